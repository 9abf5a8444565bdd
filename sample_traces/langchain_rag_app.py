"""A small, deterministic LangChain RAG app: the one the zero-code tests and samples trace.

A keyword retriever over fixed policy documents, an optional top-k cut and
LongContextReorder before the prompt, a prompt that stuffs the documents as
``Document [n] (Title: ...)``, and a fake chat model that gives a fixed answer. Nothing in
it knows about midtrace: it is traced only by OpenInference's LangChain instrumentation.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableLambda, RunnablePassthrough

SYSTEM = ("You are a support assistant. Answer only from the documents below and cite the "
          "document you used as [n].\n\n{context}")
PROMPT = ChatPromptTemplate.from_messages([("system", SYSTEM), ("human", "{question}")])

POLICIES: tuple[tuple[str, str], ...] = (
    ("Returns", "Customers may return unused items within 14 days of delivery for a full "
                "refund. Items must be in their original packaging."),
    ("Returns (2019, deprecated)", "Customers may return items within 30 days of purchase. "
                                   "This policy was replaced in 2021."),
    ("Refund timing", "Refunds are issued to the original payment method within 5 business "
                      "days after the returned item is received at our warehouse."),
    ("Exchanges", "Exchanges for a different size or colour are free within 14 days of "
                  "delivery, subject to stock."),
    ("Shipping", "Standard shipping takes 3 to 5 business days. Express shipping takes 1 "
                 "business day when ordered before noon."),
    ("Shipping costs", "Standard shipping is free for orders over 50 euros; otherwise it "
                       "costs 4.95 euros. Express shipping costs 12 euros."),
    ("Damaged items", "Report damaged items within 48 hours of delivery with a photo; we "
                      "send a replacement at no cost."),
    ("Warranty", "Electronics carry a two-year warranty covering manufacturing defects, "
                 "not accidental damage."),
    ("Gift cards", "Gift cards are valid for three years and cannot be exchanged for cash."),
    ("Final sale", "Items marked final sale cannot be returned or exchanged, except when "
                   "they arrive damaged."),
    ("International returns", "International customers pay return shipping unless the item "
                              "arrived damaged or wrong."),
    ("Price matching", "We match a competitor's price within 7 days of purchase if the item "
                       "is identical and in stock."),
)

DOCUMENTS: tuple[Document, ...] = tuple(
    Document(page_content=text, metadata={"title": title, "source": f"policies/{i:02d}.md"})
    for i, (title, text) in enumerate(POLICIES))

T = TypeVar("T")

_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 2}


class KeywordRetriever(BaseRetriever):
    """The ``k`` documents sharing most words with the query (ties: corpus order)."""

    documents: Sequence[Document] = DOCUMENTS
    k: int = 6

    def _get_relevant_documents(self, query: str, *,
                                run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        q = _words(query)
        scored = sorted(enumerate(self.documents),
                        key=lambda item: (-len(q & _words(item[1].page_content
                                                          + " " + item[1].metadata["title"])),
                                          item[0]))
        return [doc for _, doc in scored[: self.k]]


def long_context_reorder(documents: Sequence[T]) -> list[T]:
    """LangChain's LongContextReorder (langchain_community.document_transformers), exactly.

    Its ``_litm_reordering``: reverse, then put every even-indexed document first and every
    odd-indexed one last, so ranks 1..6 come out as 2, 4, 6, 5, 3, 1.
    """
    reordered: list[T] = []
    for i, doc in enumerate(reversed(list(documents))):
        if i % 2 == 1:
            reordered.append(doc)
        else:
            reordered.insert(0, doc)
    return reordered


def format_documents(documents: Sequence[Document]) -> str:
    return "\n\n".join(f"Document [{i}] (Title: {d.metadata['title']}):\n{d.page_content}"
                       for i, d in enumerate(documents, start=1))


def select(documents: Sequence[Document], top_k: int | None, reorder: bool) -> list[Document]:
    """What the chain puts in the prompt: the first ``top_k`` retrieved, maybe reordered."""
    chosen = list(documents)[:top_k] if top_k is not None else list(documents)
    return long_context_reorder(chosen) if reorder else chosen


def prompt_messages(documents: Sequence[Document], question: str) -> list[BaseMessage]:
    return PROMPT.format_messages(context=format_documents(documents), question=question)


def build_chain(answer: str, retrieve_k: int = 6, top_k: int | None = None,
                reorder: bool = False, prompt_tokens: int | None = None,
                retriever: Runnable[str, list[Document]] | None = None) -> Runnable[Any, str]:
    """retriever -> top-k cut -> optional reorder -> stuffed prompt -> fake chat model.

    The model answers ``answer``; with ``prompt_tokens`` it also reports that many input
    tokens, as a real provider would.
    """
    usage = None if prompt_tokens is None else {
        "input_tokens": prompt_tokens, "output_tokens": 12, "total_tokens": prompt_tokens + 12}
    model = GenericFakeChatModel(messages=iter([AIMessage(content=answer, usage_metadata=usage)]))
    pick: Callable[[list[Document]], list[Document]] = lambda docs: select(docs, top_k, reorder)
    context = (retriever or KeywordRetriever(k=retrieve_k)) | RunnableLambda(pick) | \
        RunnableLambda(format_documents)
    return ({"context": context, "question": RunnablePassthrough()}
            | PROMPT | model | StrOutputParser())
