"""The chat client against a real local HTTP server: retries, Retry-After, fatal statuses."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from midtrace.llm import ApiKeyError
from midtrace.sweep.client import (ChatClient, EndpointConfigError, EndpointError, RetryPolicy,
                                   api_key_from_env, parse_retry_after)
from tests.fake_llm import FakeLLM

PROMPT = "Document [1] KEYFACT ANSWER: blue.\nDocument [2] noise\n\nQuestion: colour?\nAnswer:"


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    server = FakeLLM(usage_ratio=0.25)
    yield server
    server.close()


def test_answers_and_usage(llm: FakeLLM) -> None:
    client = ChatClient(llm.url, "m", api_key="sekret")
    done = client.complete(PROMPT)
    client.close()
    assert done.text == "The answer is blue [1]."
    assert done.prompt_tokens == int(len(PROMPT) * 0.25) and done.attempts == 1
    assert llm.auth == ["Bearer sekret"]


def test_retries_429_and_5xx_then_succeeds(llm: FakeLLM) -> None:
    llm.statuses = [429, 500, 503]
    waits: list[float] = []
    client = ChatClient(llm.url, "m", retry=RetryPolicy(retries=3, backoff=0.2), sleep=waits.append)
    done = client.complete(PROMPT)
    assert done.attempts == 4 and llm.attempts == 4
    assert waits[0] == 0.0  # Retry-After: 0 on the 429 wins over backoff
    assert 0.2 <= waits[1] <= 0.4 and 0.2 <= waits[2] <= 0.8  # 2nd and 3rd retry, doubling


def test_gives_up_after_the_retries(llm: FakeLLM) -> None:
    llm.statuses = [502] * 5
    client = ChatClient(llm.url, "m", retry=RetryPolicy(retries=2), sleep=lambda s: None)
    with pytest.raises(EndpointError, match="answered 502; gave up after 3 attempts"):
        client.complete(PROMPT)
    assert llm.attempts == 3


def test_wrong_path_or_key_stops_at_once(llm: FakeLLM) -> None:
    client = ChatClient(llm.url.removesuffix("/v1"), "m", sleep=lambda s: None)
    with pytest.raises(EndpointConfigError, match="answered 404.*base URL"):
        client.complete(PROMPT)
    assert llm.attempts == 1
    llm.statuses = [401]
    with pytest.raises(EndpointConfigError, match="401"):
        ChatClient(llm.url, "m").complete(PROMPT)


def test_other_client_errors_fail_one_call(llm: FakeLLM) -> None:
    llm.statuses = [400]
    with pytest.raises(EndpointError) as info:
        ChatClient(llm.url, "m", sleep=lambda s: None).complete(PROMPT)
    assert not isinstance(info.value, EndpointConfigError)
    assert llm.attempts == 1


def test_unreachable_endpoint_is_retried_then_fails() -> None:
    client = ChatClient("http://127.0.0.1:9/v1", "m", retry=RetryPolicy(retries=1),
                        timeout=2, sleep=lambda s: None)
    with pytest.raises(EndpointError, match="connection failed.*gave up after 2 attempts"):
        client.complete(PROMPT)


def test_retry_after_forms() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after("Thu, 01 Jan 2026 12:00:07 GMT", now) == 7.0
    assert parse_retry_after("Thu, 01 Jan 2026 11:00:00 GMT", now) == 0.0
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None
    assert RetryPolicy(max_retry_after=5).wait(1, 3600) == 5


def test_api_key_precedence() -> None:
    assert api_key_from_env({"OPENAI_API_KEY": "b", "MIDTRACE_SWEEP_API_KEY": "a"}) == "a"
    assert api_key_from_env({"OPENAI_API_KEY": "b", "MIDTRACE_SWEEP_API_KEY": ""}) == "b"
    assert api_key_from_env({}) is None


def test_api_key_env_names_the_variable_and_must_be_set() -> None:
    environ = {"OPENAI_API_KEY": "b", "MIDTRACE_SWEEP_API_KEY": "a", "TEAM_KEY": "t", "EMPTY": ""}
    assert api_key_from_env(environ, "TEAM_KEY") == "t"
    for var in ("NOT_SET", "EMPTY"):
        with pytest.raises(ApiKeyError, match=f"--api-key-env {var}"):
            api_key_from_env(environ, var)
