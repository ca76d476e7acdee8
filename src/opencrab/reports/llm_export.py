"""The LLM cost figures as one document (JSON) or one table (CSV), for
`GET /api/analytics/llm/export`: every figure of the Costs page for a filter, from the
same reports (reports/llm_costs.py)."""

from __future__ import annotations

import csv
import io
from typing import Any, Literal

from opencrab.reports import llm_costs as reports
from opencrab.reports.llm_filter import filter_echo
from opencrab.store import Database
from opencrab.store.repositories.llm_analytics import Bucket, Stack, UsageFilter

Table = Literal["totals", "cost", "share", "quality", "efficiency", "speed", "errors", "cache"]


def everything(db: Database, flt: UsageFilter, bucket: Bucket, stack: Stack) -> dict[str, Any]:
    """Every figure of the Costs page for this filter, as camelCase JSON."""
    parts = {
        "totals": reports.totals_report(db, flt),
        "cost": reports.cost_report(db, flt, bucket, stack),
        "share": reports.share_report(db, flt, "model"),
        "quality": reports.quality_report(db, flt, bucket),
        "efficiency": reports.efficiency_report(db, flt),
        "speed": reports.speed_report(db, flt),
        "errors": reports.error_report(db, flt),
        "cache": reports.cache_report(db, flt),
    }
    out: dict[str, Any] = {"filter": filter_echo(flt).model_dump(mode="json", by_alias=True)}
    for name, part in parts.items():
        data = part.model_dump(mode="json", by_alias=True)
        data.pop("filter", None)
        out[name] = data
    return out


ROWS = {
    "cost": "points",
    "share": "shares",
    "quality": "points",
    "efficiency": "cells",
    "speed": "models",
    "errors": "providers",
    "cache": "models",
}


def table_csv(document: dict[str, Any], table: Table) -> str:
    """One table of an `everything` document as CSV."""
    part = document[table]
    rows = [part] if table == "totals" else part[ROWS[table]]
    buffer = io.StringIO()
    fields = list(rows[0]) if rows else []
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()
