"""A stand-in for an OpenAI-compatible chat completions endpoint, answering by a rule.

The only stand-in in the sweep and judge tests: no hosted model is reachable from a test.
The judge's tests give it a ``responder`` (tests/test_judge.py) and script failures:
statuses, delays, malformed contents, refusals, a 400 to ``response_format``. It listens
on a free loopback port, reads the documents out of the prompt (``Document [i] ...``) and
answers by a position-dependent rule: it "sees" only the documents at the slots the rule
names, reports the fact (``ANSWER: ...``) of every decisive document (marked ``KEYFACT``)
it sees with a citation, and otherwise repeats the first document's text.

The zero-code framework tests also use its completions route (``/v1/completions``, one
prompt string, for LlamaIndex's completion-style LLM), its reading of LlamaIndex's
``Source n:`` numbering, and its reply in DSPy's field format when the prompt asks for one.

A chat request that offers ``tools`` is a tool-calling loop's (the OpenAI Agents SDK's): while
no tool result follows the last user message, it calls the first tool with that message as
its ``query``; once results are there, it reads the documents out of them (JSON: a list, or a
list under ``results`` or ``documents``, of objects with an ``id`` and a ``text``) and answers
by the same rule, citing each fact by its document's id (``[returns]``).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MARKER = "KEYFACT"
DOC = re.compile(r"^Document \[(\d+)\](?:\(Title: [^)]*\))? (.*)$", re.MULTILINE)
# LlamaIndex's CitationQueryEngine numbers its sources "Source 1:" on a line of their own
SOURCE = re.compile(r"^Source (\d+):\n(.*)$", re.MULTILINE)
FACT = re.compile(r"ANSWER: ([^.]+)")
# DSPy's ChatAdapter asks for the output fields between [[ ## name ## ]] markers
DSPY_FIELD = re.compile(r"starting with the field `\[\[ ## (\w+) ## \]\]`")

Rule = Callable[[int, int], bool]  # (slot, k) -> does the model read that slot?


def first_two_and_last(slot: int, k: int) -> bool:
    return slot in (1, 2, k)


def first_and_last(slot: int, k: int) -> bool:
    return slot in (1, k)


def tool_documents(messages: list[dict]) -> list[tuple[str, str]]:
    """``(id, text)`` of each document in the tool results after the last user message."""
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    docs: list[tuple[str, str]] = []
    for m in messages[last_user + 1:]:
        if m["role"] != "tool":
            continue
        data = json.loads(_text(m["content"]))
        listed = data if isinstance(data, list) else (data.get("results")
                                                      or data.get("documents") or [])
        docs += [(str(d.get("id", len(docs) + 1)), d["text"]) if isinstance(d, dict)
                 else (str(len(docs) + 1), d) for d in listed]
    return docs


def tool_turn(request: dict, sees: Rule) -> dict:
    """The assistant message of a tool-calling loop's turn: a call to the first tool, or the
    answer from the documents its results hold."""
    messages = request["messages"]
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    if not any(m["role"] == "tool" for m in messages[last_user + 1:]):
        tool = request["tools"][0]["function"]["name"]
        query = _text(messages[last_user]["content"])
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{last_user}", "type": "function",
             "function": {"name": tool, "arguments": json.dumps({"query": query})}}]}
    docs = tool_documents(messages)
    k = len(docs)
    facts = [f"{FACT.search(text)[1]} [{doc_id}]"  # type: ignore[index]
             for slot, (doc_id, text) in enumerate(docs, start=1)
             if MARKER in text and sees(slot, k)]
    content = ("The answer is " + " and ".join(facts) + ".") if facts else (
        docs[0][1] if docs else "I do not know.")
    return {"role": "assistant", "content": content}


def answer_for(prompt: str, sees: Rule) -> str:
    docs = [(int(i), text) for i, text in DOC.findall(prompt) or SOURCE.findall(prompt)]
    k = len(docs)
    facts = [f"{FACT.search(text)[1]} [{i}]" for i, text in docs  # type: ignore[index]
             if MARKER in text and sees(i, k)]
    if facts:
        return "The answer is " + " and ".join(facts) + "."
    return docs[0][1] if docs else "I do not know."


@dataclass
class FakeLLM:
    rule: Rule = first_two_and_last
    delay: float = 0.0
    usage_ratio: float | None = None  # report usage.prompt_tokens = chars * ratio
    statuses: list[int] = field(default_factory=list)  # answered, in order, before any 200
    # the judge's stand-in: the message content from the request body (else the sweep's rule)
    responder: Callable[[dict], str] | None = None
    contents: list[str] = field(default_factory=list)  # answered, in order, before the rule's
    delays: list[float] = field(default_factory=list)  # per call, in order, before `delay`
    refusals: list[str] = field(default_factory=list)  # `message.refusal`, in order
    refuse_response_format: bool = False  # answer 400 to a body with response_format
    bodies: list[dict] = field(default_factory=list)  # each request as sent
    attempts: int = 0
    prompts: list[str] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)  # each answer's text as sent back
    url: str = ""

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                status, payload, headers = fake.handle(self.path, body, self.headers)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"
        self.auth: list[str | None] = []
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def handle(self, path: str, body: bytes, headers: object) -> tuple[int, dict, dict]:
        with self._lock:
            self.attempts += 1
            self.auth.append(headers.get("Authorization"))  # type: ignore[attr-defined]
            status = self.statuses.pop(0) if self.statuses else 200
        if path not in ("/v1/chat/completions", "/v1/completions"):
            return 404, {"error": {"message": f"no route {path}"}}, {}
        if status == 429:
            return 429, {"error": {"message": "rate limited"}}, {"Retry-After": "0"}
        if status != 200:
            return status, {"error": {"message": "injected failure"}}, {}
        request = json.loads(body)
        with self._lock:
            self.bodies.append(request)
            delay = self.delays.pop(0) if self.delays else self.delay
            scripted = self.contents.pop(0) if self.contents else None
            refusal = self.refusals.pop(0) if self.refusals else None
        if self.refuse_response_format and "response_format" in request:
            return 400, {"error": {"message": "response_format is not supported"}}, {}
        if delay:
            time.sleep(delay)
        chat = path == "/v1/chat/completions"
        if chat and request.get("tools"):
            return 200, self._tool_reply(request), {}
        prompt = _text(request["messages"][-1]["content"]) if chat else request["prompt"]
        with self._lock:
            self.prompts.append(prompt)
        if scripted is not None:
            content = scripted
        elif self.responder is not None:
            content = self.responder(request)
        else:
            content = answer_for(prompt, self.rule)
            if field := DSPY_FIELD.search(prompt):
                content = f"[[ ## {field[1]} ## ]]\n{content}\n\n[[ ## completed ## ]]"
        with self._lock:
            self.replies.append(content)
        message: dict = {"role": "assistant", "content": None if refusal else content}
        if refusal:
            message["refusal"] = refusal
        payload: dict = {"id": "chatcmpl-test", "object": "chat.completion",
                         "model": request["model"],
                         "choices": [{"index": 0, "finish_reason": "stop", "message": message}]}
        if not chat:  # the completions API: the prompt is one string, the answer a text
            payload.update(id="cmpl-test", object="text_completion", created=0, choices=[
                {"index": 0, "finish_reason": "stop", "text": content, "logprobs": None}])
        if self.usage_ratio is not None:
            payload["usage"] = {"prompt_tokens": int(len(prompt) * self.usage_ratio),
                                "completion_tokens": max(len(content) // 4, 1)
                                if self.responder is not None else 7}
        return 200, payload, {}

    def _tool_reply(self, request: dict) -> dict:
        prompt = joined_messages(request)
        message = tool_turn(request, self.rule)
        with self._lock:
            self.prompts.append(prompt)
            self.replies.append(message["content"] or "")
        payload: dict = {"id": "chatcmpl-test", "object": "chat.completion", "created": 0,
                         "model": request["model"], "choices": [
                             {"index": 0, "message": message, "logprobs": None,
                              "finish_reason": "tool_calls" if message.get("tool_calls")
                              else "stop"}]}
        if self.usage_ratio is not None:
            completion = max(len(message["content"] or "") // 4, 1)
            prompt_tokens = int(len(prompt) * self.usage_ratio)
            payload["usage"] = {"prompt_tokens": prompt_tokens,
                                "completion_tokens": completion,
                                "total_tokens": prompt_tokens + completion}
        return payload

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _text(content: str | list[dict]) -> str:
    """A chat message's text: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if part.get("type") == "text")


def joined_messages(body: dict) -> str:
    """A chat request's prompt as midtrace reads it: each message's text, a blank line
    between (docs/zero-code.md, "The prompt string")."""
    return "\n\n".join(_text(m["content"]) for m in body["messages"] if m.get("content"))
