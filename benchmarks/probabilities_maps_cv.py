"""Which recalibration map, judged on the calibration split only: query-aware maps against
Platt, by leave-one-query-out cross-validation on labelled traces (no model call).

Issue 26's floor asks, on held-out queries, for the top pick's mean probability to be
within 0.05 of its accuracy. After the Platt map it is not (docs/probabilities.md, "Real
models, held out"): on questions with no relevant candidate the model answers wrongly but
consistently, the passage holding that answer is credited prompt after prompt, and one
map of a document's own log-odds cannot tell such a question from an answered one. This
script asks whether a map that also sees the query helps, using the calibration split's
labelled traces (``evaluate --traces``) and nothing else: every figure is for queries
left out of the fit (leave one query out), so the test split can be scored once, with the
form chosen here.

Forms (each monotone in a document's own log-odds, so a query's ranking is unchanged):

- ``identity``, ``platt``, ``isotonic``: the package's maps (:mod:`gold_panning_integrations.calibration.recalibration`);
- ``platt-ridgeR``: Platt with a prior of ``R`` pseudo-pairs' weight on ``(log a, b)``
  toward the identity map (``fit_platt``'s ridge; the package uses 1);
- ``platt-pooled``: Platt fitted on this model's other queries and every other model's
  traces (given two models or more): the same map, more data, another reader's mistakes;
- ``qplatt-F``: ``sigmoid(a * lo + b + c * F)`` with ``F`` a feature every document of
  the query shares (ridge 1 on ``(log a, b, c)``, as ``fit_platt``);
- ``twopart-F``: ``P(the query has a relevant candidate | F) * P(document relevant | it
  has one, lo)``: a logistic regression on ``F`` over queries times a Platt map fitted on
  the queries that have a relevant candidate; ``twopart-const`` uses the split's share
  (Jeffreys-smoothed) instead of ``F``.

Features ``F``: ``pnone`` (log-odds of the raw ``prod(1 - p)``), ``top`` and ``second``
(the query's highest and second-highest raw log-odds), ``margin`` (their difference),
``mass`` (log of the summed raw probabilities), and two read from the trace's prompts:
``empty`` (share of prompts whose reply credited no passage) and ``topshare`` (share of
prompts that credited the query's top document).

Printed per model: each feature's AUROC for "no relevant candidate" on the split (can it
see those queries at all?) with a 95% bootstrap interval over queries; per form the
held-out ECE (10 equal-width bins), equal-count ECE, Brier, log loss, the difference in
log loss from Platt with its 95% bootstrap interval (over queries, paired), and the top
pick's mean probability / accuracy / gap with its interval, on all queries and on those
with and without a relevant candidate. Then the rule the choice follows (a form replaces
Platt only if its log loss is lower on every model and the pooled difference's interval
excludes 0) and its outcome, and how many test queries a gap of 0.05 would need to be
measurable.

    python -m benchmarks.probabilities_maps_cv qwen=traces-qwen-cal.jsonl smol=traces-smol-cal.jsonl
"""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import minimize

from gold_panning_integrations.calibration.metrics import auroc, summarize
from gold_panning_integrations.calibration.recalibration import fit_isotonic, fit_platt
from gold_panning_integrations.engine.beliefs import logit, sigmoid

_CLIP = 1e-6


@dataclass(frozen=True)
class Query:
    """One labelled trace: raw log-odds and labels, shape ``(n,)``, and its prompt features."""

    lo: NDArray[np.float64]
    y: NDArray[np.float64]
    prompt_features: dict[str, float] = field(default_factory=dict)

    @property
    def has_relevant(self) -> bool:
        return bool(self.y.any())


Map = Callable[[Query], NDArray[np.float64]]
Fit = Callable[[Sequence[Query]], Map]


def read_queries(path: Path) -> list[Query]:
    """The labelled traces of ``path`` (``evaluate --traces``), their raw posteriors."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        t = json.loads(line)
        if t.get("relevant") is None or not t["n"]:
            continue
        p = np.clip(
            np.asarray(t.get("raw_posteriors") or t["posteriors"], dtype=np.float64), _CLIP, 1 - _CLIP
        )
        y = np.zeros(int(t["n"]))
        y[list(t["relevant"])] = 1.0
        prompts = [q for r in t["rounds"] for q in r["prompts"] if not q.get("failed")]
        lo = logit(p)
        top = int(np.argmax(lo))
        n_prompts = max(len(prompts), 1)
        features = {
            "empty": sum(1 for q in prompts if not q["cited"]) / n_prompts,
            "topshare": sum(1 for q in prompts if top in q["cited"]) / n_prompts,
        }
        out.append(Query(lo, y, features))
    return out


def feature(q: Query, name: str) -> float:
    """Query-level feature ``name`` (see the module doc)."""
    if name in q.prompt_features:
        return q.prompt_features[name]
    p = sigmoid(q.lo)
    s = np.sort(q.lo)[::-1]
    if name == "pnone":
        return float(logit(np.clip(np.prod(1.0 - p), _CLIP, 1 - _CLIP)))
    if name == "top":
        return float(s[0])
    if name == "second":
        return float(s[1])
    if name == "margin":
        return float(s[0] - s[1])
    if name == "mass":
        return float(np.log(p.sum()))
    raise KeyError(name)


FEATURES = ("pnone", "top", "second", "margin", "mass", "empty", "topshare")

EXPECTED_SIGN = {
    "pnone": 1.0,
    "top": -1.0,
    "second": -1.0,
    "margin": -1.0,
    "mass": -1.0,
    "empty": 1.0,
    "topshare": -1.0,
}
"""The direction in which each feature should point to a query with no relevant candidate
(a higher raw ``p_none``, more empty replies; a lower top, margin, mass, top share)."""


def _stack(qs: Sequence[Query]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    return np.concatenate([q.lo for q in qs]), np.concatenate([q.y for q in qs])


def _logistic(x: NDArray[np.float64], y: NDArray[np.float64], *, positive_first: bool) -> NDArray[np.float64]:
    """Ridge-1 logistic regression ``sigmoid(x @ theta)``; with ``positive_first`` the
    first coefficient is ``exp(theta[0])`` (a positive slope: a monotone map)."""

    def loss(th: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        w = th.copy()
        if positive_first:
            w[0] = np.exp(th[0])
        z = x @ w
        r = sigmoid(z) - y
        g = x.T @ r
        if positive_first:
            g[0] *= w[0]
        return float(np.sum(np.logaddexp(0.0, z) - y * z)) + 0.5 * float(th @ th), g + th

    return minimize(loss, np.zeros(x.shape[1]), jac=True, method="L-BFGS-B").x


def fit_qplatt(qs: Sequence[Query], name: str) -> Map:
    lo, y = _stack(qs)
    f = np.concatenate([np.full(q.lo.size, feature(q, name)) for q in qs])
    th = _logistic(np.column_stack([lo, np.ones_like(lo), f]), y, positive_first=True)
    a = float(np.exp(th[0]))
    return lambda q: sigmoid(a * q.lo + th[1] + th[2] * feature(q, name))


def _answered_platt(qs: Sequence[Query]) -> Callable[[NDArray[np.float64]], NDArray[np.float64]]:
    lo, y = _stack([q for q in qs if q.has_relevant])
    return fit_platt(lo, y).probabilities


def fit_twopart(qs: Sequence[Query], name: str | None) -> Map:
    inner = _answered_platt(qs)
    a = np.array([float(q.has_relevant) for q in qs])
    if name is None:
        share = (a.sum() + 0.5) / (a.size + 1.0)
        return lambda q: share * inner(q.lo)
    f = np.array([feature(q, name) for q in qs])
    th = _logistic(np.column_stack([np.ones_like(f), f]), a, positive_first=False)
    return lambda q: sigmoid(th[0] + th[1] * feature(q, name)) * inner(q.lo)


def _plain(kind: str, ridge: float = 1.0) -> Fit:
    def fit(qs: Sequence[Query]) -> Map:
        lo, y = _stack(qs)
        m = fit_platt(lo, y, ridge=ridge) if kind == "platt" else fit_isotonic(lo, y)
        return lambda q: m.probabilities(q.lo)

    return fit


FORMS: dict[str, Fit] = {
    "identity": lambda qs: lambda q: sigmoid(q.lo),
    "platt": _plain("platt"),
    "isotonic": _plain("isotonic"),
    "platt-pooled": _plain("platt"),
    "platt-ridge0.1": _plain("platt", ridge=0.1),
    "platt-ridge10": _plain("platt", ridge=10.0),
    "twopart-const": lambda qs: fit_twopart(qs, None),
    **{f"qplatt-{f}": functools.partial(fit_qplatt, name=f) for f in FEATURES},
    **{f"twopart-{f}": functools.partial(fit_twopart, name=f) for f in FEATURES},
}


def leave_one_out(
    qs: Sequence[Query], form: str, *, others: Sequence[Query] = ()
) -> list[NDArray[np.float64]]:
    """Each query's probabilities under ``form`` fitted on every other query (and, for a
    ``-pooled`` form, on ``others``: the other models' traces)."""
    out = []
    pooled = list(others) if form.endswith("-pooled") else []
    for i in range(len(qs)):
        fn = FORMS[form]([q for j, q in enumerate(qs) if j != i] + pooled)
        out.append(np.clip(fn(qs[i]), _CLIP, 1 - _CLIP))
    return out


def _log_loss(p: NDArray[np.float64], y: NDArray[np.float64]) -> float:
    return float(np.sum(-(y * np.log(p) + (1 - y) * np.log(1 - p))))


def _interval(values: Sequence[float]) -> tuple[float, float]:
    lo, hi = np.percentile(np.asarray(values), [2.5, 97.5])
    return float(lo), float(hi)


def _top(
    probs: Sequence[NDArray[np.float64]], qs: Sequence[Query], pick: Sequence[int]
) -> tuple[float, float]:
    tops = [float(probs[i].max()) for i in pick]
    right = [float(qs[i].y[int(np.argmax(probs[i]))]) for i in pick]
    return float(np.mean(tops)), float(np.mean(right))


def report(
    name: str, qs: Sequence[Query], *, others: Sequence[Query] = (), draws: int, seed: int
) -> dict[str, NDArray[np.float64]]:
    """Print one model's tables (``others``: the other models' queries, for
    ``platt-pooled``); returns per-query log loss and pairs of each form."""
    n = len(qs)
    none = np.array([not q.has_relevant for q in qs])
    rng = np.random.default_rng(seed)
    boots = [rng.integers(0, n, n) for _ in range(draws)]
    print(f"\n{name}: {n} labelled calibration queries, {int(none.sum())} with no relevant candidate")
    print(
        "feature     AUROC for 'none relevant' [95% CI], in the expected direction (0.5: blind; below: reversed)"
    )
    for f in FEATURES:
        x = EXPECTED_SIGN[f] * np.array([feature(q, f) for q in qs])
        vals = [v for b in boots if (v := auroc(x[b], none[b])) is not None]
        lo, hi = _interval(vals)
        print(
            f"{f:10s}  {auroc(x, none):.2f} [{lo:.2f}, {hi:.2f}]{'  (lower is more likely none)' if EXPECTED_SIGN[f] < 0 else ''}"
        )
    pairs = np.array([q.lo.size for q in qs], dtype=np.float64)
    losses: dict[str, NDArray[np.float64]] = {}
    rows = []
    for form in FORMS:
        if form.endswith("-pooled") and not others:
            continue
        probs = leave_one_out(qs, form, others=others)
        s = summarize([(p, q.y) for p, q in zip(probs, qs)])
        losses[form] = np.array([_log_loss(p, q.y) for p, q in zip(probs, qs)])
        gaps = np.array([p.max() - q.y[int(np.argmax(p))] for p, q in zip(probs, qs)])
        g_lo, g_hi = _interval([gaps[b].mean() for b in boots])
        t_none, _ = _top(probs, qs, np.flatnonzero(none).tolist())
        t_ans, r_ans = _top(probs, qs, np.flatnonzero(~none).tolist())
        rows.append((form, s, g_lo, g_hi, t_none, t_ans, r_ans))
    base = losses["platt"]
    print(
        "form                ECE   eq-n  Brier  logloss  vs platt [95% CI]          "
        "top p / right (gap) [95% CI]        top p: none | answered p / right"
    )
    for form, s, g_lo, g_hi, t_none, t_ans, r_ans in rows:
        d = losses[form] - base
        d_lo, d_hi = _interval([d[b].sum() / pairs[b].sum() for b in boots])
        print(
            f"{form:17s} {s.ece:.4f} {s.adaptive_ece:.4f} {s.brier:.4f} {losses[form].sum() / pairs.sum():.4f}  "
            f"{d.sum() / pairs.sum():+.4f} [{d_lo:+.4f}, {d_hi:+.4f}]  "
            f"{s.top_mean:.3f} / {s.top_accuracy:.3f} ({s.top_gap:+.3f}) [{g_lo:+.2f}, {g_hi:+.2f}]   "
            f"{t_none:.3f} | {t_ans:.3f} / {r_ans:.3f}"
        )
    sd = float(np.std([p.max() - q.y[int(np.argmax(p))] for p, q in zip(leave_one_out(qs, "platt"), qs)]))
    need = int(np.ceil((1.645 * sd / 0.05) ** 2))
    print(
        f"top-pick gap's spread per query after platt: sd {sd:.3f}; a measured gap of 0 has a one-sided 95% "
        f"bound of +0.05 only from {need} test queries ({len(qs)} here: +-{1.96 * sd / np.sqrt(n):.2f})"
    )
    return {k: np.column_stack([v, pairs]) for k, v in losses.items()}


def choose(per_model: Sequence[dict[str, NDArray[np.float64]]], *, draws: int, seed: int) -> str:
    """The rule: a form replaces Platt only if its held-out log loss is lower on every
    model and the pooled per-pair difference's 95% interval (queries resampled within each
    model) lies below 0. Prints each candidate's pooled difference."""
    rng = np.random.default_rng(seed)
    sizes = [len(m["platt"]) for m in per_model]
    boots = [[rng.integers(0, s, s) for s in sizes] for _ in range(draws)]
    print(
        "\npooled over the models: log loss per pair minus platt's [95% CI], and whether lower on every model"
    )
    best, best_d = "platt", 0.0
    for form in FORMS:
        if form == "platt" or not all(form in m for m in per_model):
            continue
        diffs = [m[form][:, 0] - m["platt"][:, 0] for m in per_model]
        pairs = [m["platt"][:, 1] for m in per_model]
        total = sum(d.sum() for d in diffs) / sum(p.sum() for p in pairs)
        vals = [
            sum(d[b].sum() for d, b in zip(diffs, bs)) / sum(p[b].sum() for p, b in zip(pairs, bs))
            for bs in boots
        ]
        lo, hi = _interval(vals)
        every = all(d.sum() < 0 for d in diffs)
        print(
            f"{form:17s} {total:+.4f} [{lo:+.4f}, {hi:+.4f}]  lower on every model: {'yes' if every else 'no'}"
        )
        if every and hi < 0 and total < best_d:
            best, best_d = form, total
    print(f"chosen: {best}" + (" (no form beats it by the rule)" if best == "platt" else ""))
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="+", metavar="NAME=TRACES", help="a model's labelled calibration traces")
    ap.add_argument("--draws", type=int, default=2000, help="bootstrap draws (default 2000)")
    ap.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    args = ap.parse_args()
    models = {name: read_queries(Path(path)) for name, _, path in (s.partition("=") for s in args.traces)}
    per_model = []
    for name, qs in models.items():
        others = [q for other, oq in models.items() if other != name for q in oq]
        per_model.append(report(name, qs, others=others, draws=args.draws, seed=args.seed))
    choose(per_model, draws=args.draws, seed=args.seed)


if __name__ == "__main__":
    main()
