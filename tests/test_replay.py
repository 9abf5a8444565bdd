"""The replay's incident, layouts and prompts (midtrace/sweep/replay.py), without a model."""

from __future__ import annotations

from midtrace.references import Reference, question_key
from midtrace.sweep import replay as rp

QUESTION = "How long is the refund window?"
REFS = {question_key(QUESTION): Reference(1, QUESTION, ("14 days",), ("receipt",))}
TEXTS = {"a": "Shipping takes 3 days.", "b": "Refunds within 14 days with a receipt.",
         "c": "Gift cards never expire.", "d": "Support answers in 1 day."}


def stored(order: list[str], decisive: str = "b") -> tuple[dict, str]:
    """A trace as the query API gives it, and the prompt its LLM span carried."""
    prompt, placements = "Answer from these.\n", []
    for i, cid in enumerate(order):
        label = f"<doc title='{cid}'>"
        start = len(prompt) + len(label)
        prompt += label + TEXTS[cid] + "</doc>\n"
        placements.append({"chunk_id": cid, "prompt_index": i, "char_start": start,
                           "char_end": start + len(TEXTS[cid])})
    prompt += f"Question: {QUESTION}"
    chunks = [{"chunk_id": cid, "text": TEXTS[cid], "is_decisive": cid == decisive,
               "retrieval_rank": rank, "source_id": cid}
              for rank, cid in enumerate(sorted(TEXTS), start=1)]
    trace = {"trace_id": "ab" * 16, "request": {"question": QUESTION, "model": "m",
                                                "strategy": "score_order",
                                                "template_id": "support", "template_version": "3"},
             "chunks": chunks, "placements": placements, "outcome": {"correct": False}}
    return trace, prompt


def test_the_stored_prompt_is_sent_again_with_the_chunk_texts_swapped() -> None:
    trace, prompt = stored(["a", "b", "c", "d"])
    incident = rp.incident_from_trace(trace, REFS, ["an unrelated prompt", prompt])
    assert isinstance(incident, rp.Incident) and not incident.reconstructed
    assert incident.constraints == ("receipt",) and incident.correct is False
    placed = rp.layout(incident, rp.DECISIVE_LAST)
    assert [p.chunk.id for p in placed] == ["a", "c", "d", "b"]
    out = rp.render(incident, placed, rp.replay_template(incident))
    swapped = prompt
    for slot, cid in zip("abcd", "acdb"):  # each slot's header stays, its text is replaced
        swapped = swapped.replace(f"<doc title='{slot}'>{TEXTS[slot]}",
                                  f"<doc title='{slot}'>\1{cid}")
    for cid in "abcd":
        swapped = swapped.replace(f"\1{cid}", TEXTS[cid])
    assert out.text == swapped
    # the text around the chunks is the app's own; the chunk texts sit in the new order
    assert out.text.startswith("Answer from these.\n<doc title='a'>" + TEXTS["a"])
    assert out.text.endswith(TEXTS["b"] + f"</doc>\nQuestion: {QUESTION}")
    assert [out.text[a:b] for a, b in out.offsets] == [TEXTS[c] for c in "acdb"]
    assert rp.replay_template(incident).id == "support"


def test_a_prompt_whose_offsets_do_not_hold_the_chunks_is_rebuilt_and_marked() -> None:
    trace, prompt = stored(["a", "b", "c", "d"])
    incident = rp.incident_from_trace(trace, REFS, [prompt.replace("Shipping", "Delivery")])
    assert isinstance(incident, rp.Incident) and incident.reconstructed
    assert rp.replay_template(incident).id == rp.RECONSTRUCTED_TEMPLATE_ID
    out = rp.render(incident, rp.layout(incident, rp.DECISIVE_FIRST),
                    rp.replay_template(incident))
    assert out.text.index(TEXTS["b"]) < out.text.index(TEXTS["a"])
    assert "Document [1](Title: b) " + TEXTS["b"] in out.text and QUESTION in out.text


def test_every_layout_once_per_repeat_each_on_its_own_trace() -> None:
    trace, prompt = stored(["d", "c", "b", "a"])
    incident = rp.incident_from_trace(trace, REFS, [prompt])
    assert isinstance(incident, rp.Incident)
    # the strategies order the chunks by their ranks (a=1 ... d=4), not by the prompt order
    assert [p.chunk.id for p in rp.layout(incident, "score_order")] == ["a", "b", "c", "d"]
    assert [p.chunk.id for p in rp.layout(incident, rp.ORIGINAL)] == ["d", "c", "b", "a"]
    plan = rp.plan(incident, ["edge", "score_order"], 2, "exp")
    assert plan.layouts == ("original", "edge", "score_order", "decisive_first",
                            "decisive_last")
    assert len(plan.trials) == 10 and len({t.trace_id for t, _, _ in plan.trials}) == 10
    assert {t.condition.name for t, _, _ in plan.trials} == {rp.CONDITION}
    assert {t.case.id for t, _, _ in plan.trials} == {"ab" * 16}


def test_requests_a_replay_cannot_use_say_why() -> None:
    trace, _ = stored(["a", "b"])
    assert "no --references line" in str(rp.incident_from_trace(trace, {}))
    trace, _ = stored(["a", "c"], decisive="b")  # retrieved, never in the prompt
    assert "never reached the prompt" in str(rp.incident_from_trace(trace, REFS))
    trace, _ = stored(["a", "b"], decisive="none")
    assert "grade it first" in str(rp.incident_from_trace(trace, REFS))
    trace, _ = stored(["a", "b"])
    for c in trace["chunks"]:
        c["text"] = None
    assert rp.incident_from_trace(trace, REFS) == rp.NO_TEXT


def test_the_default_experiment_names_the_trace_and_model() -> None:
    from datetime import UTC, datetime

    name = rp.default_experiment("ab" * 16, "org/model:1", datetime(2026, 12, 2, tzinfo=UTC))
    assert name == "replay-abababababab-org_model_1-20261202"
