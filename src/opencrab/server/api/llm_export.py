"""Export of the LLM cost dashboard: `GET /api/analytics/llm/export` as JSON or CSV.

The same filter and the same report functions as the charts (server.api.llm_analytics),
so a file holds exactly what the Costs page shows. JSON: every figure in one document;
CSV: one table (`table`), one row per point, a header line of camelCase names.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Annotated, Any, Literal

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.responses import Response

from opencrab.core.runtime import Runtime
from opencrab.offload import run_blocking
from opencrab.plugins import hookimpl
from opencrab.server.api import llm_analytics as reports
from opencrab.server.api.llm_analytics import BucketQuery, StackQuery, UsageFilterDep
from opencrab.server.schemas import error_responses
from opencrab.store import Database
from opencrab.store.repositories.llm_analytics import Bucket, Stack, UsageFilter

router = APIRouter(prefix="/api/analytics/llm", tags=["LLM analytics"])

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
    out: dict[str, Any] = {
        "filter": reports.filter_echo(flt).model_dump(mode="json", by_alias=True)
    }
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


@router.get(
    "/export",
    operation_id="exportLlmAnalytics",
    responses={
        200: {
            "description": "An attachment: the figures as JSON, or one table as CSV",
            "content": {"application/json": {}, "text/csv": {}},
        },
        **error_responses(400, 404),
    },
)
async def export(
    request: Request,
    flt: UsageFilterDep,
    format: Annotated[Literal["json", "csv"], Query(description="json or csv")] = "json",
    table: Annotated[Table, Query(description="The table a CSV holds.")] = "cost",
    bucket: BucketQuery = "day",
    stack: StackQuery = "model",
) -> Response:
    """What the Costs page shows for this filter, as a file to download."""
    runtime: Runtime = request.app.state.runtime
    document = await run_blocking(everything, runtime.db, flt, bucket, stack)
    if format == "json":
        body = json.dumps(document, ensure_ascii=False, indent=2)
        media, name = "application/json", "llm-costs.json"
    else:
        body = table_csv(document, table)
        media, name = "text/csv; charset=utf-8", f"llm-costs-{table}.csv"
    return Response(
        body, media_type=media, headers={"Content-Disposition": f'attachment; filename="{name}"'}
    )


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
