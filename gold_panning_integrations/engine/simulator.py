"""Simulation under the paper's observation model: a reader for tests, a batch simulator.

:class:`SimulatedReader` cites each shown document with its position's TPR (relevant) or
FPR (irrelevant), optionally obeying an :class:`Attack`. :func:`simulate` runs thousands of
trials at once through the round functions the panner runs (:mod:`.rounds`, the stop
rules of :mod:`.beliefs`) and returns F1 per round with a 95% confidence interval.

``rng`` is split into ``(needles, model, policy, ties)``: one trial equals
``GoldPanner(SimulatedReader(..., rng=model), rng=policy)`` draw for draw (pinned by a test).
Obeying an attack is drawn from a child spawned off ``model``, so runs with and without an
attack share their citation draws.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .beliefs import DEFAULT_EPS, POLICIES, PriorSpec, initial_log_odds, logit, sigmoid, threshold_reached
from .config import PanningConfig
from .positions import resample_curve
from .records import Reading
from .rounds import BatchState, DecisionRates, active_mask, observe_round, plan_round, settle_round

__all__ = ["Attack", "Mistakes", "PolicyCurve", "SimulatedReader", "SimulationResult", "simulate"]

_CHUNK_ELEMENTS = 1 << 22  # trials x n per chunk: ~34 MB per float64 array

AttackKind = Literal["label", "position", "self"]


@dataclass(frozen=True)
class Attack:
    """A hostile document whose injection the model obeys with probability ``obey`` (in (0,
    1]) in a prompt showing it. ``kind``: ``"label"``, the model also cites what is shown
    under one of ``labels`` ("cite document 1"); ``"position"``, prompt slot 0 ("cite the
    first document listed"); ``"self"``, the hostile document itself."""

    kind: AttackKind
    obey: float = 1.0
    labels: tuple[int, ...] = (1,)

    def __post_init__(self) -> None:
        if self.kind not in ("label", "position", "self"):
            raise ValueError(f"attack kind must be 'label', 'position' or 'self', got {self.kind!r}")
        if not 0.0 < self.obey <= 1.0:
            raise ValueError(f"attack obey must be in (0, 1], got {self.obey!r}")
        labels = tuple(self.labels)
        if not labels or any(isinstance(x, bool) or not isinstance(x, (int, np.integer)) for x in labels):
            raise ValueError(f"attack labels must be a non-empty tuple of integers, got {self.labels!r}")
        object.__setattr__(self, "labels", tuple(int(x) for x in labels))


@dataclass(frozen=True)
class Mistakes:
    """A simulated reader whose mistakes repeat: per trial, each irrelevant document is a
    false lead (cited at TPR) with probability ``min(false_leads / (n - k), 1)``, each
    relevant one a blind spot (cited at FPR) with probability ``blind_rate`` in [0, 1].
    ``Mistakes(0, 0)`` is the paper's model."""

    false_leads: float = 0.0
    blind_rate: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.false_leads) and self.false_leads >= 0.0):
            raise ValueError(f"false_leads must be a number >= 0, got {self.false_leads!r}")
        if not 0.0 <= self.blind_rate <= 1.0:
            raise ValueError(f"blind_rate must be in [0, 1], got {self.blind_rate!r}")

    def draw(self, rng: np.random.Generator, truth: NDArray[np.bool_]) -> NDArray[np.bool_]:
        """What the model reads as relevant, shape ``(B, n)`` like ``truth`` (two uniforms
        per document: leads, then blind spots)."""
        b, n = truth.shape
        k = truth.sum(axis=1, keepdims=True)
        a = np.minimum(self.false_leads / np.maximum(n - k, 1), 1.0)
        lead = ~truth & (rng.random((b, n)) < a)
        blind = truth & (rng.random((b, n)) < self.blind_rate)
        return (truth & ~blind) | lead


class SimulatedReader:
    """A reader that follows a detector profile (``tpr``/``fpr``, resampled per prompt)
    exactly; ``relevant`` and ``hostile`` are collections or predicates ``doc -> bool``.
    Per prompt it draws one uniform per slot (and, for an attack obeyed below 1, one from a
    child of ``rng``): the draws of :func:`simulate`."""

    def __init__(
        self,
        profile: Any,
        relevant: Collection[Any] | Callable[[Any], bool],
        *,
        rng: np.random.Generator | int | None = None,
        hostile: Collection[Any] | Callable[[Any], bool] | None = None,
        attack: Attack | None = None,
    ) -> None:
        self.tpr = np.asarray(profile.tpr, dtype=np.float64)
        self.fpr = np.asarray(profile.fpr, dtype=np.float64)
        self._is_relevant = _predicate(relevant)
        self._is_hostile = _predicate(() if hostile is None else hostile)
        self.attack = attack
        self.rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        obeys_sometimes = attack is not None and attack.obey < 1.0
        self._obey_rng = self.rng.spawn(1)[0] if obeys_sometimes else None
        self.calls = 0

    def read(
        self, question: str, documents: Sequence[Any], *, labels: Sequence[int] | None = None
    ) -> Reading:
        """Cite each document with its position's TPR or FPR (``labels``, default
        ``1..m``, matter to a label attack only)."""
        self.calls += 1
        m = len(documents)
        if m == 0:
            return Reading(cited=())
        tpr = resample_curve(self.tpr, m)
        fpr = resample_curve(self.fpr, m)
        rel = np.fromiter((bool(self._is_relevant(d)) for d in documents), dtype=bool, count=m)
        cited = self.rng.random(m) < np.where(rel, tpr, fpr)
        if self.attack is not None:
            obeys = self._obey_rng is None or bool(self._obey_rng.random() < self.attack.obey)
            hostile = [i for i, d in enumerate(documents) if self._is_hostile(d)]
            if obeys and hostile:
                if self.attack.kind == "position":
                    cited[0] = True
                elif self.attack.kind == "self":
                    cited[hostile] = True
                else:
                    labs = np.arange(1, m + 1) if labels is None else np.asarray(labels, dtype=np.int64)
                    cited |= np.isin(labs, self.attack.labels)
        return Reading(cited=tuple(int(c) for c in np.flatnonzero(cited)))

    async def aread(
        self, question: str, documents: Sequence[Any], *, labels: Sequence[int] | None = None
    ) -> Reading:
        """Asynchronous :meth:`read` (no I/O, returns at once)."""
        return self.read(question, documents, labels=labels)


def _predicate(spec: Collection[Any] | Callable[[Any], bool]) -> Callable[[Any], bool]:
    if callable(spec):
        return spec
    members: Collection[Any] = spec
    return lambda d: d in members


@dataclass(frozen=True)
class PolicyCurve:
    """Per round (shape ``(rounds,)``) for one policy: mean ``f1`` with the half-width
    ``ci95`` of its 95% interval, ``recall`` in the top ``recall_at`` and cumulative mean
    ``calls``; ``rounds_to_match_random``: the first round (1-based) reaching PSC's final
    F1 (None: never, or no PSC)."""

    f1: NDArray[np.float64]
    ci95: NDArray[np.float64]
    rounds_to_match_random: int | None
    recall: NDArray[np.float64] | None = None
    calls: NDArray[np.float64] | None = None


@dataclass(frozen=True)
class SimulationResult:
    """Output of :func:`simulate`; :meth:`to_json` gives the CLI's JSON format."""

    n: int
    k: int
    rounds: int
    trials: int
    tpr: NDArray[np.float64]
    fpr: NDArray[np.float64]
    policies: dict[str, PolicyCurve]
    truth: NDArray[np.bool_] | None = None  # with keep_posteriors: (trials, n)
    posteriors: dict[str, NDArray[np.float64]] | None = None  # per policy, (trials, n)

    def to_json(self) -> dict[str, Any]:
        """``{"n","k","rounds","trials","profile":{"tpr","fpr"},"policies":{...}}``."""
        return {
            "n": self.n,
            "k": self.k,
            "rounds": self.rounds,
            "trials": self.trials,
            "profile": {"tpr": self.tpr.tolist(), "fpr": self.fpr.tolist()},
            "policies": {
                name: {
                    "f1": [float(x) for x in c.f1],
                    "ci95": [float(x) for x in c.ci95],
                    "rounds_to_match_random": c.rounds_to_match_random,
                }
                for name, c in self.policies.items()
            },
        }


def _top_k_hits(keys: NDArray[np.float64], truth: NDArray[np.bool_], k: int) -> NDArray[np.float64]:
    """Share of the top-k by ``keys`` (per row) that is relevant: F1 when |truth| = k."""
    if k == 1:
        top = np.argmax(keys, axis=1)[:, None]
    else:
        top = np.argpartition(-keys, k - 1, axis=1)[:, :k]
    return np.take_along_axis(truth, top, axis=1).sum(axis=1) / k


def _recall_at(keys: NDArray[np.float64], truth: NDArray[np.bool_], r: int) -> NDArray[np.float64]:
    """Fraction of the needles among the top ``r`` by ``keys`` (stable order), per row."""
    top = np.argsort(-keys, axis=1, kind="stable")[:, :r]
    return np.take_along_axis(truth, top, axis=1).sum(axis=1) / np.maximum(truth.sum(axis=1), 1)


def _draw_truth(
    rng: np.random.Generator,
    b: int,
    n: int,
    k: int,
    needle_probs: NDArray[np.float64] | None,
    relevant_counts: NDArray[np.float64] | None = None,
) -> tuple[NDArray[np.bool_], NDArray[np.intp]]:
    """``k`` needles per trial (uniform, or by ``needle_probs``; with ``relevant_counts``,
    a count drawn per trial after the keys) and one hostile non-needle per trial (-1: none)."""
    keys = rng.random((b, n))
    if needle_probs is not None:  # Gumbel top-k: sampling without replacement
        keys = np.log(needle_probs)[None, :] - np.log(-np.log(np.maximum(keys, 1e-300)))
    truth = np.zeros((b, n), dtype=bool)
    if relevant_counts is None:
        top = np.argpartition(-keys, k - 1, axis=1)[:, :k]
        np.put_along_axis(truth, top, True, axis=1)
    else:
        cdf = np.cumsum(relevant_counts)
        counts = np.minimum(np.searchsorted(cdf / cdf[-1], rng.random(b), side="right"), n)
        rank = np.argsort(np.argsort(-keys, axis=1, kind="stable"), axis=1, kind="stable")
        truth = rank < counts[:, None]
    h = np.where(truth, -1.0, rng.random((b, n)))
    hostile = np.where(truth.all(axis=1), -1, np.argmax(h, axis=1))
    return truth, hostile


def _cite(
    placement: Any,
    truth: NDArray[np.bool_],
    hostile: NDArray[np.intp],
    u: NDArray[np.float64],
    obeyed: NDArray[np.bool_] | None,
    true_geometry: DecisionRates,
    attack: Attack | None,
) -> NDArray[np.bool_]:
    """The simulated model's citations, shape ``(B, n)``: slot ``j`` is cited when ``u[:,
    j]`` is below its true rate (as :class:`SimulatedReader`), plus the attack."""
    b, n = truth.shape
    w = u.shape[1]
    sizes = placement.sizes
    prompt = placement.prompt[:, :w]
    in_prompt = np.arange(w)[None, :] < sizes[:, None]
    rel = np.take_along_axis(truth, prompt, axis=1)
    t, f = true_geometry.stacked(sizes, w)
    rate = np.where(rel, t[:, :w], f[:, :w])
    cited_slot = (u < rate) & in_prompt
    if attack is not None:
        is_h = (prompt == hostile[:, None]) & in_prompt
        go = is_h.any(axis=1) if obeyed is None else is_h.any(axis=1) & obeyed
        if attack.kind == "position":
            target = np.zeros((b, w), dtype=bool)
            target[:, 0] = True
        elif attack.kind == "self":
            target = is_h
        else:
            target = np.isin(placement.labels[:, :w], attack.labels) & in_prompt
        cited_slot |= target & go[:, None]
    cited = np.zeros((b, n), dtype=bool)
    np.put_along_axis(cited, prompt, cited_slot, axis=1)
    return cited


def _check_args(*, n: int, k: int, rounds: int, trials: int, policies: Sequence[str]) -> None:
    if n < 1 or k < 1 or k > n:
        raise ValueError(f"need 1 <= k <= n, got n={n!r}, k={k!r}")
    if rounds < 1 or trials < 1:
        raise ValueError(f"rounds and trials must be >= 1, got {rounds!r} and {trials!r}")
    unknown = [p for p in policies if p not in POLICIES]
    if unknown or not policies:
        raise ValueError(f"unknown policies {unknown}; choose from {', '.join(POLICIES)}")


class _Tally:
    """Per policy and round: sums of hits, squared hits and recall; kept posteriors."""

    def __init__(self, policies: Sequence[str], rounds: int, *, keep: bool) -> None:
        self.stats = {p: np.zeros((3, rounds)) for p in policies}
        self.calls = {p: np.zeros(rounds) for p in policies}
        self.keep = keep
        self.truth: list[NDArray[np.bool_]] = []
        self.post: dict[str, list[NDArray[np.float64]]] = {p: [] for p in policies}

    def curves(self, trials: int, *, recall: bool) -> dict[str, PolicyCurve]:
        means = {p: st[0] / trials for p, st in self.stats.items()}
        target = float(means["random"][-1]) if "random" in means else None
        out: dict[str, PolicyCurve] = {}
        for pol, st in self.stats.items():
            mean = means[pol]
            var = np.maximum(st[1] / trials - mean**2, 0.0) * trials / max(trials - 1, 1)
            match = None
            if target is not None:
                hit = np.flatnonzero(mean >= target - 1e-12)
                match = int(hit[0]) + 1 if hit.size else None
            out[pol] = PolicyCurve(
                f1=mean,
                ci95=1.96 * np.sqrt(var / trials),
                rounds_to_match_random=match,
                recall=st[2] / trials if recall else None,
                calls=np.cumsum(self.calls[pol]) / trials,
            )
        return out


@dataclass
class _Batch:
    """The fixed parts of one :func:`simulate` call; :meth:`run_chunk` runs ``b`` trials."""

    cfgs: dict[str, PanningConfig]
    geometry: DecisionRates
    true_geometry: DecisionRates
    attack: Attack | None
    recall_at: int | None
    streams: tuple[np.random.Generator, ...]
    mistakes: Mistakes | None = None
    relevant_counts: NDArray[np.float64] | None = None

    def run_chunk(
        self, bsz: int, lo0: NDArray[np.float64], needle_probs: NDArray[np.float64] | None, tally: _Tally
    ) -> None:
        needle_rng, model_rng, policy_rng, tie_rng = self.streams
        some = next(iter(self.cfgs.values()))
        needles, k, n = int(some.k or 1), some.focus, lo0.size
        truth, hostile = _draw_truth(needle_rng, bsz, n, needles, needle_probs, self.relevant_counts)
        states = {p: BatchState.start(np.broadcast_to(lo0, (bsz, n))) for p in self.cfgs}
        live = {p: np.ones(bsz, dtype=bool) for p in self.cfgs}
        reads = truth if self.mistakes is None else self.mistakes.draw(needle_rng, truth)
        prompts = some.prompts_per_round
        obey_rng = model_rng.spawn(1)[0] if self.attack is not None and self.attack.obey < 1.0 else None
        for t in range(some.rounds):
            plans: dict[str, list[Any]] = {}
            for pol, cfg in self.cfgs.items():
                st = states[pol]
                live[pol] &= ~threshold_reached(
                    st.log_odds, k=k, stop_at=cfg.stop_at, done=t, min_rounds=cfg.min_rounds
                )
                active = active_mask(st, k=k, prune_below=cfg.prune_below, started=t > 0)
                plans[pol] = [
                    plan_round(
                        st, active, config=cfg, geometry=self.geometry, rng=policy_rng, truth=truth, prompt=b
                    )
                    for b in range(prompts)
                ]
            for b in range(prompts):
                width = max(int(p[b].sizes.max()) for p in plans.values())
                u = model_rng.random((bsz, width))  # common random numbers across policies
                obeyed = (
                    None
                    if obey_rng is None or self.attack is None
                    else obey_rng.random(bsz) < self.attack.obey
                )
                for pol, cfg in self.cfgs.items():
                    plan = plans[pol][b]
                    cited = _cite(plan, reads, hostile, u, obeyed, self.true_geometry, self.attack)
                    observe_round(
                        states[pol],
                        plan.positions,
                        plan.sizes,
                        cited,
                        ok=live[pol],
                        config=cfg,
                        geometry=self.geometry,
                        settle=False,
                    )
                    tally.calls[pol][t] += live[pol].sum()
            for pol, cfg in self.cfgs.items():
                settle_round(states[pol], cfg, self.geometry)
            for pol in self.cfgs:
                st = states[pol]
                # PSC ranks by votes (random ties), the others by belief.
                keys = st.counts + tie_rng.random((bsz, n)) if pol == "random" else st.log_odds
                hits = _top_k_hits(keys, truth, k)
                tally.stats[pol][0, t] += hits.sum()
                tally.stats[pol][1, t] += np.square(hits).sum()
                if self.recall_at:
                    tally.stats[pol][2, t] += _recall_at(keys, truth, self.recall_at).sum()
        if tally.keep:
            tally.truth.append(truth)
            for pol in self.cfgs:
                tally.post[pol].append(sigmoid(states[pol].log_odds))


def _sim_config(
    config: PanningConfig | None, *, rounds: int, k: int, prior: PriorSpec, eps: float
) -> PanningConfig:
    """``config`` (default: one prompt per round) with simulate's arguments laid over it
    and profile options at their defaults; the prior's mass is ``k``, the needles planted
    (the simulator knows its base rate), unless ``config`` sets ``expected_relevant``.
    ValueError for what simulate does not model."""
    base = config or PanningConfig(prompts_per_round=1)
    mass = float(k) if base.expected_relevant is None else base.expected_relevant
    cfg = replace(base, rounds=rounds, k=k, prior=prior, eps=eps, expected_relevant=mass).with_profile(None)
    if (
        cfg.windows
        or cfg.min_gain is not None
        or cfg.max_calls is not None
        or cfg.max_prompt_tokens is not None
    ):
        raise ValueError("simulate does not model windows, min_gain, max_calls or max_prompt_tokens")
    return cfg


def _decision_geometry(
    t_true: NDArray[np.float64],
    f_true: NDArray[np.float64],
    decision_tpr: ArrayLike | None,
    decision_fpr: ArrayLike | None,
    placement_only: bool,
    cfg: PanningConfig,
) -> DecisionRates:
    """The decision rates (else the true ones) the panner places, and unless
    ``placement_only`` updates, with."""
    t_dec = t_true if decision_tpr is None else np.asarray(decision_tpr, dtype=np.float64)
    f_dec = f_true if decision_fpr is None else np.asarray(decision_fpr, dtype=np.float64)
    temp = cfg.resolved("evidence_temperature")
    if placement_only:
        return DecisionRates(t_true, f_true, config=cfg, temperature=temp, placement=(t_dec, f_dec))
    return DecisionRates(t_dec, f_dec, config=cfg, temperature=temp)


def _check_relevant_counts(relevant_counts: ArrayLike) -> NDArray[np.float64]:
    """``relevant_counts`` as an array, ValueError unless probabilities summing to 1."""
    counts = np.asarray(relevant_counts, dtype=np.float64).reshape(-1)
    if not (counts.size and np.all(np.isfinite(counts) & (counts >= 0)) and abs(counts.sum() - 1) <= 1e-6):
        raise ValueError(
            f"relevant_counts must be probabilities of 0, 1, 2, ... needles summing to 1, got {relevant_counts!r}"
        )
    return counts


def simulate(
    tpr: ArrayLike,
    fpr: ArrayLike,
    *,
    n: int,
    k: int = 1,
    rounds: int = 8,
    trials: int = 5000,
    policies: Sequence[str] = ("belief", "entropy", "random", "oracle"),
    rng: np.random.Generator | int | None = None,
    decision_tpr: ArrayLike | None = None,
    decision_fpr: ArrayLike | None = None,
    placement_only: bool = False,
    prior: PriorSpec = "uniform",
    eps: float = DEFAULT_EPS,
    config: PanningConfig | None = None,
    attack: Attack | None = None,
    mistakes: Mistakes | None = None,
    prior_probs: ArrayLike | None = None,
    needle_probs: ArrayLike | None = None,
    recall_at: int | None = None,
    keep_posteriors: bool = False,
    relevant_counts: ArrayLike | None = None,
    chunk_trials: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> SimulationResult:
    """Simulate panning under the observation model for many trials at once.

    Each trial places ``k`` needles among ``n`` documents; the simulated model cites with
    the *true* rates ``(tpr, fpr)``, the panner places and updates with the *decision*
    rates (the same unless given). Every policy sees the same needles and citation draws.

    Args:
        tpr: True TPR per position, shape ``(m,)``; resampled to each prompt's size.
        fpr: True FPR per position, shape ``(m,)``.
        n: Documents per trial.
        k: Needles per trial; F1 of the top-k selection equals the fraction found.
        rounds: Rounds per trial (overrides ``config.rounds``).
        trials: Number of trials.
        policies: Subset of ``belief``, ``entropy``, ``random``, ``oracle``.
        rng: Generator or seed.
        decision_tpr, decision_fpr: The rates the panner believes (any length; resampled).
        placement_only: The decision rates move placement only, the true ones update.
        prior: ``"uniform"`` (0.5, the paper) or ``"base-rate"`` (k/n); overrides
            ``config.prior``. Ignored with ``prior_probs``.
        eps: Clamp for the decision rates (overrides ``config.eps``).
        config: Panning options; windows and the call/token/gain budgets are not
            simulated. None: the defaults with one prompt per round.
        attack: A hostile non-needle document per trial and how the model obeys it.
        mistakes: The simulated model's repeated mistakes; None: independent readings.
        prior_probs, needle_probs: Prior probabilities of relevance and probabilities of
            being a needle per document, shape ``(n,)``.
        recall_at: Also report the fraction of needles in the top ``recall_at``.
        keep_posteriors: Keep the final posteriors and needles of every trial.
        relevant_counts: Probabilities of 0, 1, 2, ... needles per trial, shape ``(c,)``
            (None: exactly ``k``); ``k`` still sets the selection size.
        chunk_trials: Trials per chunk; default bounds each array's size.
        progress: Called with the number of trials finished after each chunk.
    """
    _check_args(n=n, k=k, rounds=rounds, trials=trials, policies=policies)
    cfg = _sim_config(config, rounds=rounds, k=k, prior=prior, eps=eps)
    if prior_probs is None and prior == "uniform":
        cfg = replace(cfg, content_free=0.0)  # as the panner: no reader's check from 0.5 each
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    t_true = np.asarray(tpr, dtype=np.float64)
    f_true = np.asarray(fpr, dtype=np.float64)
    geometry = _decision_geometry(t_true, f_true, decision_tpr, decision_fpr, placement_only, cfg)
    if prior_probs is not None:
        lo0 = logit(np.asarray(prior_probs, dtype=np.float64).reshape(n))
    else:
        lo0 = initial_log_odds(n, k=cfg.prior_mass, prior=cfg.prior)
    npb = None if needle_probs is None else np.asarray(needle_probs, dtype=np.float64).reshape(n)
    counts = None if relevant_counts is None else _check_relevant_counts(relevant_counts)
    sim = _Batch(
        cfgs={pol: replace(cfg, policy=pol) for pol in policies},
        geometry=geometry,
        true_geometry=DecisionRates(
            t_true, f_true, config=PanningConfig(robust=False, resample_profile=True)
        ),
        attack=attack,
        recall_at=recall_at,
        streams=tuple(gen.spawn(4)),  # needles, model, policy, ties
        mistakes=mistakes,
        relevant_counts=counts,
    )
    chunk = chunk_trials or max(1, min(trials, _CHUNK_ELEMENTS // n))
    tally = _Tally(policies, rounds, keep=keep_posteriors)
    done = 0
    while done < trials:
        b = min(chunk, trials - done)
        sim.run_chunk(b, lo0, None if npb is None else npb / npb.sum(), tally)
        done += b
        if progress is not None:
            progress(done)
    return SimulationResult(
        n=n,
        k=k,
        rounds=rounds,
        trials=trials,
        tpr=resample_curve(t_true, n),
        fpr=resample_curve(f_true, n),
        policies=tally.curves(trials, recall=bool(recall_at)),
        truth=np.concatenate(tally.truth) if keep_posteriors else None,
        posteriors={p: np.concatenate(v) for p, v in tally.post.items()} if keep_posteriors else None,
    )
