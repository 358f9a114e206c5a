"""``python -m benchmarks latency`` on a tiny configuration (0.01 s per call), and the
acceptance tests of issue 19: a flood of 200 queries through one reader limited to 16
calls in flight against a server answering 429 above 16 (async and sync), and an
``asyncio.gather`` of queries cancelled mid-flight.

The loopback model here is a perfect reader (TPR 1, FPR 0 at every position), so every
count below follows from the settings by hand: a panning method makes rounds x prompts
per round calls per query and finds every gold document; each peer makes one call.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import numpy as np
import pytest

from benchmarks import _latency_methods
from benchmarks import latency as L
from benchmarks._cli import main as cli_main
from benchmarks._loopback import LoopbackServer
from gold_panning_integrations.evaluate._instances import make_instances
from gold_panning_integrations.panning import GoldPanner
from gold_panning_integrations.profiles import DetectorProfile

N = 6
PERFECT = DetectorProfile(n_positions=N, tpr=[1.0] * N, fpr=[0.0] * N)


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    """Every method, both paths, 3 queries of 6 documents, a flood of 12."""
    return L.run_latency_bench(
        latency=0.01, queries=3, n=N, profile=PERFECT, flood_queries=12, engine_n=(), timeout=20.0
    )


def _row(report: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    [row] = [d for d in report["methods"] if d["method"] == method and d["path"] == path]
    return row


def test_every_method_runs_on_both_paths(report: dict[str, Any]) -> None:
    assert [(d["method"], d["path"]) for d in report["methods"]] == [
        (m.name, p) for m in L.METHODS for p in ("sync", "async")
    ]
    assert report["skipped"] == {}
    assert report["server"] == {"unknown_question": 0, "errors": 0}


@pytest.mark.parametrize("path", ["sync", "async"])
def test_calls_per_query_follow_the_settings(report: dict[str, Any], path: str) -> None:
    calls = {d["method"]: d["calls_per_query"] for d in report["methods"] if d["path"] == path}
    default = _latency_methods.resolved_config(L.METHODS[2])
    assert calls["base"] == 0
    assert calls["psc-8"] == 8  # 1 round x 8 prompts
    assert calls["gp-defaults"] == default.rounds * default.prompts_per_round == 6  # 2 rounds x 3 prompts
    assert calls["gp-0.4"] == 4  # 4 rounds x 1 prompt
    assert calls["gp-lowest-latency"] == 8  # 1 round x 8 prompts
    assert calls["gp-highest-accuracy"] == 12  # 3 rounds x 4 prompts
    assert 1 <= calls["gp-lowest-cost"] <= 4  # 4 rounds x 1 prompt, may stop early
    for peer in ("langchain-listwise", "llamaindex-llmrerank", "llamaindex-rankgpt"):
        assert calls[peer] == 1


@pytest.mark.parametrize("path", ["sync", "async"])
def test_a_perfect_reader_puts_every_gold_first_for_every_method_that_asks_it(
    report: dict[str, Any], path: str
) -> None:
    instances = make_instances("kv", n=N, instances=3, seed=L.DEFAULTS["seed"])
    base_top1 = round(sum(inst.gold == (0,) for inst in instances) / 3, 4)  # the report keeps 4 digits
    for d in report["methods"]:
        if d["path"] != path:
            continue
        assert d["top1"] == (base_top1 if d["method"] == "base" else 1.0), d["method"]
        assert d["exceptions"] == d["errors"] == d["rejected"] == d["unusable"] == 0


def test_each_method_asked_in_its_own_format(report: dict[str, Any]) -> None:
    asked = {d["method"]: d["asked"] for d in report["methods"] if d["path"] == "sync"}
    assert asked["base"] == {}
    assert asked["psc-8"] == {"gold-panning": {"json_schema": 24}}
    assert asked["gp-defaults"] == {"gold-panning": {"json_schema": 18}}
    assert asked["langchain-listwise"] == {"langchain-listwise": {"json_schema": 3}}
    assert asked["llamaindex-llmrerank"] == {"llamaindex-llmrerank": {"text": 3}}
    assert asked["llamaindex-rankgpt"] == {"llamaindex-rankgpt": {"text": 3}}


def test_latency_multiples_are_p50_over_the_call_latency(report: dict[str, Any]) -> None:
    for d in report["methods"]:
        assert d["p50_x_latency"] == round(d["p50"] / 0.01, 2)
        assert d["p95"] >= d["p50"] >= 0.0
    # A method that calls the model waits at least one call of latency per query.
    assert _row(report, "psc-8", "sync")["p50"] >= 0.01
    assert _row(report, "gp-defaults", "async")["p50"] >= 2 * 0.01


def test_the_flood_lines_report_no_failure_and_the_limit(report: dict[str, Any]) -> None:
    assert [f["path"] for f in report["flood"]] == ["sync", "async"]
    for f in report["flood"]:
        assert (f["queries"], f["failed"], f["calls"], f["top1"]) == (12, 0, 12 * 6, 1.0)
        assert f["max_open"] <= 16


def test_the_markdown_report_shows_every_row_and_check(report: dict[str, Any]) -> None:
    text = L.format_latency_markdown(report)
    for m in L.METHODS:
        assert text.count(f"| {m.label} |") == 2
    assert "| GP defaults (2 rounds x 3 prompts) | 2 x 3 | sync |" in text
    assert "| PSC, 8 prompts at once | 1 x 8 | async |" in text
    assert text.count("| sync | 12 | 16 | 16 | 0 |") == 1
    assert "Acceptance checks:" in text and "gp-defaults top-1 >= psc-8 top-1 (sync: [1.0, 1.0])" in text


def test_the_acceptance_checks_compare_the_latency_setting_with_psc() -> None:
    summary = [
        {"method": "gp-defaults", "path": "sync", "p50": 1.1, "p50_x_latency": 2.2, "top1": 0.6},
        {"method": "psc-8", "path": "sync", "p50": 0.55, "p50_x_latency": 1.1, "top1": 0.5},
        {"method": "gp-defaults", "path": "async", "p50": 1.2, "p50_x_latency": 2.4, "top1": 0.4},
        {"method": "psc-8", "path": "async", "p50": 0.55, "p50_x_latency": 1.1, "top1": 0.5},
    ]
    flood = [{"path": "async", "queries": 200, "failed": 0, "max_open": 17, "max_concurrency": 16}]
    checks = L.acceptance(summary, flood, latency=0.5)
    assert [(c["path"], c["met"]) for c in checks] == [
        ("sync", True),
        ("sync", True),
        ("async", False),
        ("async", False),
        ("async", False),
    ]


def test_the_cli_prints_json_and_writes_the_report(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "latency.json"
    code = cli_main(
        [
            "latency",
            "--latency",
            "0.01",
            "--queries",
            "2",
            "--n",
            "5",
            "--methods",
            "base,gp-defaults",
            "--paths",
            "async",
            "--flood-queries",
            "0",
            "--engine-n",
            "",
            "--json",
            "--output",
            str(out),
        ]
    )
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    assert json.loads(out.read_text()) == printed
    assert [(d["method"], d["path"], d["queries"]) for d in printed["methods"]] == [
        ("base", "async", 2),
        ("gp-defaults", "async", 2),
    ]
    assert printed["settings"]["profile"] == "smollm2-135m-kv"
    assert printed["settings"]["method_settings"]["gp-defaults"]["setting"] == "2 x 3"
    assert printed["flood"] == [] and printed["engine"] == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--methods", "gp-turbo"], "unknown method(s) gp-turbo"),
        (["--latency", "-1"], "latency must be a finite number of seconds >= 0, got -1.0"),
        (["--queries", "0"], "queries must be an int >= 1, got 0"),
        (["--max-concurrency", "0"], "max_concurrency must be an int >= 1, got 0"),
    ],
)
def test_bad_options_fail_with_a_message(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code: object
    try:
        code = cli_main(["latency", "--flood-queries", "0", "--engine-n", "", *argv])
    except SystemExit as stop:  # argparse's usage error
        code = stop.code
    assert code not in (0, None)
    assert message in capsys.readouterr().err


def test_engine_time_reports_each_size() -> None:
    rows = L.engine_time([20, 100], repeat=3)
    assert [(r["n"], r["rounds"]) for r in rows] == [(20, 4), (100, 4)]
    assert all(r["ms_per_query"] > 0 and r["ms_with_construction"] > 0 for r in rows)


# ============================================================== issue 19's acceptance
FLOOD: dict[str, Any] = {"rounds": 2, "prompts_per_round": 2}
"""4 calls per query, 2 of them at once: 800 calls for 200 queries."""


@pytest.mark.parametrize("path", ["async", "sync"])
def test_a_flood_of_200_queries_never_opens_more_than_16_requests(path: str) -> None:
    """200 queries at once through one reader limited to 16 calls in flight, against a
    server answering 429 above 16 open requests: every query gets its answer, every
    call is answered the first time (no 429), and the server never sees 17 open."""
    instances = make_instances("kv", n=N, instances=200, seed=5)
    f = L.run_flood(
        instances,
        profile=PERFECT,
        options=FLOOD,
        path=path,
        latency=0.01,
        capacity=16,
        max_concurrency=16,
        retry_after=1.0,
        seed=5,
        timeout=30.0,
    )
    assert (f["queries"], f["failed"], f["exceptions"], f["unfinished"]) == (200, 0, 0, 0)
    assert f["calls"] == 200 * 4
    assert f["rejected"] == 0
    assert f["max_open"] <= 16
    assert f["top1"] == 1.0


def test_cancelling_a_gather_of_queries_leaves_no_task_and_no_request_open() -> None:
    """Cancel an ``asyncio.gather`` of 12 queries while the reader's 3 slots are busy:
    the calls in flight are hung up (the server sees every request end), no task is
    left, the slots are given back (a new query through the same reader finishes), and
    the cancelled queries send nothing more."""
    instances = make_instances("kv", n=N, instances=13, seed=2)
    model = L.relevance_model(instances, PERFECT, seed=2)

    async def scenario(server: LoopbackServer) -> tuple[list[asyncio.Task[Any]], bool, Any, Any]:
        reader = L.make_reader(server.base_url, max_concurrency=3, timeout=30.0)
        try:

            def panner(i: int) -> GoldPanner:
                return GoldPanner(
                    reader, PERFECT, rng=np.random.default_rng(i), retriever_prior="none", **FLOOD
                )

            flight = asyncio.gather(
                *(panner(i).arun(x.question, x.documents) for i, x in enumerate(instances[:12]))
            )
            for _ in range(2000):  # until 3 calls are being served (deadline: 20 s)
                if server.stats().serving == 3:
                    break
                await asyncio.sleep(0.01)
            assert server.stats().serving == 3
            flight.cancel()
            with pytest.raises(asyncio.CancelledError):
                await flight  # raised once the first query is cancelled; the others unwind
            for _ in range(500):  # until every cancelled query has unwound (deadline: 5 s)
                left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()]
                if not left:
                    break
                await asyncio.sleep(0.01)
            idle = await asyncio.to_thread(server.wait_idle, 10.0)
            after_cancel = server.stats()
            fresh = await asyncio.wait_for(
                panner(99).arun(instances[12].question, instances[12].documents), 20
            )
            return left, idle, after_cancel, fresh
        finally:
            await reader.aclose()

    with LoopbackServer(model, latency=0.5, capacity=16) as srv:
        left, idle, after_cancel, fresh = asyncio.run(scenario(srv))
        assert left == []
        assert idle and after_cancel.open == 0
        assert after_cancel.abandoned >= 1  # hung up in their latency, not answered
        assert after_cancel.requests == after_cancel.answered + after_cancel.abandoned
        # At most the 3 calls in flight, and 3 more had the cancel come late, ever went out.
        assert after_cancel.requests <= 6
        assert int(fresh.ranking[0]) in instances[12].gold
        assert srv.wait_idle(timeout=10)
        assert (
            srv.stats().requests == after_cancel.requests + 4
        )  # the fresh query's 2 x 2 calls, nothing else
