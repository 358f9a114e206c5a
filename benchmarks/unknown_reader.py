"""A reader the profile does not describe (issue 48; docs/probabilities.md): scripted readers
a person can reason about, panned with the generic profile and library defaults, then the
profile learned from their traffic without labels. No model call.

Readers: one that cites the relevant passage whenever it is shown (``perfect``), and ones
that cite whatever is shown first in a share ``q`` of their replies and otherwise read as
the perfect one (``first 30%`` ...); ``silent`` cites nothing. Each world is 60 questions
over 10 passages: nothing relevant, or one relevant passage at a rank drawn uniformly.
``--learn`` also learns a profile from 200 questions of each reader's traffic with the
labels removed (:func:`~gold_panning_integrations.calibration.unlabelled.learn_unlabelled`),
and with them (:func:`~gold_panning_integrations.calibration.traces.learn_profile`), and
scores both on 200 new questions of the same world (a question has each passage relevant
with the default rank map's probability, or with BM25's on NQ under ``--learn-world
bm25``: a world the learner does not start from), beside the simulator's readers with the
SmolLM2-135M and Qwen2.5-Coder-0.5B NQ profiles' rates.

    python -m benchmarks.unknown_reader            # the tables, a few minutes
    python -m benchmarks.unknown_reader --learn    # and the learned profiles, a minute more
    python -m benchmarks.unknown_reader --learn-only --learn-world bm25
    python -m benchmarks.unknown_reader --before   # the update before issue 48 (content_free=0)
    python -m benchmarks.unknown_reader --overhead # engine time per query, with and without the check
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gold_panning_integrations import DetectorProfile, GoldPanner, Reading
from gold_panning_integrations.calibration.metrics import ece
from gold_panning_integrations.calibration.traces import learn_profile, trace_record
from gold_panning_integrations.calibration.unlabelled import learn_unlabelled
from gold_panning_integrations.engine.priors import DEFAULT_RANK_MAP, RankMap
from gold_panning_integrations.engine.simulator import SimulatedReader

PASSAGES = (
    [f"Passage number {i} about subject {i}." for i in range(10)],
    [f"A paragraph on topic {chr(65 + i)} with detail {i * 7}." for i in range(10)],
)
"""Two sets of passage texts: the engine draws its placements from the question and the
passages, so two sets are two samples of placements."""

READERS = (("perfect", 0.0), ("first 30%", 0.3), ("first 60%", 0.6), ("first 90%", 0.9))


class Scripted:
    """Cites what is shown first in a share ``first`` of its replies (drawn from ``rng``),
    otherwise every relevant passage shown; ``relevant`` empty: a silent reply then."""

    def __init__(self, relevant: set[str], first: float, rng: np.random.Generator) -> None:
        self.relevant, self.first, self.rng = relevant, first, rng

    def read(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        if self.first and self.rng.random() < self.first:
            return Reading(cited=(0,))
        return Reading(cited=tuple(i for i, d in enumerate(documents) if d in self.relevant))

    async def aread(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Reading:
        return self.read(question, documents, labels=labels)


@dataclass(frozen=True)
class Row:
    """One reader's line: with nothing relevant, the mean top posterior and ``p_none``;
    with one relevant, how often it came first and the mean top posterior."""

    reader: str
    none_top: float
    none_p_none: float
    right: int
    one_top: float
    questions: int


def scripted_row(
    name: str,
    first: float,
    passages: Sequence[str],
    options: dict[str, Any],
    q: int = 60,
    *,
    world: str = "uniform",
) -> Row:
    """The issue's line for one reader over ``q`` questions per world: with one relevant
    passage at a rank drawn uniformly (``world="uniform"``), or as the default rank map
    would draw the one relevant passage (``"prior"``: rank r in proportion to its odds)."""
    none_top, none_pn, right, one_top = [], [], 0, []
    for i in range(q):
        rng = np.random.default_rng(1000 + i)
        r0 = GoldPanner(Scripted(set(), first, rng), "lost-in-the-middle", **options).run(
            f"question {i}?", passages
        )
        none_top.append(float(r0.posteriors.max()))
        none_pn.append(float(r0.p_none))
        if world == "uniform":
            g = int(rng.integers(len(passages)))
        else:
            odds = DEFAULT_RANK_MAP.probabilities(len(passages))
            odds = odds / (1.0 - odds)
            g = int(rng.choice(len(passages), p=odds / odds.sum()))
        r1 = GoldPanner(Scripted({passages[g]}, first, rng), "lost-in-the-middle", **options).run(
            f"question {i}?", passages
        )
        right += int(r1.ranking[0] == g)
        one_top.append(float(r1.posteriors.max()))
    return Row(name, float(np.mean(none_top)), float(np.mean(none_pn)), right, float(np.mean(one_top)), q)


def silent_p_none(n: int, options: dict[str, Any]) -> float:
    """``p_none`` of a reader that cites nothing, over ``n`` candidates (mean of 20 questions)."""
    docs = [f"Passage number {i} about subject {i}." for i in range(n)]
    out = [
        GoldPanner(Scripted(set(), 0.0, np.random.default_rng(i)), "lost-in-the-middle", **options)
        .run(f"question {i}?", docs)
        .p_none
        for i in range(20)
    ]
    return float(np.mean(out))


# ------------------------------------------------------------------------------ learning
ReaderFactory = Callable[[set[str], np.random.Generator], Any]


def traffic(
    make: ReaderFactory,
    profile: Any,
    *,
    queries: int,
    seed: int,
    n: int = 10,
    world: RankMap = DEFAULT_RANK_MAP,
) -> tuple[list[dict[str, Any]], list[tuple[Any, np.ndarray]]]:
    """``queries`` questions of a world where each passage is relevant with the probability
    of the rank map ``world`` (the default one unless told), panned with ``profile``: trace
    records (labelled) and ``(result, relevant mask)`` pairs."""
    docs = PASSAGES[0][:n]
    p = world.probabilities(n)
    records, out = [], []
    for i in range(queries):
        rng = np.random.default_rng(seed + i)
        mask = rng.random(n) < p
        rel = {d for d, m in zip(docs, mask) if m}
        res = GoldPanner(make(rel, rng), profile).run(f"question {seed + i}?", docs)
        records.append(trace_record(res, relevant=[int(j) for j in np.flatnonzero(mask)]))
        out.append((res, mask))
    return records, out


def auroc(score: np.ndarray, positive: np.ndarray) -> float:
    """Mann-Whitney AUROC of ``score`` for ``positive`` (ties count half)."""
    pos, neg = score[positive], score[~positive]
    if not pos.size or not neg.size:
        return float("nan")
    return float(np.mean([(a > neg).mean() + 0.5 * (a == neg).mean() for a in pos]))


def scores(out: list[tuple[Any, np.ndarray]]) -> dict[str, float]:
    """Per-document ECE, ``p_none`` AUROC for "nothing relevant", and over the questions
    with something relevant, the mean top posterior and the share right first."""
    probs = np.concatenate([r.posteriors for r, _ in out])
    labels = np.concatenate([m for _, m in out]).astype(np.float64)
    p_none = np.array([r.p_none for r, _ in out])
    none = np.array([not m.any() for _, m in out])
    some = [(r, m) for r, m in out if m.any()]
    return {
        "ece": float(ece(probs, labels)),
        "p_none_auroc": auroc(p_none, none),
        "top": float(np.mean([r.posteriors.max() for r, _ in some])),
        "right": float(np.mean([m[r.ranking[0]] for r, m in some])),
    }


def learned_rows(
    queries: int = 200,
    world: RankMap = DEFAULT_RANK_MAP,
) -> list[tuple[str, dict[str, float], dict[str, float], dict[str, float], Any]]:
    """Per reader: scores with the generic profile, with the profile learned without
    labels, and with the one fitted with labels, each on ``queries`` new questions."""
    generic = DetectorProfile.bundled("lost-in-the-middle")

    def scripted(first: float) -> ReaderFactory:
        return lambda rel, rng: Scripted(rel, first, rng)

    def simulated(rates: DetectorProfile) -> ReaderFactory:
        return lambda rel, rng: SimulatedReader(rates, rel, rng=rng)

    makers = [(name, scripted(first)) for name, first in READERS]
    for name in ("smollm2-135m-nq-labelled", "qwen2.5-coder-0.5b-nq"):
        makers.append((f"simulated {name}", simulated(DetectorProfile.bundled(name))))
    rows = []
    for name, make in makers:
        records, before = traffic(make, generic, queries=queries, seed=10_000, world=world)
        unlabelled = [{k: v for k, v in r.items() if k != "relevant"} for r in records]
        fit = learn_unlabelled(unlabelled, generic)
        labelled = learn_profile(records, generic).profile
        _, after = traffic(make, fit.profile, queries=queries, seed=20_000, world=world)
        _, with_labels = traffic(make, labelled, queries=queries, seed=20_000, world=world)
        rows.append((name, scores(before), scores(after), scores(with_labels), fit))
    return rows


def overhead(queries: int = 200) -> tuple[float, float]:
    """Engine milliseconds per query (2 rounds of 3 prompts, 20 passages, a reader that cites
    one passage at once) with ``content_free=0`` and with the default check, measured in
    one run, batches interleaved (the machine's load falls on both alike)."""
    docs = [f"Passage number {i} about subject {i}." for i in range(20)]
    panners = [
        GoldPanner(
            Scripted({docs[3]}, 0.0, np.random.default_rng(0)), "lost-in-the-middle", content_free=0.0
        ),
        GoldPanner(Scripted({docs[3]}, 0.0, np.random.default_rng(0)), "lost-in-the-middle"),
    ]
    spent = [0.0, 0.0]
    for batch in range(10):
        for j, panner in enumerate(panners if batch % 2 == 0 else panners[::-1]):
            j = j if batch % 2 == 0 else 1 - j
            start = time.perf_counter()
            for i in range(queries // 10):
                panner.run(f"question {batch}-{i}?", docs)
            spent[j] += time.perf_counter() - start
    return 1000 * spent[0] / queries, 1000 * spent[1] / queries


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--learn", action="store_true", help="also learn profiles from 200 questions of traffic"
    )
    parser.add_argument(
        "--learn-world",
        choices=("default", "bm25"),
        default="default",
        help="with --learn: draw relevance by the default rank map or by BM25's on NQ (the bundled "
        "qwen2.5-coder-0.5b-nq profile's), which the learner does not start from",
    )
    parser.add_argument("--learn-only", action="store_true", help="--learn without the scripted table")
    parser.add_argument(
        "--before", action="store_true", help="the update without the reader's check (content_free=0)"
    )
    parser.add_argument(
        "--overhead", action="store_true", help="engine time per query with and without the check"
    )
    parser.add_argument(
        "--world",
        choices=("uniform", "prior"),
        default="uniform",
        help="where the one relevant passage sits: a uniform rank (default) or the rank map's draw",
    )
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    if args.overhead:
        off, on = overhead()
        print(
            f"engine time per query (2 x 3 prompts, 20 passages): {off:.2f} ms without the check, {on:.2f} ms with it"
        )
        return
    if args.learn_only:
        print_learned(args.learn_world)
        return
    options: dict[str, Any] = {"content_free": 0.0} if args.before else {}
    print(
        "| reader | nothing relevant: top posterior / p_none | one relevant: right first / mean top posterior |"
    )
    print("|---|---|---|")
    for name, first in (("silent", None), *READERS):
        rows = [scripted_row(name, first or 0.0, p, options, world=args.world) for p in PASSAGES]
        none = " - ".join(f"{r.none_top:.2f}" for r in rows), " - ".join(f"{r.none_p_none:.2f}" for r in rows)
        if first is None:
            print(f"| {name} | {none[0]} / {none[1]} | - |")
            continue
        one = " - ".join(str(r.right) for r in rows), " - ".join(f"{r.one_top:.2f}" for r in rows)
        print(f"| {name} | {none[0]} / {none[1]} | {one[0]} of 60 / {one[1]} |")
    print()
    sizes = (1, 2, 4, 8, 20)
    print(
        "silent reader, p_none by candidates: "
        + ", ".join(f"{n}: {silent_p_none(n, options):.3f}" for n in sizes)
    )
    if args.learn:
        print()
        print_learned(args.learn_world)


def print_learned(world: str) -> None:
    """The learned-profile table (:func:`learned_rows`) in the world named ``world``."""
    world_map = (
        DEFAULT_RANK_MAP
        if world == "default"
        else RankMap.from_dict(DetectorProfile.bundled("qwen2.5-coder-0.5b-nq").rank_map or {})
    )
    print(
        "| reader (200 questions learned, 200 new) | profile | per-document ECE | p_none AUROC | top posterior / right first |"
    )
    print("|---|---|---|---|---|")
    for name, before, after, labelled, fit in learned_rows(world=world_map):
        for label, s in (
            ("generic", before),
            ("learned, no labels", after),
            ("fitted with labels", labelled),
        ):
            print(
                f"| {name} | {label} | {s['ece']:.3f} | {s['p_none_auroc']:.3f} | {s['top']:.2f} / {s['right']:.2f} |"
            )
        print(f"|  | (learned: silent_rate {fit.silent_rate:.2f}, {fit.iterations} EM iterations) | | | |")


if __name__ == "__main__":
    main()
