"""The sweep's model client: the one retrying client of midtrace (midtrace/llm.py), with the
sweep's API key fallbacks."""

from __future__ import annotations

from collections.abc import Mapping

from midtrace.llm import (  # noqa: F401  (re-exported for the sweep)
    FATAL_STATUSES, ChatClient, Completion, EndpointConfigError, EndpointError, RetryPolicy,
    api_key, parse_retry_after)

API_KEY_ENVS = ("MIDTRACE_SWEEP_API_KEY", "OPENAI_API_KEY")


def api_key_from_env(environ: Mapping[str, str], var: str | None = None) -> str | None:
    """``--api-key-env VAR`` when given; else the first of MIDTRACE_SWEEP_API_KEY,
    OPENAI_API_KEY that is set and not empty."""
    return api_key(environ, var, API_KEY_ENVS)
