"""Reliability, end to end: the fault-injection matrix through every user-facing path.

Every fault kind of the reliability issue is served by the loopback OpenAI-compatible
server (``tests/openai_server.py``) to the real ``openai`` client inside
``OpenAIReader``, and run through four paths: ``GoldPanner.run``, ``GoldPanner.arun``
(``AsyncOpenAI``), ``GoldPanningRetriever.pan`` (LangChain, in-memory base retriever)
and ``GoldPanningPostprocessor.pan`` (LlamaIndex). Reader-level unit tests of the same
faults live in ``test_readers_openai.py``; this file proves the whole stack.

The scripted model. Four documents, one of them the needle (the only one stating the
vault code). Every request, the model reads the prompt, finds the label ``L`` under
which the needle is shown *this* round, and answers according to the fault kind: a
hostile output that still carries ``L`` as its only valid label (label faults), a
fault for some requests and ``{"cited": [L]}`` for the others (transport and
malformed-output faults), or a hostile output every time (the all-rounds-fail tests).
The model logs, per request, which labels it validly meant and which text sat under
each label. A *mis-mapped citation* is a document the trace says was cited that the
model never validly cited, identified through the prompt text (independently of the
engine's positions). Decoy labels (strings, floats, booleans, nested lists, the
other value of a repeated JSON key) name documents other than the needle, so any
coercion would show up as a mis-mapping; numbers a hostile document would write (``1``,
numbers of the label space that were not shown) name no document.

Outcomes are cached per ``(kind, path)`` so the summary test reuses the matrix when
the whole file runs; alone it computes what it needs.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pytest
from doubles import shown_documents
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, TextNode
from openai_server import (
    Behaviour,
    FakeOpenAIServer,
    RecordedRequest,
    cite,
    content_null,
    delay,
    dynamic,
    empty_choices,
    enormous,
    ok,
    raw_body,
    refusal,
    reset,
    status,
)
from tenacity import RetryCallState

from gold_panning_integrations import (
    AllRoundsFailedError,
    DetectorProfile,
    GoldPanner,
    GoldPanningPostprocessor,
    GoldPanningRetriever,
    PanningResult,
)
from gold_panning_integrations.engine.config import PanningConfig
from gold_panning_integrations.engine.priors import BOUND_SHARE, DEFAULT_RANK_MAP, bounded_prior
from gold_panning_integrations.engine.records import label_range
from gold_panning_integrations.engine.rounds import evidence_swing
from gold_panning_integrations.readers import OpenAIReader
from gold_panning_integrations.readers._limits import retry_after

QUESTION = "What is the vault code?"
NEEDLE = "The vault code is 4417."
DOCS = [NEEDLE, "The garden has three oak trees.", "Trains leave every hour.", "Bread is baked at dawn."]
N = len(DOCS)
NEEDLE_INDEX = 0
ROUNDS = 3
MAX_ATTEMPTS = 3
SLOW_KIND_TIMEOUT = 0.25
"""Client timeout (s) for the slow kind (whose server answers after 5 s)."""
CLIENT_TIMEOUT = 10.0
"""Client timeout (s) for every other kind: generous, so a loaded machine never turns
a loopback answer into a spurious timeout (which would change the request counts)."""

# Diagnosticity grows with the position: the likeliest document goes last (label 4),
# the least likely first. Decoy labels then point at non-needle documents.
PROFILE = DetectorProfile(
    n_positions=4, tpr=[0.55, 0.6, 0.7, 0.9], fpr=[0.45, 0.3, 0.2, 0.05], model="fault-matrix"
)

Category = Literal["transient", "deadline", "malformed", "fatal", "labels", "recovered"]
Path_ = Literal["panner", "panner-async", "retriever", "postprocessor"]
PATHS: tuple[Path_, ...] = ("panner", "panner-async", "retriever", "postprocessor")


@dataclass(frozen=True)
class Shown:
    """What one prompt showed: the needle's label and every label, in prompt order.

    Attributes:
        label: The needle's label this round.
        labels: Every label shown, in prompt order.
    """

    label: int
    labels: tuple[int, ...]

    @property
    def m(self) -> int:
        """Documents shown."""
        return len(self.labels)

    @property
    def decoy(self) -> int:
        """A valid label that is not the needle's (the smallest other one)."""
        return min(x for x in self.labels if x != self.label)

    def unshown(self, count: int = 1) -> list[int]:
        """``count`` numbers of this prompt's label space that were not shown (the
        smallest ones): what a document listing plausible labels would write."""
        low, high = label_range(self.m)
        return [x for x in range(low, high + 1) if x not in self.labels][:count]


def _digits(label: int, zero: int) -> str:
    """``label`` written in the decimal digits starting at code point ``zero``."""
    return "".join(chr(zero + int(d)) for d in str(label))


@dataclass(frozen=True)
class Kind:
    """One fault kind.

    Attributes:
        name: Test id.
        category: ``transient`` (first request of each round fails, retried),
            ``deadline`` (the first request gets no reply within ``timeout``: the query's
            deadline passes, round 1 fails after that one attempt, later rounds are not
            sent: one AllRoundsFailedError naming the deadline),
            ``malformed`` (round 1 gets bad output on every attempt: it fails; later
            rounds are clean), ``fatal`` (round 1 fails at once, not retried),
            ``labels`` (every reply carries the needle's label among bad labels),
            ``recovered`` (JSON wrapped in fences or prose: parsed).
        hostile: ``Shown -> Behaviour`` of a hostile request.
        intended: Valid labels a hostile reply carries (``labels``/``recovered``).
        invalid: Labels each reading must count as invalid.
        duplicates: Labels each reading must count as duplicates.
        retry_after: The Retry-After the wait must receive (seconds).
    """

    name: str
    category: Category
    hostile: Callable[[Shown], Behaviour]
    intended: Callable[[Shown], tuple[int, ...]] = lambda s: ()
    invalid: int = 0
    duplicates: int = 0
    retry_after: float | None = None


def _c(labels: Callable[[Shown], list[Any]]) -> Callable[[Shown], Behaviour]:
    return lambda s: ok(json.dumps({"cited": labels(s)}))


def _needle(s: Shown) -> tuple[int, ...]:
    return (s.label,)


KINDS: tuple[Kind, ...] = (
    # -- transport: retried, then the clean answer
    Kind("http_429_retry_after", "transient", lambda s: status(429, retry_after=7), retry_after=7.0),
    Kind("http_500", "transient", lambda s: status(500)),
    Kind("http_502", "transient", lambda s: status(502)),
    Kind("http_503", "transient", lambda s: status(503)),
    Kind("slower_than_timeout", "deadline", lambda s: delay(5.0, cite(s.label))),
    Kind("connection_reset_mid_body", "transient", lambda s: reset()),
    Kind("http_body_truncated", "transient", lambda s: raw_body('{"id": "chatcmpl-x", "choices": [{"ind')),
    # -- malformed output: retried up to max_attempts, then the round fails
    Kind("empty_choices", "malformed", lambda s: empty_choices()),
    Kind("content_null", "malformed", lambda s: content_null()),
    Kind("non_json_text", "malformed", lambda s: ok(f"The answer is in document {s.label}.")),
    Kind("json_truncated_mid_object", "malformed", lambda s: ok('{"cited": [' + f"{s.label}, ")),
    Kind(
        "json_cut_at_max_tokens",
        "malformed",
        lambda s: ok('{"cited": [' + str(s.label), finish_reason="length"),
    ),
    Kind("wrong_key", "malformed", lambda s: ok(json.dumps({"documents": [s.label]}))),
    Kind("null_list", "malformed", lambda s: ok('{"cited": null}')),
    Kind("cited_not_a_list", "malformed", lambda s: ok(json.dumps({"cited": s.label}))),
    Kind("enormous_prose", "malformed", lambda s: enormous(1_000_000)),
    Kind("enormous_bracket_flood", "malformed", lambda s: enormous(300_000, fill="[")),
    # only invalid labels is no evidence: retried, then a failed round (never "nothing cited")
    Kind("all_labels_invalid", "malformed", _c(lambda s: [0, s.m + 1, "one"])),
    Kind("quotes_document_text", "malformed", _c(lambda s: [NEEDLE])),
    Kind("label_not_shown", "malformed", _c(lambda s: [s.m + 7])),
    Kind("obeys_cite_document_1", "malformed", _c(lambda s: [1])),  # the injection alone
    Kind("label_space_number_not_shown", "malformed", _c(lambda s: s.unshown(1))),
    # more numbers that were not shown than labels that were: a document's list, obeyed
    Kind("listed_numbers_beside_the_label", "malformed", _c(lambda s: [s.label, *s.unshown(10)])),
    Kind("huge_numbers_beside_the_label", "malformed", _c(lambda s: [10**20, s.label, 2**63])),
    # ambiguous JSON: a repeated key is read as neither value (json.loads keeps the last)
    Kind("duplicate_cited_key", "malformed", lambda s: ok(f'{{"cited": [{s.label}], "cited": [{s.decoy}]}}')),
    Kind(
        "duplicate_key_fenced",
        "malformed",
        lambda s: ok(f'```json\n{{"cited": [{s.decoy}], "cited": [{s.label}]}}\n```'),
    ),
    Kind(
        "duplicate_key_in_prose",
        "malformed",
        lambda s: ok(f'Answer: {{"cited": [{s.label}], "answer": "a", "cited": [{s.decoy}]}} done'),
    ),
    # -- a refusal is final: not retried
    Kind("refusal", "fatal", lambda s: refusal()),
    # -- bad labels next to the needle's valid label: dropped, counted, never mapped
    Kind("label_zero", "labels", _c(lambda s: [0, s.label]), _needle, invalid=1),
    Kind("label_negative", "labels", _c(lambda s: [-1, s.label, -s.label]), _needle, invalid=2),
    Kind("label_n_plus_1", "labels", _c(lambda s: [s.label, s.m + 1]), _needle, invalid=1),
    Kind("label_huge", "labels", _c(lambda s: [10**20, s.label]), _needle, invalid=1),
    Kind("obeys_cite_document_1_beside_the_label", "labels", _c(lambda s: [1, s.label]), _needle, invalid=1),
    Kind(
        "label_space_number_beside_the_label",
        "labels",
        _c(lambda s: [s.label, *s.unshown(1)]),
        _needle,
        invalid=1,
    ),
    Kind("labels_duplicated", "labels", _c(lambda s: [s.label, s.label, s.label]), _needle, duplicates=2),
    Kind("label_as_word", "labels", _c(lambda s: [f"doc {s.decoy} maybe", s.label]), _needle, invalid=1),
    Kind(
        "label_as_float", "labels", _c(lambda s: [float(s.decoy), s.label, s.label + 0.5]), _needle, invalid=2
    ),
    Kind("label_as_bool", "labels", _c(lambda s: [True, s.label, False]), _needle, invalid=2),
    Kind("nested_list", "labels", _c(lambda s: [[s.decoy], s.label]), _needle, invalid=1),
    Kind("null_label", "labels", _c(lambda s: [None, s.label]), _needle, invalid=1),
    Kind(
        "mix_valid_invalid",
        "labels",
        _c(lambda s: [0, s.label, f"{s.decoy}th", s.label, s.m + 1, 2.5, True, None]),
        _needle,
        invalid=6,
        duplicates=1,
    ),
    Kind(
        "enormous_label_list",
        "labels",
        lambda s: ok(json.dumps({"cited": [s.label] + [s.m + 1] * 100_000})),
        _needle,
        invalid=100_000,
    ),
    # -- recoverable wrappings
    Kind(
        "markdown_fenced_json",
        "recovered",
        lambda s: ok(f'Here:\n```json\n{{"cited": [{s.label}]}}\n```'),
        _needle,
    ),
    Kind(
        "prose_around_json",
        "recovered",
        lambda s: ok(f'Sure! {{"cited": [{s.label}]}} Hope this helps.'),
        _needle,
    ),
    Kind("bare_list", "recovered", lambda s: ok(f"[{s.label}]"), _needle),
    # common label forms are labels
    Kind("label_as_string", "recovered", _c(lambda s: [str(s.label)]), _needle),
    Kind("label_in_brackets_string", "recovered", _c(lambda s: [f"[{s.label}]"]), _needle),
    Kind("bare_label_with_period", "recovered", lambda s: ok(f"{s.label}."), _needle),
    Kind("arabic_indic_digits", "recovered", lambda s: ok(_digits(s.label, 0x0660)), _needle),
    Kind("full_width_digits", "recovered", lambda s: ok(_digits(s.label, 0xFF10)), _needle),
    Kind("label_with_hash", "recovered", lambda s: ok(f"#{s.label}"), _needle),
    Kind("label_as_document_word", "recovered", _c(lambda s: [f"Document {s.label}"]), _needle),
)
KIND_BY_NAME = {k.name: k for k in KINDS}
FAILING = tuple(k for k in KINDS if k.category in ("transient", "deadline", "malformed", "fatal"))


# ------------------------------------------------------------------ the scripted model
@dataclass
class Logged:
    """What the model saw and meant in one request."""

    texts: dict[int, str]
    intended: tuple[int, ...] | None  # valid labels meant; None: the reply cites nothing usable


@dataclass
class ScriptedModel:
    """Serves the kind's schedule and logs each request (see the module docstring)."""

    kind: Kind
    always_hostile: bool = False
    log: list[Logged] = field(default_factory=list)

    def _hostile(self, i: int) -> bool:
        if self.always_hostile:
            return True
        c = self.kind.category
        if c == "transient":
            return i % 2 == 0
        if c == "malformed":
            return i < MAX_ATTEMPTS
        if c == "fatal":
            return i < 1
        return True

    def __call__(self, req: RecordedRequest) -> Behaviour:
        texts = dict(shown_documents(req.user_text))
        label = next(lab for lab, t in texts.items() if t == NEEDLE)
        shown = Shown(label, tuple(texts))
        i = len(self.log)
        if self._hostile(i):
            meant = self.kind.intended(shown) if self.kind.category in ("labels", "recovered") else None
            self.log.append(Logged(texts, meant))
            return self.kind.hostile(shown)
        self.log.append(Logged(texts, (label,)))
        return cite(label)


class RecordingWait:
    """Non-sleeping wait; records the Retry-After of each retried failure."""

    def __init__(self) -> None:
        self.retry_afters: list[float | None] = []

    def __call__(self, state: RetryCallState) -> float:
        self.retry_afters.append(retry_after(state))
        return 0.0


class ListRetriever(BaseRetriever):
    """In-memory LangChain base retriever returning its documents in order."""

    docs: list[Document]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return list(self.docs)


# ------------------------------------------------------------------------- running
@dataclass
class Outcome:
    kind: Kind
    path: Path_
    result: PanningResult | None
    error: BaseException | None
    log: list[Logged]
    requests: list[RecordedRequest]
    waits: list[float | None]
    returned: list[int]  # input indices the adapter returned (panner: result.selected)
    prior: np.ndarray

    @property
    def mis_mapped(self) -> int:
        return _citation_check(self)[0]

    @property
    def lost(self) -> int:
        return _citation_check(self)[1]


def _prior(path: Path_) -> np.ndarray:
    """What the engine starts from on ``path``, from the engine's prior functions (not from
    a run): the adapters' default rank prior is the default rank map's first ``N``
    probabilities, bounded at ``BOUND_SHARE`` of the swing consistent evidence can make
    with these options; the panner paths (``retriever_prior="none"``, no
    ``expected_relevant``) start flat, with the same chance that none is relevant."""
    if path in ("retriever", "postprocessor"):
        config = PanningConfig.from_options(None, rounds=ROUNDS, prompts_per_round=1).with_profile(PROFILE)
        return bounded_prior(
            DEFAULT_RANK_MAP.probabilities(N), max_gap=BOUND_SHARE * evidence_swing(config, N)
        )
    return DEFAULT_RANK_MAP.flat(N)


def _run_path(path: Path_, reader: OpenAIReader, on_failure: str) -> tuple[PanningResult, list[int]]:
    opts: dict[str, Any] = {
        "profile": PROFILE,
        "rounds": ROUNDS,
        "prompts_per_round": 1,
        "on_failure": on_failure,
    }
    if path in ("panner", "panner-async"):
        opts["retriever_prior"] = "none"  # the panner paths start flat (see _prior)
    if path == "panner":
        res = GoldPanner(reader, k=1, rng=0, **opts).run(QUESTION, DOCS)
        return res, res.selected.tolist()
    if path == "panner-async":

        async def go() -> PanningResult:
            try:
                return await GoldPanner(reader, k=1, rng=0, **opts).arun(QUESTION, DOCS)
            finally:
                await reader.aclose()

        res = asyncio.run(go())
        return res, res.selected.tolist()
    if path == "retriever":
        base = ListRetriever(docs=[Document(page_content=t, metadata={"i": i}) for i, t in enumerate(DOCS)])
        docs, res = GoldPanningRetriever(base_retriever=base, reader=reader, k=1, seed=0, **opts).pan(
            QUESTION
        )
        assert all(d.metadata["gold_panning_panned"] is res.panned for d in docs)
        return res, [d.metadata["i"] for d in docs]
    nodes = [
        NodeWithScore(node=TextNode(text=t, id_=f"n{i}"), score=float(N - i)) for i, t in enumerate(DOCS)
    ]
    out, res = GoldPanningPostprocessor(reader=reader, top_n=1, seed=0, **opts).pan(nodes, QUESTION)
    return res, [int(o.node.node_id[1:]) for o in out]


_SERVER: FakeOpenAIServer | None = None
_CLIENT: Any = None


def _server() -> FakeOpenAIServer:
    """One loopback server for the module (started on first use, stopped by the
    module fixture): the matrix makes hundreds of short runs."""
    global _SERVER
    if _SERVER is None:
        # Headers and body go out in two writes; without TCP_NODELAY every response
        # waits ~40 ms for a delayed ACK (Nagle). Set on the handler this server uses.
        _SERVER = FakeOpenAIServer().start()
        assert _SERVER._httpd is not None
        _SERVER._httpd.RequestHandlerClass = type(
            "NoDelayHandler", (_SERVER._httpd.RequestHandlerClass,), {"disable_nagle_algorithm": True}
        )
    return _SERVER


def _sync_client() -> Any:
    """One ``openai.OpenAI`` client for the synchronous paths (building one costs ~30 ms
    of TLS setup even for plain HTTP); the async path builds its own per event loop."""
    global _CLIENT
    if _CLIENT is None:
        from openai import OpenAI

        _CLIENT = OpenAI(api_key="test-key", base_url=_server().base_url, max_retries=0)
    return _CLIENT


@pytest.fixture(scope="module", autouse=True)
def _stop_server() -> Any:
    yield
    global _SERVER, _CLIENT
    if _CLIENT is not None:
        _CLIENT.close()
        _CLIENT = None
    if _SERVER is not None:
        _SERVER.stop()
        _SERVER = None


def run_kind(kind: Kind, path: Path_, *, always_hostile: bool = False, on_failure: str = "raise") -> Outcome:
    """Serve ``kind`` to ``path``; never raises (an escaping exception is recorded)."""
    model = ScriptedModel(kind, always_hostile=always_hostile)
    wait = RecordingWait()
    server = _server()
    server.clear()
    server.default = dynamic(model)
    reader = OpenAIReader(
        model="fake-model",
        base_url=server.base_url,
        api_key="test-key",
        client=None if path == "panner-async" else _sync_client(),
        wait=wait,
        timeout=SLOW_KIND_TIMEOUT if kind.name == "slower_than_timeout" else CLIENT_TIMEOUT,
        max_attempts=MAX_ATTEMPTS,
    )
    result: PanningResult | None = None
    error: BaseException | None = None
    returned: list[int] = []
    try:
        result, returned = _run_path(path, reader, on_failure)
    except Exception as err:  # noqa: BLE001 - recorded: the tests decide whether it was allowed
        error = err
    finally:
        reader.close()
    requests = server.requests
    return Outcome(kind, path, result, error, model.log, requests, wait.retry_afters, returned, _prior(path))


@functools.cache
def outcome(name: str, path: Path_) -> Outcome:
    return run_kind(KIND_BY_NAME[name], path)


def _citation_check(o: Outcome) -> tuple[int, int]:
    """(mis-mapped, lost) citations over the run's successful readings.

    Readings consume requests in order (``attempts`` each); the last request of a
    successful reading is the one it parsed. The documents the trace says were cited
    must be exactly those the model validly meant, identified by the prompt text.
    """
    if o.result is None:
        return 0, 0
    text_to_doc = {t: i for i, t in enumerate(DOCS)}
    mis = lost = 0
    at = 0
    for tr in o.result.rounds:
        assert len(tr.labels) == len(tr.windows), "one label tuple per prompt"
        for window, labels, reading in zip(tr.windows, tr.labels, tr.readings):
            at += reading.attempts
            if reading.failed:
                continue
            seen = o.log[at - 1]
            # the prompt showed each of the trace's documents under the label the trace
            # records for it (labels are drawn per prompt from the label space of its size)
            low, high = label_range(len(window))
            assert sorted(labels) == sorted(seen.texts) and len(set(labels)) == len(window)
            assert all(low <= lab <= high for lab in labels)
            assert {lab: text_to_doc[seen.texts[lab]] for lab in labels} == dict(zip(labels, window))
            trace_docs = {window[p] for p in reading.cited}
            meant = {text_to_doc[seen.texts[lab]] for lab in (seen.intended or ())}
            mis += len(trace_docs - meant)
            lost += len(meant - trace_docs)
    assert at == len(o.log) == len(o.requests), "every request belongs to exactly one reading"
    return mis, lost


def _expected_requests(kind: Kind) -> int:
    return {
        "transient": 2 * ROUNDS,
        "deadline": 1,
        "malformed": MAX_ATTEMPTS + (ROUNDS - 1),
        "fatal": 1 + (ROUNDS - 1),
    }.get(kind.category, ROUNDS)


# ---------------------------------------------------------------------- the matrix
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", [k.name for k in KINDS])
def test_fault_end_to_end(name: str, path: Path_) -> None:
    o = outcome(name, path)
    kind = o.kind
    if kind.category == "deadline":  # no reply within timeout: the query ends there, clearly
        assert isinstance(o.error, AllRoundsFailedError), f"got {o.error!r}"
        message = str(o.error)
        assert f"timeout={SLOW_KIND_TIMEOUT:g} s" in message and _server().base_url in message
        assert len(o.error.errors) == ROUNDS and len(o.requests) == _expected_requests(kind)
        return
    assert o.error is None, f"{type(o.error).__name__} escaped: {o.error}"
    res = o.result
    assert res is not None and len(res.rounds) == ROUNDS and res.panned
    assert len(o.requests) == _expected_requests(kind)
    assert o.mis_mapped == 0 and o.lost == 0
    readings = [tr.reading for tr in res.rounds]
    if kind.category == "transient":
        assert [r.attempts for r in readings] == [2] * ROUNDS
        assert not any(tr.failed for tr in res.rounds)
        assert len(o.waits) == ROUNDS  # one non-sleeping wait per retried round
        assert o.waits == [kind.retry_after] * ROUNDS
    elif kind.category in ("malformed", "fatal"):
        first = res.rounds[0]
        assert first.failed and first.cited == () and res.failed_rounds == 1
        assert first.reading.attempts == (MAX_ATTEMPTS if kind.category == "malformed" else 1)
        assert first.reading.error
        # the failed round left every belief where the prior put it
        np.testing.assert_allclose(first.posteriors, o.prior, rtol=1e-12)
        # tenacity asks the wait after every retryable failure, the last one included
        assert len(o.waits) == (MAX_ATTEMPTS if kind.category == "malformed" else 0)
    else:
        assert not any(tr.failed for tr in res.rounds) and o.waits == []
        assert [r.invalid_labels for r in readings] == [kind.invalid] * ROUNDS
        assert [r.duplicate_labels for r in readings] == [kind.duplicates] * ROUNDS
        assert res.invalid_labels == kind.invalid * ROUNDS
    # every round that succeeded cited exactly the needle (or nothing, when the model
    # gave no valid label), and the needle is what comes back
    for tr in res.rounds:
        if not tr.failed:
            assert tr.cited == (NEEDLE_INDEX,)
    assert o.returned == [NEEDLE_INDEX]
    assert res.citation_counts.tolist() == [ROUNDS - res.failed_rounds, 0, 0, 0]


@pytest.mark.parametrize(
    ("name", "path"),
    [(k.name, PATHS[i % len(PATHS)]) for i, k in enumerate(FAILING)],
    ids=[f"{k.name}-{PATHS[i % len(PATHS)]}" for i, k in enumerate(FAILING)],
)
def test_every_round_failing_is_one_clear_error(name: str, path: Path_) -> None:
    """Each failing kind on every round: one AllRoundsFailedError (paths rotate)."""
    o = run_kind(KIND_BY_NAME[name], path, always_hostile=True)
    assert isinstance(o.error, AllRoundsFailedError), f"got {o.error!r}"
    assert f"all {ROUNDS} panning rounds failed" in str(o.error) and "on_failure='fallback'" in str(o.error)
    assert len(o.error.errors) == ROUNDS
    per_round = 1 if o.kind.category == "fatal" else MAX_ATTEMPTS
    # past the query's deadline nothing more is sent: one request in all
    assert len(o.requests) == (1 if o.kind.category == "deadline" else per_round * ROUNDS)


@pytest.mark.parametrize("path", ["panner", "retriever", "postprocessor"])
@pytest.mark.parametrize("name", ["http_503", "non_json_text", "refusal", "connection_reset_mid_body"])
def test_every_round_failing_fallback_is_flagged(name: str, path: Path_) -> None:
    o = run_kind(KIND_BY_NAME[name], path, always_hostile=True, on_failure="fallback")
    assert o.error is None and o.result is not None
    res = o.result
    assert not res.panned and res.stop_reason == "all-rounds-failed" and res.failed_rounds == ROUNDS
    for tr in res.rounds:  # beliefs never moved
        np.testing.assert_allclose(tr.posteriors, o.prior, rtol=1e-12)
    np.testing.assert_allclose(res.posteriors, o.prior, rtol=1e-12)
    assert o.returned == [int(np.argmax(o.prior))]  # the prior's best (ties: the first)


# ----------------------------------------------------------------------- the summary
def _summary() -> dict[str, int]:
    crashes = mis = lost = shuffled = 0
    for k in KINDS:
        for p in PATHS:
            o = outcome(k.name, p)
            # the deadline kind ends in one AllRoundsFailedError by design, not a crash
            crashes += o.error is not None and not (
                k.category == "deadline" and isinstance(o.error, AllRoundsFailedError)
            )
            mis += o.mis_mapped
            lost += o.lost
            if o.result is not None:
                rounds = o.result.rounds
                shuffled += sum(
                    list(lab) != list(range(1, len(lab) + 1)) for tr in rounds for lab in tr.labels
                )
    return {
        "kinds": len(KINDS),
        "paths": len(PATHS),
        "crashes": crashes,
        "mis_mapped": mis,
        "lost": lost,
        "shuffled_prompts": shuffled,
    }


@pytest.mark.parametrize(
    "expected",
    [{"kinds": len(KINDS), "crashes": 0, "mis_mapped": 0}],
    ids=[f"kinds={len(KINDS)}-paths={len(PATHS)}-crashes=0-mismapped=0"],
)
def test_fault_matrix_summary(expected: dict[str, int]) -> None:
    s = _summary()
    print(
        f"\nfault matrix: kinds tried={s['kinds']} x paths={s['paths']} "
        f"({s['kinds'] * s['paths']} runs), crashes={s['crashes']}, "
        f"mis-mapped citations={s['mis_mapped']}, lost citations={s['lost']}"
    )
    assert s["kinds"] == expected["kinds"] and s["kinds"] >= 30
    assert s["crashes"] == expected["crashes"]
    assert s["mis_mapped"] == expected["mis_mapped"] and s["lost"] == 0
    # the check went through labels that were not positions (else label == position + 1
    # would pass it by accident)
    assert s["shuffled_prompts"] > 0


def test_the_mis_mapping_check_can_fail() -> None:
    """The checker is not vacuous: a reading that also cites a document the model never
    meant (what "label 0 -> last document" would produce) counts as one mis-mapping."""
    import dataclasses

    o = outcome("label_zero", "panner")
    assert o.result is not None and o.mis_mapped == 0
    tr = o.result.rounds[0]
    window = tr.windows[0]
    other = next(p for p, d in enumerate(window) if d != NEEDLE_INDEX)
    bad = dataclasses.replace(tr.reading, cited=tuple(sorted({*tr.reading.cited, other})))
    forged = dataclasses.replace(tr, readings=(bad,))
    res = dataclasses.replace(o.result, rounds=(forged, *o.result.rounds[1:]))
    assert dataclasses.replace(o, result=res).mis_mapped == 1
