"""Locating documents in a prompt and resolving citations: examples and properties."""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from midtrace.collector.normalize.locate import (
    CITATION_PATTERN_ENV,
    DEFAULT_CITATION_PATTERN,
    MIN_PREFIX_CHARS,
    Found,
    InvalidCitationPattern,
    citation_keys,
    citation_pattern,
    compile_citation_pattern,
    fold_text,
    locate,
    prompt_labels,
    resolve_citations,
)

PATTERN = compile_citation_pattern(DEFAULT_CITATION_PATTERN)


def spans(found: list[Found]) -> list[tuple[int, int, int]]:
    return [(f.doc, f.start, f.end) for f in found]


# --- examples --------------------------------------------------------------------------------

def test_documents_are_found_in_prompt_order_with_original_offsets() -> None:
    docs = ["alpha beta gamma", "delta epsilon", "zeta eta"]
    prompt = f"Intro.\n[1] {docs[2]}\n[2] {docs[0]}\n"
    found = locate(prompt, docs)
    assert spans(found) == [(2, prompt.index(docs[2]), prompt.index(docs[2]) + len(docs[2])),
                            (0, prompt.index(docs[0]), prompt.index(docs[0]) + len(docs[0]))]


def test_whitespace_changes_still_match_and_offsets_cover_the_changed_text() -> None:
    doc = "Refunds are issued\nwithin  5 days.\n"
    prompt = "Context:\n<doc id=1>\n  Refunds   are issued within\t5\n\ndays.\n</doc>"
    (f,) = locate(prompt, [doc])
    assert prompt[f.start:f.end] == "Refunds   are issued within\t5\n\ndays."


def test_a_document_placed_twice_has_two_occurrences() -> None:
    doc = "the same paragraph"
    prompt = f"A: {doc}. B: something else. C: {doc}."
    assert [f.start for f in locate(prompt, [doc])] == [3, prompt.rindex(doc)]


def test_identical_texts_take_the_occurrences_in_turn() -> None:
    doc = "duplicated chunk text"
    assert [f.doc for f in locate(f"{doc} / {doc}", [doc, doc])] == [0, 1]
    assert [f.doc for f in locate(f"only once: {doc}", [doc, doc])] == [0]


def test_a_truncated_document_is_found_by_a_long_enough_prefix() -> None:
    doc = "x" * 10 + " ".join(f"word{i}" for i in range(40))
    cut = doc[:MIN_PREFIX_CHARS + 20]
    prompt = f"Docs:\n{cut}...\nQuestion?"
    (f,) = locate(prompt, [doc])
    assert f.truncated and prompt[f.start:f.end] == cut.rstrip()
    assert locate(f"Docs:\n{doc[:MIN_PREFIX_CHARS - 10]}", [doc]) == []


def test_a_document_inside_a_longer_one_is_not_placed_there() -> None:
    long = "The warranty covers manufacturing defects for two years."
    short = "manufacturing defects"
    assert spans(locate(f"[1] {long}", [short, long])) == [(1, 4, 4 + len(long))]


def test_nfc_and_nfd_forms_of_the_same_text_match() -> None:
    nfd = "Cafe\u0301 policy: re\u0301sume\u0301 required"
    nfc = "Café policy: résumé required"
    (f,) = locate(f"Doc: {nfc}!", [nfd])
    assert (f.start, f.end) == (5, 5 + len(nfc))
    (g,) = locate(f"Doc: {nfd}!", [nfc])
    assert (g.start, g.end) == (5, 5 + len(nfd))


def test_empty_and_missing_documents_are_never_found() -> None:
    assert locate("some prompt", ["", "   ", None, "absent"]) == []
    assert locate("", ["x"]) == []


# --- citations -------------------------------------------------------------------------------

@pytest.mark.parametrize("answer, keys", [
    ("It is 14 days [3].", ["3"]),
    ("It is 14 days [doc-3].", ["3"]),
    ("See [source: policies/00.md].", ["policies/00.md"]),
    ("As Document [3] says", ["3"]),
    ("As Document 3 says", ["3"]),
    ('<doc id="3"/> and <document id=doc7>', ["3", "7"]),
    ("Both [1, 2] and [4][5].", ["1", "2", "4", "5"]),
    ("Per 【2†source】.", ["2"]),
    ("No citation here.", []),
])
def test_default_pattern_reads_common_citation_styles(answer: str, keys: list[str]) -> None:
    assert citation_keys(answer, PATTERN) == keys


def test_prompt_labels_come_from_the_text_just_before_each_document() -> None:
    prompt = ("Cite as [n].\n\nDocument [1] (Title: Returns [draft]):\nAAA\n\n"
              "<doc id=beta>\nBBB\n</doc>\n\nCCC")
    placed = [(prompt.index(t), prompt.index(t) + 3) for t in ("AAA", "BBB", "CCC")]
    assert prompt_labels(prompt, placed, PATTERN) == ["1", "beta", None]
    # A numeric example in the instructions is not the label of a document tagged by id.
    prompt = "Cite sources like [1].\n<doc id=refunds>\nAAA\n</doc>"
    assert prompt_labels(prompt, [(prompt.index("AAA"), prompt.index("AAA") + 3)],
                         PATTERN) == ["refunds"]


def test_citations_map_labels_then_ids_then_prompt_order() -> None:
    ids = ["a", "b", "c"]
    labelled = resolve_citations("see [3] and [doc-1] and [x9]", ids, ["1", "2", "3"],
                                 {"x9": ["b"]}, PATTERN)
    assert labelled is not None and labelled.cited_ids == ("c", "a", "b")
    unlabelled = resolve_citations("see [2] and [7]", ids, [None] * 3, {}, PATTERN)
    assert unlabelled is not None
    assert unlabelled.cited_ids == ("b",) and unlabelled.unresolved == ("7",)
    assert resolve_citations("no markers", ids, [None] * 3, {}, PATTERN) is None


def test_the_citation_pattern_is_configurable_and_checked() -> None:
    custom = citation_pattern({CITATION_PATTERN_ENV: r"\(ref (\w+)\)"})
    assert citation_keys("as shown (ref 4) and [5]", custom) == ["4"]
    assert citation_pattern({}).pattern == DEFAULT_CITATION_PATTERN
    with pytest.raises(InvalidCitationPattern, match=CITATION_PATTERN_ENV):
        compile_citation_pattern(r"\[(\d+\]")
    with pytest.raises(InvalidCitationPattern, match="capturing group"):
        compile_citation_pattern(r"\[\d+\]")


# --- properties ------------------------------------------------------------------------------

# Document text: letters from several scripts, digits, punctuation and whitespace; never the
# guillemets used for the unique markers below.
TEXT = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x2FF, exclude_characters="«»")
               | st.sampled_from(list("\n\t  ëéあ漢字Ωж—…\u0301\u00a0")), max_size=60)
WHITESPACE = st.sampled_from([" ", "  ", "\n", "\n\n", "\t", " \n "])


def reflow(text: str, data: st.DataObject) -> str:
    """``text`` with every whitespace run replaced by some other whitespace."""
    words = text.split()
    return "".join(w + (data.draw(WHITESPACE) if i < len(words) - 1 else "")
                   for i, w in enumerate(words))


def check_sound(prompt: str, docs: list[str], found: list[Found]) -> None:
    assert found == sorted(found, key=lambda f: (f.start, f.doc))
    for a, b in zip(found, found[1:]):
        assert a.end <= b.start
    for f in found:
        located, wanted = fold_text(prompt[f.start:f.end]), fold_text(docs[f.doc])
        if f.truncated:
            assert wanted.startswith(located) and len(located) >= MIN_PREFIX_CHARS
        else:
            assert located == wanted


@settings(max_examples=300, deadline=None)
@given(docs=st.lists(TEXT, max_size=8), filler=TEXT, data=st.data())
def test_every_occurrence_reported_is_the_document_text(docs: list[str], filler: str,
                                                        data: st.DataObject) -> None:
    order = data.draw(st.permutations(range(len(docs))))
    prompt = filler + "".join(f"\n[{i}] " + reflow(docs[i], data) for i in order)
    found = locate(prompt, docs)
    check_sound(prompt, docs, found)
    assert found == locate(prompt, docs)


@settings(max_examples=300, deadline=None)
@given(bodies=st.lists(TEXT, min_size=1, max_size=8), prefix=TEXT, data=st.data())
def test_distinct_documents_are_found_exactly_where_they_were_put(
        bodies: list[str], prefix: str, data: st.DataObject) -> None:
    # Shared prefixes on purpose: every document starts with the same text.
    docs = [f"{prefix} «{i}» {body}" for i, body in enumerate(bodies)]
    order = data.draw(st.permutations(range(len(docs))))
    present = [i for i in order if data.draw(st.booleans(), label=f"keep {i}")]
    prompt, expected = "System: answer from the documents.\n", []
    for i in present:
        prompt += f"\n<doc id={i}>\n"
        shown = reflow(docs[i], data)
        expected.append((i, len(prompt), len(prompt) + len(shown)))
        prompt += shown + "\n</doc>"
    found = locate(prompt, docs)
    check_sound(prompt, docs, found)
    assert spans(found) == expected


@settings(max_examples=200, deadline=None)
@given(doc=TEXT, times=st.integers(1, 4), data=st.data())
def test_a_repeated_document_gets_one_occurrence_per_copy(doc: str, times: int,
                                                          data: st.DataObject) -> None:
    marked = f"«{doc}»"
    prompt = "".join(f"\n--- copy {k} ---\n{reflow(marked, data)}" for k in range(times))
    assert [f.doc for f in locate(prompt, [marked])] == [0] * times


@settings(max_examples=200, deadline=None)
@given(shared=st.text(alphabet="abc ", min_size=MIN_PREFIX_CHARS, max_size=120),
       tails=st.lists(st.text(alphabet="xyz", min_size=1, max_size=10), min_size=2,
                      max_size=4, unique=True))
def test_a_missing_document_is_not_mistaken_for_one_sharing_its_prefix(
        shared: str, tails: list[str]) -> None:
    assume(fold_text(shared))
    docs = [f"«{shared}» {t}" for t in tails]
    prompt = f"Only the first: {docs[0]}."
    assert [f.doc for f in locate(prompt, docs)] == [0]


@given(docs=st.lists(st.sampled_from(["", " ", "\n\t", "\u00a0"]), max_size=5), prompt=TEXT)
def test_blank_documents_are_never_placed(docs: list[str], prompt: str) -> None:
    assert locate(prompt, docs) == []


def test_pattern_is_a_compiled_regex() -> None:
    assert isinstance(PATTERN, re.Pattern)
