"""The one retrying client for every midtrace command that calls a model (sweep, grade's
judge): an OpenAI-compatible chat completions endpoint: vLLM, llama.cpp's server, Ollama,
hosted APIs.

The endpoint is the API's base URL, as the OpenAI SDK's ``base_url`` (``.../v1``); the
client POSTs to ``{endpoint}/chat/completions``. 429, 5xx, timeouts and connection errors
are retried with exponential backoff, honouring Retry-After (RFC 9110 10.2.3: seconds or an
HTTP date). 401, 403 and 404 would fail every call alike, so they stop the command; any other
4xx fails the one call.

The API key: ``--api-key-env VAR`` names the variable that holds it, the one convention of
every command that calls a model; without it a command reads its own fallbacks (the sweep:
MIDTRACE_SWEEP_API_KEY, then OPENAI_API_KEY). Light to import: httpx loads on first use.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

log = logging.getLogger(__name__)

FATAL_STATUSES = (401, 403, 404)
DEFAULT_KEY_ENVS = ("OPENAI_API_KEY",)


@dataclass(frozen=True)
class RetryPolicy:
    retries: int = 5
    backoff: float = 0.5
    max_backoff: float = 30.0
    max_retry_after: float = 60.0

    def wait(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after)
        base = min(self.backoff * 2 ** (attempt - 1), self.max_backoff)
        return float(base * (0.5 + random.random() / 2))


class ApiKeyError(ValueError):
    """``--api-key-env`` names a variable that is unset or empty."""


def api_key(environ: Mapping[str, str], var: str | None = None,
            fallbacks: Sequence[str] = DEFAULT_KEY_ENVS) -> str | None:
    """The API key: the variable ``var`` names (``--api-key-env``), which must then be set;
    else the first of ``fallbacks`` that is set and not empty; else None (no key sent)."""
    if var:
        value = environ.get(var)
        if not value:
            raise ApiKeyError(f"--api-key-env {var}: the variable {var} is unset or empty")
        return value
    return next((environ[k] for k in fallbacks if environ.get(k)), None)


class EndpointError(Exception):
    """One call failed for good (retries spent, or a response that cannot be used)."""


class EndpointConfigError(EndpointError):
    """The endpoint refuses every call (wrong URL, key or model): the command stops."""


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int | None
    completion_tokens: int | None
    attempts: int
    latency_ms: float
    finish_reason: str | None = None
    refusal: str | None = None  # the message's `refusal` (structured outputs), when it refused


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
    """POST one user message per call; thread-safe (one pooled httpx client).

    ``hint`` ends the message of an endpoint that refuses every call: which options to check.
    """

    def __init__(self, endpoint: str, model: str, *, api_key: str | None = None,
                 timeout: float = 120.0, retry: RetryPolicy = RetryPolicy(),
                 temperature: float = 0.0, max_tokens: int = 100, concurrency: int = 1,
                 sleep: Callable[[float], None] = time.sleep,
                 hint: str = "check --endpoint (the API base URL, e.g. "
                             "http://localhost:8000/v1), --model and the API key "
                             "(--api-key-env, else MIDTRACE_SWEEP_API_KEY or OPENAI_API_KEY)"
                 ) -> None:
        import httpx

        self.url = endpoint.rstrip("/") + "/chat/completions"
        self.model = model
        self.retry = retry
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.hint = hint
        self._sleep = sleep
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(
            headers=headers, timeout=timeout,
            limits=httpx.Limits(max_connections=max(concurrency, 1) + 2))

    def close(self) -> None:
        self._http.close()

    def complete(self, prompt: str, *, system: str | None = None,
                 response_format: dict[str, Any] | None = None) -> Completion:
        """One completion of ``prompt`` (after ``system``, when given); ``response_format``
        is sent as is (structured output, e.g. ``{"type": "json_schema", ...}``)."""
        import httpx

        messages = ([{"role": "system", "content": system}] if system else []) + [
            {"role": "user", "content": prompt}]
        body: dict[str, Any] = {"model": self.model, "messages": messages,
                                "temperature": self.temperature, "max_tokens": self.max_tokens}
        if response_format is not None:
            body["response_format"] = response_format
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
                        f"{self.url} answered {status}: {_excerpt(response)}; {self.hint}")
                if status != 429 and status < 500:
                    raise EndpointError(f"{self.url} answered {status}: {_excerpt(response)}")
                problem = f"answered {status}"
                retry_after = parse_retry_after(response.headers.get("retry-after"))
            if attempt > self.retry.retries:
                raise EndpointError(f"{self.url} {problem}; gave up after {attempt} attempts")
            wait = self.retry.wait(attempt, retry_after)
            log.info("%s %s; retry %d in %.2fs", self.url, problem, attempt, wait)
            self._sleep(wait)

    def _completion(self, response: Any, attempt: int, started: float) -> Completion:
        latency_ms = (time.perf_counter() - started) * 1000
        try:
            data = response.json()
            choice = data["choices"][0]
            message = choice["message"]
            text = message.get("content") or ""
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
            raise EndpointError(f"{self.url} answered without choices[0].message: "
                                f"{_excerpt(response)}") from e
        if not isinstance(text, str):
            raise EndpointError(f"{self.url} answered a non-text message content")
        refusal = message.get("refusal")
        finish = choice.get("finish_reason") if isinstance(choice, dict) else None
        usage = data.get("usage")
        return Completion(text=text, prompt_tokens=_usage_int(usage, "prompt_tokens"),
                          completion_tokens=_usage_int(usage, "completion_tokens"),
                          attempts=attempt, latency_ms=latency_ms,
                          finish_reason=finish if isinstance(finish, str) else None,
                          refusal=refusal if isinstance(refusal, str) and refusal else None)


def _excerpt(response: Any, limit: int = 200) -> str:
    text = " ".join(response.text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."
