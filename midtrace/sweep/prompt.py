"""Render a prompt from a template and chunks in prompt order, keeping each chunk's offsets.

The default template is the question-answering prompt of "Lost in the Middle" (Liu et al.
2023): an instruction, the documents as ``Document [i](Title: ...) text`` one per line, then
the question. A template file replaces it; its placeholders are ``{documents}`` (exactly
once), ``{question}`` (at least once) and ``{k}`` (the number of documents). Anything else
in braces is left as written, so JSON examples in a template need no escaping.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

DEFAULT_TEMPLATE = (
    "Write a high-quality answer for the given question using only the provided search "
    "results (some of which might be irrelevant).\n\n{documents}\n\nQuestion: {question}\nAnswer:"
)
DEFAULT_TEMPLATE_ID = "lost-in-the-middle-qa"
PLACEHOLDERS = ("documents", "question", "k")
_PLACEHOLDER = re.compile(r"\{(documents|question|k)\}")


class TemplateError(ValueError):
    """The template cannot be used; the message says what is missing."""


@dataclass(frozen=True)
class Template:
    text: str
    id: str
    version: str

    @classmethod
    def default(cls) -> Template:
        return cls.of(DEFAULT_TEMPLATE, DEFAULT_TEMPLATE_ID)

    @classmethod
    def load(cls, path: Path) -> Template:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise TemplateError(f"cannot read template {path}: {e.strerror or e}") from e
        return cls.of(text, path.stem)

    @classmethod
    def of(cls, text: str, template_id: str) -> Template:
        found = _PLACEHOLDER.findall(text)
        if found.count("documents") != 1:
            raise TemplateError("the template must contain {documents} exactly once")
        if "question" not in found:
            raise TemplateError("the template must contain {question}")
        version = hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
        return cls(text=text, id=template_id, version=version)


@dataclass(frozen=True)
class Doc:
    text: str
    title: str | None = None


@dataclass(frozen=True)
class Prompt:
    text: str
    offsets: tuple[tuple[int, int], ...]  # [start, end) of each document's text, prompt order


def document_header(index: int, title: str | None) -> str:
    return f"Document [{index}](Title: {title}) " if title else f"Document [{index}] "


def render(template: Template, question: str, docs: Sequence[Doc]) -> Prompt:
    """The prompt string and the character span of each document's text within it."""
    parts: list[str] = []
    offsets: list[tuple[int, int]] = []
    length = 0
    pos = 0
    for m in _PLACEHOLDER.finditer(template.text):
        literal = template.text[pos:m.start()]
        parts.append(literal)
        length += len(literal)
        name = m.group(1)
        if name == "documents":
            for i, doc in enumerate(docs, start=1):
                if i > 1:
                    parts.append("\n")
                    length += 1
                header = document_header(i, doc.title)
                parts.append(header + doc.text)
                offsets.append((length + len(header), length + len(header) + len(doc.text)))
                length += len(header) + len(doc.text)
        else:
            value = question if name == "question" else str(len(docs))
            parts.append(value)
            length += len(value)
        pos = m.end()
    parts.append(template.text[pos:])
    return Prompt(text="".join(parts), offsets=tuple(offsets))
