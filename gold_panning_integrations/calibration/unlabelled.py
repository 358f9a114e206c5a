"""A reader's profile learned from its own traffic, without relevance labels (numpy only).

Each context position is an annotator whose rates (TPR, FPR) are unknown, and the
documents move between positions from prompt to prompt: as in Dawid and Skene's
estimation of annotators' error rates without a gold standard, the rates are identifiable
from the replies alone, by expectation-maximisation over the latent relevance.

* **E-step**: every trace is replayed through the engine's own update
  (:func:`~gold_panning_integrations.engine.rounds.observe_round`, batched over traces of
  one size, a round's replies weighed together as the panner does) with the current
  profile, from the prior the current rank map (or score map) gives it. Empty replies are
  read at each document's own position (``empty_prompts="by-position"``), the reader's
  likelihood as it generates them (the engine's default weighs them alike, for do-no-harm,
  which biases the rates if learned through it). Each document's four classes (relevant
  and read as such, a blind spot, a false lead, irrelevant) come from its evidence and its
  prior; each empty reply's probability of having been silent for its own sake weighs it
  out of the rates. The reader's check is off in the E-step (``content_free=0``): against
  rates that are being learned, a reply that follows the positions and a reader whose
  rates favour a position are not told apart (docs/probabilities.md), so the rates absorb
  the reader's position bias and the learned profile leaves ``content_free`` to its
  default.
* **M-step**: per grid position, the expected citations and sightings of documents read
  as relevant and as irrelevant over the replies that read them (Jeffreys-smoothed, with
  a light prior from the starting profile); the silent rate is the expected share of
  silent replies; ``false_leads`` and ``blind_rate`` the expected shares of their classes (with
  :data:`MIXTURE_PRIOR_WEIGHT` pseudo-documents at the start's values); the rank map (with
  :data:`RANK_MAP_PRIOR_QUERIES` pseudo-queries at the start's map) and, when every trace
  records scores, the score map, by logistic regression of the probabilities of relevance.

Without labels, a false lead (an irrelevant document the reader cites the way it cites an
answer) and a blind spot are told from relevance only through the prior: they are weakly
measured, and a reader whose mistakes repeat (docs/probabilities.md has the 0.5B model's
figures) keeps more confidence in them than a profile fitted with labels.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..engine.beliefs import logit
from ..engine.config import DEFAULT_BLIND_RATE, DEFAULT_FALSE_LEADS, PanningConfig
from ..engine.panner import _retriever_prior
from ..engine.positions import grid_positions as default_grid
from ..engine.priors import DEFAULT_RANK_MAP, RankMap, ScoreMap
from ..engine.rounds import BatchState, DecisionRates, observe_round, settle_round
from ..profiles import DetectorProfile
from ._fit import rate_counts
from .score_maps import fit_rank_map_on, fit_score_map_on

__all__ = [
    "MIN_UNLABELLED_QUERIES",
    "NotEnoughTracesError",
    "TrafficLearner",
    "UnlabelledFit",
    "learn_unlabelled",
]

MIN_UNLABELLED_QUERIES = 40
"""Traced queries below which :func:`learn_unlabelled` refuses to fit (docs/probabilities.md
has the measurement behind the number)."""

MIXTURE_PRIOR_WEIGHT = 2.0
"""Pseudo-documents at the engine's defaults behind the learned ``false_leads`` and
``blind_rate``."""

RANK_MAP_PRIOR_QUERIES = MIN_UNLABELLED_QUERIES
"""Pseudo-queries of 10 candidates at the starting rank map's probabilities behind the
learned rank map: without labels, how much relevance the candidates hold is told only
through the reader, and a reader that says little must leave the map near its start."""

PRIOR_STRENGTH = 1.0
"""Pseudo-sightings per grid position and class that the starting profile's rates add."""

_CLIP = (0.01, 0.99)


class NotEnoughTracesError(ValueError):
    """Too few traced queries to learn a profile without labels."""


@dataclass(frozen=True)
class UnlabelledFit:
    """Outcome of :func:`learn_unlabelled`.

    Attributes:
        profile: The learned profile.
        queries: Traced queries used.
        replies: Replies read (failed prompts left out).
        iterations: EM iterations run.
        converged: Whether the last iteration moved no rate by more than ``tol``.
        tpr_se: Standard error of each grid TPR, ``(K,)`` (from the expected sightings).
        fpr_se: Standard error of each grid FPR, ``(K,)``.
        relevant_sightings: Expected sightings of relevant documents per grid position, ``(K,)``.
        silent_rate: The learned share of replies silent whatever the prompt held.
        p_none: Mean probability, over the queries, that none of its candidates is relevant.
    """

    profile: DetectorProfile
    queries: int
    replies: int
    iterations: int
    converged: bool
    tpr_se: NDArray[np.float64] = field(repr=False)
    fpr_se: NDArray[np.float64] = field(repr=False)
    relevant_sightings: NDArray[np.float64] = field(repr=False)
    silent_rate: float
    p_none: float


@dataclass(frozen=True)
class _Prompt:
    docs: NDArray[np.intp]
    positions: NDArray[np.intp]
    span: int
    cited: NDArray[np.bool_]


@dataclass(frozen=True)
class _Query:
    n: int
    prompts: tuple[_Prompt, ...]
    scores: NDArray[np.float64] | None
    rounds: tuple[int, ...]  # the round of each prompt


def _queries(traces: Iterable[Mapping[str, Any]]) -> list[_Query]:
    out = []
    for t in traces:
        n = int(t["n"])
        prompts = []
        round_of = []
        for ri, r in enumerate(t.get("rounds", ())):
            for p in r["prompts"]:
                if p.get("failed") or not p["docs"]:
                    continue
                cited = np.zeros(len(p["docs"]), dtype=bool)
                where = {d: i for i, d in enumerate(p["docs"])}
                for c in p["cited"]:
                    if c in where:
                        cited[where[c]] = True
                prompts.append(
                    _Prompt(
                        np.asarray(p["docs"], dtype=np.intp),
                        np.asarray(p["positions"], dtype=np.intp),
                        int(p["span"]),
                        cited,
                    )
                )
                round_of.append(ri)
        s = t.get("scores")
        scores = None
        if s is not None and len(s) == n and all(isinstance(v, (int, float)) and math.isfinite(v) for v in s):
            scores = np.asarray(s, dtype=np.float64)
        if n > 0 and prompts:
            out.append(_Query(n, tuple(prompts), scores, tuple(round_of)))
    return out


def _grid_weights(
    depth: NDArray[np.float64], grid: NDArray[np.intp], n_positions: int
) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
    """Left grid index and right weight of each relative depth (linear interpolation)."""
    x = np.clip(depth * max(n_positions - 1, 0), grid[0], grid[-1]).astype(np.float64)
    if grid.size == 1:
        return np.zeros(x.shape, np.intp), np.zeros(x.shape)
    left = np.clip(np.searchsorted(grid, x, side="right") - 1, 0, grid.size - 2)
    w = (x - grid[left]) / (grid[left + 1] - grid[left])
    return left.astype(np.intp), np.clip(w, 0.0, 1.0)


@dataclass
class _Model:
    """The parameters one EM iteration reads: grid rates, silence, positional share, prior."""

    grid: NDArray[np.intp]
    n_positions: int
    tpr: NDArray[np.float64]
    fpr: NDArray[np.float64]
    silent_rate: float
    rank_map: RankMap
    score_map: ScoreMap | None
    false_leads: float
    blind_rate: float

    def curves(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        x = np.arange(self.n_positions, dtype=np.float64)
        return np.interp(x, self.grid, self.tpr), np.interp(x, self.grid, self.fpr)

    def config(self) -> PanningConfig:
        return PanningConfig(
            false_leads=self.false_leads,
            blind_rate=self.blind_rate,
            robust=False,
            adapt_level=False,
            empty_prompts="by-position",
            silent_rate=self.silent_rate,
            content_free=0.0,  # every reply read through the rates being learned
        ).with_profile(None)


def _e_step(
    queries: Sequence[_Query], model: _Model
) -> tuple[list[NDArray[np.float64]], list[NDArray[np.float64]], list[NDArray[np.float64]]]:
    """Per query, the documents' prior log-odds and expected evidence (each ``(n,)``) and
    each reply's positional probability ``(R,)``, replayed through the engine in batches
    of one size."""
    cfg = model.config()
    tpr, fpr = model.curves()
    geometry = DecisionRates(tpr, fpr, config=cfg)
    prior_lo: list[NDArray[np.float64]] = [np.zeros(0)] * len(queries)
    evidence: list[NDArray[np.float64]] = [np.zeros(0)] * len(queries)
    gamma: list[NDArray[np.float64]] = [np.zeros(0)] * len(queries)
    by_n: dict[int, list[int]] = {}
    for i, q in enumerate(queries):
        by_n.setdefault(q.n, []).append(i)
    for n, idx in by_n.items():
        priors = []
        for i in idx:
            q = queries[i]
            p = _retriever_prior(
                cfg, n, None if q.scores is None else q.scores.tolist(), None, model.score_map, model.rank_map
            )
            priors.append(np.full(n, 0.5) if p is None else p)
        state = BatchState.start(logit(np.clip(np.stack(priors), 1e-9, 1 - 1e-9)))
        # replay round by round, prompt by prompt, and weigh each round's replies together
        # as the panner does (rows without that prompt are not read)
        by_round = [
            [[p for p, ri in zip(queries[i].prompts, queries[i].rounds) if ri == r] for i in idx]
            for r in range(max(max(queries[i].rounds) for i in idx) + 1)
        ]
        b = len(idx)
        columns: list[list[int]] = [[] for _ in idx]  # each row's prompts among the replies
        col = 0
        for prompts_of in by_round:
            for j in range(max(len(ps) for ps in prompts_of)):
                positions = np.full((b, n), -1, dtype=np.intp)
                cited = np.zeros((b, n), dtype=bool)
                sizes = np.ones(b, dtype=np.intp)
                ok = np.zeros(b, dtype=bool)
                for row, ps in enumerate(prompts_of):
                    if j < len(ps):
                        shown = ps[j]
                        positions[row, shown.docs] = shown.positions
                        cited[row, shown.docs[shown.cited]] = True
                        sizes[row] = shown.span
                        ok[row] = True
                        columns[row].append(col)
                observe_round(
                    state, positions, sizes, cited, ok=ok, config=cfg, geometry=geometry, settle=False
                )
                col += 1
            settle_round(state, cfg, geometry)
        for row, i in enumerate(idx):
            prior_lo[i] = state.prior_log_odds[row]
            evidence[i] = state.evidence[row]
            k = len(queries[i].prompts)
            gamma[i] = state.positional[row, columns[row]] if state.positional.size else np.zeros(k)
    return prior_lo, evidence, gamma


def _classes(
    prior_lo: NDArray[np.float64], evidence: NDArray[np.float64], a: float, b: float
) -> tuple[NDArray[np.float64], ...]:
    """Each document's posterior of being relevant and read as such, relevant and missed
    (a blind spot), irrelevant and read as relevant (a false lead), irrelevant: elementwise."""
    log_pi = -np.logaddexp(0.0, -prior_lo)
    log_1m = -np.logaddexp(0.0, prior_lo)
    terms = np.stack(
        [
            log_pi + np.log1p(-b) + evidence,
            log_pi + np.log(max(b, 1e-12)),
            log_1m + np.log(max(a, 1e-12)) + evidence,
            log_1m + np.log1p(-a),
        ]
    )
    w = np.exp(terms - terms.max(axis=0))
    w /= w.sum(axis=0)
    return tuple(w)


def learn_unlabelled(
    traces: Iterable[Mapping[str, Any]],
    start: DetectorProfile,
    *,
    grid: int | Sequence[int] | None = None,
    iterations: int = 40,
    tol: float = 1e-4,
    min_queries: int = MIN_UNLABELLED_QUERIES,
) -> UnlabelledFit:
    """Learn a profile from traces that carry no relevance labels (the module's EM).

    Args:
        traces: Trace records (:func:`~gold_panning_integrations.calibration.traces.read_traces`);
            their labels, if any, are not read.
        start: Where the EM starts (the profile the traces were panned with, or the
            generic one): its rates start the E-step and add :data:`PRIOR_STRENGTH`
            pseudo-sightings per grid position; its grid (else 11 points) is the learned one.
        grid: Grid positions to learn on (a count or the positions), else as above.
        iterations: Maximum EM iterations.
        tol: Stop when no rate, the silent rate or the positional share moves more than this.
        min_queries: Refuse with fewer traced queries than this.

    Raises:
        NotEnoughTracesError: fewer than ``min_queries`` traced queries (the message says
            how many more to collect).
    """
    queries = _queries(traces)
    if len(queries) < min_queries:
        raise NotEnoughTracesError(
            f"learning a profile without labels needs the traces of at least {min_queries} queries; "
            f"these hold {len(queries)} with a reply. Trace {min_queries - len(queries)} more "
            "(on_result=TraceWriter(path) on an adapter, or --traces on run, evaluate and rerank), "
            "or label some (their 'relevant' field) and fit with labels"
        )
    P = start.n_positions
    if grid is None:
        g = np.asarray(start.grid_positions, dtype=np.intp) if start.grid_positions else default_grid(P, 11)
    elif isinstance(grid, int):
        g = default_grid(P, grid)
    else:
        g = np.asarray(grid, dtype=np.intp)
    k = g.size
    model = _Model(
        grid=g,
        n_positions=P,
        tpr=np.asarray(start.tpr, dtype=np.float64)[g],
        fpr=np.asarray(start.fpr, dtype=np.float64)[g],
        silent_rate=float(start.silent_rate if start.silent_rate is not None else 0.1),
        rank_map=DEFAULT_RANK_MAP if start.rank_map is None else RankMap.from_dict(start.rank_map),
        score_map=None,
        false_leads=DEFAULT_FALSE_LEADS if start.false_leads is None else float(start.false_leads),
        blind_rate=DEFAULT_BLIND_RATE if start.blind_rate is None else float(start.blind_rate),
    )
    # the start's rank map as RANK_MAP_PRIOR_QUERIES pseudo-queries of 10 candidates
    anchor = [model.rank_map.probabilities(10)] * RANK_MAP_PRIOR_QUERIES
    n_irrelevant = float(np.mean([q.n for q in queries])) - 1.0  # the lead rate's denominator (n - 1)
    a0, b0 = model.false_leads / max(n_irrelevant, 1.0), model.blind_rate  # their prior: the start's
    with_scores = all(q.scores is not None for q in queries)
    # Every sighting, flattened once: query, prompt, document, depth, cited.
    rows = [
        (qi, pi, int(d), (int(j) / (p.span - 1) if p.span > 1 else 0.0), bool(c))
        for qi, q in enumerate(queries)
        for pi, p in enumerate(q.prompts)
        for d, j, c in zip(p.docs, p.positions, p.cited)
    ]
    s_q = np.array([r[0] for r in rows], dtype=np.intp)
    s_p = np.array([r[1] for r in rows], dtype=np.intp)
    s_d = np.array([r[2] for r in rows], dtype=np.intp)
    s_c = np.array([r[4] for r in rows], dtype=bool)
    left, w_right = _grid_weights(np.array([r[3] for r in rows]), g, P)
    offsets = np.cumsum([0] + [len(q.prompts) for q in queries])
    reply = offsets[s_q] + s_p  # global reply index of each sighting
    n_replies = int(offsets[-1])
    reply_cites = np.bincount(reply, s_c.astype(np.float64), minlength=n_replies) > 0
    right = np.minimum(left + 1, k - 1)

    def acc(x: NDArray[np.float64]) -> NDArray[np.float64]:
        """``x`` summed into the grid, each sighting split between its two grid positions."""
        out = np.bincount(left, x * (1 - w_right), minlength=k)
        return np.asarray(out + np.bincount(right, x * w_right, minlength=k), dtype=np.float64)

    t0, f0 = model.tpr.copy(), model.fpr.copy()
    converged = False
    it = 0
    counts: tuple[NDArray[np.float64], ...] = (np.zeros(k),) * 4
    post: list[NDArray[np.float64]] = []
    for it in range(1, iterations + 1):
        prior_lo, evidence, gamma = _e_step(queries, model)
        a_rate = model.false_leads / max(n_irrelevant, 1.0)
        classes = [_classes(lo, e, a_rate, model.blind_rate) for lo, e in zip(prior_lo, evidence)]
        post = [c[0] + c[1] for c in classes]  # relevant
        reads = [c[0] + c[2] for c in classes]  # read as relevant
        # (clipped: sums of probabilities can pass 1 by a rounding error, and counts must not go negative)
        q_s = np.clip(np.array([reads[qi][d] for qi, d in zip(s_q, s_d)]), 0.0, 1.0)
        g_reply = np.clip(np.concatenate(gamma), 0.0, 1.0) if gamma else np.zeros(0)
        # silence: an empty reply was silent for its own sake with this probability
        t_s = model.tpr[left] * (1 - w_right) + model.tpr[right] * w_right
        f_s = model.fpr[left] * (1 - w_right) + model.fpr[right] * w_right
        miss = np.log(np.clip(q_s * (1 - t_s) + (1 - q_s) * (1 - f_s), 1e-12, 1.0))
        log_quiet = np.bincount(reply, miss, minlength=n_replies)
        pi = model.silent_rate
        silent = np.where(reply_cites, 0.0, pi / (pi + (1 - pi) * np.exp(log_quiet)))
        weight = np.where(reply_cites, 1.0 - g_reply, 1.0 - silent)[reply]
        rel, irr = q_s * weight, (1 - q_s) * weight
        counts = (acc(rel * s_c), acc(rel), acc(irr * s_c), acc(irr))
        gc, gs, dc, ds = counts
        a = PRIOR_STRENGTH
        tpr = (a * t0 + gc + 0.5) / (a + gs + 1.0)
        fpr = (a * f0 + dc + 0.5) / (a + ds + 1.0)
        silent_new = float(np.clip(silent.sum() / max(n_replies, 1), 0.0, 0.95))
        c_all = [np.concatenate([c[j] for c in classes]) for j in range(4)]
        w0 = MIXTURE_PRIOR_WEIGHT
        blind_new = float((c_all[1].sum() + w0 * b0) / (c_all[0].sum() + c_all[1].sum() + w0))
        a_new = float((c_all[2].sum() + w0 * a0) / (c_all[2].sum() + c_all[3].sum() + w0))

        rank_map = fit_rank_map_on([*post, *anchor]) or model.rank_map
        score_map = None
        if with_scores:
            fitted = fit_score_map_on([q.scores for q in queries if q.scores is not None], post)
            score_map = None if fitted is None else fitted[0]
        delta = max(
            abs(a_new - a_rate),
            abs(blind_new - model.blind_rate),
            float(np.max(np.abs(tpr - model.tpr))),
            float(np.max(np.abs(fpr - model.fpr))),
            abs(silent_new - model.silent_rate),
        )
        model = _Model(g, P, tpr, fpr, silent_new, rank_map, score_map, a_new * n_irrelevant, blind_new)
        if delta < tol:
            converged = True
            break
    gc, gs, dc, ds = counts
    tpr_se = np.sqrt(model.tpr * (1 - model.tpr) / (gs + 1.0))
    fpr_se = np.sqrt(model.fpr * (1 - model.fpr) / (ds + 1.0))
    p_none = float(np.mean([np.prod(1.0 - p) for p in post])) if post else 1.0
    extra: dict[str, Any] = {
        "learned_without_labels": {
            "queries": len(queries),
            "replies": n_replies,
            "iterations": it,
            "converged": converged,
            "tpr_se": [round(float(x), 4) for x in tpr_se],
            "fpr_se": [round(float(x), 4) for x in fpr_se],
            "relevant_sightings": [round(float(x), 2) for x in gs],
            "mean_p_none": round(p_none, 4),
        }
    }
    profile = DetectorProfile.from_grid(
        g,
        model.tpr,
        model.fpr,
        n_positions=P,
        counts=rate_counts(g, *counts),
        model=start.model,
        task=start.task,
        notes=(
            f"Learned without labels from {len(queries)} traced queries ({n_replies} replies) by EM over the "
            f"latent relevance ({it} iterations{', converged' if converged else ''}), starting from "
            f"{start.model!r}/{start.task!r}. Without labels, false_leads and blind_rate are weakly "
            "measured (a document the reader keeps citing looks relevant): label some queries to "
            "measure them and fit a recalibration map."
        ),
        extra=extra,
        false_leads=round(model.false_leads, 4),
        blind_rate=round(model.blind_rate, 4),
        silent_rate=round(model.silent_rate, 4),
        content_free=None,  # not learned: the reader's check stays at its default
        rank_map=model.rank_map.to_dict(),
        score_map=None if model.score_map is None else model.score_map.to_dict(),
    )
    return UnlabelledFit(
        profile=profile,
        queries=len(queries),
        replies=n_replies,
        iterations=it,
        converged=converged,
        tpr_se=tpr_se,
        fpr_se=fpr_se,
        relevant_sightings=gs,
        silent_rate=model.silent_rate,
        p_none=p_none,
    )


class TrafficLearner:
    """Learns a profile from the queries a panner pans, without labels
    (:meth:`~gold_panning_integrations.GoldPanner.learn_from_traffic`): it keeps the last
    ``window`` queries' traces and, from :data:`MIN_UNLABELLED_QUERIES` queries on, every
    ``every`` queries returns a profile learned from them, starting from ``start``.
    Thread-safe: adapters may pan queries at once.

    Attributes:
        fits: Every :class:`UnlabelledFit` so far, oldest first.
        queries: Queries seen.
    """

    def __init__(self, start: DetectorProfile, *, every: int = 50, window: int = 1000) -> None:
        if not (isinstance(every, int) and every >= 1):
            raise ValueError(f"every must be an int >= 1, got {every!r}")
        if not (isinstance(window, int) and window >= MIN_UNLABELLED_QUERIES):
            raise ValueError(f"window must be an int >= {MIN_UNLABELLED_QUERIES}, got {window!r}")
        self.start = start
        self.every = every
        self.window = window
        self.fits: list[UnlabelledFit] = []
        self.queries = 0
        self._traces: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def observe(self, result: Any) -> DetectorProfile | None:
        """Keep ``result``'s trace; a newly learned profile when one is due, else None."""
        from ._trace_io import trace_record

        if not getattr(result, "panned", False) or not result.rounds:
            return None
        with self._lock:
            self._traces.append(trace_record(result))
            del self._traces[: -self.window]
            self.queries += 1
            due = (
                self.queries >= MIN_UNLABELLED_QUERIES
                and (self.queries - MIN_UNLABELLED_QUERIES) % self.every == 0
            )
            if not due:
                return None
            traces = list(self._traces)
        fit = learn_unlabelled(traces, self.start)
        with self._lock:
            self.fits.append(fit)
        return fit.profile
