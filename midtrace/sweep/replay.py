"""Replay one incident: a stored request's own prompt, its chunks re-laid-out, asked again.

docs/replay.md is the user-facing description. A stored request (the query API's trace)
becomes an :class:`Incident`: its question, the chunks that reached its prompt (in prompt
order, with their retrieval ranks), its decisive chunks and the accepted answers of the
references line that matches its question. Each layout puts the same chunks in another
order:

- ``original``: the prompt order the request had;
- a packing strategy (``--strategies``, midtrace.schemas.packing) applied to the chunks in
  their ranking order (rerank rank, else retrieval rank, else prompt order);
- ``decisive_first`` / ``decisive_last``: the decisive chunk(s) moved to slot 1 / the last
  slot, every other chunk keeping its original relative order.

The prompt is the request's own where the trace carried its text with each chunk's character
offsets: the text stays as it was and the chunk texts are swapped slot by slot. Otherwise it is
rebuilt ("reconstructed") from the chunks with the sweep's default template (the Lost in the
Middle QA prompt, midtrace/sweep/prompt.py), recorded under template id
``reconstructed/lost-in-the-middle-qa``.

Every call is graded with the sweep's rule (best-subspan exact match of the accepted answers,
plus the required constraints) and recorded, through the sweep's recording path, as a request
of the replay's experiment: ``case_id`` = the original trace id, ``condition`` = ``replay``,
``strategy`` = the layout, so the Experiments page compares the layouts like strategies, and
the original's inspector finds its replays by its trace id.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from midtrace.references import Reference, question_key
from midtrace.schemas import packing
from midtrace.sweep import prompt as prompts
from midtrace.sweep.cases import Case, CaseChunk
from midtrace.sweep.client import ChatClient, EndpointConfigError, EndpointError
from midtrace.sweep.conditions import Condition, Placed
from midtrace.sweep.grading import grade
from midtrace.sweep.recording import Recorder, RecordError
from midtrace.sweep.results import trace_id_of
from midtrace.sweep.runner import Called, Trial, build_record, genai_attributes

ORIGINAL = "original"
DECISIVE_FIRST = "decisive_first"
DECISIVE_LAST = "decisive_last"
CONDITION = "replay"
RECONSTRUCTED_TEMPLATE_ID = "reconstructed/" + prompts.DEFAULT_TEMPLATE_ID
DEFAULT_STRATEGIES = ("edge", "long_context_reorder")
CHARS_PER_TOKEN = 4
RECORD_BATCH = 25  # replays recorded per write: one store write per call would cost more than
# the call to a local model

NO_TEXT = ("it cannot be replayed: its texts were not stored (the collector ran with "
           "--no-text), so there is no prompt to send again")


class ReplayError(Exception):
    """The replay cannot start or had to stop; the message says why."""


@dataclass(frozen=True)
class Incident:
    """What a replay needs of one stored request."""

    trace_id: str
    question: str
    chunks: tuple[CaseChunk, ...]  # the chunks of its prompt, in prompt order
    ranks: Mapping[str, int]  # chunk id -> ranking position (1 = first)
    answers: tuple[str, ...]
    constraints: tuple[str, ...]
    model: str | None
    strategy: str | None
    answer: str | None
    correct: bool | None  # the original's merged grade
    template_id: str | None = None
    template_version: str | None = None
    prompt_text: str | None = None  # the stored prompt, when the trace carried it
    offsets: tuple[tuple[int, int], ...] = ()  # each slot's chunk text in prompt_text

    @property
    def reconstructed(self) -> bool:
        return self.prompt_text is None

    @property
    def decisive_ids(self) -> tuple[str, ...]:
        return tuple(c.id for c in self.chunks if c.role == "decisive")

    def case(self) -> Case:
        return Case(id=self.trace_id, question=self.question, answers=self.answers,
                    decisive=tuple(c for c in self.chunks if c.role == "decisive"),
                    distractors=tuple(c for c in self.chunks if c.role != "decisive"),
                    constraints=self.constraints)


def incident_from_trace(trace: Mapping[str, Any], references: Mapping[str, Reference],
                        prompt_texts: Sequence[str] = ()) -> Incident | str:
    """The incident a stored request makes, or why it cannot be replayed. ``prompt_texts``
    are the prompts the trace's LLM spans carried (the query API's prompts): the first in
    which every chunk's stored character offsets hold exactly its text is the request's own;
    with none such the prompt is rebuilt."""
    request = trace.get("request") or {}
    question = request.get("question")
    chunks_by_id = {str(c.get("chunk_id")): c for c in trace.get("chunks") or []}
    if not isinstance(question, str) or not question.strip():
        if chunks_by_id and all(c.get("text") is None for c in chunks_by_id.values()):
            return NO_TEXT
        return "it has no stored question (none was recorded, or the collector ran with --no-text)"
    placements = sorted(trace.get("placements") or [], key=lambda p: p.get("prompt_index", 0))
    seen: set[str] = set()
    placed = []
    for p in placements:
        cid = str(p.get("chunk_id"))
        if cid in chunks_by_id and cid not in seen:
            seen.add(cid)
            placed.append((chunks_by_id[cid], p))
    if not placed:
        return "no chunk of it is known to have been in its prompt: there is no layout to change"
    if any(not isinstance(c.get("text"), str) for c, _ in placed):
        return NO_TEXT if all(c.get("text") is None for c, _ in placed) else \
            "a chunk of its prompt has no stored text"
    decisive = {str(c["chunk_id"]) for c in chunks_by_id.values() if c.get("is_decisive")}
    if not decisive:
        return "no decisive chunk is known among its chunks: grade it first"
    if not decisive & seen:
        return ("its decisive chunk never reached the prompt (retrieved but dropped, or not "
                "retrieved): no layout of its prompt can hold it")
    reference = references.get(question_key(question))
    if reference is None:
        return ("no accepted answer to grade replays by: no --references line has its "
                "question (stored outcomes carry no accepted answers)")
    outcome = trace.get("outcome") or {}
    constraints = tuple(outcome.get("required_constraints") or reference.required_constraints)
    chunks = tuple(_chunk(c, str(c["chunk_id"]) in decisive) for c, _ in placed)
    ranking = sorted(range(len(placed)), key=lambda i: _rank_key(placed[i][0], i))
    ranks = {chunks[i].id: n for n, i in enumerate(ranking, start=1)}
    prompt_text, offsets = next(((t, o) for t in prompt_texts
                                 if (o := _offsets(t, placed)) is not None), (None, None))
    return Incident(
        trace_id=str(trace.get("trace_id")), question=question, chunks=chunks, ranks=ranks,
        answers=tuple(reference.answers), constraints=constraints,
        model=request.get("model"), strategy=request.get("strategy"),
        answer=request.get("answer"),
        template_id=request.get("template_id"), template_version=request.get("template_version"),
        correct=outcome.get("correct") if isinstance(outcome.get("correct"), bool) else None,
        prompt_text=prompt_text if offsets else None, offsets=offsets or ())


def _rank_key(chunk: Mapping[str, Any], prompt_index: int) -> tuple[int, int, int]:
    for key in ("rerank_rank", "retrieval_rank"):
        value = chunk.get(key)
        if isinstance(value, int):
            return (0 if key == "rerank_rank" else 1, value, prompt_index)
    return (2, prompt_index, prompt_index)


def _chunk(c: Mapping[str, Any], decisive: bool) -> CaseChunk:
    return CaseChunk(id=str(c["chunk_id"]), text=str(c["text"]),
                     role="decisive" if decisive else "distractor",
                     label=str(c.get("label") or ("direct_answer" if decisive else "irrelevant")),
                     source=str(c["source_id"]) if c.get("source_id") else None,
                     source_position=c["source_position"]
                     if isinstance(c.get("source_position"), int) else None)


def _offsets(prompt_text: str | None, placed: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]]
             ) -> tuple[tuple[int, int], ...] | None:
    """Each slot's [start, end) in the stored prompt, when every one is known, in order,
    without overlap, and holds exactly its chunk's text; else None (the prompt is rebuilt)."""
    if not prompt_text:
        return None
    out: list[tuple[int, int]] = []
    end = 0
    for chunk, p in placed:
        a, b = p.get("char_start"), p.get("char_end")
        if not isinstance(a, int) or not isinstance(b, int) or a < end or b > len(prompt_text):
            return None
        if prompt_text[a:b] != chunk.get("text"):
            return None
        out.append((a, b))
        end = b
    return tuple(out)


# --- layouts ----------------------------------------------------------------------------------

def layout_names(strategies: Sequence[str]) -> tuple[str, ...]:
    """The layouts a replay asks, in the order it prints them: the original first."""
    return tuple(dict.fromkeys((ORIGINAL, *strategies, DECISIVE_FIRST, DECISIVE_LAST)))


def layout(incident: Incident, name: str) -> list[Placed]:
    """The incident's chunks in the prompt order of layout ``name``, each with its rank."""
    chunks = list(incident.chunks)
    if name == ORIGINAL:
        ordered = chunks
    elif name in (DECISIVE_FIRST, DECISIVE_LAST):
        decisive = [c for c in chunks if c.role == "decisive"]
        others = [c for c in chunks if c.role != "decisive"]
        ordered = decisive + others if name == DECISIVE_FIRST else others + decisive
    else:
        ranked = sorted(chunks, key=lambda c: incident.ranks[c.id])
        packed = packing.pack(name, ranked, source=lambda c: c.source,
                              source_position=lambda c: c.source_position)
        ordered = list(packed.items)
    return [Placed(c, incident.ranks[c.id]) for c in ordered]


def render(incident: Incident, placed: Sequence[Placed],
           template: prompts.Template) -> prompts.Prompt:
    """The prompt of one layout: the stored prompt with its chunk texts swapped slot by slot,
    else the template rendered with the chunks in the layout's order."""
    if incident.prompt_text is None:
        docs = [prompts.Doc(p.chunk.text, p.chunk.source) for p in placed]
        return prompts.render(template, incident.question, docs)
    text = incident.prompt_text
    parts: list[str] = []
    offsets: list[tuple[int, int]] = []
    pos = length = 0
    for (a, b), p in zip(incident.offsets, placed, strict=True):
        parts.append(text[pos:a])
        length += a - pos
        parts.append(p.chunk.text)
        offsets.append((length, length + len(p.chunk.text)))
        length += len(p.chunk.text)
        pos = b
    parts.append(text[pos:])
    return prompts.Prompt(text="".join(parts), offsets=tuple(offsets))


def replay_template(incident: Incident) -> prompts.Template:
    """The template recorded with the replays: the request's own (by its id and version)
    when its prompt was stored, else the default marked reconstructed."""
    default = prompts.Template.default()
    if incident.reconstructed:
        return prompts.Template(default.text, RECONSTRUCTED_TEMPLATE_ID, default.version)
    return prompts.Template(default.text, incident.template_id or "stored",
                            incident.template_version or "stored")


def default_experiment(trace_id: str, model: str, today: datetime | None = None) -> str:
    """``replay-<first 12 of the trace id>-<model>-<YYYYMMDD>`` (UTC), unsafe characters
    replaced."""
    day = (today or datetime.now(UTC)).strftime("%Y%m%d")
    return re.sub(r"[^A-Za-z0-9_.@+-]+", "_", f"replay-{trace_id[:12]}-{model}-{day}")


# --- the run ----------------------------------------------------------------------------------

@dataclass
class LayoutResult:
    layout: str
    slots: tuple[int, ...]  # 1-based slots of the decisive chunk(s)
    calls: int = 0
    correct: int = 0
    failed: int = 0
    answers: list[str] = field(default_factory=list)


@dataclass
class ReplayResult:
    incident: Incident
    experiment: str
    model: str
    layouts: dict[str, LayoutResult]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usage_missing: int = 0  # calls whose endpoint reported no usage
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)

    @property
    def calls(self) -> int:
        return sum(r.calls for r in self.layouts.values())


@dataclass(frozen=True)
class Plan:
    incident: Incident
    experiment: str
    template: prompts.Template
    trials: tuple[tuple[Trial, tuple[Placed, ...], prompts.Prompt], ...]
    layouts: tuple[str, ...]

    @property
    def prompt_chars(self) -> int:
        return sum(len(p.text) for _, _, p in self.trials)

    def estimated_prompt_tokens(self) -> int:
        return sum(math.ceil(len(p.text) / CHARS_PER_TOKEN) for _, _, p in self.trials)


def plan(incident: Incident, strategies: Sequence[str], repeats: int,
         experiment: str) -> Plan:
    template = replay_template(incident)
    render_with = prompts.Template.default()
    case = incident.case()
    condition = Condition(CONDITION, ())
    names = layout_names(strategies)
    trials = []
    for name in names:
        placed = tuple(layout(incident, name))
        rendered = render(incident, placed, render_with)
        for repeat in range(repeats):
            key = (case.id, CONDITION, name, repeat)
            trials.append((Trial(case, condition, name, repeat, trace_id_of(experiment, key)),
                           placed, rendered))
    return Plan(incident, experiment, template, tuple(trials), names)


def run(plan_: Plan, client: ChatClient, recorder: Recorder, model: str,
        concurrency: int = 4, progress: Callable[[int], None] | None = None) -> ReplayResult:
    """Ask every trial of the plan, grade every answer and record it (``RECORD_BATCH`` at a
    time; the rest when the calls are done)."""
    incident = plan_.incident
    layouts = {}
    for name in plan_.layouts:
        placed = next(p for t, p, _ in plan_.trials if t.strategy == name)
        layouts[name] = LayoutResult(name, tuple(i for i, p in enumerate(placed, start=1)
                                                 if p.chunk.role == "decisive"))
    out = ReplayResult(incident, plan_.experiment, model, layouts)
    started = time.perf_counter()

    def ask(trial: Trial, placed: tuple[Placed, ...], rendered: prompts.Prompt) -> Called:
        start_ns = time.time_ns()
        completion = client.complete(rendered.text)
        end_ns = time.time_ns()
        g = grade(completion.text, incident.answers, incident.constraints, len(placed))
        return Called(trial, list(placed), rendered, completion, g, start_ns, end_ns)

    fatal: str | None = None
    batch: list[Any] = []
    with ThreadPoolExecutor(max_workers=max(concurrency, 1),
                            thread_name_prefix="midtrace-replay") as pool:
        futures = {pool.submit(ask, *t): t[0] for t in plan_.trials}
        for f in as_completed(futures):
            trial = futures[f]
            if fatal:
                f.cancel()
                continue
            try:
                called = f.result()
            except EndpointConfigError as e:
                fatal = str(e)
                for other in futures:
                    other.cancel()
                continue
            except EndpointError as e:
                layouts[trial.strategy].failed += 1
                out.failures.append(f"{trial.strategy}, repeat {trial.repeat}: {e}")
                continue
            record = build_record(called, plan_.experiment, model, plan_.template)
            span = recorder.span(trial.trace_id, record, called.start_ns, called.end_ns,
                                 {**genai_attributes(called, model),
                                  "midtrace.replay.of": incident.trace_id,
                                  "midtrace.replay.prompt": "reconstructed"
                                  if incident.reconstructed else "stored"})
            batch.append(span)
            if len(batch) >= RECORD_BATCH:
                fatal = _flush(recorder, batch)
            r = layouts[trial.strategy]
            r.calls += 1
            r.correct += called.grade.correct
            r.answers.append(called.completion.text)
            c = called.completion
            if c.prompt_tokens is None:
                out.usage_missing += 1
            out.prompt_tokens += c.prompt_tokens or math.ceil(len(called.prompt.text)
                                                              / CHARS_PER_TOKEN)
            out.completion_tokens += c.completion_tokens or 0
            if progress:
                progress(1)
    fatal = fatal or _flush(recorder, batch)
    out.seconds = time.perf_counter() - started
    if fatal:
        raise ReplayError(f"{fatal} ({out.calls} replay(s) recorded before the stop)")
    return out


def _flush(recorder: Recorder, batch: list[Any]) -> str | None:
    """Send the batch of finished spans; the error message if the sink did not take it."""
    try:
        recorder.send(batch)
    except RecordError as e:
        return str(e)
    finally:
        batch.clear()
    return None
