"""`bench compare` measures the calibration of per-document probabilities (issue 26), keeps
them in checkpoint rows and ``--out``, and recomputes it with no model call."""

from __future__ import annotations

import argparse
import importlib
import json
from pathlib import Path
from typing import Any

import pytest
from compare_fakes import kv_model
from openai_server import FakeOpenAIServer

from gold_panning_integrations.calibration.metrics import adaptive_ece, auroc, brier, ece, summarize
from gold_panning_integrations.evaluate import compare as C
from gold_panning_integrations.evaluate._calibration import calibration

# Three queries of two candidates: (probabilities, gold index).
QUERIES = [([0.9, 0.1], 0), ([0.3, 0.7], 1), ([0.6, 0.2], 0)]


def _scored(inst: C.CompareInstance) -> C.MethodOutcome:
    probs, _ = QUERIES[inst.index]
    return C.MethodOutcome(ranking=sorted(range(2), key=lambda i: -probs[i]), scores=probs)


def test_metrics_by_hand() -> None:
    p = [0.9, 0.1, 0.3, 0.7, 0.6, 0.2]
    y = [1, 0, 0, 1, 1, 0]
    # six bins of one pair: (0.1 + 0.1 + 0.3 + 0.3 + 0.4 + 0.2) / 6
    assert ece(p, y) == pytest.approx(1.4 / 6)
    # two equal-count bins: sorted p 0.1 0.2 0.3 | 0.6 0.7 0.9, y 0 0 0 | 1 1 1
    assert adaptive_ece(p, y, bins=2) == pytest.approx(0.5 * 0.2 + 0.5 * abs(2.2 / 3 - 1))
    assert brier(p, y) == pytest.approx(0.4 / 6)
    assert auroc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == pytest.approx(0.75)
    assert auroc([0.5, 0.5], [0, 1]) == pytest.approx(0.5)
    assert auroc([0.1, 0.2], [1, 1]) is None
    # a query with no relevant candidate: p_none = (1 - 0.1)(1 - 0.2) = 0.72 beats 0.1 * 0.8
    s = summarize([([0.9, 0.2], [True, False]), ([0.1, 0.2], [False, False])])
    assert s.p_none_auroc == pytest.approx(1.0)
    with pytest.raises(ValueError, match="probabilities in"):
        ece([1.2], [1])


def test_summary_has_the_calibration_of_methods_with_scores() -> None:
    insts = [C.CompareInstance(f"q{i}", ["a", "b"], (g,), index=i) for i, (_, g) in enumerate(QUERIES)]
    qrels = {inst.query_id: {inst.document_ids[inst.gold[0]]: 1} for inst in insts}
    rows = C.run_compare(insts, {"base": lambda inst: C.MethodOutcome(ranking=[0, 1]), "scored": _scored})
    s = C.summarize(rows, ["base", "scored"], rounds=1, instances=insts, qrels=qrels)
    assert "calibration" not in s["base"]
    c = s["scored"]["calibration"]
    assert (c["pairs"], c["queries"]) == (6, 3)
    assert c["ece"] == pytest.approx(0.2333, abs=1e-4)
    assert c["brier"] == pytest.approx(0.0667, abs=1e-4)
    # top picks 0.9, 0.7, 0.6, all right
    assert (c["top_mean"], c["top_accuracy"], c["top_gap"]) == pytest.approx((0.7333, 1.0, -0.2667), abs=1e-4)
    assert c["p_none_auroc"] is None  # every query has a relevant candidate
    # p_none: 0.1 * 0.9, 0.7 * 0.3, 0.4 * 0.8 -> mean 0.62 / 3; no query without a relevant one
    assert (c["p_none_mean"], c["none_share"]) == pytest.approx((0.2067, 0.0), abs=1e-4)
    # min_relevance=0.5 keeps 0.9, 0.7 and 0.6: all relevant
    assert (c["returned_at_threshold"], c["precision_at_threshold"]) == (3, 1.0)
    md = C.format_markdown(s)
    assert "| scored | 6 | 0.233 | " in md and "| 0.21 / 0.00 | 3, 1.00 |" in md


def _args(base_url: str, *extra: str) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    C.register(ap.add_subparsers())
    return ap.parse_args(
        ["evaluate", "--reader", "openai", "--base-url", base_url, "--model", "m", "--mode", "answer"]
        + ["--profile", "smollm2-135m-kv", "--n", "6", "--instances", "4", "--rounds", "2", "--json", *extra]
    )


def test_cli_keeps_probabilities_and_recomputes_without_a_model(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    ck, out = tmp_path / "ck.jsonl", tmp_path / "out"
    with FakeOpenAIServer(default=kv_model()) as srv:
        args = _args(srv.base_url, "--methods", "base,gp-belief", "--checkpoint", str(ck), "--out", str(out))
        assert C.main(args) == 0
        res: dict[str, Any] = json.loads(capsys.readouterr().out)
        calls = len(srv.requests)
    c = res["methods"]["gp-belief"]["calibration"]
    assert "calibration" not in res["methods"]["base"]
    assert (c["pairs"], c["queries"]) == (24, 4)
    # checkpoint rows keep one probability per candidate
    rows = [json.loads(line) for line in ck.read_text().splitlines()]
    gp = [r for r in rows if r.get("method") == "gp-belief"]
    assert len(gp) == 4 and all(len(r["scores"]) == 6 for r in gp)
    # --out's probabilities file alone gives the same figures
    lines = [
        json.loads(line) for line in (out / "probabilities" / "gp-belief.jsonl").read_text().splitlines()
    ]
    again = summarize([(q["probabilities"], [d in q["relevant"] for d in q["docs"]]) for q in lines])
    assert (round(again.ece, 4), round(again.brier, 4)) == (c["ece"], c["brier"])
    # and the checkpoint's rows through the summary's own function, with no model call
    with FakeOpenAIServer(default=kv_model()) as srv:
        assert C.main(_args(srv.base_url, "--methods", "base,gp-belief", "--checkpoint", str(ck))) == 0
        resumed = json.loads(capsys.readouterr().out)
        assert srv.requests == []
    assert resumed["methods"]["gp-belief"]["calibration"] == c
    assert calls > 0
    # the rows and the instances (rebuilt from the seed) are all it takes
    assert calibration(gp, C.make_instances("kv", n=6, instances=4, seed=args.seed), "gp-belief") == c


def test_cli_plot_draws_the_reliability_diagram(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    importlib.import_module("matplotlib")
    png = tmp_path / "acc.png"
    with FakeOpenAIServer(default=kv_model()) as srv:
        assert C.main(_args(srv.base_url, "--methods", "base,gp-belief", "--plot", str(png))) == 0
    capsys.readouterr()
    assert (tmp_path / "acc-reliability.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
