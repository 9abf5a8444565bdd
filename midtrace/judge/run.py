"""The LLM judge's run (docs/grading.md, "An LLM judge"): sampling, the cache that is also the
resume journal, the rate limit, the budget, retries of a malformed or refused answer, and the
outcomes, handed to a writer in the ``/v1/outcomes`` body format.

The cache is one JSON line per judged call, appended and fsynced right after the call and
before its outcome is written, keyed by the request's content (the rendered prompt: question,
documents in prompt order, answer), the judge model and the prompt version and text. A run
killed at any point resumes without paying twice: every call it paid for is in the cache, and
writing the same outcome again stores nothing (the store leaves out an unchanged machine
grade). A run over requests judged before reads their verdicts from the cache for free.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from midtrace.jsonl import json_lines
from midtrace.judge.prompt import (
    RESPONSE_FORMAT, BadVerdict, JudgePrompt, Verdict, label_chunks, parse_verdict,
    verdict_from_json)
from midtrace.llm import ChatClient, Completion, EndpointConfigError, EndpointError
from midtrace.prices import Price

log = logging.getLogger(__name__)

GRADER = "judge"
CACHE_FILE = "judge-cache.jsonl"
CHARS_PER_TOKEN = 4  # the estimate when the endpoint reports no usage


class BudgetSpent(Exception):
    """The next call would go past --budget-usd: the run stops."""


class JudgeStop(Exception):
    """The endpoint refuses every call (wrong URL, key or model), or the cache cannot be written."""


def sampled(trace_id: str, share: float) -> bool:
    """Whether ``trace_id`` is in the sample: stable across runs and machines (a hash of the
    id, not a random draw), and a larger share keeps every id a smaller one kept."""
    if share >= 1:
        return True
    digest = hashlib.sha256(trace_id.lower().encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


def cache_key(model: str, prompt: JudgePrompt, rendered: str) -> str:
    return hashlib.sha256(json.dumps([model, prompt.version, prompt.digest, rendered])
                          .encode()).hexdigest()


class Cache:
    """The judge's cache and resume journal: ``<state dir>/judge-cache.jsonl``."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / CACHE_FILE
        self.verdicts: dict[str, dict[str, Any]] = {}
        if self.path.exists():
            for number, line in enumerate(json_lines(self.path.read_text(encoding="utf-8")), 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    self.verdicts[row["key"]] = row["verdict"]
                except (json.JSONDecodeError, KeyError, TypeError):
                    # a line a kill cut short: that call is made again
                    log.warning("%s:%d: skipped an unreadable line", self.path, number)
        try:
            state_dir.mkdir(parents=True, exist_ok=True)
            self._file: IO[str] = open(self.path, "a", encoding="utf-8")
        except OSError as e:
            raise JudgeStop(f"cannot write the judge cache {self.path}: {e.strerror or e}") from e
        if self.path.stat().st_size and not self.path.read_bytes().endswith(b"\n"):
            self._file.write("\n")

    def get(self, key: str) -> dict[str, Any] | None:
        return self.verdicts.get(key)

    def put(self, key: str, row: dict[str, Any]) -> None:
        try:
            self._file.write(json.dumps({"key": key, **row}, ensure_ascii=False) + "\n")
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as e:
            raise JudgeStop(f"cannot write the judge cache {self.path}: {e.strerror or e}") from e
        self.verdicts[key] = row["verdict"]

    def close(self) -> None:
        self._file.close()


@dataclass(frozen=True)
class JudgeSettings:
    model: str
    sample: float = 1.0
    max_calls_per_minute: float | None = None
    budget_usd: float | None = None
    price: Price | None = None
    invalid_retries: int = 2  # more calls after a malformed or refused answer
    max_tokens: int = 400


@dataclass
class JudgeReport:
    requests: int = 0          # read (after the filters)
    not_sampled: int = 0
    no_answer: int = 0
    judged: int = 0            # requests with a verdict written (called or cached)
    cached: int = 0            # of those, read from the cache: not paid again
    correct: int = 0
    errors: int = 0            # judge errors written (no grade)
    calls: int = 0             # calls made (each attempt after a bad answer is one)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated_tokens: bool = False  # some call reported no usage: tokens estimated
    cost_usd: float = 0.0
    sent: int = 0
    stopped: str | None = None  # why the run stopped before the end
    call_seconds: float = 0.0
    errors_seen: list[str] = field(default_factory=list)


class Judge:
    """One judging run: :meth:`grade_pages` over pages of request rows (``trace_id``,
    ``question``, ``answer``, ``chunks``: ``{chunk_id, text, prompt_index}``)."""

    def __init__(self, client: ChatClient, settings: JudgeSettings, cache: Cache,
                 write: Callable[[list[dict[str, Any]]], None], prompt: JudgePrompt | None = None,
                 batch: int = 50, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.client = client
        self.s = settings
        self.cache = cache
        self.write = write
        self.prompt = prompt or JudgePrompt.load()
        self.batch = batch
        self.report = JudgeReport()
        self.reviewer = f"judge:{settings.model}"
        self.structured = True  # ask for structured output until the endpoint refuses it
        self._clock = clock
        self._sleep = sleep
        self._next_call = 0.0
        self._pending: list[dict[str, Any]] = []

    # --- the run ------------------------------------------------------------------------

    def grade_pages(self, pages: Iterable[Iterable[dict[str, Any]]]) -> JudgeReport:
        try:
            for page in pages:
                for row in page:
                    self.grade_row(row)
                self.flush()  # each page's outcomes go out before the next page is read
        except BudgetSpent as e:
            self.report.stopped = str(e)
        finally:
            self.flush()
        return self.report

    def grade_row(self, row: dict[str, Any]) -> None:
        r = self.report
        r.requests += 1
        trace_id = row["trace_id"]
        if not sampled(trace_id, self.s.sample):
            r.not_sampled += 1
            return
        answer = row.get("answer")
        if answer is None:
            r.no_answer += 1
            return
        labelled = label_chunks(row.get("chunks") or ())
        rendered = self.prompt.render(row.get("question") or "", labelled.documents, answer)
        key = cache_key(self.s.model, self.prompt, rendered)
        cached = self.cache.get(key)
        if cached is not None:
            verdict = verdict_from_json(cached, len(labelled.documents))
            r.cached += 1
        else:
            try:
                verdict = self._call(rendered, len(labelled.documents))
            except EndpointConfigError as e:
                raise JudgeStop(str(e)) from e
            except (EndpointError, BadVerdict) as e:
                self._error(trace_id, str(e))
                return
            self.cache.put(key, {"trace_id": trace_id, "model": self.s.model,
                                 "prompt_version": self.prompt.version,
                                 "verdict": verdict.to_json(),
                                 "at": datetime.now(UTC).isoformat().replace("+00:00", "Z")})
        r.judged += 1
        r.correct += verdict.correct
        self._add(outcome_body(trace_id, verdict, labelled.chunk_ids, self.reviewer,
                               self.prompt.version))

    def _call(self, rendered: str, labels: int) -> Verdict:
        """Up to 1 + invalid_retries calls until one answers a valid verdict; each is paid."""
        problem = ""
        for _ in range(1 + self.s.invalid_retries):
            completion = self._complete(rendered)
            if completion.refusal or completion.finish_reason == "content_filter":
                problem = f"the judge refused: {completion.refusal or 'content filter'}"
                continue
            try:
                return parse_verdict(completion.text, labels)
            except BadVerdict as e:
                problem = f"malformed answer: {e}"
        raise BadVerdict(f"{problem} (after {1 + self.s.invalid_retries} calls)")

    def _complete(self, rendered: str) -> Completion:
        if self.s.budget_usd is not None and self.report.cost_usd >= self.s.budget_usd:
            raise BudgetSpent(f"the budget of ${self.s.budget_usd:.4f} is spent "
                              f"(${self.report.cost_usd:.4f})")
        self._pace()
        started = time.perf_counter()
        try:
            if self.structured:
                try:
                    completion = self.client.complete(rendered, response_format=RESPONSE_FORMAT)
                except EndpointError as e:
                    if isinstance(e, EndpointConfigError) or " answered 4" not in str(e):
                        raise
                    # a 400 (422...) to response_format: ask again without it, and from now on
                    log.info("the endpoint refused response_format (%s); asking for JSON in the "
                             "prompt only", e)
                    self.structured = False
                    completion = self.client.complete(rendered)
            else:
                completion = self.client.complete(rendered)
        finally:
            self.report.call_seconds += time.perf_counter() - started
        self._count(rendered, completion)
        return completion

    def _pace(self) -> None:
        if not self.s.max_calls_per_minute:
            return
        now = self._clock()
        if now < self._next_call:
            self._sleep(self._next_call - now)
            now = self._next_call
        self._next_call = now + 60.0 / self.s.max_calls_per_minute

    def _count(self, rendered: str, completion: Completion) -> None:
        r = self.report
        r.calls += 1
        prompt_tokens = completion.prompt_tokens
        completion_tokens = completion.completion_tokens
        if prompt_tokens is None or completion_tokens is None:
            r.estimated_tokens = True
            prompt_tokens = prompt_tokens or -(-len(rendered) // CHARS_PER_TOKEN)
            completion_tokens = completion_tokens or -(-len(completion.text) // CHARS_PER_TOKEN)
        r.prompt_tokens += prompt_tokens
        r.completion_tokens += completion_tokens
        if self.s.price is not None:
            r.cost_usd += self.s.price.cost(prompt_tokens, completion_tokens)

    def _error(self, trace_id: str, message: str) -> None:
        self.report.errors += 1
        if len(self.report.errors_seen) < 20:
            self.report.errors_seen.append(f"{trace_id}: {message}")
        self._add(error_body(trace_id, message, self.reviewer, self.prompt.version))

    def _add(self, body: dict[str, Any]) -> None:
        self._pending.append(body)
        if len(self._pending) >= self.batch:
            self.flush()

    def flush(self) -> None:
        if self._pending:
            batch, self._pending = self._pending, []
            self.write(batch)
            self.report.sent += len(batch)


def outcome_body(trace_id: str, verdict: Verdict, chunk_ids: dict[int, str], reviewer: str,
                 version: str) -> dict[str, Any]:
    """A verdict as one item of a ``/v1/outcomes`` body: grader judge, the prompt version and
    whether the answer is supported in the note, with the judge's reason."""
    body: dict[str, Any] = {
        "trace_id": trace_id, "grader": GRADER, "reviewer": reviewer,
        "correct": verdict.correct, "score": 1.0 if verdict.correct else 0.0,
        "note": f"{version}: {'supported' if verdict.supported else 'unsupported'}: "
                f"{verdict.reason}"}
    decisive = [chunk_ids[d] for d in verdict.decisive if d in chunk_ids]
    if decisive:
        body["decisive_chunk_ids"] = decisive
    if verdict.qualifiers_in_evidence:
        body["required_constraints"] = list(verdict.qualifiers_in_evidence)
        body["recalled_constraints"] = [q for q in verdict.qualifiers_kept
                                        if q in verdict.qualifiers_in_evidence]
    return body


def error_body(trace_id: str, message: str, reviewer: str, version: str) -> dict[str, Any]:
    """A judge error as an outcome with no grade: its note says what went wrong."""
    return {"trace_id": trace_id, "grader": GRADER, "reviewer": reviewer,
            "note": f"{version}: judge error: {message}"[:2000]}
