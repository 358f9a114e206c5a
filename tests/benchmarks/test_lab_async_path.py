"""``python -m benchmarks async-path`` and ``python -m benchmarks reliability``: their
plumbing (which path each mode takes, what is counted, what is printed), not their
timings, which are the figures they report."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import pytest

from benchmarks import async_path, reliability
from benchmarks._loopback import LoopbackServer, PositionBiasedModel
from gold_panning_integrations import DetectorProfile


class _Panner:
    """Records which method each query went through, and its event loop."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, int | None]] = []

    def run(self, question: str, documents: Any) -> None:
        self.calls.append(("run", question, None))

    async def arun(self, question: str, documents: Any) -> None:
        self.calls.append(("arun", question, id(asyncio.get_running_loop())))


@pytest.mark.parametrize("mode", async_path.MODES)
def test_each_mode_runs_every_question_through_its_path(mode: async_path.Mode) -> None:
    panner = _Panner()
    seconds = async_path.run_queries(panner, mode, ["a", "b", "c"], ["d"])
    assert len(seconds) == 3 and all(s >= 0 for s in seconds)
    assert [q for _, q, _ in panner.calls] == ["a", "b", "c"]
    methods = {m for m, _, _ in panner.calls}
    assert methods == ({"run"} if mode == "sync" else {"arun"})
    if mode == "async-one-loop":
        assert len({loop for _, _, loop in panner.calls}) == 1


def test_a_loop_per_query_runs_each_in_a_loop_of_its_own() -> None:
    loops: list[Any] = []

    class Keeps(_Panner):
        async def arun(self, question: str, documents: Any) -> None:
            loops.append(asyncio.get_running_loop())  # kept alive: ids cannot repeat

    async_path.run_queries(Keeps(), "async-run-per-query", ["a", "b"], ["d"])
    assert len(loops) == 2 and loops[0] is not loops[1]
    with pytest.raises(ValueError, match="mode must be one of"):
        async_path.run_queries(_Panner(), "threads", ["a"], ["d"])  # type: ignore[arg-type]


@pytest.mark.parametrize("protocol", async_path.PROTOCOLS)
def test_a_measure_sends_every_prompt_of_every_query(protocol: str) -> None:
    figure = async_path.measure(
        protocol, "async-run-per-query", queries=2, prompts=3, documents=4, latency=0.01
    )
    assert (figure.protocol, figure.mode, len(figure.seconds), figure.requests) == (
        protocol,
        "async-run-per-query",
        2,
        6,
    )
    assert figure.ratio == pytest.approx(figure.p50 / 0.01, rel=0.01)


def test_the_loopback_server_speaks_either_http_version() -> None:
    import http.client

    model = PositionBiasedModel(DetectorProfile.bundled("lost-in-the-middle"))
    for protocol in async_path.PROTOCOLS:
        with LoopbackServer(model, latency=0.0, protocol=protocol) as server:  # type: ignore[arg-type]
            conn = http.client.HTTPConnection("127.0.0.1", server.bound_port(), timeout=10)
            conn.request("GET", "/v1/models")
            response = conn.getresponse()
            response.read()
            assert response.version == (10 if protocol == "HTTP/1.0" else 11)
            assert response.will_close == (protocol == "HTTP/1.0")  # 1.1: the connection is kept
            conn.close()
    with pytest.raises(ValueError, match="protocol must be"):
        LoopbackServer(model, protocol="HTTP/2")  # type: ignore[arg-type]


def test_the_table_has_a_row_per_protocol_and_mode(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def fake(protocol: str, mode: str, **kwargs: Any) -> async_path.Figure:
        return async_path.Figure(protocol, mode, (0.5, 0.44), 0.47, 1.175, 16)

    monkeypatch.setattr(async_path, "measure", fake)
    args = argparse.Namespace(
        queries=2, prompts=8, documents=20, latency=0.4, modes=list(async_path.MODES), json=False
    )
    assert async_path.main(args) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("HTTP/")]
    assert len(rows) == 6 and all("1.18x" in row for row in rows)
    assert sum("asyncio.run per query" in row for row in rows) == 2


# ------------------------------------------------------------------ reliability
def test_max_in_window_counts_a_half_open_window() -> None:
    assert reliability.max_in_window([0.0, 1.0, 2.0, 2.5, 2.9], 1.0) == 3  # (1.9, 2.9]
    assert reliability.max_in_window([0.0, 1.0, 2.0], 1.0) == 1
    assert reliability.max_in_window([], 1.0) == 0


def test_the_faults_are_measured_through_a_reader() -> None:
    figures = reliability.measure(
        reliability.FAULTS, hang_timeout=0.2, retry_after=0.0, rate=(2, 0.05, 4), cancel_after=0.05
    )
    assert list(figures) == list(reliability.FAULTS)
    hang, too_many, cancel = figures["hang"], figures["429"], figures["cancel"]
    assert hang["requests"] == 3 and hang["error"].startswith(
        "AllRoundsFailedError"
    )  # one round, then the deadline
    assert (too_many["attempts"], too_many["requests"], too_many["failed"]) == (2, 2, False)
    assert (figures["500"]["attempts"], figures["500"]["requests"]) == (3, 3)
    assert figures["rate limit"]["requests"] == 4 and figures["rate limit"]["max_in_window"] <= 2
    # every request that reached the server before the cancel was dropped by its client
    assert (cancel["slots_held_after"], cancel["answered"]) == (0, 0)
    assert cancel["dropped_by_client"] == cancel["requests"] <= 3
    with pytest.raises(ValueError, match="unknown fault"):
        reliability.measure(["flood"])
