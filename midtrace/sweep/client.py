"""An OpenAI-compatible chat completions client with retries: vLLM, llama.cpp's server,
Ollama, hosted APIs.

The endpoint is the API's base URL, as the OpenAI SDK's ``base_url`` (``.../v1``); the
client POSTs to ``{endpoint}/chat/completions``. 429, 5xx, timeouts and connection errors
are retried with exponential backoff, honouring Retry-After (RFC 9110 10.2.3: seconds or an
HTTP date). 401, 403 and 404 would fail every call alike, so they stop the sweep; any other
4xx fails the one call.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from midtrace.sweep.settings import RetryPolicy

log = logging.getLogger(__name__)

API_KEY_ENVS = ("MIDTRACE_SWEEP_API_KEY", "OPENAI_API_KEY")
FATAL_STATUSES = (401, 403, 404)


def api_key_from_env(environ: Mapping[str, str]) -> str | None:
    """The first of MIDTRACE_SWEEP_API_KEY, OPENAI_API_KEY that is set and not empty."""
    return next((environ[k] for k in API_KEY_ENVS if environ.get(k)), None)


class EndpointError(Exception):
    """One call failed for good (retries spent, or a response that cannot be used)."""


class EndpointConfigError(EndpointError):
    """The endpoint refuses every call (wrong URL, key or model): the sweep stops."""


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int | None
    completion_tokens: int | None
    attempts: int
    latency_ms: float


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    if not value:
        return None
    value = value.strip()
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - (now or datetime.now(UTC))).total_seconds(), 0.0)


def _usage_int(usage: Any, key: str) -> int | None:
    if not isinstance(usage, dict):
        return None
    value = usage.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


class ChatClient:
    """POST one user message per call; thread-safe (one pooled httpx client)."""

    def __init__(self, endpoint: str, model: str, *, api_key: str | None = None,
                 timeout: float = 120.0, retry: RetryPolicy = RetryPolicy(),
                 temperature: float = 0.0, max_tokens: int = 100, concurrency: int = 1,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.url = endpoint.rstrip("/") + "/chat/completions"
        self.model = model
        self.retry = retry
        self.temperature = temperature
        self.max_tokens = max_tokens
        self._sleep = sleep
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(
            headers=headers, timeout=timeout,
            limits=httpx.Limits(max_connections=max(concurrency, 1) + 2))

    def close(self) -> None:
        self._http.close()

    def complete(self, prompt: str) -> Completion:
        body = {"model": self.model, "messages": [{"role": "user", "content": prompt}],
                "temperature": self.temperature, "max_tokens": self.max_tokens}
        attempt = 0
        while True:
            attempt += 1
            started = time.perf_counter()
            retry_after: float | None = None
            try:
                response = self._http.post(self.url, json=body)
            except httpx.TimeoutException as e:
                problem = f"timed out ({type(e).__name__})"
            except httpx.TransportError as e:
                problem = f"connection failed: {e}"
            else:
                status = response.status_code
                if status < 300:
                    return self._completion(response, attempt, started)
                if status in FATAL_STATUSES:
                    raise EndpointConfigError(
                        f"{self.url} answered {status}: {_excerpt(response)}; check --endpoint "
                        f"(the API base URL, e.g. http://localhost:8000/v1), --model and the "
                        f"API key ({' or '.join(API_KEY_ENVS)})")
                if status != 429 and status < 500:
                    raise EndpointError(f"{self.url} answered {status}: {_excerpt(response)}")
                problem = f"answered {status}"
                retry_after = parse_retry_after(response.headers.get("retry-after"))
            if attempt > self.retry.retries:
                raise EndpointError(f"{self.url} {problem}; gave up after {attempt} attempts")
            wait = self.retry.wait(attempt, retry_after)
            log.info("%s %s; retry %d in %.2fs", self.url, problem, attempt, wait)
            self._sleep(wait)

    def _completion(self, response: httpx.Response, attempt: int, started: float) -> Completion:
        latency_ms = (time.perf_counter() - started) * 1000
        try:
            data = response.json()
            message = data["choices"][0]["message"]
            text = message.get("content") or ""
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
            raise EndpointError(f"{self.url} answered without choices[0].message: "
                                f"{_excerpt(response)}") from e
        if not isinstance(text, str):
            raise EndpointError(f"{self.url} answered a non-text message content")
        usage = data.get("usage")
        return Completion(text=text, prompt_tokens=_usage_int(usage, "prompt_tokens"),
                          completion_tokens=_usage_int(usage, "completion_tokens"),
                          attempts=attempt, latency_ms=latency_ms)


def _excerpt(response: httpx.Response, limit: int = 200) -> str:
    text = " ".join(response.text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."
