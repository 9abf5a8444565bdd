"""Locating documents in a prompt and resolving citations: examples and properties."""

from __future__ import annotations

import json
import re
import unicodedata

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from midtrace.collector.normalize import locate as locate_module
from midtrace.collector.normalize.locate import (
    edited_forms,
    CITATION_PATTERN_ENV,
    DEFAULT_CITATION_PATTERN,
    MIN_PREFIX_CHARS,
    Found,
    InvalidCitationPattern,
    _candidates,
    _fold,
    _Grams,
    _Scan,
    _search,
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


# Every character str.isspace() accepts, which is what folding collapses.
WHITESPACE_KINDS = [" ", "\n", "\r\n", "\t", "\v", "\f", "\x1c", "\x1f", "\x85", "\u00a0",
                    "\u2003", "\u2028", "\u3000", " \n\t "]


@pytest.mark.parametrize("ws", WHITESPACE_KINDS)
def test_every_kind_of_whitespace_folds_either_way(ws: str) -> None:
    doc = f"Returns{ws}within 30 days{ws}of delivery."
    plain = "Returns within 30 days of delivery."
    prompt = f"[1]{ws}{plain}{ws}[2] {doc}\n"
    found = locate(prompt, [doc])
    assert [(f.start, f.end) for f in found] == [
        (prompt.index(plain), prompt.index(plain) + len(plain)),
        (prompt.rindex(doc), prompt.rindex(doc) + len(doc))]


def test_a_document_is_placed_once_per_copy_whatever_its_whitespace() -> None:
    a, b = "alpha beta gamma", "alpha\n\nbeta\tgamma"
    prompt = f"{b} | {a} | {a.replace(' ', '   ')}"
    # Both fold to one text: they share its three copies in turn.
    assert [(f.doc, prompt[f.start:f.end]) for f in locate(prompt, [a, b])] == [
        (0, b), (1, a), (0, a.replace(" ", "   "))]


def test_copies_of_a_document_never_overlap_each_other() -> None:
    assert [(f.start, f.end) for f in locate("aaaaa", ["aa"])] == [(0, 2), (2, 4)]


def test_a_document_inside_a_longer_one_is_placed_only_where_it_stands_alone() -> None:
    long = "The warranty covers manufacturing defects for two years."
    short = "manufacturing defects"
    prompt = f"[1] {long}\n[2] {short}"
    assert spans(locate(prompt, [short, long])) == [
        (1, 4, 4 + len(long)), (0, prompt.rindex(short), len(prompt))]


def test_documents_not_in_the_prompt_are_left_out() -> None:
    docs = ["present text here", "absent text", "also absent"]
    assert spans(locate("x present text here y", docs)) == [(0, 2, 19)]


def test_a_truncated_document_placed_twice_is_found_twice_and_trailing_space_is_dropped() -> None:
    doc = " ".join(f"word{i}" for i in range(40))
    cut = doc[:doc.index(" ", MIN_PREFIX_CHARS) + 1]
    prompt = f"A: {cut}\u2026\nB: {cut}\u2026\n"
    found = locate(prompt, [doc])
    assert [(f.start, f.end, f.truncated) for f in found] == [
        (3, 3 + len(cut) - 1, True), (prompt.rindex(cut), prompt.rindex(cut) + len(cut) - 1, True)]


def test_a_prefix_inside_a_placed_document_is_not_taken_for_a_truncated_one() -> None:
    shared = "Section 4.2 of the employee handbook, on leave and time off, says: "
    placed, missing = shared + "annual leave is 25 days.", shared + "sick leave is paid."
    assert len(shared) > MIN_PREFIX_CHARS
    assert spans(locate(f"[1] {placed}", [missing, placed])) == [(1, 4, 4 + len(placed))]


def test_nfc_comparison_keeps_offsets_in_the_original_prompt() -> None:
    nfd = "re\u0301sume\u0301 and cafe\u0301 policy"
    nfc = unicodedata.normalize("NFC", nfd)
    other = "plain ascii text"
    prompt = f"[1]\n\n  {nfc}  \n\n[2]   {other}  \n"
    assert spans(locate(prompt, [nfd, other])) == [
        (0, prompt.index(nfc), prompt.index(nfc) + len(nfc)),
        (1, prompt.index(other), prompt.index(other) + len(other))]


def test_compatibility_forms_are_not_equated() -> None:
    # Only NFC is applied: a ligature or a full-width digit is a different text (NFKC).
    assert locate("the \ufb01le is 30 days", ["the file is 30 days"]) == []
    assert locate("within \uff13\uff10 days", ["within 30 days"]) == []


def test_a_json_escaped_document_is_found_as_the_prompt_holds_it() -> None:
    doc = 'She said "refunds take\n5 days".'
    prompt = json.dumps({"prompt": f"Context: {doc}"})
    (f,) = locate(prompt, [doc])
    assert prompt[f.start:f.end] == 'She said \\"refunds take\\n5 days\\".'


def many_documents(n: int) -> tuple[str, list[str], list[tuple[int, int, int, bool]]]:
    """``n`` documents sharing a long opening, in a prompt that places them in several ways;
    returns the prompt, the documents and where each must be found."""
    header = ("Employee handbook, chapter 7 (benefits), as revised in March; applies to all "
              "regions unless a local annex says otherwise.\n")
    docs = [header + f"Rule {i}: " + " ".join(f"term{i}x{j}" for j in range(40)) for i in range(n)]
    docs.append(docs[3].split("\n")[1][:30])   # a substring of a placed document, not alone
    prompt, expected = "Answer from these documents.\n", []
    for i, doc in enumerate(docs[:n]):
        shown = doc
        if i % 7 == 1:
            continue  # dropped
        if i % 7 == 2:
            shown = doc[:len(header) + 40].rstrip()
        elif i % 7 == 3:
            shown = "\n   ".join(doc.split(" "))
        elif i % 7 == 4:
            shown = doc.replace(" ", "\u00a0")
        prompt += f"\n<doc id={i}>\n"
        expected.append((i, len(prompt), len(prompt) + len(shown), shown != doc and i % 7 == 2))
        prompt += shown + "\u2026\n</doc>"
        if i % 7 == 5:
            prompt += "\n<doc>\n"
            expected.append((i, len(prompt), len(prompt) + len(doc), False))
            prompt += doc + "\n</doc>"
    return prompt, docs, expected


@pytest.mark.parametrize("n", [12, 150])
def test_many_documents_sharing_an_opening_are_told_apart(n: int) -> None:
    prompt, docs, expected = many_documents(n)
    folded = _fold(prompt).text
    needles = [fold_text(d) for d in docs]
    # 12 documents are searched for one by one, 150 through the index.
    assert isinstance(_search(folded, needles, MIN_PREFIX_CHARS), _Grams) == (n > 100)
    found = locate(prompt, docs)
    assert [(f.doc, f.start, f.end, f.truncated) for f in found] == expected


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
    # plural lists, as current models write them
    ("Refunds take 14 days (Documents 1, 3, 14, 15).", ["1", "3", "14", "15"]),
    ("See [Documents 1, 3, and 5].", ["1", "3", "5"]),
    ("See (Document 9, 10) and Document 2.", ["9", "10", "2"]),
    ("Documents 4 and 7 agree; Sources 2 & 3 do not.", ["4", "7", "2", "3"]),
    ("See [source: terms and conditions].", ["terms and conditions"]),
    ("As Document 3, which is dated 2024, says", ["3"]),
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


def test_a_marker_of_digits_int_cannot_read_is_an_unresolved_key() -> None:
    # "²" and "³" are digits to str.isdigit() but not to int(): an answer citing "[²]"
    # once failed its whole trace, and a prompt labelling a document "[³]" the same
    ids = ["a", "b"]
    cited = resolve_citations("see [\u00b2] and [2]", ids, [None] * 2, {}, PATTERN)
    assert cited is not None
    assert cited.cited_ids == ("b",) and cited.unresolved == ("\u00b2",)
    prompt = "[\u00b3] AAA\n[1] BBB"
    placed = [(prompt.index("AAA"), prompt.index("AAA") + 3),
              (prompt.index("BBB"), prompt.index("BBB") + 3)]
    labels = prompt_labels(prompt, placed, PATTERN)
    assert labels == ["\u00b3", "1"]
    labelled = resolve_citations("see [\u00b3] and [1]", ids, labels, {}, PATTERN)
    assert labelled is not None and labelled.cited_ids == ("a", "b")


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


def naive_fold(text: str) -> tuple[str, list[int]]:
    """``text`` folded character by character, with each folded character's original index."""
    out, where = [], []
    for i, ch in enumerate(text):
        if not ch.isspace():
            out.append(ch)
            where.append(i)
        elif not out or out[-1] != " " or not text[i - 1].isspace():
            out.append(" ")
            where.append(i)
    return "".join(out), where


ANY_WHITESPACE = st.sampled_from(WHITESPACE_KINDS + ["  ", "\n\n", " " * 5])
FOLD_TEXT = st.one_of(
    st.lists(st.sampled_from(["ab", "c", "é", "\u200b", "\x00", "Ω"]) | ANY_WHITESPACE,
             max_size=30).map("".join),
    st.lists(st.sampled_from(["ab", "c", " ", "  ", "\n", "\t", "\r\n", "\v", "\x1f"]),
             max_size=30).map("".join))


@settings(max_examples=300, deadline=None)
@given(text=FOLD_TEXT)
def test_folding_maps_every_character_back_to_the_original(text: str) -> None:
    folded = _fold(text)
    expected, where = naive_fold(text)
    assert folded.text == expected == re.sub(r"\s+", " ", text)
    for i, ch in enumerate(expected):
        if ch != " ":
            assert folded.original_start(i) == where[i]
            assert folded.original_end(i + 1) == where[i] + 1
    assert fold_text(text) == expected.strip()


@settings(max_examples=300, deadline=None)
@given(opening=st.text(alphabet="ab ", max_size=12), data=st.data(),
       bodies=st.lists(st.text(alphabet="abc ", max_size=30), min_size=1, max_size=10),
       k=st.integers(1, 4), min_prefix=st.integers(1, 12))
def test_the_index_finds_what_one_search_per_document_finds(
        opening: str, bodies: list[str], data: st.DataObject, k: int, min_prefix: int) -> None:
    # A small alphabet, a shared opening and short pieces: many candidate places, repeats,
    # documents inside documents and truncated copies.
    needles = [n for n in dict.fromkeys(fold_text(opening + b) for b in bodies) if n]
    assume(needles)
    pieces = data.draw(st.lists(st.sampled_from(needles).flatmap(
        lambda n: st.integers(0, len(n)).map(lambda cut: n[:cut])), max_size=12))
    prompt = fold_text(" ab ".join(pieces))
    k = min(k, (min_prefix + 1) // 2)
    assume(k >= 1)
    assert sorted(_candidates(_Grams(prompt, k), needles, min_prefix)) == sorted(
        _candidates(_Scan(prompt), needles, min_prefix))


# --- documents edited on their way into the prompt ---------------------------------------------

from hypothesis import example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_DOC_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=20,
                    max_size=200).filter(lambda t: len(fold_text(t)) >= 20)


@settings(max_examples=150, deadline=None)
@given(docs=st.lists(_DOC_TEXT, min_size=1, max_size=4, unique_by=fold_text),
       ascii_only=st.booleans(), twice=st.booleans())
# a control character JSON escapes (and that folds to a space) ended the plain match early
@example(docs=["0" * 64 + "\x1f0"], ascii_only=False, twice=False)
def test_documents_inside_a_json_tool_result_are_found_where_the_prompt_holds_them(
        docs: list[str], ascii_only: bool, twice: bool) -> None:
    """A tool returns its documents as JSON (an array of objects with a text field); the
    model's prompt holds that JSON, perhaps itself inside a JSON string."""
    import json
    result = json.dumps([{"id": i, "text": d} for i, d in enumerate(docs)],
                        ensure_ascii=ascii_only)
    if twice:
        result = json.dumps(result, ensure_ascii=ascii_only)[1:-1]
    prompt = "System: answer from the tool results.\n\nTool result: " + result + "\n\nQ: ?"
    found = locate(prompt, docs)
    distinct = {fold_text(d) for d in docs}
    # a document inside another one's text is not placed there (occurrences never overlap)
    nested = {d for d in distinct if any(d != o and d in o for o in distinct)}
    got = {fold_text(docs[f.doc]) for f in found}
    assert distinct - nested <= got
    for f in found:
        held = prompt[f.start:f.end]
        assert f.start >= len("System: answer from the tool results.\n\nTool result: ")
        assert not f.truncated
        assert fold_text(held) in {fold_text(x) for x in edited_forms(docs[f.doc])} | {
            fold_text(docs[f.doc])}


def test_a_document_with_html_tags_is_found_in_a_prompt_that_stripped_them() -> None:
    doc = "<p>Refunds for <b>annual</b> plans: within 14 days of the charge &amp; no later.</p>"
    prompt = "Context:\nRefunds for annual plans: within 14 days of the charge & no later.\nQ?"
    (f,) = locate(prompt, [doc])
    assert prompt[f.start:f.end] == ("Refunds for annual plans: within 14 days of the charge "
                                     "& no later.")


def test_a_stripped_form_too_short_to_tell_apart_is_not_looked_for() -> None:
    doc = "if a < b and c > d then e"  # no tags, but "< b and c >" reads as one
    assert locate("Context: a d.\nQuestion: which is larger?", [doc]) == []
    assert edited_forms(doc)[-1] == "if a   d then e"


def test_an_instruction_example_labels_no_document_of_a_later_message() -> None:
    # a system message's "cite like [2]", then a tool result listing documents as JSON
    system = "Answer from the search results and cite one by its place, like [2]."
    tool = '[{"id":"a","content":"Refunds take 5 days."},{"id":"b","content":"Returns: 14 days."}]'
    prompt = system + "\n\n" + tool
    placed = [(prompt.index(t), prompt.index(t) + len(t))
              for t in ("Refunds take 5 days.", "Returns: 14 days.")]
    assert prompt_labels(prompt, placed, PATTERN) == ["2", None]
    assert prompt_labels(prompt, placed, PATTERN, [0, len(system) + 2]) == [None, None]


def test_documents_seen_before_are_found_alike_and_only_short_ones_are_kept_folded() -> None:
    """A popular chunk's folded form is kept for the next request; a long document's is
    not (the memory kept stays bounded), and either way the answer is the same."""
    locate_module.forget_folded()
    short = "Refunds are accepted\n  within 30 days of delivery for every unopened item."
    long = "Warranty terms. " * (locate_module.FOLDED_KEPT_CHARS // 16 + 1)
    prompt = f"Answer from these.\n\n[1] {short}\n\n[2] {long}\n\nQuestion: refunds?"
    first = locate(prompt, [short, long])
    kept = locate_module._folded_kept.cache_info()
    assert kept.currsize == 1  # the short document only
    again = locate(prompt, [short, long])
    assert again == first
    assert locate_module._folded_kept.cache_info().hits == kept.hits + 1
    assert [f.doc for f in first] == [0, 1]
    assert prompt[first[0].start:first[0].end] == short
