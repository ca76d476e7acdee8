"""Export of the LLM cost dashboard: `GET /api/analytics/llm/export` as JSON or CSV.

The same filter and the same report functions as the charts (opencrab.reports.llm_export
over reports.llm_costs), so a file holds exactly what the Costs page shows. JSON: every
figure in one document; CSV: one table (`table`), one row per point, a header line of
camelCase names.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.responses import Response

from opencrab.core.runtime import Runtime
from opencrab.offload import run_blocking
from opencrab.plugins import hookimpl
from opencrab.reports import llm_export
from opencrab.reports.llm_export import Table
from opencrab.server.schemas import error_responses
from opencrab.server.usage_filter import BucketQuery, StackQuery, UsageFilterDep

router = APIRouter(prefix="/api/analytics/llm", tags=["LLM analytics"])


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
    document = await run_blocking(llm_export.everything, runtime.db, flt, bucket, stack)
    if format == "json":
        body = json.dumps(document, ensure_ascii=False, indent=2)
        media, name = "application/json", "llm-costs.json"
    else:
        body = llm_export.table_csv(document, table)
        media, name = "text/csv; charset=utf-8", f"llm-costs-{table}.csv"
    return Response(
        body, media_type=media, headers={"Content-Disposition": f'attachment; filename="{name}"'}
    )


@hookimpl
def register_routes(app: FastAPI) -> None:
    app.include_router(router)
