"""The ``latency`` panel of ``python -m benchmarks sim``: F1 against sequential depth and
against calls, when each round sends ``B`` prompts together.

Latency is set by the rounds that run one after another (the *depth*), cost by the
prompts sent (the *calls*). Per bundled profile (``N = 100``, ``k = 1``, the library's
defaults with its ``base-rate`` prior) and per simulated reader (``independent``: the
paper's observation model; ``repeats``: a reader whose mistakes repeat, see
:data:`REPEATS`), the panel runs:

* GP-Belief with ``B`` in :data:`BS` prompts per round (the oracle-placement bound
  with one prompt per round beside it);
* PSC with 8 prompts at once (depth 1: one call of latency);
* with a retriever whose order carries information (the needle drawn from the library's
  rank prior, ``top10_recall = 0.5``): GP-Belief with all its prompts in one round (depth
  1) with the rank prior over the retriever's order and without it, and PSC with 8
  prompts at once over the same needles.

Every setting of one (profile, reader) pair shares a seed, so the needles and the
reader's mistakes are the same across settings (common random numbers).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from gold_panning_integrations.engine.config import PanningConfig
from gold_panning_integrations.engine.priors import rank_prior_probs
from gold_panning_integrations.engine.simulator import Mistakes

__all__ = [
    "BS",
    "DEPTH",
    "LATENCY_N",
    "ONE_ROUND_BS",
    "PSC_PROMPTS",
    "READERS",
    "REPEATS",
    "latency_jobs",
    "latency_panel",
    "latency_tables",
]

LATENCY_N = 100
"""Documents per trial."""
BS: tuple[int, ...] = (1, 2, 3, 4)
"""Prompts per round of the GP-Belief curves."""
DEPTH = 4
"""Rounds of the ``B > 1`` curves (one prompt per round runs the bench's ``rounds``)."""
PSC_PROMPTS = 8
"""PSC's prompts, all sent at once."""
ONE_ROUND_BS: tuple[int, ...] = (4, 6, 8)
"""Prompts of GP-Belief with all its prompts in one round, over an informative retriever."""
REPEATS = Mistakes(false_leads=1.5, blind_rate=0.35)
"""The ``repeats`` reader: on average 1.5 irrelevant documents per question it reads as
relevant whatever their position, and a relevant document it cannot recognise with
probability 0.35 (close to what labelled traces measured for the embedded model over NQ)."""
READERS: dict[str, Mistakes | None] = {"independent": None, "repeats": REPEATS}
"""Simulated readers of the panel."""
TOP10_RECALL = 0.5
"""The informative retriever: the needle's rank follows the rank prior at this recall."""


def latency_jobs(
    ss_panel: np.random.SeedSequence,
    profiles: dict[str, Any],
    *,
    trials: int,
    base_cfg: PanningConfig | None,
    make_job: Any,
) -> list[Any]:
    """The panel's simulator jobs, built with ``make_job(**fields)`` (the bench's job type).

    One prompt per round runs the bench's ``rounds``, more run :data:`DEPTH` rounds.
    Keys are ``profile|reader|method|B``; ``method`` is ``gp``, ``psc``, ``gp-rank``
    (one round, rank prior over an informative retriever), ``gp-flat`` (one round, flat
    prior, same retriever) or ``psc-retriever``.
    """
    base = base_cfg or PanningConfig()
    prior = rank_prior_probs(LATENCY_N, k=1, top10_recall=TOP10_RECALL)
    needle = prior / prior.sum()
    jobs: list[Any] = []
    pairs = [(name, reader) for name in profiles for reader in READERS]
    for (name, reader), ss in zip(pairs, ss_panel.spawn(len(pairs))):
        p = profiles[name]
        common = {
            "tpr": p.tpr_array,
            "fpr": p.fpr_array,
            "n": LATENCY_N,
            "k": 1,
            "trials": trials,
            "seed": ss,
            "mistakes": READERS[reader],
            "prior": "base-rate",
        }

        def job(
            method: str,
            b: int,
            policies: tuple[str, ...],
            depth: int | None,
            *,
            _key: str = f"{name}|{reader}",
            _common: dict[str, Any] = common,
            **extra: Any,
        ) -> Any:
            cfg = replace(base, prompts_per_round=b)
            return make_job(
                panel="latency",
                key=f"{_key}|{method}|{b}",
                policies=policies,
                config=cfg,
                rounds=depth,
                **_common,
                **extra,
            )

        for b in BS:
            jobs.append(
                job("gp", b, ("belief", "oracle") if b == 1 else ("belief",), None if b == 1 else DEPTH)
            )
        jobs.append(job("psc", PSC_PROMPTS, ("random",), 1))
        for b in ONE_ROUND_BS:
            jobs.append(job("gp-rank", b, ("belief",), 1, prior_probs=prior, needle_probs=needle))
        jobs.append(job("gp-flat", PSC_PROMPTS, ("belief",), 1, needle_probs=needle))
        jobs.append(job("psc-retriever", PSC_PROMPTS, ("random",), 1, needle_probs=needle))
    return jobs


def latency_panel(settings: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The ``latency`` panel from its pooled settings (``key -> {policies, trials}``).

    Returns:
        ``{"latency": {"n", "k", "readers", "retriever", "settings": [...]}}``; a setting
        holds ``profile``, ``reader``, ``method`` (``gp``, ``oracle``, ``psc``,
        ``gp-rank``, ``gp-flat``, ``psc-retriever``), ``prompts_per_round``, and per depth
        ``f1``, ``ci95`` and ``calls``.
    """
    rows: list[dict[str, Any]] = []
    for key, s in settings.items():
        prof, reader, method, b = key.split("|")
        for pol, curve in s["policies"].items():
            name = "oracle" if pol == "oracle" else method
            rows.append(
                {
                    "profile": prof,
                    "reader": reader,
                    "method": name,
                    "prompts_per_round": int(b),
                    "trials": s["trials"],
                    "f1": list(curve["f1"]),
                    "ci95": list(curve["ci95"]),
                    "calls": [int(b) * (t + 1) for t in range(len(curve["f1"]))],
                }
            )
    return {
        "latency": {
            "n": LATENCY_N,
            "k": 1,
            "prior": "base-rate",
            "readers": {
                name: None if m is None else {"false_leads": m.false_leads, "blind_rate": m.blind_rate}
                for name, m in READERS.items()
            },
            "retriever": f"needle rank ~ rank_prior_probs({LATENCY_N}, k=1, top10_recall={TOP10_RECALL})",
            "settings": rows,
        }
    }


_METHOD_LABELS = {
    "gp": "GP-Belief",
    "oracle": "oracle placement",
    "psc": "PSC",
    "gp-rank": "GP-Belief, one round, rank prior",
    "gp-flat": "GP-Belief, one round, flat prior",
    "psc-retriever": "PSC",
}


def _at(row: dict[str, Any], depth: int) -> str:
    f1 = row["f1"]
    if depth > len(f1):
        return "-"
    return f"{f1[depth - 1]:.3f} ({row['calls'][depth - 1]})"


def latency_tables(results: dict[str, Any]) -> list[tuple[str, list[str], list[list[Any]]]]:
    """(title, headers, rows): one table per profile and reader, F1 (calls) by depth."""
    lat = results["latency"]
    depths: Sequence[int] = (1, 2, 3, 4, results.get("rounds", 8))
    out: list[tuple[str, list[str], list[list[Any]]]] = []
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in lat["settings"]:
        groups.setdefault((row["profile"], row["reader"]), []).append(row)
    for (prof, reader), rows in groups.items():
        table = []
        for row in sorted(
            rows, key=lambda r: (list(_METHOD_LABELS).index(r["method"]), r["prompts_per_round"])
        ):
            retriever = "informative" if row["method"] in ("gp-rank", "gp-flat", "psc-retriever") else "none"
            table.append(
                [_METHOD_LABELS[row["method"]], row["prompts_per_round"], retriever]
                + [_at(row, d) for d in dict.fromkeys(depths)]
            )
        out.append(
            (
                (
                    f"Latency: F1 (calls) by sequential depth, profile {prof}, {reader} reader "
                    f"(N={lat['n']}, k=1, {rows[0]['trials']} trials)"
                ),
                ["method", "prompts per round", "retriever"] + [f"depth {d}" for d in dict.fromkeys(depths)],
                table,
            )
        )
    return out


def plot_latency(results: dict[str, Any], plt: Any, save: Any) -> None:
    """One figure, ``latency``: per profile (a row), F1 against depth and against calls
    of GP-Belief at each ``B``, the oracle and PSC, for both readers."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in results["latency"]["settings"]:
        groups.setdefault(row["profile"], []).append(row)
    fig, axes = plt.subplots(len(groups), 2, figsize=(11, 3.6 * len(groups)), squeeze=False)
    for (prof, rows), (ax_depth, ax_calls) in zip(groups.items(), axes):
        for row in rows:
            if row["method"] not in ("gp", "oracle", "psc"):
                continue
            style = "-" if row["reader"] == "independent" else "--"
            label = f"{_METHOD_LABELS[row['method']]} B={row['prompts_per_round']} ({row['reader']})"
            depth = list(range(1, len(row["f1"]) + 1))
            marker = "o" if len(depth) == 1 else None
            ax_depth.plot(depth, row["f1"], style, marker=marker, label=label)
            ax_calls.plot(row["calls"], row["f1"], style, marker=marker, label=label)
        ax_depth.set_title(f"{prof}: F1 by sequential depth (latency)", fontsize=9)
        ax_calls.set_title(f"{prof}: F1 by calls (cost)", fontsize=9)
        ax_depth.set_ylabel("F1")
        ax_calls.legend(fontsize=5)
    save(fig, "latency")
