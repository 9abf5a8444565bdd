"""Tool results read as retrieved documents (collector/normalize/tool_results.py), and those
documents found in the prompt of the call that read them, JSON-escaped as a tool message
holds them (docs/zero-code.md, "Tool results")."""

from __future__ import annotations

import json
from typing import Any

import pytest

from midtrace.collector.normalize.locate import locate
from midtrace.collector.normalize.tool_results import tool_documents
from midtrace.schemas.chunk_hash import content_hash

TEXT_A = 'Refunds are issued within 5 business days.\nSee "Refund timing" for details.'
TEXT_B = "Réunion and Zürich orders ship from the EU warehouse – allow 7 days."


def read(result: Any) -> list[tuple[int, str | None, str | None, float | None, str | None]]:
    return [(rank, d.text, d.doc_id, d.score, d.source_id)
            for rank, d in tool_documents(result)]


@pytest.mark.parametrize("result", [
    [{"id": "a", "score": 0.9, "text": TEXT_A}, {"id": "b", "score": 0.5, "text": TEXT_B}],
    {"query": "refunds", "results": [{"id": "a", "score": 0.9, "content": TEXT_A},
                                     {"id": "b", "score": 0.5, "content": TEXT_B}]},
    {"data": {"documents": [{"chunk_id": "a", "relevance_score": 0.9, "page_content": TEXT_A},
                            {"chunk_id": "b", "relevance_score": 0.5, "page_content": TEXT_B}]}},
    {"hits": [{"score": 0.9, "document": {"id": "a", "text": TEXT_A}},
              {"score": 0.5, "document": {"id": "b", "text": TEXT_B}}]},
    {"results": [[{"id": "a", "score": 0.9, "chunk": TEXT_A}],
                 [{"id": "b", "score": 0.5, "chunk": TEXT_B}]]},  # one list per query
], ids=["list", "results", "nested-key", "nested-document", "list-per-query"])
def test_documents_in_json_results(result: Any) -> None:
    expected = [(1, TEXT_A, "a", 0.9, None), (2, TEXT_B, "b", 0.5, None)]
    assert read(result) == expected
    assert read(json.dumps(result)) == expected  # as output.value holds it
    assert read(json.dumps(result, ensure_ascii=False)) == expected


def test_strings_sources_and_items_without_text() -> None:
    assert read(json.dumps([TEXT_A, "", TEXT_B])) == [(1, TEXT_A, None, None, None),
                                                      (3, TEXT_B, None, None, None)]  # its place in the result
    (doc,) = tool_documents([{"text": TEXT_A}])
    assert doc[1].chunk_id == content_hash(TEXT_A)  # no id: the documented content hash
    assert read({"results": [
        {"id": 7, "text": TEXT_A, "metadata": {"source": "policies/refunds.md"}},
        {"id": 8, "title": "no text here"},
        {"id": 9, "text": TEXT_B, "url": "https://example.com/eu"},
        {"doc_id": "eu-shipping.md", "text": TEXT_A + " (EU)"}]}) == [
        (1, TEXT_A, "7", None, "policies/refunds.md"),
        (3, TEXT_B, "9", None, "https://example.com/eu"),
        (4, TEXT_A + " (EU)", None, None, "eu-shipping.md")]  # doc_id names the source


@pytest.mark.parametrize("result", [
    "Refunds are issued within 5 business days.",  # plain text: not read
    json.dumps({"temperature": 21, "unit": "C"}),  # an object with no list of documents
    json.dumps([{"name": "Ann", "age": 31}]),  # records without text
    json.dumps([]), "{not json", None, 42,
])
def test_other_results_are_no_retrieval(result: Any) -> None:
    assert tool_documents(result) == ()



def test_a_score_beyond_a_float_is_no_score() -> None:
    # JSON allows an integer of any length; float() of one past 1e308 raises OverflowError,
    # which once failed the whole trace
    result = json.dumps([{"id": "a", "score": 10**400, "text": TEXT_A},
                         {"id": "b", "score": "1e999", "text": TEXT_B}])
    assert read(result) == [(1, TEXT_A, "a", None, None), (2, TEXT_B, "b", None, None)]

@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_documents_are_found_escaped_in_the_tool_message(ensure_ascii: bool) -> None:
    result = json.dumps({"results": [{"id": "a", "text": TEXT_A}, {"id": "b", "text": TEXT_B}]},
                        ensure_ascii=ensure_ascii)
    prompt = "You answer from the documents.\n\nWhere is my refund?\n\n" + result
    texts = [d.text for _, d in tool_documents(result)]
    found = locate(prompt, texts)
    assert [f.doc for f in found] == [0, 1]
    for f, text in zip(found, texts):  # each placement covers the text as the prompt holds it
        assert prompt[f.start:f.end] == json.dumps(text, ensure_ascii=ensure_ascii)[1:-1]


def test_a_document_whose_long_opening_is_unescaped_is_found_whole() -> None:
    # more than 64 characters before the first escape: that prefix is in the prompt as is,
    # but the whole document is there escaped, and that is where it is placed
    text = ("Customers in the EU, Norway and Réunion may return unused items within 14 days"
            "\nof delivery, in their \"original packaging\".")
    result = json.dumps([{"text": text}], ensure_ascii=False)
    prompt = "Where can I return items?\n\n" + result
    (found,) = locate(prompt, [text])
    assert not found.truncated
    assert prompt[found.start:found.end] == json.dumps(text, ensure_ascii=False)[1:-1]
