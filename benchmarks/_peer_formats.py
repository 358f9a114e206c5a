"""What each reranker sends to a chat-completions endpoint, and how to answer it.

The loopback model (:mod:`._loopback`) plays one position-biased reader for every
method of ``bench latency``. Each method asks in its own format; this module reads a
request's documents in prompt order (with the identifier each is shown under) and
writes the answer in the format that method parses, from one set of citations:

* ``gold-panning``: our citation prompt (:func:`~..readers._prompt.render_prompt`):
  one line ``[label] text`` per document, labels of any size (read from the prompt,
  never assumed to be ``1..m``). Answer ``{"cited": [labels]}``.
* ``langchain-listwise``: LangChain ``LLMListwiseRerank``: a system message of
  ``Document ID: i`` blocks (``i`` from 0) and structured output of a
  ``ranked_document_ids`` object, asked through ``response_format`` (``json_schema``,
  ChatOpenAI's default) or through ``tools`` (``function_calling``). Answer: the cited
  IDs, then the others, as JSON content or as a tool call, whichever was asked.
* ``llamaindex-llmrerank``: LlamaIndex ``LLMRerank``: ``Document N:`` blocks after
  ``Let's try this now:``. Answer: ``Doc: N, Relevance: S`` lines for the cited
  documents (S = 10, 9, ... in prompt order, at least 1); a reply citing nothing says so
  in words (``LLMRerank`` then returns no node).
* ``llamaindex-rankgpt``: LlamaIndex ``RankGPTRerank``: one ``[k] text`` user message per
  passage, each acknowledged by ``Received passage [k].``, of any window. Answer the
  permutation ``[a] > [b] > ...``: the cited passages, then the others.

A listwise answer is the same reading as a citation: cited documents first, in prompt
order, then the rest in prompt order (what a model that found some documents and lists
the rest as given replies). So the peers' accuracy is that of the same position-biased
reader, not a parse failure.

Detection uses the structured-output schema first (a ``cited`` or
``ranked_document_ids`` property in ``response_format`` or in a tool's parameters),
then the prompt's own markers; a request matching none is refused by the server with a
message listing the formats it knows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "PEER_FORMATS",
    "ParsedRequest",
    "UnknownFormatError",
    "message_text",
    "normalize",
    "parse_request",
    "render_answer",
]

PEER_FORMATS: tuple[str, ...] = (
    "gold-panning",
    "langchain-listwise",
    "llamaindex-llmrerank",
    "llamaindex-rankgpt",
)
"""The request formats the loopback model answers, named like ``bench compare``'s methods."""

_LISTWISE_KEY = "ranked_document_ids"
_CITED_KEY = "cited"


class UnknownFormatError(ValueError):
    """A request in none of :data:`PEER_FORMATS` (the server answers it with HTTP 400)."""


@dataclass(frozen=True)
class ParsedRequest:
    """One chat-completions request, read.

    Attributes:
        kind: One of :data:`PEER_FORMATS`.
        documents: ``(identifier as shown, text)`` per document in prompt order, shape
            ``(m,)``; identifiers are our labels, LangChain's 0-based IDs, or the 1-based
            numbers of LlamaIndex's prompts.
        text: Every message's text, joined (where the question is looked up).
        asked: How the answer was asked for: ``"json_schema"``, ``"json_object"``,
            ``"tools"`` or ``"text"``.
        tool: Name of the tool to answer through, when ``asked == "tools"``.
    """

    kind: str
    documents: tuple[tuple[int, str], ...]
    text: str
    asked: str
    tool: str | None = None


def normalize(text: str) -> str:
    """``text`` with whitespace runs collapsed to one space and the ends stripped (how
    prompts show documents, so a shown text compares equal to its source)."""
    return " ".join(str(text).split())


def message_text(content: Any) -> str:
    """A message's content as text: strings as they are, lists of parts joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p if isinstance(p, str) else str(p.get("text", "")) if isinstance(p, Mapping) else ""
            for p in content
        )
    return str(content)


# ------------------------------------------------------------------------- detection
def _schema_keys(schema: Any) -> set[str]:
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    return set(props) if isinstance(props, Mapping) else set()


def _structured(body: Mapping[str, Any]) -> tuple[str, set[str], str | None]:
    """``(asked, property names of the requested object, tool name)`` of a request."""
    tools = body.get("tools")
    if isinstance(tools, list) and tools:
        wanted = None
        choice = body.get("tool_choice")
        if isinstance(choice, Mapping):
            wanted = (choice.get("function") or {}).get("name")
        for tool in tools:
            fn = tool.get("function") if isinstance(tool, Mapping) else None
            if isinstance(fn, Mapping) and (wanted is None or fn.get("name") == wanted):
                return "tools", _schema_keys(fn.get("parameters")), str(fn.get("name"))
    rf = body.get("response_format")
    if isinstance(rf, Mapping):
        kind = str(rf.get("type"))
        if kind == "json_schema":
            js = rf.get("json_schema")
            return "json_schema", _schema_keys(js.get("schema") if isinstance(js, Mapping) else None), None
        if kind == "json_object":
            return "json_object", set(), None
    return "text", set(), None


_OUR_DOC = re.compile(r"^<document (\d{1,12})>\n(.*)\n</document \1>$", re.MULTILINE)
_RANKGPT_ACK = re.compile(r"^Received passage \[\d+\]\.?$")
_RANKGPT_PASSAGE = re.compile(r"^\[(\d{1,6})\] ?(.*)$", re.DOTALL)
_LC_DOC = re.compile(r"Document ID: (\d+)\n```(.*?)```", re.DOTALL)
_LI_HEADER = re.compile(r"^Document (\d+):\n", re.MULTILINE)
_LI_START = "Let's try this now:"


def _gold_panning_docs(user: str) -> tuple[tuple[int, str], ...]:
    return tuple((int(lab), text) for lab, text in _OUR_DOC.findall(user))


def _langchain_docs(text: str) -> tuple[tuple[int, str], ...]:
    return tuple((int(i), t) for i, t in _LC_DOC.findall(text))


def _llmrerank_docs(user: str) -> tuple[tuple[int, str], ...]:
    start = user.find(_LI_START)
    body = user[start + len(_LI_START) :] if start >= 0 else user
    end = body.rfind("\nQuestion:")
    if end >= 0:
        body = body[:end]
    heads = list(_LI_HEADER.finditer(body))
    docs = []
    for h, nxt in zip(heads, [*heads[1:], None]):
        text = body[h.end() : nxt.start() if nxt is not None else len(body)]
        if start < 0 and text.strip().startswith("<summary of document"):
            continue  # the prompt's own example, when the marker is missing
        docs.append((int(h.group(1)), text))
    return tuple(docs)


def _rankgpt_docs(messages: Sequence[Mapping[str, Any]]) -> tuple[tuple[int, str], ...]:
    docs = []
    for prev, nxt in zip(messages, [*messages[1:], None]):
        if prev.get("role") != "user" or nxt is None or nxt.get("role") != "assistant":
            continue
        if not _RANKGPT_ACK.match(message_text(nxt.get("content")).strip()):
            continue
        m = _RANKGPT_PASSAGE.match(message_text(prev.get("content")).strip())
        if m:
            docs.append((int(m.group(1)), m.group(2)))
    return tuple(docs)


def parse_request(body: Mapping[str, Any]) -> ParsedRequest:
    """Which format ``body`` (a decoded chat-completions request) is in, and its documents.

    Raises:
        UnknownFormatError: the request is in none of :data:`PEER_FORMATS`, or shows no
            document.
    """
    messages = body.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, Mapping) for m in messages):
        raise UnknownFormatError("the request has no list of chat messages")
    texts = [message_text(m.get("content")) for m in messages]
    text = "\n".join(texts)
    users = [t for m, t in zip(messages, texts) if m.get("role") == "user"]
    last_user = users[-1] if users else ""
    asked, keys, tool = _structured(body)
    kind: str | None = None
    docs: tuple[tuple[int, str], ...] = ()
    if _CITED_KEY in keys or (not keys and '{"cited": [' in last_user):
        kind, docs = "gold-panning", _gold_panning_docs(last_user)
    elif _LISTWISE_KEY in keys or (not keys and "Document ID: 0" in text):
        kind, docs = "langchain-listwise", _langchain_docs(text)
    elif any(m.get("role") == "assistant" and _RANKGPT_ACK.match(t.strip()) for m, t in zip(messages, texts)):
        kind, docs = "llamaindex-rankgpt", _rankgpt_docs(messages)
    elif _LI_START in last_user and "Relevance:" in last_user:
        kind, docs = "llamaindex-llmrerank", _llmrerank_docs(last_user)
    if kind is None:
        raise UnknownFormatError(
            "the loopback model answers only these formats: "
            + ", ".join(PEER_FORMATS)
            + "; this request matches none (no citation schema, no listwise schema, no RankGPT passages, "
            "no LLMRerank choice prompt)"
        )
    if not docs:
        raise UnknownFormatError(f"a {kind} request with no document the loopback model can read")
    return ParsedRequest(kind=kind, documents=docs, text=text, asked=asked, tool=tool)


# --------------------------------------------------------------------------- answers
def _cited_first(req: ParsedRequest, cited: Sequence[bool]) -> list[int]:
    """Identifiers: the cited documents in prompt order, then the others in prompt order."""
    ids = [i for i, _ in req.documents]
    return [i for i, c in zip(ids, cited) if c] + [i for i, c in zip(ids, cited) if not c]


def render_answer(
    req: ParsedRequest, cited: Sequence[bool]
) -> tuple[str | None, list[dict[str, Any]] | None]:
    """The reply to ``req`` when the documents flagged in ``cited`` (shape ``(m,)``, prompt
    order) are the ones the reader found: ``(content, tool_calls)``, one of them None."""
    if len(cited) != len(req.documents):
        raise ValueError(f"cited has {len(cited)} flags for {len(req.documents)} documents")
    ids = [i for i, _ in req.documents]
    found = [i for i, c in zip(ids, cited) if c]
    payload: dict[str, Any] | None = None
    if req.kind == "gold-panning":
        payload = {_CITED_KEY: found}
    elif req.kind == "langchain-listwise":
        payload = {_LISTWISE_KEY: _cited_first(req, cited)}
    elif req.kind == "llamaindex-llmrerank":
        if not found:
            return "None of the documents is relevant to the question.", None
        return "\n".join(f"Doc: {i}, Relevance: {max(1, 10 - j)}" for j, i in enumerate(found)), None
    elif req.kind == "llamaindex-rankgpt":
        return " > ".join(f"[{i}]" for i in _cited_first(req, cited)), None
    else:
        raise UnknownFormatError(f"no answer format for {req.kind!r}; known: {', '.join(PEER_FORMATS)}")
    arguments = json.dumps(payload)
    if req.asked == "tools":
        call = {
            "id": "call_loopback",
            "type": "function",
            "function": {"name": req.tool, "arguments": arguments},
        }
        return None, [call]
    return arguments, None
