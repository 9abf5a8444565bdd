"""Re-send accepted export batches to other OTLP/HTTP endpoints (Phoenix, Langfuse, Jaeger,
an OpenTelemetry Collector), so a team keeps its existing backend.

Each target has its own thread and a bounded queue. Forwarding never blocks or fails
ingest: when a target is slow or down its queue fills and the oldest batch is dropped
(counted). Retryable answers (OTLP/HTTP spec: 429, 502, 503, 504, or no connection) are
retried a few times with a short backoff, honouring ``Retry-After`` up to a cap.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import httpx

from midtrace.collector.storage.threads import NamedThread

log = logging.getLogger(__name__)

RETRYABLE = frozenset({429, 502, 503, 504})
ATTEMPTS = 3
MAX_BACKOFF_S = 2.0


def traces_url(url: str) -> str:
    """``url`` itself, or ``url + /v1/traces`` when it names only a host (like OTEL_EXPORTER_OTLP_ENDPOINT)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"forward target {url!r} must be an http:// or https:// URL")
    if parts.path in ("", "/"):
        return urlunsplit(parts._replace(path="/v1/traces"))
    return url


def shown_url(url: str) -> str:
    """The URL without credentials or query, for logs and /healthz."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


@dataclass
class ForwardState:
    url: str
    sent: int = 0
    failed: int = 0
    dropped: int = 0
    queued: int = 0
    last_error: str | None = None
    last_error_at: float | None = None

    def as_json(self) -> dict[str, object]:
        return {"url": self.url, "sent": self.sent, "failed": self.failed,
                "dropped": self.dropped, "queued": self.queued, "last_error": self.last_error,
                "last_error_at": self.last_error_at}


@dataclass(frozen=True)
class Batch:
    body: bytes
    content_type: str
    content_encoding: str | None = None


class Forwarder:
    """One downstream target: ``offer`` never blocks; a thread does the sending."""

    def __init__(self, url: str, max_queue: int = 1000, headers: dict[str, str] | None = None,
                 timeout: float = 10.0) -> None:
        self.url = traces_url(url)
        self.state = ForwardState(shown_url(self.url))
        self._headers = dict(headers or {})
        self._timeout = timeout
        self._queue: deque[Batch] = deque()
        self._max_queue = max_queue
        self._cond = threading.Condition()
        self._closing = False
        self._thread = NamedThread(target=self._run, name="midtrace-forward", daemon=True)

    def start(self) -> Forwarder:
        self._thread.start()
        return self

    def offer(self, batch: Batch) -> None:
        with self._cond:
            if self._closing:
                return
            if len(self._queue) >= self._max_queue:
                self._queue.popleft()
                self.state.dropped += 1
            self._queue.append(batch)
            self.state.queued = len(self._queue)
            self._cond.notify()

    def close(self, drain_seconds: float = 2.0, deadline: float | None = None) -> None:
        """Give the queue ``drain_seconds`` (or until the ``time.monotonic()`` ``deadline``)
        to empty, then stop; what is left is dropped. A send still in flight at the
        deadline is abandoned to its (daemon) thread rather than waited for."""
        deadline = time.monotonic() + drain_seconds if deadline is None else deadline
        with self._cond:
            while self._queue and time.monotonic() < deadline:
                self._cond.wait(0.05)
            self._closing = True
            self.state.dropped += len(self._queue)
            self._queue.clear()
            self.state.queued = 0
            self._cond.notify_all()
        self._thread.join(max(0.05, deadline - time.monotonic()))
        if self._thread.is_alive():
            log.warning("forward to %s: a send was still in flight at shutdown", self.state.url)

    def _run(self) -> None:
        with httpx.Client(timeout=self._timeout) as client:
            while True:
                with self._cond:
                    while not self._queue and not self._closing:
                        self._cond.wait()
                    if self._closing:
                        return
                    batch = self._queue[0]
                self._send(client, batch)
                with self._cond:
                    if self._queue and self._queue[0] is batch:
                        self._queue.popleft()
                    self.state.queued = len(self._queue)
                    self._cond.notify_all()

    def _send(self, client: httpx.Client, batch: Batch) -> None:
        headers = {**self._headers, "content-type": batch.content_type}
        if batch.content_encoding:
            headers["content-encoding"] = batch.content_encoding
        error = ""
        for attempt in range(ATTEMPTS):
            wait = 0.25 * 2 ** attempt
            try:
                answer = client.post(self.url, content=batch.body, headers=headers)
            except httpx.HTTPError as e:
                error = f"{type(e).__name__}: {e}"
            else:
                if answer.status_code < 300:
                    self.state.sent += 1
                    return
                error = f"HTTP {answer.status_code}: {answer.text[:200]}"
                if answer.status_code not in RETRYABLE:
                    break
                retry_after = answer.headers.get("retry-after", "")
                if retry_after.isascii() and retry_after.isdigit():  # delta-seconds; not "²"
                    wait = min(float(retry_after), MAX_BACKOFF_S)
            if attempt + 1 < ATTEMPTS:
                with self._cond:
                    if self._closing:
                        break
                    self._cond.wait(wait)
        self.state.failed += 1
        self.state.last_error = error
        self.state.last_error_at = time.time()
        log.warning("forward to %s failed: %s", self.state.url, error)
