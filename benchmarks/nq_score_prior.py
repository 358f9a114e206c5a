"""``gold-panning evaluate`` on a BEIR folder with the first stage's scores as the panning
prior (``retriever_prior="score"``) in place of the rank prior, everything else unchanged.

Since 0.6 ``evaluate`` passes a run file's scores to the panning methods and the default
prior (``"auto"``) reads them; this lab script, written when it did not, forces
``retriever_prior="score"`` (whatever the number of candidates) and takes extra engine
options. It runs ``evaluate`` with the engine's panner told to use the scores (a softmax over the candidates' scores divided by their standard deviation), so
``gp-defaults`` reads as "the defaults with the score prior", with the same seeds, placements
rules and reader. The scores come from ``--run`` (its top ``--n`` per query, best first, as
``evaluate`` takes them) and are matched to each instance by its question text, from the
folder's ``queries.jsonl``.

    python -m benchmarks.nq_score_prior evaluate --task beir --data nq-strata \\
        --run nq-strata/run.trec --split test --instances 51 --seed 6 --n 10 --mode answer \\
        --reader embedded --model-path "$path" --methods base,gp-defaults --out out-score

``--engine-option NAME=VALUE`` (repeatable, taken out before ``evaluate`` sees the
arguments) sets one more engine option for the panning methods, e.g. ``self_citing=0.5``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gold_panning_integrations.panning as panner_module
from gold_panning_integrations.cli import main as cli_main
from gold_panning_integrations.engine.priors import DEFAULT_SCORE_TEMPERATURE
from gold_panning_integrations.ir.collection import read_run
from gold_panning_integrations.panning import GoldPanner


def _flag(argv: Sequence[str], name: str, default: str | None = None) -> str:
    """The value of ``--name VALUE`` or ``--name=VALUE`` in ``argv``."""
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    if default is None:
        raise SystemExit(f"nq_score_prior: pass {name} (the BEIR folder and its run file)")
    return default


def scores_by_question(data: Path, run_path: Path, depth: int) -> dict[str, list[float]]:
    """Question text -> the first stage's scores of its top ``depth`` candidates, best first."""
    texts = {}
    for line in (data / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        texts[str(row["_id"])] = str(row["text"])
    scores: dict[str, dict[str, float]] = {}
    for line in run_path.read_text(encoding="utf-8").splitlines():
        q, _, doc, _, score, _ = line.split()
        scores.setdefault(q, {})[doc] = float(score)
    run = read_run(run_path, depth=depth)
    return {texts[q]: [scores[q][d] for d in docs] for q, docs in run.candidates.items() if q in texts}


def engine_options(args: list[str]) -> dict[str, float]:
    """The ``--engine-option NAME=VALUE`` pairs of ``args`` (removed from it), values as numbers."""
    found: dict[str, float] = {}
    while "--engine-option" in args:
        i = args.index("--engine-option")
        if i + 1 >= len(args) or "=" not in args[i + 1]:
            raise SystemExit("nq_score_prior: --engine-option takes NAME=VALUE, e.g. self_citing=0.5")
        name, value = args[i + 1].split("=", 1)
        found[name] = float(value)
        del args[i : i + 2]
    return found


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    extra = engine_options(args)
    by_question = scores_by_question(
        Path(_flag(args, "--data")), Path(_flag(args, "--run")), int(_flag(args, "--n", "20"))
    )

    class ScorePriorPanner(GoldPanner):
        def __init__(self, *a: Any, **kw: Any) -> None:
            # BM25 over NQ passages: the retriever DEFAULT_SCORE_TEMPERATURE was fitted for, so
            # the score prior is read at that fitted temperature (not bounded) unless given.
            fitted = {"prior_temperature": DEFAULT_SCORE_TEMPERATURE}
            super().__init__(*a, **{**fitted, **kw, **extra, "retriever_prior": "score"})

        def run(self, question: str, documents: Sequence[Any], **options: Any) -> Any:
            scores = by_question[question]
            if len(scores) != len(documents):
                raise SystemExit(
                    f"nq_score_prior: {len(scores)} scores for {len(documents)} documents of {question!r}"
                )
            options.pop("prior_probs", None)
            return super().run(question, documents, **{**options, "scores": scores})

    # evaluate imports the panner class when it builds each method: swap it for this run only
    panner_module.__dict__["GoldPanner"] = ScorePriorPanner
    try:
        return int(cli_main(args) or 0)
    finally:
        panner_module.__dict__["GoldPanner"] = GoldPanner


if __name__ == "__main__":
    raise SystemExit(main())
