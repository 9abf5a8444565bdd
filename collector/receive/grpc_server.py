"""OTLP/gRPC: the TraceService Export method on grpc.aio, in the HTTP server's event loop.

Same checks, normalizer and writer as OTLP/HTTP (collector/intake/accept.py). Status codes follow
the OTLP spec ("OTLP/gRPC"): OK with ``partial_success`` for individually refused spans;
INVALID_ARGUMENT for a request that cannot be decoded (not retryable); UNAVAILABLE when the
writer's queue is full, with a ``google.rpc.RetryInfo`` the exporters honour ("the server
MAY include RetryInfo ... the client SHOULD honour the delay"). The request is taken as raw
bytes so the very bytes received can be forwarded.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable

import grpc
from google.protobuf.duration_pb2 import Duration
from google.rpc.error_details_pb2 import RetryInfo
from google.protobuf.message import Message

from midtrace.collector.receive.auth import token_matches
from midtrace.collector.receive.forward import Batch
from midtrace.collector.intake.accept import Intake
from midtrace.collector.receive.bodies import PROTOBUF, SpanCheck, logs_answer, traces_answer
from midtrace.collector.storage.appender import ExportTooLarge
from midtrace.collector.storage.writer import QueueFull
from midtrace.collector.intake.genai_events import event_spans, parse_logs_protobuf
from midtrace.collector.intake.otlp import PayloadError, parse_protobuf

log = logging.getLogger(__name__)

SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
LOGS_SERVICE = "opentelemetry.proto.collector.logs.v1.LogsService"


def _retry_info() -> bytes:
    # About a second, as OTLP/HTTP's Retry-After: 1, spread a little so the clients refused
    # together do not all come back in the same instant.
    delay = random.uniform(0.8, 1.2)
    return RetryInfo(retry_delay=Duration(seconds=int(delay), nanos=int(delay % 1 * 1e9))).SerializeToString()


def _service(name: str, what: str, token: str | None,
             store: Callable[[bytes], Awaitable[SpanCheck]],
             answer: Callable[[SpanCheck], Message]) -> grpc.GenericRpcHandler:
    """One OTLP export service: ``store`` reads the body (PayloadError: INVALID_ARGUMENT) and
    hands it to the intake; ``answer`` is the OTLP response to what it kept."""
    async def export(body: bytes, context: grpc.aio.ServicerContext) -> bytes:
        if token is not None:
            values = [v for k, v in context.invocation_metadata() or () if k == "authorization"]
            if not token_matches(values, token):
                await context.abort(grpc.StatusCode.UNAUTHENTICATED,
                                    "missing or wrong token: send one metadata entry "
                                    "'authorization: Bearer <token>'")
        try:
            check = await store(body)
        except PayloadError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        except ExportTooLarge as e:  # no retry delay: the same export would be refused again
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(e))
        except QueueFull as e:
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(e),
                                trailing_metadata=(("google.rpc.retryinfo-bin", _retry_info()),))
        except Exception as e:  # the writer's error: nothing of this request was stored
            log.error("%s not stored: %s", what, e)
            await context.abort(grpc.StatusCode.INTERNAL, f"{what} not stored: {e}")
        return answer(check).SerializeToString()

    method = grpc.unary_unary_rpc_method_handler(export)  # no (de)serializers: raw bytes
    return grpc.method_handlers_generic_handler(name, {"Export": method})


def _handlers(intake: Intake, token: str | None) -> tuple[grpc.GenericRpcHandler, ...]:
    """TraceService, and LogsService for GenAI events (collector/intake/genai_events.py)."""
    async def traces(body: bytes) -> SpanCheck:
        return await intake.export(parse_protobuf(body), Batch(body, PROTOBUF))

    async def logs(body: bytes) -> SpanCheck:
        read = event_spans(parse_logs_protobuf(body))
        return await intake.export_events(read.spans, read.ignored)

    return (_service(SERVICE, "spans", token, traces, traces_answer),
            _service(LOGS_SERVICE, "log records", token, logs, logs_answer))


async def start_grpc(intake: Intake, host: str, port: int, max_message_bytes: int,
                     token: str | None) -> tuple[grpc.aio.Server, str]:
    """Start the gRPC server on the running loop; returns it and its ``host:port``."""
    server = grpc.aio.server(options=[
        # gRPC's default limit (4 MiB) is smaller than one large export batch, and the
        # exporters would retry RESOURCE_EXHAUSTED: take what OTLP/HTTP takes.
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.so_reuseport", 0),
    ])
    server.add_generic_rpc_handlers(_handlers(intake, token))
    shown = f"[{host}]" if ":" in host else host
    try:
        bound = server.add_insecure_port(f"{shown}:{port}")
    except RuntimeError as e:
        raise OSError(f"cannot listen on {shown}:{port} for OTLP/gRPC: {e}") from e
    if bound == 0:
        raise OSError(f"cannot listen on {shown}:{port} for OTLP/gRPC")
    await server.start()
    return server, f"{shown}:{bound}"
