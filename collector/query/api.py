"""The collector's read-only query API (docs/query-api.md).

Reads run on cursors of the collector's own DuckDB connection (no other process can open
the file while the collector holds it), in a worker thread so the event loop keeps
receiving. Nothing here runs caller SQL: views and group-by keys come from allowlists in
collector/query/reads.py and every value is bound as a parameter.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import anyio
import duckdb
import pyarrow as pa
import pyarrow.ipc
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from midtrace.collector.query import reads
from midtrace.collector.query.reads import Filters, QueryError
from midtrace.collector.storage.appender import Freshness

log = logging.getLogger(__name__)

ARROW_STREAM = "application/vnd.apache.arrow.stream"
FORMATS = ("json", "arrow")
FRESH_WAIT_SECONDS = 10.0


def _arrow_body(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pyarrow.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    return [{k: reads.json_value(v) for k, v in row.items()} for row in table.to_pylist()]


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(body, ensure_ascii=False, allow_nan=False), status_code=status,
                    media_type="application/json", headers=headers)


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _split(request: Request, extra: tuple[str, ...]) -> tuple[Filters, dict[str, str]]:
    params = dict(request.query_params)
    params.pop("fresh", None)  # read by every route before its handler
    rest = {k: params.pop(k) for k in list(params) if k in extra}
    try:
        filters = Filters.from_params(params)
    except QueryError as e:
        allowed = ", ".join((*reads.FILTER_KEYS, *extra))
        unknown = sorted(set(params) - set(reads.FILTER_KEYS))
        if unknown:
            raise QueryError(f"unknown query parameter(s) {', '.join(unknown)}; "
                             f"allowed: {allowed}") from e
        raise
    return filters, rest


def _format(rest: dict[str, str]) -> str:
    fmt = rest.get("format", "json")
    if fmt not in FORMATS:
        raise QueryError(f"format {fmt!r} is not one of {', '.join(FORMATS)}")
    return fmt


class NotFresh(Exception):
    """``fresh=1`` and derivation did not catch up in time."""


def query_routes(connection: Callable[[], duckdb.DuckDBPyConnection],
                 freshness: Freshness | None = None) -> list[Route]:
    """The /api/v1 routes, reading through cursors of ``connection()`` (the store's current
    connection: it changes when the store is reopened). With ``fresh=1`` a call first
    waits (up to FRESH_WAIT_SECONDS) until every export acknowledged before it is derived."""

    async def wait_fresh(request: Request) -> None:
        fresh = request.query_params.get("fresh", "0")
        if fresh not in ("0", "1"):
            raise QueryError(f"fresh must be 0 or 1, got {fresh!r}")
        if fresh == "1" and freshness is not None:
            if not await anyio.to_thread.run_sync(freshness.wait, FRESH_WAIT_SECONDS):
                raise NotFresh()

    async def read(fn: Callable[[Any], Any]) -> Any:
        def run() -> Any:
            cur = reads.read_cursor(connection())
            try:
                return fn(cur)
            finally:
                cur.close()
        return await anyio.to_thread.run_sync(run)

    async def guarded(handler: Callable[[Request], Any], request: Request) -> Response:
        try:
            await wait_fresh(request)
            return await handler(request)  # type: ignore[no-any-return]
        except QueryError as e:
            return _error(400, str(e))
        except NotFresh:
            lag = freshness.lag() if freshness is not None else {}
            return JSONResponse({"error": f"derivation did not catch up within "
                                          f"{FRESH_WAIT_SECONDS:.0f} s; retry", "derivation": lag},
                                status_code=503, headers={"Retry-After": "1"})
        except duckdb.Error as e:
            log.error("query failed for %s: %s", request.url.path, e)
            return _error(500, f"query failed: {e}")
        except Exception as e:  # a bug: answer JSON all the same
            log.exception("query failed for %s", request.url.path)
            return _error(500, f"query failed: {e!r}")

    async def list_views(request: Request) -> Response:
        return _json({"views": [
            {"name": v.name, "description": v.description, "keys": list(v.keys),
             "url": f"/api/v1/views/{v.name}"} for v in reads.metric_views().values()],
            "filters": list(reads.FILTER_KEYS), "group_by": list(reads.GROUP_KEYS)})

    async def one_view(request: Request) -> Response:
        name = request.path_params["name"]
        filters, rest = _split(request, ("group_by", "format"))
        fmt = _format(rest)
        group_by = reads.parse_group_by(rest.get("group_by"))
        reads.view_query(name, filters, group_by)  # refuse a bad name before taking a thread
        table = await read(lambda cur: reads.run_view(cur, name, filters, group_by))
        if fmt == "arrow":
            return Response(_arrow_body(table), media_type=ARROW_STREAM)
        return _json({"view": name, "filters": filters.to_params(), "group_by": list(group_by),
                      "columns": table.schema.names, "rows": _rows(table)})

    async def requests(request: Request) -> Response:
        filters, rest = _split(request, ("q", "class", "limit", "offset", "format"))
        fmt = _format(rest)
        try:
            limit = int(rest.get("limit", "50"))
            offset = int(rest.get("offset", "0"))
        except ValueError:
            raise QueryError("limit and offset must be integers") from None
        table, total = await read(lambda cur: reads.run_requests(
            cur, filters, rest.get("q") or None, rest.get("class") or None, limit, offset))
        if fmt == "arrow":
            return Response(_arrow_body(table), media_type=ARROW_STREAM,
                            headers={"X-Total-Count": str(total)})
        return _json({"rows": _rows(table), "total": total, "limit": limit, "offset": offset})

    async def request_texts(request: Request) -> Response:
        filters, rest = _split(request, ("limit", "offset", "format"))
        fmt = _format(rest)
        try:
            limit = int(rest.get("limit", "500"))
            offset = int(rest.get("offset", "0"))
        except ValueError:
            raise QueryError("limit and offset must be integers") from None
        table = await read(lambda cur: reads.run_request_texts(cur, filters, limit, offset))
        if fmt == "arrow":
            return Response(_arrow_body(table), media_type=ARROW_STREAM)
        return _json({"rows": _rows(table), "limit": limit, "offset": offset})

    async def trace(request: Request) -> Response:
        trace_id = request.path_params["trace_id"]
        found = await read(lambda cur: reads.run_trace(cur, trace_id))
        if found is None:
            return _error(404, f"no request with trace id {trace_id!r}")
        return _json(found)

    async def prompts(request: Request) -> Response:
        trace_id = request.path_params["trace_id"]
        return _json({"trace_id": trace_id,
                      "prompts": await read(lambda cur: reads.run_trace_prompts(cur, trace_id))})

    async def facets(request: Request) -> Response:
        return _json(await read(reads.run_facets))

    async def settings(request: Request) -> Response:
        return _json(await read(reads.run_settings))

    def route(path: str, handler: Callable[[Request], Any]) -> Route:
        async def endpoint(request: Request) -> Response:
            return await guarded(handler, request)
        return Route(path, endpoint, methods=["GET"])

    return [
        route("/api/v1/views", list_views),
        route("/api/v1/views/{name:path}", one_view),
        route("/api/v1/requests", requests),
        route("/api/v1/request-texts", request_texts),
        route("/api/v1/traces/{trace_id:path}", trace),
        route("/api/v1/prompts/{trace_id}", prompts),
        route("/api/v1/facets", facets),
        route("/api/v1/settings", settings),
    ]
