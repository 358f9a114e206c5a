"""``python -m benchmarks rerank-throughput`` on a small configuration: the ideal is the
endpoint's capacity in questions (derived by hand below), the achieved rate is printed beside
it, every question's calls reach the endpoint, and memory is sampled at four points."""

from __future__ import annotations

import json
from typing import Any

import pytest

from benchmarks import rerank_throughput as B
from benchmarks._cli import main as cli_main
from gold_panning_integrations.engine.config import PanningConfig


def test_the_ideal_is_the_endpoints_capacity_in_questions() -> None:
    # the acceptance's setting: 32 calls at once, 0.2 s each, 2 rounds x 3 prompts = 6 calls
    assert B.ideal_questions_per_second(capacity=32, latency=0.2) == pytest.approx(32 / 1.2)
    # one prompt per round, 4 rounds: 4 calls per question
    cfg = PanningConfig(rounds=4, prompts_per_round=1)
    assert B.ideal_questions_per_second(capacity=8, latency=0.5, config=cfg) == pytest.approx(4.0)


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    return B.run_rerank_throughput(questions=24, n=6, latency=0.02, capacity=4)


def test_a_small_run_measures_every_question(report: dict[str, Any]) -> None:
    assert report["calls_per_question"] == 6 and report["sequential_rounds"] == 2
    assert report["ideal_qps"] == pytest.approx(4 / (6 * 0.02), abs=1e-3)  # 33.333
    assert report["calls"] == 24 * 6 == report["server"]["answered"] == report["server"]["requests"]
    assert report["server"]["max_serving"] <= 4 and report["server"]["unknown_question"] == 0
    assert report["not_panned"] == 0
    assert 0 < report["achieved_qps"] and report["share_of_ideal"] == pytest.approx(
        report["achieved_qps"] / report["ideal_qps"], abs=2e-3
    )
    assert set(report["rss_mb"]) == {"start", "warm", "middle", "end"}
    assert report["in_flight"] == 8  # twice the reader's max_concurrency (= capacity)


def test_the_report_prints_the_rate_beside_the_ideal(report: dict[str, Any]) -> None:
    text = B.format_report(report)
    assert f"ideal    {report['ideal_qps']:8.2f} questions/s  = 4 / (6 calls x 0.02 s)" in text
    assert f"achieved {report['achieved_qps']:8.2f} questions/s" in text
    # the share of the ideal with the machine's load beside it, on the same line
    start, end = report["load"]["start"], report["load"]["end"]
    assert len(start) == len(end) == 3 and report["cpus"] >= 1
    achieved = next(line for line in text.splitlines() if "achieved" in line)
    assert f"{report['share_of_ideal']:.1%} of the ideal" in achieved
    assert f"machine load {start[0]:.2f} at the start, {end[0]:.2f} at the end" in achieved
    assert report["server"]["cpu_seconds"] > 0 and report["job_cores"] > 0
    assert "memory (RSS, MB): start" in text


def test_the_lab_cli_runs_it(capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "rerank-throughput",
        "--questions",
        "6",
        "--n",
        "4",
        "--latency",
        "0.01",
        "--capacity",
        "2",
        "--json",
    ]
    assert cli_main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["calls"] == 36 and out["questions"] == 6
