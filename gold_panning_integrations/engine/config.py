"""Every panning option once: a frozen :class:`PanningConfig`, validated once.

:class:`~gold_panning_integrations.engine.panner.GoldPanner`, the batch simulator
(:func:`~gold_panning_integrations.engine.simulate.simulate`), the framework adapters and
the CLI all take one of these, so an option is declared, documented and checked in one
place.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Literal

from .beliefs import DEFAULT_EPS, PriorSpec
from .policies import POLICIES

__all__ = [
    "DEFAULT_BLIND_RATE",
    "DEFAULT_FALSE_LEADS",
    "PAPER_UPDATE",
    "EmptyPromptRule",
    "PanningConfig",
    "Spread",
]

DEFAULT_FALSE_LEADS = 0.25
"""``false_leads`` when neither the options nor the profile set it."""

DEFAULT_BLIND_RATE = 0.3
"""``blind_rate`` when neither the options nor the profile set it."""

EmptyPromptRule = Literal["evidence", "skip", "mixture"]
"""What a prompt whose reply cites nothing at all counts as: ``"evidence"`` (a miss for
every shown document, the paper's independent-citation model), ``"skip"`` (a failed
reading of the whole prompt: no update), or ``"mixture"`` (a reply is silent with a
probability estimated online from how many more empty replies came than the profile
expects; an empty reply is a miss as far as it is not explained by silence)."""

Spread = Literal["draw", "stride", "copies"]
"""How the prompts of one round differ when ``prompts_per_round > 1`` (the first prompt
is always the policy's own placement): ``"draw"`` (prompt ``b`` ranks by the policy's
score plus Gumbel noise, :data:`~.rounds.DRAW_TEMPERATURE`: a random ranking in which a
document comes first in proportion to its odds squared, so strong beliefs keep their
places and ties are broken at random), ``"stride"`` (prompt ``b`` puts the documents
ranked ``b, b+B, b+2B, ...`` on the most diagnostic positions, the others after them in
rank order), or ``"copies"`` (every prompt ranks alike; only the top shuffle and the
labels differ)."""


PAPER_UPDATE: dict[str, Any] = {
    "robust": False,
    "shuffle_top": 0,
    "empty_prompts": "evidence",
    "adapt_level": False,
    "false_leads": 0.0,
    "blind_rate": 0.0,
}
"""The options that turn every extension off: the paper's GP-Belief update (independent
citations at the profile's exact rates). :meth:`PanningConfig.paper` applies them."""


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(float(value))


def _int_at_least(low: int, *, optional: bool = False) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if optional and value is None:
            return None
        ok = _is_int(value) and value >= low
        return None if ok else f"an int >= {low}" + (" or None" if optional else "")

    return check


def _number_in(low: float, high: float | None, *, optional: bool = True) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if optional and value is None:
            return None
        ok = _is_real(value) and low < value and (high is None or value < high)
        span = f"in ({low:g}, {high:g})" if high is not None else f"> {low:g}"
        return None if ok else f"a number {span}" + (" or None" if optional else "")

    return check


def _one_of(*choices: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if value in choices:
            return None
        return " or ".join(", ".join(repr(c) for c in choices).rsplit(", ", 1))

    return check


def _non_negative(value: Any) -> str | None:
    return None if value is None or (_is_real(value) and value >= 0.0) else "a number >= 0 or None"


def _rate_in_unit(value: Any) -> str | None:
    return None if value is None or (_is_real(value) and 0.0 <= value < 1.0) else "a number in [0, 1) or None"


def _flag(value: Any) -> str | None:
    return None if isinstance(value, bool) else "True or False"


def _policy(value: Any) -> str | None:
    return None if value in POLICIES else f"one of {', '.join(POLICIES)}"


_CHECKS: dict[str, Callable[[Any], str | None]] = {
    "rounds": _int_at_least(1),
    "prompts_per_round": _int_at_least(1),
    "spread": _one_of("draw", "stride", "copies"),
    "k": _int_at_least(1),
    "min_rounds": _int_at_least(1),
    "shuffle_top": _int_at_least(0),
    "max_docs_per_prompt": _int_at_least(1, optional=True),
    "max_calls": _int_at_least(1, optional=True),
    "max_prompt_tokens": _int_at_least(1, optional=True),
    "policy": _policy,
    "stop_at": _number_in(0.0, 1.0),
    "prune_below": _number_in(0.0, 1.0),
    "min_gain": _number_in(0.0, None),
    "evidence_temperature": _number_in(0.0, None),
    "eps": _number_in(0.0, 0.5, optional=False),
    "false_leads": _non_negative,
    "blind_rate": _rate_in_unit,
    "on_failure": _one_of("raise", "fallback"),
    "prior": _one_of("base-rate", "uniform"),
    "empty_prompts": _one_of("evidence", "skip", "mixture"),
    "windows": _flag,
    "resample_profile": _flag,
    "robust": _flag,
    "adapt_level": _flag,
}
"""One check per option: None when the value is valid, else what it must be."""


@dataclass(frozen=True)
class PanningConfig:
    """Options of one panning run (GP-Belief, GP-Entropy or PSC over one question).

    Attributes:
        rounds: Maximum number of rounds (``>= 1``), run one after another: the number
            of sequential model calls, which sets the latency.
        prompts_per_round: Prompts sent together in each round (``>= 1``), each with its
            own placement (see ``spread``) and its own labels; beliefs are updated on all
            of them before the next round is planned. A round costs ``prompts_per_round``
            calls (times the windows) but one call of latency when the reader takes
            concurrent calls.
        spread: How the prompts of one round differ; see :data:`Spread`.
        k: Number of relevant documents to select (top-k), an int ``>= 1``.
        policy: ``"belief"`` (GP-Belief), ``"entropy"`` (GP-Entropy), ``"random"`` (PSC),
            or ``"oracle"`` (simulation only; needs ``truth=``).
        max_docs_per_prompt: Context budget in documents per prompt (``>= 1``, or None
            for all). With more documents, the lowest-scoring ones sit out each round
            (left out of the prompt, beliefs unchanged), unless ``windows=True``.
        windows: When documents exceed ``max_docs_per_prompt``, split each round into
            several prompts ("windows") dealt round-robin by score instead of leaving
            documents out; each window uses the profile resampled to its size.
        prior: Uniform prior when no per-document prior is given: ``"base-rate"``
            (probability ``min(k/n, 0.5)``: posteriors read as probabilities) or
            ``"uniform"`` (0.5, the paper's setting).
        stop_at: Stop once the mean posterior of the selected top-k reaches this value,
            in (0, 1). None disables it.
        min_gain: Stop once another round is expected to raise that mean posterior by
            less than this (``> 0``). None disables it.
        min_rounds: Rounds always run before ``stop_at``/``min_gain`` may stop (``>= 1``).
        max_calls: Hard budget of prompts (``>= 1``, or None: ``rounds`` is the limit).
        max_prompt_tokens: Hard budget of prompt tokens, enforced before each round from
            the tokens the reader reported so far (the first round always runs).
        prune_below: Evidence-ratio floor for pruning, in (0, 1): a document whose
            evidence (posterior odds / prior odds) falls below it *after it was shown at
            least twice* leaves later prompts (shorter prompts, the profile resampled to
            the smaller size). It is not a posterior floor. The top-k are never pruned.
            E.g. 0.05. None disables pruning.
        evidence_temperature: Divides every log-likelihood ratio (``> 1`` tempers
            over-confident evidence). None: the profile's ``extra["evidence_temperature"]``
            when present, else 1.
        on_failure: When every round fails: ``"raise"`` an ``AllRoundsFailedError``, or
            ``"fallback"`` to the prior order with ``panned=False``.
        eps: Clamp for rates in the update, in (0, 0.5).
        resample_profile: Resample the profile to each prompt's size (by relative
            position). If False, documents take the most diagnostic of the profile's
            own positions and dummy documents fill the rest.
        shuffle_top: Each round, randomly permute the ``shuffle_top`` highest-scoring
            documents over the ``shuffle_top`` most diagnostic positions (``>= 0``; 0 or 1
            disables it). Stops a document that says "cite the first document listed"
            from confirming whichever document leads.
        robust: Robust likelihood: before the update, rates become
            ``0.95 * rate + 0.025`` and any position whose TPR is below its FPR gets
            both set to their mean. Survives a profile measured on another model.
        empty_prompts: What a prompt whose reply cites nothing counts as; see
            :data:`EmptyPromptRule`.
        adapt_level: Re-estimate the profile's level online: TPR and FPR are scaled by
            ``(observed + 1) / (predicted + 1)`` citations so far (capped at 1), keeping
            the calibrated shape. A model that cites far less than its profile predicts
            then stops turning silence into evidence against the documents it was shown.
        false_leads: Expected number of irrelevant documents per question (``>= 0``)
            that draw the reader's citations the way a relevant one does, whatever their
            position: a plausible wrong answer the model keeps giving. The paper treats
            every round as independent, so such a document gains evidence at every
            citation; here each irrelevant document is such a lead with probability
            ``a = min(false_leads / (n - k), 0.5)`` and a document's total evidence is the
            likelihood ratio of that mixture, which never lifts it by more than
            ``log(1 / a)`` nats in all (measured on the embedded model over NQ: 7 of 171
            distractors drew 3 or more of 6 citations, against 0.4 expected under
            independence). 0: the paper's update. None (default): the profile's
            ``extra["false_leads"]`` (measured from labelled traces by
            :func:`~gold_panning_integrations.traces.learn_profile`) when present, else
            :data:`DEFAULT_FALSE_LEADS`.
        blind_rate: Probability, in [0, 1), that a relevant document is one this reader
            cannot recognise (it is cited like an irrelevant one). Bounds the total
            evidence against a document at ``log(blind_rate)`` nats, so a reader that
            cannot answer a question cannot bury the retriever's best documents either.
            0: the paper's update. None (default): the profile's ``extra["blind_rate"]``
            when present, else :data:`DEFAULT_BLIND_RATE`.
    """

    rounds: int = 4
    prompts_per_round: int = 1
    spread: Spread = "draw"
    k: int = 1
    policy: str = "belief"
    max_docs_per_prompt: int | None = None
    windows: bool = False
    prior: PriorSpec = "base-rate"
    stop_at: float | None = None
    min_gain: float | None = None
    min_rounds: int = 1
    max_calls: int | None = None
    max_prompt_tokens: int | None = None
    prune_below: float | None = None
    evidence_temperature: float | None = None
    on_failure: Literal["raise", "fallback"] = "raise"
    eps: float = DEFAULT_EPS
    resample_profile: bool = True
    shuffle_top: int = 3
    robust: bool = True
    empty_prompts: EmptyPromptRule = "mixture"
    adapt_level: bool = True
    false_leads: float | None = None
    blind_rate: float | None = None

    def __post_init__(self) -> None:
        for name, check in _CHECKS.items():
            message = check(getattr(self, name))
            if message is not None:
                raise ValueError(f"{name} must be {message}, got {getattr(self, name)!r}")

    @classmethod
    def from_options(cls, config: PanningConfig | None = None, **options: Any) -> PanningConfig:
        """``config`` (or the defaults) with ``options`` replaced; unknown names are refused.

        Raises:
            TypeError: an option name that is not a field (the message lists the fields).
        """
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - names)
        if unknown:
            raise TypeError(
                f"unknown panning option(s) {', '.join(unknown)}; valid options: {', '.join(sorted(names))}"
            )
        base = cls() if config is None else config
        if not isinstance(base, PanningConfig):
            raise TypeError(f"config must be a PanningConfig or None, got {type(base).__name__}")
        return replace(base, **options) if options else base

    @classmethod
    def paper(cls, **options: Any) -> PanningConfig:
        """The paper's update: independent citations at the profile's exact rates (no
        robust likelihood, no document-level mixture, no top shuffle, empty replies count
        as misses, no level adaptation), with ``options`` laid over it."""
        return cls.from_options(cls(**PAPER_UPDATE), **options)

    def with_profile(self, profile: Any) -> PanningConfig:
        """This config with the options left to the profile filled in: ``false_leads`` and
        ``blind_rate`` from ``profile.extra`` (what labelled traces measured for that
        reader), else :data:`DEFAULT_FALSE_LEADS` / :data:`DEFAULT_BLIND_RATE`. Options
        set explicitly always win.

        Raises:
            ValueError: the profile carries an invalid value (the message names it).
        """
        extra = getattr(profile, "extra", None) or {}
        fill: dict[str, Any] = {}
        for name, default in (("false_leads", DEFAULT_FALSE_LEADS), ("blind_rate", DEFAULT_BLIND_RATE)):
            if getattr(self, name) is not None:
                continue
            value = extra.get(name, default)
            message = _CHECKS[name](value)
            if value is None or message is not None:
                raise ValueError(
                    f"the profile's extra[{name!r}] must be {message or 'a number'}, got {value!r}; "
                    "fix or remove it, or pass the option explicitly"
                )
            fill[name] = float(value)
        return replace(self, **fill) if fill else self

    def to_dict(self) -> dict[str, Any]:
        """The options as a plain dict (JSON-ready)."""
        return asdict(self)
