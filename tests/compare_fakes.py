"""A scripted "model" for `bench compare` tests, behind tests/openai_server.py.

It reads each chat request the way the method that sent it formats its prompt and finds
the key-value fact about the person the question names (KVTask's "What is Lena Park's
access code?"):

* our answer mode: replies with the value (answer attribution then credits that fact);
* our cite mode: ``{"cited": [k]}`` for that fact's label;
* LlamaIndex LLMRerank: ``Doc: k, Relevance: 10`` for that fact's ``Document k``;
* LlamaIndex RankGPTRerank: ``[k] > [others...]``;
* LangChain LLMListwiseRerank (structured output): ``{"ranked_document_ids": [...]}``.

``wrong=True`` makes every method's answer point at another document (a model that is
always wrong), so tests can tell real routing from luck.

``oracle_model(is_relevant)`` answers the same formats for any collection: it points at the
first document shown for which ``is_relevant(text)`` holds (our answer mode: replies with
that document's text, which only that document contains).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from openai_server import Behaviour, RecordedRequest, dynamic, ok, raw_body

__all__ = ["COMPLETION_TOKENS", "PROMPT_TOKENS", "kv_model", "oracle_model"]

PROMPT_TOKENS = 50
COMPLETION_TOKENS = 5
_OUR_DOC = re.compile(r"^<document (\d+)>\n(.*)\n</document \1>$", re.MULTILINE)
_NAME = re.compile(r"What is (.+?)'s ")


def _text(m: dict[str, Any]) -> str:
    c = m.get("content")
    if isinstance(c, list):
        return "".join(p.get("text", "") for p in c if isinstance(p, dict))
    return c or ""


def _pick(name: str, docs: list[tuple[int, str]], wrong: bool) -> int:
    """The label of the fact about ``name`` (or of another document when ``wrong``)."""
    hit = next(k for k, d in docs if d.strip().startswith(f"{name}'s"))
    if not wrong:
        return hit
    return next(k for k, _ in docs if k != hit)


Picker = Callable[[str, list[tuple[int, str]]], int]
"""``(the prompt's text, [(label, document text)]) -> the label the model points at``."""


def kv_model(*, wrong: bool = False) -> Behaviour:
    """The dynamic behaviour answering every method's prompt format (see the module docstring)."""

    def pick(joined: str, docs: list[tuple[int, str]]) -> int:
        name_m = _NAME.search(joined)
        return _pick(name_m.group(1) if name_m else "", docs, wrong)

    return _model(pick, answer=lambda text: text.rsplit(" is ", 1)[-1].rstrip("."))


def oracle_model(is_relevant: Callable[[str], bool], *, wrong: bool = False) -> Behaviour:
    """Points at the first shown document ``is_relevant`` accepts (the first it rejects when
    ``wrong``; the first document when none qualifies)."""

    def pick(joined: str, docs: list[tuple[int, str]]) -> int:
        want = not wrong
        return next((k for k, d in docs if is_relevant(d.strip()) == want), docs[0][0])

    return _model(pick, answer=lambda text: text)


def _model(pick: Picker, *, answer: Callable[[str], str]) -> Behaviour:
    def respond(req: RecordedRequest) -> Behaviour:
        msgs = req.messages
        texts = [_text(m) for m in msgs]
        joined = "\n".join(texts)
        body = req.body or {}

        def reply(content: str) -> Behaviour:
            return ok(content, prompt_tokens=PROMPT_TOKENS, completion_tokens=COMPLETION_TOKENS)

        if "RankGPT" in joined:
            docs = [
                (int(m.group(1)), m.group(2))
                for t in texts
                if (m := re.match(r"\[(\d+)\] (.*)", t, re.DOTALL))
            ]
            top = pick(joined, docs)
            order = [top] + [k for k, _ in docs if k != top]
            return reply(" > ".join(f"[{k}]" for k in order))
        if "Relevance:" in joined and "Document 1:" in joined:
            user = texts[-1].split("Let's try this now:")[-1]
            docs = [
                (int(k), d)
                for k, d in re.findall(
                    r"Document (\d+):\n(.*?)(?=\n\nDocument \d+:|\nQuestion:)", user, re.DOTALL
                )
            ]
            return reply(f"Doc: {pick(joined, docs)}, Relevance: 10")
        if "Document ID:" in joined:
            docs = [(int(k), d) for k, d in re.findall(r"Document ID: (\d+)\n```(.*?)```", joined, re.DOTALL)]
            top = pick(joined, docs)
            ids = [top] + [k for k, _ in docs if k != top]
            content = json.dumps({"ranked_document_ids": ids})
            if body.get("tools"):
                tool = body["tools"][0]["function"]["name"]
                return raw_body(json.dumps(_tool_call_body(tool, content)))
            return reply(content)
        if '{"cited": [N]}' in joined:  # our cite mode: "<document k>\ntext\n</document k>" blocks
            docs = [(int(k), d) for k, d in _OUR_DOC.findall(texts[-1])]
            return reply(json.dumps({"cited": [pick(joined, docs)]}))
        # our answer mode: "Documents:\n- <one per line>\n\nQuestion: ..."; the reply is an answer
        block = texts[-1].split("Documents:\n", 1)[-1].split("\n\nQuestion:", 1)[0]
        docs = [(i, line.removeprefix("- ")) for i, line in enumerate(block.split("\n"))]
        return reply(answer(docs[pick(joined, docs)][1]))

    return dynamic(respond)


def _tool_call_body(tool: str, arguments: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "fake-model",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": tool, "arguments": arguments},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {
            "prompt_tokens": PROMPT_TOKENS,
            "completion_tokens": COMPLETION_TOKENS,
            "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS,
        },
    }
