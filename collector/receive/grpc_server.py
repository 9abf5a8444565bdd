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

import grpc
from google.protobuf.duration_pb2 import Duration
from google.rpc.error_details_pb2 import RetryInfo
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from midtrace.collector.receive.auth import token_matches
from midtrace.collector.receive.forward import Batch
from midtrace.collector.intake.accept import Intake
from midtrace.collector.receive.bodies import PROTOBUF
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


def _handler(intake: Intake, token: str | None) -> grpc.GenericRpcHandler:
    async def export(body: bytes, context: grpc.aio.ServicerContext) -> bytes:
        if token is not None:
            values = [v for k, v in context.invocation_metadata() or () if k == "authorization"]
            if not token_matches(values, token):
                await context.abort(grpc.StatusCode.UNAUTHENTICATED,
                                    "missing or wrong token: send one metadata entry "
                                    "'authorization: Bearer <token>'")
        try:
            request = parse_protobuf(body)
        except PayloadError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        try:
            check = await intake.export(request, Batch(body, PROTOBUF))
        except QueueFull as e:
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(e),
                                trailing_metadata=(("google.rpc.retryinfo-bin", _retry_info()),))
        except Exception as e:  # the writer's error: nothing of this request was stored
            log.error("export not stored: %s", e)
            await context.abort(grpc.StatusCode.INTERNAL, f"spans not stored: {e}")
        response = ExportTraceServiceResponse()
        if check.rejected:
            response.partial_success.rejected_spans = len(check.rejected)
            response.partial_success.error_message = check.message
        return response.SerializeToString()

    method = grpc.unary_unary_rpc_method_handler(export)  # no (de)serializers: raw bytes
    return grpc.method_handlers_generic_handler(SERVICE, {"Export": method})


def _logs_handler(intake: Intake, token: str | None) -> grpc.GenericRpcHandler:
    """LogsService: GenAI events are kept with their span's trace, other records dropped
    (collector/intake/genai_events.py)."""
    async def export(body: bytes, context: grpc.aio.ServicerContext) -> bytes:
        if token is not None:
            values = [v for k, v in context.invocation_metadata() or () if k == "authorization"]
            if not token_matches(values, token):
                await context.abort(grpc.StatusCode.UNAUTHENTICATED,
                                    "missing or wrong token: send one metadata entry "
                                    "'authorization: Bearer <token>'")
        try:
            read = event_spans(parse_logs_protobuf(body))
        except PayloadError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        try:
            check = await intake.export_events(read.spans, read.ignored)
        except QueueFull as e:
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(e),
                                trailing_metadata=(("google.rpc.retryinfo-bin", _retry_info()),))
        except Exception as e:
            log.error("logs export not stored: %s", e)
            await context.abort(grpc.StatusCode.INTERNAL, f"log records not stored: {e}")
        response = ExportLogsServiceResponse()
        if check.rejected:
            response.partial_success.rejected_log_records = len(check.rejected)
            response.partial_success.error_message = check.message
        return response.SerializeToString()

    method = grpc.unary_unary_rpc_method_handler(export)
    return grpc.method_handlers_generic_handler(LOGS_SERVICE, {"Export": method})


async def start_grpc(intake: Intake, host: str, port: int, max_message_bytes: int,
                     token: str | None) -> tuple[grpc.aio.Server, str]:
    """Start the gRPC server on the running loop; returns it and its ``host:port``."""
    server = grpc.aio.server(options=[
        # gRPC's default limit (4 MiB) is smaller than one large export batch, and the
        # exporters would retry RESOURCE_EXHAUSTED: take what OTLP/HTTP takes.
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.so_reuseport", 0),
    ])
    server.add_generic_rpc_handlers((_handler(intake, token), _logs_handler(intake, token)))
    shown = f"[{host}]" if ":" in host else host
    try:
        bound = server.add_insecure_port(f"{shown}:{port}")
    except RuntimeError as e:
        raise OSError(f"cannot listen on {shown}:{port} for OTLP/gRPC: {e}") from e
    if bound == 0:
        raise OSError(f"cannot listen on {shown}:{port} for OTLP/gRPC")
    await server.start()
    return server, f"{shown}:{bound}"
