"""Several prompts per round (``prompts_per_round``): placement, trace, budgets, and how
the synchronous and asynchronous paths send them (together, or one after another)."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Sequence

import numpy as np
import pytest

from gold_panning_integrations import (
    DetectorProfile,
    FatalReaderError,
    GoldPanner,
    PanningConfig,
    Reading,
    SimulatedReader,
)
from gold_panning_integrations.engine.panner import takes_concurrent_calls
from gold_panning_integrations.engine.rounds import BatchState, _stride, rank_documents
from gold_panning_integrations.engine.simulator import Mistakes

PROFILE = DetectorProfile.bundled("lost-in-the-middle")
DOCS = [f"d{i}" for i in range(10)]


# ------------------------------------------------------------------ placement
def test_stride_puts_every_bth_rank_first_by_hand() -> None:
    order = np.array([[4, 2, 0, 1, 3, 5, 6]])  # best first; 5 and 6 inactive
    n_active = np.array([5])
    assert _stride(order, n_active, 0, 2).tolist() == [[4, 0, 3, 2, 1, 5, 6]]
    assert _stride(order, n_active, 1, 2).tolist() == [[2, 1, 4, 0, 3, 5, 6]]
    assert _stride(order, n_active, 2, 3).tolist() == [[0, 4, 2, 1, 3, 5, 6]]


def test_stride_is_per_row() -> None:
    order = np.array([[0, 1, 2, 3], [3, 2, 1, 0]])
    got = _stride(order, np.array([4, 2]), 1, 2)
    assert got.tolist() == [[1, 3, 0, 2], [2, 3, 1, 0]]


def _state(log_odds: Sequence[float]) -> BatchState:
    return BatchState.start(np.asarray([log_odds], dtype=np.float64))


def test_the_first_prompt_of_a_round_is_the_policys_own_order() -> None:
    st = _state([0.0, 3.0, -1.0, 2.0, 1.0])
    active = np.ones((1, 5), dtype=bool)
    for spread in ("stride", "draw", "copies"):
        order, _ = rank_documents(
            "belief", st, active, rng=np.random.default_rng(0), prompt=0, prompts=3, spread=spread
        )
        assert order.tolist() == [[1, 3, 4, 0, 2]], spread


def test_later_prompts_follow_the_spread() -> None:
    st = _state([0.0, 3.0, -1.0, 2.0, 1.0])  # belief order 1, 3, 4, 0, 2
    active = np.ones((1, 5), dtype=bool)
    rng = np.random.default_rng(0)
    stride, _ = rank_documents("belief", st, active, rng=rng, prompt=1, prompts=2, spread="stride")
    assert stride.tolist() == [[3, 0, 1, 4, 2]]  # ranks 1, 3, then 0, 2, 4
    copies, _ = rank_documents("belief", st, active, rng=rng, prompt=1, prompts=2, spread="copies")
    assert copies.tolist() == [[1, 3, 4, 0, 2]]


def test_draw_spread_puts_a_document_first_in_proportion_to_its_odds_squared() -> None:
    # Gumbel noise at scale 0.5 on log-odds log(1), log(sqrt 2), log(2): P(first) is
    # proportional to odds squared, 1 : 2 : 4, i.e. 1/7, 2/7, 4/7.
    st = BatchState.start(np.tile(np.log([1.0, np.sqrt(2.0), 2.0]), (40_000, 1)))
    active = np.ones((40_000, 3), dtype=bool)
    order, _ = rank_documents(
        "belief", st, active, rng=np.random.default_rng(1), prompt=1, prompts=2, spread="draw"
    )
    share = np.bincount(order[:, 0], minlength=3) / 40_000
    assert share == pytest.approx([1 / 7, 2 / 7, 4 / 7], abs=0.01)


def test_inactive_documents_stay_last_under_every_spread() -> None:
    st = _state([5.0, 4.0, 3.0, 2.0, 1.0])
    active = np.array([[True, False, True, True, False]])
    for spread in ("stride", "draw", "copies"):
        order, n = rank_documents(
            "belief", st, active, rng=np.random.default_rng(2), prompt=1, prompts=2, spread=spread
        )
        assert n.tolist() == [3]
        assert sorted(order[0, 3:].tolist()) == [1, 4], spread


def test_mistakes_draw_by_hand() -> None:
    truth = np.array([[True, False, False, False, False]])
    rng = np.random.default_rng(3)
    u_lead, u_blind = np.random.default_rng(3).random((2, 1, 5))
    reads = Mistakes(false_leads=2.0, blind_rate=0.5).draw(rng, truth)
    # a = 2 / (5 - 1) = 0.5: a distractor is a lead when its draw is below 0.5
    expected = (~truth & (u_lead < 0.5)) | (truth & ~(u_blind < 0.5))
    assert reads.tolist() == expected.tolist()


def test_mistakes_reject_bad_values() -> None:
    with pytest.raises(ValueError, match="false_leads must be a number >= 0"):
        Mistakes(false_leads=-1.0)
    with pytest.raises(ValueError, match=r"blind_rate must be in \[0, 1\]"):
        Mistakes(blind_rate=1.5)


@pytest.mark.parametrize(
    ("options", "pattern"),
    [
        ({"prompts_per_round": 0}, r"prompts_per_round must be an int >= 1, got 0"),
        ({"prompts_per_round": 2.0}, r"prompts_per_round must be an int >= 1, got 2\.0"),
        ({"spread": "zigzag"}, r"spread must be 'draw', 'stride' or 'copies', got 'zigzag'"),
    ],
)
def test_config_rejects_bad_parallel_options(options: dict, pattern: str) -> None:
    with pytest.raises(ValueError, match=pattern):
        PanningConfig(**options)


# ------------------------------------------------------------------ the trace
def test_a_round_sends_b_prompts_and_the_trace_says_which_is_which() -> None:
    reader = SimulatedReader(PROFILE, {"d3"}, rng=0)
    res = GoldPanner(reader, PROFILE, rounds=2, prompts_per_round=3, rng=0).run("q", DOCS)
    assert res.calls == 6 and reader.calls == 6
    for r in res.rounds:
        assert r.prompt_index == (0, 1, 2)
        assert len(r.windows) == len(r.labels) == len(r.readings) == 3
        assert all(sorted(w) == list(range(10)) for w in r.windows)
        assert len({tuple(w) for w in r.windows}) == 3  # three different placements
    summary = res.summary()["rounds"][0]
    assert summary["prompt_index"] == [0, 1, 2] and summary["calls"] == 3


def test_windows_compose_with_prompts_per_round() -> None:
    reader = SimulatedReader(PROFILE, {"d3"}, rng=0)
    docs = [f"d{i}" for i in range(12)]
    res = GoldPanner(
        reader, PROFILE, rounds=1, prompts_per_round=2, max_docs_per_prompt=5, windows=True, rng=0
    ).run("q", docs)
    (r,) = res.rounds
    assert r.prompt_index == (0, 0, 0, 1, 1, 1)
    assert [len(w) for w in r.windows] == [4, 4, 4, 4, 4, 4]
    for b in (0, 1):  # each prompt's windows cover every document once
        shown = [i for w, p in zip(r.windows, r.prompt_index) if p == b for i in w]
        assert sorted(shown) == list(range(12))


def test_the_call_budget_sends_the_prompts_that_still_fit() -> None:
    reader = SimulatedReader(PROFILE, {"d3"}, rng=0)
    res = GoldPanner(reader, PROFILE, rounds=4, prompts_per_round=2, max_calls=5, rng=0).run("q", DOCS)
    assert [r.calls for r in res.rounds] == [2, 2, 1]
    assert res.calls == 5 and res.stop_reason == "call-budget"
    assert res.rounds[-1].prompt_index == (0,)


def test_one_prompt_per_round_is_unchanged_by_the_option() -> None:
    # one prompt per round: the spread of later prompts never applies
    a = GoldPanner(
        SimulatedReader(PROFILE, {"d3"}, rng=1), PROFILE, rounds=4, prompts_per_round=1, rng=5
    ).run("q", DOCS)
    b = GoldPanner(
        SimulatedReader(PROFILE, {"d3"}, rng=1),
        PROFILE,
        rounds=4,
        prompts_per_round=1,
        spread="copies",
        rng=5,
    ).run("q", DOCS)
    assert a.posteriors.tolist() == b.posteriors.tolist()


# ------------------------------------------------------------------ how prompts are sent
class _Barrier:
    """A reader whose ``read`` returns only once ``parties`` reads are in flight at once
    (or fails after ``timeout`` s: then the calls were not concurrent)."""

    def __init__(self, parties: int, *, max_concurrency: int | None = 8, timeout: float = 10.0) -> None:
        self.barrier = threading.Barrier(parties, timeout=timeout)
        self.max_concurrency = max_concurrency
        self.threads: set[int] = set()
        self.lock = threading.Lock()

    def read(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        with self.lock:
            self.threads.add(threading.get_ident())
        self.barrier.wait()
        return Reading(cited=(0,))


def test_run_sends_a_rounds_prompts_at_once() -> None:
    reader = _Barrier(4)
    res = GoldPanner(reader, PROFILE, rounds=2, prompts_per_round=4, rng=0).run("q", DOCS)
    assert res.failed_rounds == 0 and res.calls == 8
    assert threading.get_ident() in reader.threads  # the first prompt runs in the caller's thread
    assert len(reader.threads) >= 4


class _Ordered:
    """A reader that declares no concurrency (or ``max_concurrency=1``)."""

    def __init__(self, max_concurrency: int | None | str = "undeclared") -> None:
        if max_concurrency != "undeclared":
            self.max_concurrency = max_concurrency
        self.seen: list[tuple[int, tuple[int, ...]]] = []

    def read(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        self.seen.append((threading.get_ident(), tuple(labels or ())))
        return Reading(cited=())


@pytest.mark.parametrize("declared", ["undeclared", 1])
def test_a_reader_without_concurrency_is_called_in_order_in_the_callers_thread(declared: object) -> None:
    reader = _Ordered(declared)  # type: ignore[arg-type]
    res = GoldPanner(reader, PROFILE, rounds=2, prompts_per_round=3, rng=0).run("q", DOCS)
    assert {t for t, _ in reader.seen} == {threading.get_ident()}
    assert [labels for _, labels in reader.seen] == [lab for r in res.rounds for lab in r.labels]


@pytest.mark.parametrize(
    ("declared", "expected"),
    [(None, True), (16, True), (2, True), (1, False), (0, False), (True, False), ("8", False)],
)
def test_takes_concurrent_calls(declared: object, expected: bool) -> None:
    reader = _Ordered(declared)  # type: ignore[arg-type]
    assert takes_concurrent_calls(reader) is expected
    assert takes_concurrent_calls(object()) is False


_TRACE_ID: contextvars.ContextVar[str] = contextvars.ContextVar("trace_id", default="none")


def test_pool_threads_see_the_callers_context() -> None:
    seen: list[str] = []

    class Reader:
        max_concurrency = 4

        def read(
            self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
        ) -> Reading:
            seen.append(_TRACE_ID.get())
            return Reading()

    token = _TRACE_ID.set("span-7")
    try:
        GoldPanner(Reader(), PROFILE, rounds=1, prompts_per_round=4, rng=0).run("q", DOCS)
    finally:
        _TRACE_ID.reset(token)
    assert seen == ["span-7"] * 4


class _FatalSecond:
    """The second prompt of a round raises a fatal error; the others block briefly."""

    max_concurrency = 8

    def __init__(self) -> None:
        self.started = 0
        self.finished = 0
        self.lock = threading.Lock()
        self.release = threading.Event()

    def read(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        with self.lock:
            self.started += 1
            me = self.started
        if me == 2:
            self.release.set()
            raise FatalReaderError("401: check the API key", status_code=401)
        self.release.wait(5.0)
        with self.lock:
            self.finished += 1
        return Reading()


def test_a_fatal_error_in_a_parallel_prompt_ends_the_run_after_the_others_finish() -> None:
    reader = _FatalSecond()
    with pytest.raises(FatalReaderError, match="401"):
        GoldPanner(reader, PROFILE, rounds=3, prompts_per_round=3, rng=0).run("q", DOCS)
    assert reader.started == 3 and reader.finished == 2  # nothing left running, no second round


class _AsyncGate:
    """``aread``: the first call raises a fatal error once every call is in flight; the
    others wait for an event that never comes (until cancelled)."""

    def __init__(self, parties: int) -> None:
        self.parties = parties
        self.started = 0
        self.cancelled = 0
        self.all_in: asyncio.Event | None = None

    async def aread(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        if self.all_in is None:
            self.all_in = asyncio.Event()
        self.started += 1
        me = self.started
        if self.started == self.parties:
            self.all_in.set()
        if me == 1:
            await self.all_in.wait()
            raise FatalReaderError("403: permission denied", status_code=403)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return Reading()


def test_arun_sends_a_rounds_prompts_together_and_leaves_no_task_behind() -> None:
    reader = _AsyncGate(4)

    async def main() -> set[asyncio.Task[object]]:
        with pytest.raises(FatalReaderError, match="403"):
            await GoldPanner(reader, PROFILE, rounds=2, prompts_per_round=4, rng=0).arun("q", DOCS)
        return {t for t in asyncio.all_tasks() if t is not asyncio.current_task()}

    left = asyncio.run(main())
    assert reader.started == 4 and reader.cancelled == 3
    assert left == set()


def test_cancelling_arun_cancels_its_prompts() -> None:
    reader = _AsyncGate(99)  # nobody raises: every prompt waits

    async def main() -> set[asyncio.Task[object]]:
        task = asyncio.ensure_future(
            GoldPanner(reader, PROFILE, rounds=2, prompts_per_round=3, rng=0).arun("q", DOCS)
        )
        while reader.started < 3:
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return {t for t in asyncio.all_tasks() if t is not asyncio.current_task()}

    left = asyncio.run(main())
    assert reader.cancelled == 2 and left == set()  # the first prompt waits inside all_in
