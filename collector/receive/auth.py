"""An optional shared token, checked in front of every route but /healthz.

An ASGI middleware rather than a check per route, so routes added later (the query API) are
covered without anyone remembering to. OTel exporters send the token through their
``headers`` setting (``OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer%20<token>``).
"""

from __future__ import annotations

import hmac

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

OPEN_PATHS = frozenset({"/healthz"})


def token_matches(headers: list[str | bytes], token: str) -> bool:
    """Whether the ``Authorization`` values of a request are exactly one ``Bearer <token>``
    (compared in constant time). Two values are refused: HTTP servers read the first and gRPC
    the last, so which one was checked would depend on the transport."""
    if len(headers) != 1:
        return False
    header = headers[0]
    value = header.encode("latin-1") if isinstance(header, str) else header
    return hmac.compare_digest(value, b"Bearer " + token.encode("utf-8"))


class BearerToken:
    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        headers = [v for k, v in scope["headers"] if k == b"authorization"]
        if token_matches(headers, self.token):
            await self.app(scope, receive, send)
            return
        response = JSONResponse(
            {"error": "missing or wrong token: send one header 'Authorization: Bearer <token>' "
                      "(the collector was started with --token / MIDTRACE_TOKEN)"},
            status_code=401, headers={"WWW-Authenticate": "Bearer"})
        await response(scope, receive, send)
