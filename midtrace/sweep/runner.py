"""The sweep runner: plan every (case, condition, strategy, repeat), call the model for what
the journal does not yet hold, grade, record one trace per call, summarise.

Calls run on a thread pool (``concurrency`` at a time); grading and recording happen on the
calling thread as calls finish, each finished batch sent to the sink and only then written
to the journal, so the journal never claims a call the database does not have. The summary
is read back from the database's metric views once every batch is stored.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from midtrace.sweep import prompt as prompts
from midtrace.sweep.cases import Case, load_cases
from midtrace.sweep.client import ChatClient, Completion, EndpointConfigError, EndpointError
from midtrace.sweep.conditions import (Condition, Placed, conditions_for, prompt_order,
                                       retrieval_order)
from midtrace.sweep.grading import Grade, grade, normalize, without_citations
from midtrace.sweep.journal import Journal, JournalError, journal_path
from midtrace.sweep.recording import OtlpSink, Recorder, RecordError, Sink, StoreSink
from midtrace.sweep.results import TrialKey, TrialResult, trace_id_of
from midtrace.sweep.settings import SweepSettings
from midtrace.sweep.summary import Summary, summarise
from midtrace.schemas.model import Chunk, Outcome, Placement, RagRecord

log = logging.getLogger(__name__)

STATE_DIR = Path(".midtrace") / "sweeps"
CHARS_PER_TOKEN = 4
MAX_CONSECUTIVE_FAILURES = 10


class SweepError(Exception):
    """The sweep cannot start or had to stop; the message says why and what to do."""


def default_experiment(cases: Path, model: str, today: datetime | None = None) -> str:
    """``<cases file stem>-<model>-<YYYYMMDD>`` (UTC), with unsafe characters replaced."""
    day = (today or datetime.now(UTC)).strftime("%Y%m%d")
    return re.sub(r"[^A-Za-z0-9_.@+-]+", "_", f"{cases.stem}-{model}-{day}")


@dataclass(frozen=True)
class Trial:
    case: Case
    condition: Condition
    strategy: str
    repeat: int
    trace_id: str

    @property
    def key(self) -> TrialKey:
        return (self.case.id, self.condition.name, self.strategy, self.repeat)


def plan(cases: list[Case], settings: SweepSettings, experiment: str) -> tuple[list[Trial], list[str]]:
    """Every trial of the sweep, case by case, and notes on conditions a case cannot have."""
    trials: list[Trial] = []
    notes: list[str] = []
    for case in cases:
        conditions, case_notes = conditions_for(case, settings.ranks, settings.absent)
        notes += case_notes
        for condition in conditions:
            for strategy in settings.strategies:
                for repeat in range(settings.repeats):
                    key = (case.id, condition.name, strategy, repeat)
                    trials.append(Trial(case, condition, strategy, repeat,
                                        trace_id_of(experiment, key)))
    return trials, notes


@dataclass(frozen=True)
class Called:
    trial: Trial
    placed: list[Placed]
    prompt: prompts.Prompt
    completion: Completion
    grade: Grade
    start_ns: int
    end_ns: int


def call(trial: Trial, template: prompts.Template, client: ChatClient) -> Called:
    """Lay out, render, ask and grade one trial (runs on a worker thread)."""
    placed = prompt_order(trial.strategy, retrieval_order(trial.case, trial.condition))
    docs = [prompts.Doc(p.chunk.text, p.chunk.title or p.chunk.source) for p in placed]
    prompt = prompts.render(template, trial.case.question, docs)
    start_ns = time.time_ns()
    completion = client.complete(prompt.text)
    end_ns = time.time_ns()
    g = grade(completion.text, trial.case.answers, trial.case.constraints, len(placed))
    return Called(trial, placed, prompt, completion, g, start_ns, end_ns)


def prompt_tokens(called: Called) -> int:
    """The endpoint's usage.prompt_tokens when it reports it, else characters / 4."""
    return called.completion.prompt_tokens or math.ceil(len(called.prompt.text) / CHARS_PER_TOKEN)


def build_record(called: Called, experiment: str, model: str,
                 template: prompts.Template) -> RagRecord:
    t, g = called.trial, called.grade
    cited = set(g.cited)
    chunks = tuple(
        Chunk(id=p.chunk.id, stage="in_prompt", source_id=p.chunk.source,
              source_position=p.chunk.source_position, retrieval_rank=p.rank,
              label=p.chunk.label, decisive=p.chunk.role == "decisive", cited=i in cited,
              text=p.chunk.text)
        for i, p in enumerate(called.placed, start=1))
    placements = tuple(
        Placement(chunk_id=p.chunk.id, prompt_index=i, char_start=start, char_end=end)
        for i, (p, (start, end)) in enumerate(zip(called.placed, called.prompt.offsets)))
    constraints = t.case.constraints or None
    outcome = Outcome(
        correct=g.correct, score=1.0 if g.matched else 0.0,
        decisive_chunk_ids=tuple(c.id for c in t.case.decisive),
        required_constraints=constraints,
        recalled_constraints=g.recalled if constraints else None)
    return RagRecord(
        question=t.case.question, answer=called.completion.text, model=model,
        template_id=template.id, template_version=template.version, strategy=t.strategy,
        experiment_id=experiment, condition=t.condition.name, case_id=t.case.id,
        cited_ids=tuple(called.placed[i - 1].chunk.id for i in g.cited),
        prompt_tokens=prompt_tokens(called), output_tokens=called.completion.completion_tokens,
        prompt_chars=len(called.prompt.text), latency_ms=round(called.completion.latency_ms, 3),
        chunks=chunks, placements=placements, outcome=outcome)


def genai_attributes(called: Called, model: str) -> dict[str, Any]:
    attrs: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.request.model": model}
    if called.completion.prompt_tokens is not None:
        attrs["gen_ai.usage.input_tokens"] = called.completion.prompt_tokens
    if called.completion.completion_tokens is not None:
        attrs["gen_ai.usage.output_tokens"] = called.completion.completion_tokens
    return attrs


def result_of(called: Called) -> TrialResult:
    t, g = called.trial, called.grade
    slots = [i for i, p in enumerate(called.placed, start=1) if p.chunk.role == "decisive"]
    return TrialResult(
        case=t.case.id, condition=t.condition.name, strategy=t.strategy, repeat=t.repeat,
        trace_id=t.trace_id, k=len(called.placed), slots=tuple(slots),
        correct=g.correct, matched=g.matched, required=len(g.required), recalled=len(g.recalled),
        cited_decisive=(any(s in g.cited for s in slots) if slots else None),
        answer=normalize(without_citations(called.completion.text)), prompt_tokens=prompt_tokens(called),
        latency_ms=round(called.completion.latency_ms, 3), attempts=called.completion.attempts)


@dataclass
class Failure:
    key: TrialKey
    message: str


@dataclass
class Sweep:
    """One sweep run: ``Sweep.prepare(settings)``, then ``run(progress)``."""

    settings: SweepSettings
    experiment: str
    template: prompts.Template
    trials: list[Trial]
    journal: Journal
    bad_lines: list[str]
    notes: list[str]
    failures: list[Failure] = field(default_factory=list)
    recorded: int = 0

    @classmethod
    def prepare(cls, settings: SweepSettings) -> Sweep:
        if (settings.url is None) == (settings.db is None):
            raise SweepError("give exactly one of --url (a running collector) or --store (a DuckDB "
                             "file or a ClickHouse store)")
        try:
            case_file = load_cases(settings.cases)
        except OSError as e:
            raise SweepError(f"cannot read {settings.cases}: {e.strerror or e}") from e
        except UnicodeDecodeError as e:
            raise SweepError(f"{settings.cases} is not UTF-8 text: {e}") from e
        bad = [str(b) for b in case_file.bad]
        if not case_file.cases:
            detail = f" ({len(bad)} bad line(s); first: {bad[0]})" if bad else ""
            raise SweepError(f"{settings.cases} has no usable case{detail}")
        experiment = settings.experiment or default_experiment(settings.cases, settings.model)
        template = settings.template or prompts.Template.default()
        trials, notes = plan(case_file.cases, settings, experiment)
        state_dir = settings.state_dir or settings.cases.resolve().parent / STATE_DIR
        header = {"experiment": experiment, "model": settings.model,
                  "template_id": template.id, "template_version": template.version,
                  "endpoint": settings.endpoint, "cases": str(settings.cases),
                  "created": datetime.now(UTC).isoformat(timespec="seconds")}
        try:
            journal = Journal(journal_path(state_dir, experiment), header)
        except JournalError as e:
            raise SweepError(str(e)) from e
        return cls(settings, experiment, template, trials, journal, bad, notes)

    @property
    def todo(self) -> list[Trial]:
        return [t for t in self.trials if t.key not in self.journal.done]

    @property
    def resumed(self) -> int:
        return sum(1 for t in self.trials if t.key in self.journal.done)

    def _sink(self) -> Sink:
        s = self.settings
        try:
            return OtlpSink(s.url, s.token) if s.url else StoreSink(s.db, s.prices)  # type: ignore[arg-type]
        except RecordError as e:
            raise SweepError(str(e)) from e

    def run(self, progress: Callable[[int], None] | None = None) -> Summary:
        """Call, record and journal every trial not yet recorded; stop early on a fatal error
        (raised as SweepError once what finished is recorded)."""
        todo = self.todo
        s = self.settings
        fatal: str | None = None
        try:
            if todo:
                recorder = Recorder(self._sink())
                client = ChatClient(s.endpoint, s.model, api_key=s.api_key, timeout=s.timeout,
                                    retry=s.retry, temperature=s.temperature,
                                    max_tokens=s.max_tokens, concurrency=s.concurrency)
                try:
                    fatal = self._run_pool(todo, recorder, client, progress)
                finally:
                    client.close()
                    recorder.close()
        finally:
            self.journal.close()
        if fatal:
            raise SweepError(fatal)
        return self.summary()

    def _run_pool(self, todo: list[Trial], recorder: Recorder, client: ChatClient,
                  progress: Callable[[int], None] | None) -> str | None:
        """At most ``concurrency`` calls are in flight, plus the finished batch being recorded:
        all a kill can lose."""
        window = self.settings.concurrency
        pool = ThreadPoolExecutor(max_workers=window, thread_name_prefix="midtrace-sweep")
        queue = iter(todo)
        pending: set[Future[Called]] = set()
        keys: dict[Future[Called], TrialKey] = {}
        consecutive = 0
        fatal: str | None = None

        def fill() -> None:
            while len(pending) < window:
                t = next(queue, None)
                if t is None:
                    return
                f = pool.submit(call, t, self.template, client)
                keys[f] = t.key
                pending.add(f)

        try:
            fill()
            while pending and fatal is None:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                batch: list[Called] = []
                for f in done:
                    try:
                        batch.append(f.result())
                        consecutive = 0
                    except EndpointConfigError as e:
                        fatal = str(e)
                    except EndpointError as e:
                        consecutive += 1
                        self.failures.append(Failure(keys[f], str(e)))
                        log.warning("case %s, %s, %s, repeat %d: %s", *keys[f], e)
                    del keys[f]
                if consecutive >= MAX_CONSECUTIVE_FAILURES and fatal is None:
                    fatal = (f"{consecutive} calls in a row failed, stopping; the last: "
                             f"{self.failures[-1].message}")
                if fatal is None:
                    fill()
                self._record(batch, recorder)
                if progress:
                    progress(len(done))
        except RecordError as e:
            fatal = f"{e}; rerun the same command to resume"
        finally:
            for f in pending:
                f.cancel()
            pool.shutdown(wait=True, cancel_futures=True)
        return fatal

    def _record(self, batch: list[Called], recorder: Recorder) -> None:
        if not batch:
            return
        spans = [recorder.span(c.trial.trace_id,
                               build_record(c, self.experiment, self.settings.model, self.template),
                               c.start_ns, c.end_ns, genai_attributes(c, self.settings.model))
                 for c in batch]
        recorder.send(spans)
        try:
            self.journal.append(result_of(c) for c in batch)
        except JournalError as e:
            raise RecordError(str(e)) from e
        self.recorded += len(batch)

    def summary(self) -> Summary:
        """The summary from the metric views of the database the traces went to (for --url
        the collector answers an export after its commit, so every call is there)."""
        from midtrace.client import ClientError, QueryError, open_client  # pandas, pyarrow

        s = self.settings
        try:
            client = open_client(url=s.url, db=s.db, token=s.token, fresh=True)
            try:
                out = summarise(client, self.experiment, s.model, s.strategies)
            finally:
                client.close()
        except (ClientError, QueryError) as e:
            raise SweepError(f"the calls are recorded, but the summary could not be read: {e}; "
                             "rerun the same command to print it") from e
        planned = {t.key for t in self.trials}
        out.recorded = self.recorded
        out.failed = len(self.failures)
        out.skipped = sum(1 for k in self.journal.done if k in planned) - self.recorded
        out.bad_lines = list(self.bad_lines)
        out.notes = list(self.notes)
        return out


def run_sweep(settings: SweepSettings, progress: Callable[[int], None] | None = None) -> Summary:
    """Prepare and run a sweep in one call (the CLI uses the two steps to size its progress bar)."""
    return Sweep.prepare(settings).run(progress)

