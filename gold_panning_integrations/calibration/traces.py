"""Learning a detector profile from use: panning traces to JSONL, and EM with or without labels.

:class:`TraceWriter` (:mod:`._trace_io`, pass it as an integration's ``on_result``) appends
one JSON line per panning result; :func:`learn_profile` re-estimates the per-position rates
from such traces by EM, and labelled traces also measure ``blind_rate``, ``false_leads``
and ``prior_head_decay`` (docs/calibration-and-profiles.md); traces that record the
retriever's scores fit its score map (:mod:`.score_maps`). Pure numpy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from ..engine.beliefs import DEFAULT_EPS, log_likelihood_ratios, sigmoid
from ..engine.positions import grid_positions as default_grid
from ..profiles import DetectorProfile, RateCounts
from ._fit import rate_counts
from ._trace_io import TRACE_VERSION, TraceWriter, check_relevant, read_traces, trace_record
from .score_maps import MIN_SCORE_MAP_QUERIES, fit_rank_map_on, fit_score_map, fit_score_map_on

__all__ = [
    "MIN_SCORE_MAP_QUERIES",
    "TRACE_VERSION",
    "LearnResult",
    "MixtureFit",
    "Observations",
    "RetrieverFit",
    "TraceWriter",
    "fit_abstention_map",
    "fit_head_decay",
    "fit_score_map",
    "fit_score_map_on",
    "learn_profile",
    "observations_from_traces",
    "read_traces",
    "silent_rate",
    "trace_record",
]


Relevance = Literal["independent", "one"]
_LEARNED_FIELDS = (
    "false_leads",
    "blind_rate",
    "prior_head_decay",
    "expected_relevant",
    "silent_rate",
    "abstention_map",
    "score_map",
    "rank_map",
    "content_free",
)


@dataclass(frozen=True)
class Observations:
    """Every (document, prompt) sighting of a set of traces, flattened.

    ``D`` documents over all queries (query-major), ``O`` sightings.

    Attributes:
        doc: Global document index of each sighting, shape ``(O,)``.
        depth: Relative depth in its prompt, 0 = first, 1 = last, shape ``(O,)``.
        cited: Whether it was cited, shape ``(O,)``.
        prior_log_odds: Prior log-odds of each document, shape ``(D,)``.
        query: Query index of each document, shape ``(D,)``.
        final_posteriors: Posterior each trace reported, shape ``(D,)``.
        label: 1 for a document labelled relevant, 0 for one labelled irrelevant (the
            other documents of a labelled trace), NaN in unlabelled traces, shape ``(D,)``.
        prompt: The prompt of each sighting (0, 1, ... over all traces), shape ``(O,)``;
            None when not known.
    """

    doc: NDArray[np.intp]
    depth: NDArray[np.float64]
    cited: NDArray[np.bool_]
    prior_log_odds: NDArray[np.float64]
    query: NDArray[np.intp]
    final_posteriors: NDArray[np.float64]
    label: NDArray[np.float64] | None = None
    prompt: NDArray[np.intp] | None = None

    @property
    def n_queries(self) -> int:
        return int(self.query.max()) + 1 if self.query.size else 0

    @property
    def labels(self) -> NDArray[np.float64]:
        """:attr:`label`, all NaN when the traces carried none, shape ``(D,)``."""
        return np.full(self.prior_log_odds.size, np.nan) if self.label is None else self.label


def observations_from_traces(traces: Iterable[Mapping[str, Any]]) -> Observations:
    """Flatten trace records (from :func:`read_traces` or :func:`trace_record`), failed
    prompts left out; a missing prior is the base rate ``k / n``."""
    sightings: list[tuple[int, float, bool, int]] = []  # (global document index, depth, cited, prompt)
    prior: list[float] = []
    query: list[int] = []
    final: list[float] = []
    label: list[float] = []
    offset = 0
    prompt_id = 0
    for qi, t in enumerate(traces):
        n = int(t["n"])
        relevant = None if t.get("relevant") is None else set(check_relevant(t["relevant"], n))
        label.extend(float("nan") if relevant is None else float(d in relevant) for d in range(n))
        if t.get("prior_log_odds") is not None:
            prior.extend(float(x) for x in t["prior_log_odds"])
        else:
            p0 = min(max(int(t.get("k", 1)), 1) / max(n, 1), 0.5)
            prior.extend([float(np.log(p0) - np.log1p(-p0))] * n)
        final.extend(float(x) for x in t["posteriors"])
        query.extend([qi] * n)
        for r in t["rounds"]:
            for p in r["prompts"]:
                if p.get("failed"):
                    continue
                span, c = int(p["span"]), set(p["cited"])
                sightings.extend(
                    (offset + int(d), j / (span - 1) if span > 1 else 0.0, d in c, prompt_id)
                    for d, j in zip(p["docs"], p["positions"])
                )
                prompt_id += 1
        offset += n
    doc, depth, cited, prompt = zip(*sightings) if sightings else ((), (), (), ())
    return Observations(
        doc=np.asarray(doc, dtype=np.intp),
        depth=np.asarray(depth, dtype=np.float64),
        cited=np.asarray(cited, dtype=bool),
        prior_log_odds=np.asarray(prior, dtype=np.float64),
        query=np.asarray(query, dtype=np.intp),
        final_posteriors=np.asarray(final, dtype=np.float64),
        label=np.asarray(label, dtype=np.float64),
        prompt=np.asarray(prompt, dtype=np.intp),
    )


def _grid_weights(
    depth: NDArray[np.float64], grid: NDArray[np.intp], n_positions: int
) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
    """For each depth, the left grid index and the weight of the right one (linear
    interpolation on profile positions ``depth * (n_positions - 1)``)."""
    x = depth * max(n_positions - 1, 0)
    g = grid.astype(np.float64)
    if grid.size == 1:
        return np.zeros(x.shape, np.intp), np.zeros(x.shape)
    x = np.clip(x, g[0], g[-1])
    left = np.clip(np.searchsorted(g, x, side="right") - 1, 0, grid.size - 2)
    w = (x - g[left]) / (g[left + 1] - g[left])
    return left.astype(np.intp), np.clip(w, 0.0, 1.0)


def _rates_at(
    values: NDArray[np.float64], left: NDArray[np.intp], w: NDArray[np.float64]
) -> NDArray[np.float64]:
    if values.size == 1:
        return np.full(left.shape, values[0])
    return values[left] * (1.0 - w) + values[left + 1] * w


def _accumulate(
    left: NDArray[np.intp], w: NDArray[np.float64], weights: NDArray[np.float64], k: int
) -> NDArray[np.float64]:
    """Sum ``weights`` into ``k`` grid bins, each split by the interpolation weight."""
    if k == 1:
        return np.array([weights.sum()])
    right = np.bincount(left + 1, weights * w, minlength=k)
    return np.asarray(np.bincount(left, weights * (1.0 - w), minlength=k) + right, dtype=np.float64)


@dataclass(frozen=True)
class MixtureFit:
    """The reader's document-level mixture, measured on labelled traces.

    Attributes:
        false_leads: Expected false leads per query: ``false_lead_rate`` times the
            labelled queries' mean number of irrelevant documents.
        blind_rate: Share of relevant documents the reader reads as irrelevant.
        false_lead_rate: Share of irrelevant documents it reads as relevant.
        relevant: Labelled relevant documents behind the estimate.
        irrelevant: Labelled irrelevant documents behind the estimate.
        queries: Labelled queries.
        expected_relevant: Mean number of relevant documents per labelled query (the
            prior's mass; at least 0.01).
        silent_rate: Probability that a reply cites nothing whatever its prompt holds
            (:func:`silent_rate`).
        silent_prompts: ``(prompts, expected empty, seen empty)`` behind ``silent_rate``.
    """

    false_leads: float
    blind_rate: float
    false_lead_rate: float
    relevant: int
    irrelevant: int
    queries: int
    expected_relevant: float = 1.0
    silent_rate: float = 0.0
    silent_prompts: tuple[int, float, int] = (0, 0.0, 0)


MIXTURE_PRIOR_WEIGHT = 2.0
"""Pseudo-documents (a Beta prior) behind the default ``blind_rate`` and lead rate when
:func:`learn_profile` measures them: no estimate reaches exactly 0 or 1."""


@dataclass(frozen=True)
class RetrieverFit:
    """How good the base retriever's order was on labelled traces.

    Attributes:
        head_decay: The rank prior's ``head_decay`` that makes the relevant documents'
            ranks likeliest (maximum likelihood on a grid, ``head_floor`` at its default).
        top1_share: Share of labelled queries whose first document was relevant.
        queries: Labelled queries behind the estimate.
    """

    head_decay: float
    top1_share: float
    queries: int


MIN_RETRIEVER_QUERIES = 5
"""Labelled queries with a rank prior needed before :func:`fit_head_decay` says anything."""


def fit_head_decay(traces: Iterable[Mapping[str, Any]]) -> RetrieverFit | None:
    """Fit the rank prior's ``head_decay`` to where the relevant documents sat in the base
    retriever's order (a document's index is its rank), from labelled traces whose prior
    is a rank prior (non-increasing, not flat); each relevant document's rank is a draw from
    the rank prior normalised over the query's documents.

    Returns:
        A :class:`RetrieverFit`, or None with fewer than :data:`MIN_RETRIEVER_QUERIES`
        such queries.
    """
    from ..engine.priors import rank_prior_probs

    ranks: dict[int, list[int]] = {}  # the relevant documents' ranks, by the query's size
    queries = top1 = 0
    for t in traces:
        rel, prior = t.get("relevant"), t.get("prior_log_odds")
        if not rel or prior is None or len(prior) < 2:
            continue
        lo = np.asarray(prior, dtype=np.float64)
        if np.any(np.diff(lo) > 1e-9) or lo[0] - lo[-1] < 1e-6:
            continue
        queries += 1
        top1 += int(0 in rel)
        ranks.setdefault(int(t["n"]), []).extend(int(r) for r in rel)
    if queries < MIN_RETRIEVER_QUERIES:
        return None
    grid = np.round(np.linspace(0.05, 1.0, 96), 4)
    ll = np.zeros(grid.size)
    for i, d in enumerate(grid):
        for n, at in ranks.items():
            p = rank_prior_probs(n, k=1, head_decay=float(d))
            ll[i] += float(np.log(p / p.sum())[at].sum())
    return RetrieverFit(
        head_decay=float(grid[int(np.argmax(ll))]), top1_share=top1 / queries, queries=queries
    )


@dataclass(frozen=True)
class LearnResult:
    """Outcome of :func:`learn_profile`.

    Attributes:
        profile: The learned profile (its ``counts`` are prior + expected new counts).
        iterations: EM iterations run.
        converged: Whether the grid rates moved less than ``tol`` in the last iteration.
        queries: Queries used.
        sightings: Document sightings used (failed prompts excluded).
        new_counts: The expected counts from the traces alone.
        mixture: ``false_leads`` and ``blind_rate`` measured on the labelled traces (also
            the profile's fields of those names), or None when no trace was labelled.
        retriever: The base retriever's rank prior fitted on the labelled traces (its
            ``head_decay`` is ``profile.prior_head_decay``), or None.
    """

    profile: DetectorProfile
    iterations: int
    converged: bool
    queries: int
    sightings: int
    new_counts: RateCounts
    mixture: MixtureFit | None = None
    retriever: RetrieverFit | None = None


def _prior_counts(
    prior: DetectorProfile, grid: NDArray[np.intp], strength: float
) -> tuple[NDArray[np.float64], ...]:
    """Gold cited/shown and distractor cited/shown at each grid position from the prior."""
    c = prior.rate_counts()
    if c is not None and list(c.positions) == grid.tolist():
        a = c.arrays()
        return a["gold_cited"], a["gold_shown"], a["distractor_cited"], a["distractor_shown"]
    t = prior.tpr_array[grid]
    f = prior.fpr_array[grid]
    s = np.full(grid.size, float(strength))
    return t * s, s.copy(), f * s, s.copy()


def _learn_grid(prior: DetectorProfile, grid: int | Sequence[int] | None) -> NDArray[np.intp]:
    """The grid positions :func:`learn_profile` estimates on: ``grid`` (a size or the
    positions), else the prior's ``grid_positions``, else 11 points over its positions."""
    P = prior.n_positions
    if grid is None:
        return (
            np.asarray(prior.grid_positions, dtype=np.intp) if prior.grid_positions else default_grid(P, 11)
        )
    if isinstance(grid, int):
        return default_grid(P, grid)
    return np.asarray(grid, dtype=np.intp)


def _mixture_start(
    obs: Observations, known: NDArray[np.bool_], irr_l: NDArray[np.bool_]
) -> tuple[float, float, float]:
    """``(irrelevant per labelled query, a0, b0)``: the mixture's starting (and prior)
    false-lead and blind rates, from the engine's defaults."""
    from ..engine.config import DEFAULT_BLIND_RATE, DEFAULT_FALSE_LEADS

    lq = np.unique(obs.query[known])
    irr_per_query = float(np.mean(np.bincount(obs.query[irr_l], minlength=obs.n_queries)[lq]))
    return irr_per_query, min(DEFAULT_FALSE_LEADS / max(irr_per_query, 1.0), 0.5), DEFAULT_BLIND_RATE


def _one_relevant_posterior(lo: NDArray[np.float64], obs: Observations) -> NDArray[np.float64]:
    """Posterior of each sighting's document when each query has exactly one relevant
    document: a softmax of the log-odds ``lo`` over the query's documents."""
    m = np.full(obs.n_queries, -np.inf)
    np.maximum.at(m, obs.query, lo)
    e = np.exp(lo - m[obs.query])
    z = np.bincount(obs.query, e, minlength=obs.n_queries)
    return e / z[obs.query]


def silent_rate(
    obs: Observations,
    sighting_rates: NDArray[np.float64],
) -> tuple[float, int, float, int]:
    """The probability that a reply cites nothing whatever its prompt holds, measured on
    the labelled prompts of ``obs``: ``(rate, prompts, expected empty, seen empty)``.

    ``sighting_rates`` (shape ``(O,)``) is each sighting's chance of being cited given its
    label (the mixture's: a relevant document at ``(1 - b) TPR + b FPR``, an irrelevant one
    at ``a TPR + (1 - a) FPR``). A prompt is empty with probability ``prod (1 - rate)`` when
    replies are never silent for their own sake; with ``E`` such empty prompts expected of
    ``N`` and ``S`` seen, the rate is ``(S - E) / (N - E)``, clipped to [0, 0.99] (the same
    moment estimate a single query's replies would give, pooled over many questions whose
    relevant documents are known).

    Example: two prompts each expected empty with probability 0.5 (``E = 1``), both empty
    (``S = 2``): ``(2 - 1) / (2 - 1) = 1``, clipped to 0.99; one empty: 0.
    """
    labelled = ~np.isnan(obs.labels[obs.doc])
    if obs.prompt is None or not labelled.any():
        return 0.0, 0, 0.0, 0
    prompts, inverse = np.unique(obs.prompt[labelled], return_inverse=True)
    count = prompts.size
    miss = np.log1p(-np.clip(sighting_rates[labelled], 0.0, 1.0 - 1e-12))
    log_empty = np.bincount(inverse, miss, minlength=count)
    expected = float(np.exp(log_empty).sum())
    seen = int(np.count_nonzero(np.bincount(inverse, obs.cited[labelled], minlength=count) == 0))
    if count - expected <= 0.0:
        return 0.0, count, expected, seen
    return float(min(max((seen - expected) / (count - expected), 0.0), 0.99)), count, expected, seen


MIN_ABSTENTION_QUERIES = 10
"""Labelled queries with abstention readings (some with a relevant candidate shown, some
without, at least 2 of each) below which :func:`fit_abstention_map` fits nothing."""


def fit_abstention_map(
    traces: Iterable[Mapping[str, Any]],
) -> tuple[tuple[float, float], dict[str, Any]] | None:
    """The profile's ``abstention_map`` ``(slope, offset)`` from labelled traces whose
    prompts carry ``abstain_p``, with how it was fitted; None below
    :data:`MIN_ABSTENTION_QUERIES`.

    A prompt's reading ``z = logit(abstain_p)`` (clipped as the engine reads it) is taken as
    normal with mean ``mu1`` when its question has a relevant document among those shown,
    ``mu0`` when it has none, and a common variance ``s2`` of which a share ``rho`` is the
    question's own (its prompts hesitate together). The log-likelihood ratio of a question's
    ``m`` readings is then that of their mean, so each prompt adds ``slope * (z - z0)``
    with ``slope = (mu1 - mu0) / (s2 (1 + (m - 1) rho))`` and ``z0 = (mu0 + mu1) / 2``:
    a model whose hesitation does not differ between the two kinds of question gets a
    slope near 0, and prompts that only repeat each other count once. Means and variances
    weigh every question alike.
    """
    from ..engine.rounds import ABSTAIN_CLIP

    per_query: list[tuple[NDArray[np.float64], bool]] = []
    for t in traces:
        if t.get("relevant") is None:
            continue
        relevant = set(t["relevant"])
        zs: list[float] = []
        hit = False
        for r in t.get("rounds", ()):
            for prompt in r["prompts"]:
                a = prompt.get("abstain_p")
                if a is None or prompt.get("failed"):
                    continue
                p = min(max(float(a), ABSTAIN_CLIP), 1.0 - ABSTAIN_CLIP)
                zs.append(float(np.log(p / (1.0 - p))))
                hit |= bool(relevant.intersection(prompt["docs"]))
        if zs:
            per_query.append((np.array(zs), hit))
    kinds = [[z for z, h in per_query if h == kind] for kind in (False, True)]
    if len(per_query) < MIN_ABSTENTION_QUERIES or min(len(k) for k in kinds) < 2:
        return None
    means = [np.array([z.mean() for z in k]) for k in kinds]
    mu0, mu1 = (float(m.mean()) for m in means)
    within = [float(np.sum((z - z.mean()) ** 2)) for z, _ in per_query]
    dof = sum(z.size - 1 for z, _ in per_query)
    omega2 = sum(within) / dof if dof > 0 else 0.0  # a question's prompts around their mean
    m_bar = float(np.mean([z.size for z, _ in per_query]))
    between = float(sum(np.sum((m - m.mean()) ** 2) for m in means)) / (len(per_query) - 2)
    tau2 = max(between - omega2 / m_bar, 0.0)  # questions around their kind's mean
    s2 = max(tau2 + omega2, 1e-6)
    rho = tau2 / s2
    slope = (mu1 - mu0) / (s2 * (1.0 + (m_bar - 1.0) * rho))
    z0 = (mu0 + mu1) / 2.0
    how = {
        "queries": len(per_query),
        "with_relevant": len(kinds[1]),
        "prompts": int(sum(z.size for z, _ in per_query)),
        "mean_z": [round(mu0, 4), round(mu1, 4)],
        "variance": round(s2, 4),
        "question_share": round(rho, 4),
    }
    return (round(slope, 6), round(-slope * z0, 6)), how


def _learned_fields(
    prior: DetectorProfile, fit: MixtureFit | None, retriever: RetrieverFit | None, extra: dict[str, Any]
) -> dict[str, Any]:
    """The learned profile's ``false_leads``, ``blind_rate``, ``expected_relevant``,
    ``silent_rate`` and ``prior_head_decay``: those ``fit`` and ``retriever`` measured
    (how, added to ``extra``), else the prior's (as its ``abstention_map`` and ``score_map``)."""
    learned = {key: getattr(prior, key) for key in _LEARNED_FIELDS if getattr(prior, key) is not None}
    if fit is not None:
        learned["false_leads"], learned["blind_rate"] = fit.false_leads, fit.blind_rate
        learned["expected_relevant"], learned["silent_rate"] = fit.expected_relevant, fit.silent_rate
        extra["mixture_fit"] = {
            key: getattr(fit, key) for key in ("relevant", "irrelevant", "queries", "silent_prompts")
        }
    if retriever is not None:
        learned["prior_head_decay"] = retriever.head_decay
        extra["retriever_fit"] = {"queries": retriever.queries, "top1_share": round(retriever.top1_share, 4)}
    return learned


def learn_profile(
    traces: Iterable[Mapping[str, Any]] | Observations,
    prior: DetectorProfile,
    *,
    grid: int | Sequence[int] | None = None,
    prior_strength: float = 3.0,
    relevance: Relevance = "independent",
    iterations: int = 50,
    tol: float = 1e-5,
    eps: float = DEFAULT_EPS,
) -> LearnResult:
    """Re-estimate a profile's rates from panning traces by EM; labelled traces also
    measure the reader's mixture and the retriever's rank prior.

    E-step: each document's posterior is its soft label (labelled documents are counted
    instead). M-step: Jeffreys-smoothed expected cited / shown counts per grid position
    (a sighting split between its two neighbouring grid positions by the interpolation
    weights), blended with the prior's counts. With labels, each document either "reads as
    relevant" (cited at TPR) or not (at FPR): a relevant one fails to with probability
    ``blind_rate``, an irrelevant one does with probability ``false_leads / (n - k)``; both
    are estimated with the rates (:data:`MIXTURE_PRIOR_WEIGHT`) and stored in the profile,
    so the TPR is that of a document the reader recognises. Labelled traces with a rank
    prior also fit ``prior_head_decay`` (:func:`fit_head_decay`).

    Args:
        traces: Trace records or already flattened :class:`Observations`.
        prior: The profile the traces were panned with (or any starting point); its
            counts (or ``prior_strength`` pseudo-trials per grid position for gold and
            for distractors when it has none) are blended with the traces' counts.
        grid: Grid of profile positions to estimate on (default: the prior's
            ``grid_positions``, else the paper's 11-point grid over its positions).
        prior_strength: Pseudo-trials per grid position for a prior without counts.
        relevance: ``"independent"``: each document is relevant or not on its own
            (posterior from the trace's prior log-odds, as the panner computes it);
            ``"one"``: each query has exactly one relevant document (its posterior is
            a softmax over the query's documents).
        iterations: Maximum EM iterations.
        tol: Stop when no grid rate moves more than this.
        eps: Rate clamp of the log-likelihood ratios (as in the panner).

    Returns:
        A :class:`LearnResult`; ``profile`` has ``prior.n_positions`` positions.
    """
    if relevance not in ("independent", "one"):
        raise ValueError(f"relevance must be 'independent' or 'one', got {relevance!r}")
    if not prior_strength > 0:
        raise ValueError(f"prior_strength must be > 0, got {prior_strength!r}")
    retriever = None
    abstention = None
    score_map = None
    if not isinstance(traces, Observations):
        traces = list(traces)
        retriever = fit_head_decay(traces)
        abstention = fit_abstention_map(traces)
        score_map = fit_score_map(traces)
    obs = traces if isinstance(traces, Observations) else observations_from_traces(traces)
    P = prior.n_positions
    g = _learn_grid(prior, grid)
    k = g.size
    a_gc, a_gs, a_dc, a_ds = _prior_counts(prior, g, prior_strength)
    left, w = _grid_weights(obs.depth, g, P)
    cited = obs.cited
    D = obs.prior_log_odds.size
    labels = obs.labels
    known = ~np.isnan(labels)
    n_labelled = int(np.unique(obs.query[known]).size) if known.any() else 0
    rel_l, irr_l = known & (labels == 1.0), known & (labels == 0.0)
    # Without labels a = b = 0: "reads as relevant" is relevance itself.
    mixture = bool(rel_l.any() and irr_l.any())
    irr_per_query, a0, b0 = _mixture_start(obs, known, irr_l) if mixture else (0.0, 0.0, 0.0)
    a_rate, b_rate = a0, b0
    # Start the E-step from the prior profile's own rates (what the traces were panned with).
    t_grid = prior.tpr_array[g].copy()
    f_grid = prior.fpr_array[g].copy()
    converged = False
    it = 0
    new: tuple[NDArray[np.float64], ...] = (np.zeros(k),) * 4
    wm = MIXTURE_PRIOR_WEIGHT
    for it in range(1, iterations + 1):
        # E-step: P(document reads as relevant | all its sightings).
        llr_c, llr_m = log_likelihood_ratios(_rates_at(t_grid, left, w), _rates_at(f_grid, left, w), eps=eps)
        ev = np.bincount(obs.doc, np.where(cited, llr_c, llr_m), minlength=D)
        lo = obs.prior_log_odds + ev
        post = _one_relevant_posterior(lo, obs) if relevance == "one" else sigmoid(lo)
        ab_old = (a_rate, b_rate)
        if mixture:
            # Unlabelled: relevant-and-seen or a false lead; labelled: the class given the label.
            pi = np.clip(sigmoid(obs.prior_log_odds), 1e-12, 1.0 - 1e-12)
            like = pi * (1.0 - b_rate) + (1.0 - pi) * a_rate
            post = sigmoid(np.log(like) - np.log1p(-like) + ev)
            post = np.where(rel_l, sigmoid(np.log1p(-b_rate) - np.log(b_rate) + ev), post)
            post = np.where(irr_l, sigmoid(np.log(a_rate) - np.log1p(-a_rate) + ev), post)
            b_rate = float((np.sum(1.0 - post[rel_l]) + wm * b0) / (rel_l.sum() + wm))
            a_rate = float((np.sum(post[irr_l]) + wm * a0) / (irr_l.sum() + wm))
        else:
            post = np.where(known, labels, post)  # labelled documents are counted, not guessed
        q = post[obs.doc]
        # M-step: expected counts per grid position, blended with the prior's.
        new = tuple(_accumulate(left, w, x, k) for x in (q * cited, q, (1.0 - q) * cited, 1.0 - q))
        gc, gs, dc, ds = new
        t_new = (a_gc + gc + 0.5) / (a_gs + gs + 1.0)
        f_new = (a_dc + dc + 0.5) / (a_ds + ds + 1.0)
        delta = max(
            float(np.max(np.abs(t_new - t_grid))),
            float(np.max(np.abs(f_new - f_grid))),
            abs(a_rate - ab_old[0]),
            abs(b_rate - ab_old[1]),
        )
        t_grid, f_grid = t_new, f_new
        if delta < tol:
            converged = True
            break
    fresh = rate_counts(g, *new)
    total = rate_counts(g, *(a + b for a, b in zip((a_gc, a_gs, a_dc, a_ds), new)))
    how = f"by EM ({n_labelled} of them labelled)" if n_labelled else "by EM"
    extra: dict[str, Any] = {
        "learned_from_traces": {
            "queries": obs.n_queries,
            "labelled_queries": n_labelled,
            "sightings": int(obs.doc.size),
            "iterations": it,
            "converged": converged,
            "relevance": relevance,
            "prior_strength": prior_strength if prior.rate_counts() is None else None,
        },
    }
    fit = None
    if mixture:
        rates_t, rates_f = _rates_at(t_grid, left, w), _rates_at(f_grid, left, w)
        lab = labels[obs.doc]
        p_cite = np.where(
            lab == 1.0,
            (1.0 - b_rate) * rates_t + b_rate * rates_f,
            a_rate * rates_t + (1.0 - a_rate) * rates_f,
        )
        silent, n_prompts, expected_empty, seen_empty = silent_rate(obs, p_cite)
        fit = MixtureFit(
            false_leads=round(a_rate * irr_per_query, 4),
            blind_rate=min(round(b_rate, 4), 0.9999),
            false_lead_rate=a_rate,
            relevant=int(rel_l.sum()),
            irrelevant=int(irr_l.sum()),
            queries=n_labelled,
            expected_relevant=round(max(int(rel_l.sum()) / max(n_labelled, 1), 0.01), 4),
            silent_rate=round(silent, 4),
            silent_prompts=(n_prompts, round(expected_empty, 3), seen_empty),
        )
    learned = _learned_fields(prior, fit, retriever, extra)
    if n_labelled:
        rank_map = fit_rank_map_on([labels[obs.query == q] for q in np.unique(obs.query[known])])
        if rank_map is not None:
            learned["rank_map"] = rank_map.to_dict()
    if abstention is not None:
        learned["abstention_map"], extra["abstention_fit"] = abstention
    if score_map is not None:
        fitted_map, extra["score_map_fit"] = score_map
        learned["score_map"] = fitted_map.to_dict()
    profile = DetectorProfile.from_grid(
        g,
        t_grid,
        f_grid,
        n_positions=P,
        counts=total,
        model=prior.model,
        task=prior.task,
        notes=(
            f"Learned from {obs.n_queries} panning traces ({obs.doc.size} document sightings) {how} "
            f"({it} iterations, relevance={relevance}), blended with the prior profile "
            f"{prior.model!r}/{prior.task!r} by counts. Prior notes: {prior.notes}"
        ).strip(),
        extra=extra,
        **learned,
    )
    return LearnResult(
        profile=profile,
        iterations=it,
        converged=converged,
        queries=obs.n_queries,
        sightings=int(obs.doc.size),
        new_counts=fresh,
        mixture=fit,
        retriever=retriever,
    )
