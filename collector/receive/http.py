"""The collector's HTTP face: OTLP/HTTP traces, outcomes, health.

Status codes follow the OTLP/HTTP spec: 200 with an ExportTraceServiceResponse (carrying
``partial_success`` when some spans were refused) once the accepted spans are durable in
the intake log (their rows are derived behind it, seconds at most);
400 with a google.rpc.Status for a body that cannot be decoded; 413/415 for size and media
type; 503 with ``Retry-After`` when the writer's queue is full ("the client SHOULD retry
... 429, 502, 503, 504", honouring Retry-After).
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import logging
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

import duckdb
from google.protobuf import json_format
from google.rpc import status_pb2
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from midtrace.collector.query.api import query_routes
from midtrace.collector.receive.auth import BearerToken
from midtrace.collector.receive.forward import Batch, Forwarder
from midtrace.collector.intake.accept import Intake, recover
from midtrace.collector.intake.otlp import PROTOBUF_READER
from midtrace.collector.receive.bodies import (
    JSON, PROTOBUF, BadInput, decompress, media_type, parse_outcomes, parse_logs, parse_trace_export, SpanCheck, logs_answer,
    traces_answer)
from midtrace.collector.settings import ClickHouseURL, CollectorSettings, parse_store
from midtrace.collector.storage.appender import Appender, ExportTooLarge, Freshness, SharedAppender
from midtrace.collector.storage.derive import DerivePool, default_workers
from midtrace.collector.storage.intake_log import IntakeLog
from midtrace.collector.storage.store import WriteJob, open_writable
from midtrace.collector.storage.threads import arrow_on_malloc
from midtrace.collector.storage.writer import QueueFull, Writer, backlog_bytes

log = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = "1"
FORWARD_DRAIN_SECONDS = 2.0
STOP_STACKS_SECONDS = 15.0  # a stop still under way after this prints every thread's stack
# to stderr, once: what it waits on (a stop commits what is queued and folds the .wal back in,
# which takes seconds, not this long)
# google.rpc.Code of the Status body for each HTTP status this server answers with.
RPC_CODE = {400: 3, 413: 8, 415: 3, 500: 13, 503: 14}  # INVALID_ARGUMENT, RESOURCE_EXHAUSTED, INTERNAL, UNAVAILABLE


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BadInput(413, f"body of {declared} bytes is larger than the limit of {limit} bytes")
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BadInput(413, f"body is larger than the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _otlp_response(kind: str, message: Any, status: int = 200,
                   headers: dict[str, str] | None = None) -> Response:
    if kind == JSON:
        body = json_format.MessageToJson(message, indent=None)
        return Response(body, status_code=status, media_type=JSON, headers=headers)
    return Response(message.SerializeToString(), status_code=status, media_type=PROTOBUF,
                    headers=headers)


def _status(kind: str, code: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return _otlp_response(kind, status_pb2.Status(code=RPC_CODE.get(code, 3), message=message),
                          code, headers)


async def _internal_error(request: Request, exc: Exception) -> Response:
    """Whatever escapes a route is answered as JSON, never as a plain-text page."""
    return JSONResponse({"error": f"internal error: {exc!r}"}, status_code=500)


def build_intake(writer: Writer, settings: CollectorSettings,
                 forwarders: Sequence[Forwarder] = ()) -> Intake:
    """The intake in front of ``writer``: an appender that acknowledges once the intake log
    has committed, the freshness the writer reports to, a reopen that derives the log. A
    store many collectors share (ClickHouse) has no intake log: its exports are acknowledged
    once their spans are in the store (SharedAppender)."""
    freshness = Freshness()
    writer.on_derived = freshness.derived
    writer.wants_fresh = freshness.readers_waiting
    if getattr(writer.store, "shared", False):
        shared = SharedAppender(writer, freshness, max_queue=settings.queue_size).start()
        return Intake(shared, forwarders, keep_text=settings.keep_text)
    appender = Appender(IntakeLog(writer.store.conn), writer, freshness,
                        max_queue=settings.queue_size,
                        on_reopen=lambda: recover(writer.store),
                        max_export_bytes=(None if settings.memory_limit is None
                                          else writer.max_backlog_bytes)).start()
    writer.on_fatal = appender.mark_broken
    intake = Intake(appender, forwarders, keep_text=settings.keep_text)
    writer.intake_busy = intake.busy
    return intake


def create_app(writer: Writer, settings: CollectorSettings, intake: Intake | None = None) -> Starlette:
    intake = intake or build_intake(writer, settings)
    appender = intake.appender

    async def receive(request: Request, what: str, parse: Callable[[bytes, str | None], Any],
                      store: Callable[[Any, bytes], Awaitable[SpanCheck]],
                      answer: Callable[[SpanCheck], Any]) -> Response:
        """One OTLP export: read, decompress and ``parse`` the body (400/413/415 when it
        cannot be), ``store`` what it holds (503 when derivation is behind), answer in the
        request's content type."""
        kind = media_type(request.headers.get("content-type"))
        answer_kind = JSON if kind == JSON else PROTOBUF
        try:
            raw = await _read_body(request, settings.max_body_bytes)
            body = decompress(raw, request.headers.get("content-encoding"), settings.max_body_bytes)
            parsed = parse(body, request.headers.get("content-type"))
        except BadInput as e:
            log.info("refused %s: %s", what, e.message)
            return _status(answer_kind, e.status, e.message)
        except Exception as e:  # a bug: still an OTLP answer, never a plain-text page
            log.exception("%s could not be read", what)
            return _status(answer_kind, 500, f"{what} could not be read: {e!r}")
        try:
            check = await store(parsed, raw)
        except ExportTooLarge as e:
            log.info("refused %s: %s", what, e)
            return _status(answer_kind, 413, str(e))
        except QueueFull as e:
            return _status(answer_kind, 503, str(e), {"Retry-After": RETRY_AFTER_SECONDS})
        except Exception as e:
            log.error("%s not stored: %s", what, e)
            return _status(answer_kind, 500, f"{what} not stored: {e}")
        return _otlp_response(answer_kind, answer(check))

    async def traces(request: Request) -> Response:
        async def store(spans: Any, raw: bytes) -> SpanCheck:
            return await intake.export(spans, Batch(raw, request.headers.get("content-type")
                                                    or PROTOBUF,
                                                    request.headers.get("content-encoding")))
        return await receive(request, "spans", parse_trace_export, store, traces_answer)

    async def logs(request: Request) -> Response:
        """OTLP logs: GenAI events are kept as part of their span's trace, other records
        are acknowledged and dropped (collector/intake/genai_events.py)."""
        async def store(read: Any, raw: bytes) -> SpanCheck:
            return await intake.export_events(read.spans, read.ignored)
        return await receive(request, "log records", parse_logs, store, logs_answer)

    async def outcomes(request: Request) -> Response:
        try:
            raw = await _read_body(request, settings.max_body_bytes)
            body = decompress(raw, request.headers.get("content-encoding"), settings.max_body_bytes)
            if media_type(request.headers.get("content-type")) not in (JSON, ""):
                raise BadInput(415, f"Content-Type must be {JSON}")
            check = parse_outcomes(body)
        except BadInput as e:
            return JSONResponse({"error": e.message}, status_code=e.status)
        if check.accepted:
            try:
                fut = writer.submit(WriteJob(outcomes=check.accepted))
            except QueueFull as e:
                return JSONResponse({"error": str(e)}, status_code=503,
                                    headers={"Retry-After": RETRY_AFTER_SECONDS})
            try:
                await asyncio.wrap_future(fut)
            except Exception as e:
                log.error("outcomes not stored: %s", e)
                if isinstance(e, duckdb.Error):  # the store cannot write now: worth a retry
                    return JSONResponse({"error": f"outcomes not stored, retry: {e}"},
                                        status_code=503, headers={"Retry-After": RETRY_AFTER_SECONDS})
                return JSONResponse({"error": f"outcomes not stored: {e}"}, status_code=500)
        status = 400 if check.errors and not check.accepted else 200
        return JSONResponse({"accepted": len(check.accepted), "rejected": len(check.errors),
                             "errors": check.errors}, status_code=status)

    async def healthz(request: Request) -> Response:
        c = writer.counters
        ready = writer.alive and appender.alive and not appender.unwritable
        reason = (c.last_error or "the writer is not running" if not writer.alive else
                  appender.unwritable if appender.unwritable else
                  appender.last_error or "the appender is not running")
        return JSONResponse({
            "status": "ready" if ready else "not ready",
            **({} if ready else {"reason": reason}),
            "queue_depth": writer.depth, "queue_capacity": writer.capacity,
            "derivation": {**appender.freshness.lag(),
                           "workers": writer.pool.workers if writer.pool else 0,
                           "exports_by_workers": c.worker_jobs,
                           "exports_derived_ahead": c.ahead_jobs,
                           "worker_restarts": writer.pool_restarts,
                           "evidence_refreshes": c.evidence_refreshes},
            "spans_written": c.spans, "requests_written": c.requests, "commits": c.commits,
            "failed_jobs": c.failed_jobs, "failed_traces": c.failed_traces,
            "normalize_errors": c.normalize_errors,
            "text": "stored" if settings.keep_text else "not stored (--no-text)",
            "token_required": settings.token is not None,
            "memory_limit_bytes": settings.memory_limit,
            "store_reopens": appender.reopens,
            "protobuf_reader": PROTOBUF_READER,
            **intake.health(),
        }, status_code=200 if ready else 503)

    routes = [
        Route("/v1/traces", traces, methods=["POST"]),
        Route("/v1/logs", logs, methods=["POST"]),
        Route("/v1/outcomes", outcomes, methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
        *query_routes(lambda: writer.store.conn, appender.freshness),
    ]
    middleware = [Middleware(BearerToken, token=settings.token)] if settings.token else []
    app = Starlette(routes=routes, middleware=middleware,
                    exception_handlers={Exception: _internal_error})
    app.state.writer = writer
    app.state.settings = settings
    return app


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted sockets inherit this: without it a response written in two parts waits
    # for the client's delayed ACK, about 40 ms a request.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.set_inheritable(True)
    return sock


def base_url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def run(settings: CollectorSettings) -> None:
    """Serve OTLP/HTTP and OTLP/gRPC until SIGINT/SIGTERM, then commit what is queued,
    give forward targets a moment to drain, and close the database."""
    settings.check()
    arrow_on_malloc()
    writer = _open_writer(settings)
    forwarders = [Forwarder(url, settings.forward_queue, settings.forward_headers).start()
                  for url in settings.forward]
    intake = build_intake(writer, settings, forwarders)
    appender = intake.appender
    try:
        sock = bind(settings.host, settings.http_port)
        app = create_app(writer, settings, intake)
        asyncio.run(_serve(app, sock, intake, settings))
    finally:
        deadline = time.monotonic() + FORWARD_DRAIN_SECONDS  # one budget for every target
        for f in forwarders:
            f.close(deadline=deadline)
        appender.close()  # what was acknowledged is in the log; the writer derives the rest
        writer.close()
        faulthandler.cancel_dump_traceback_later()
        print("midtrace collector stopped", file=sys.stderr, flush=True)


def _open_writer(settings: CollectorSettings) -> Writer:
    """The writer of the store ``settings.db`` names, started. A DuckDB file: what a stop
    left in its intake log is derived first, and rows are derived by worker processes. A
    ClickHouse store: traces whose stored spans no derivation has read (a collector stopped
    after acknowledging them) are derived first, and rows are derived in the writer thread;
    more collectors, not workers, spread the work (docs/clickhouse.md)."""
    target = parse_store(settings.db)
    store = open_writable(target, keep_text=settings.keep_text, prices=settings.prices,
                          memory_limit=settings.memory_limit)
    if isinstance(target, ClickHouseURL):
        recovered = store.recover().traces
        if recovered:
            print(f"midtrace collector derived {recovered} traces a stopped writer left "
                  "underived", file=sys.stderr, flush=True)
        return Writer(store, max_queue=settings.queue_size).start()
    recovered = recover(store)
    if recovered:
        print(f"midtrace collector derived {recovered} exports left in the intake log",
              file=sys.stderr, flush=True)
    # The query API reads through this connection: after migrations it never needs to reach
    # a file or the network, and this (database-wide, irreversible) makes sure it cannot.
    store.forbid_external_access()
    workers = default_workers() if settings.derive_workers is None else settings.derive_workers
    pool = DerivePool(workers) if workers else None
    return Writer(store, max_queue=settings.queue_size, pool=pool,
                  max_backlog_bytes=backlog_bytes(settings.memory_limit)).start()


async def _serve(app: Starlette, sock: socket.socket, intake: Intake,
                 settings: CollectorSettings) -> None:
    import uvicorn

    from midtrace.collector.receive.grpc_server import start_grpc

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # uvicorn re-raises the signal after serving, which would kill the process
            # before the writer commits what is queued; stop cleanly instead.
            def stop(sig: int, frame: Any) -> None:
                faulthandler.dump_traceback_later(STOP_STACKS_SECONDS, exit=False)
                self.handle_exit(sig, frame)

            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, stop)
            yield

    grpc_server, grpc_address = await start_grpc(intake, settings.host, settings.grpc_port,
                                                 settings.max_body_bytes, settings.token)
    url = base_url(sock)
    print(f"midtrace collector listening on {url} (OTLP/HTTP {url}/v1/traces, "
          f"outcomes {url}/v1/outcomes) db={settings.db}", flush=True)
    print(f"midtrace collector OTLP/gRPC on {grpc_address}", flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    try:
        await Server(config).serve(sockets=[sock])
    finally:
        await grpc_server.stop(grace=5)
