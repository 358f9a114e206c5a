"""Every panning option once: a frozen :class:`PanningConfig`, validated once.

:class:`~gold_panning_integrations.engine.panner.GoldPanner`, the batch simulator
(:func:`~gold_panning_integrations.engine.simulate.simulate`), the framework adapters and
the CLI all take one of these, so an option is declared, documented and checked in one
place.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Literal

from .beliefs import DEFAULT_EPS, PriorSpec
from .policies import POLICIES

__all__ = ["PanningConfig", "EmptyPromptRule"]

EmptyPromptRule = Literal["evidence", "skip", "mixture"]
"""What a prompt whose reply cites nothing at all counts as: ``"evidence"`` (a miss for
every shown document, the paper's independent-citation model), ``"skip"`` (a failed
reading of the whole prompt: no update), or ``"mixture"`` (a reply is silent with a
probability estimated online from how many more empty replies came than the profile
expects; an empty reply is a miss as far as it is not explained by silence)."""


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(float(value))


@dataclass(frozen=True)
class PanningConfig:
    """Options of one panning run (GP-Belief, GP-Entropy or PSC over one question).

    Attributes:
        rounds: Maximum number of rounds (``>= 1``). The paper uses 8; GP-Belief usually
            reaches PSC's 8-round quality in about half of that.
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
    """

    rounds: int = 4
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

    def __post_init__(self) -> None:
        for name, low in (("rounds", 1), ("k", 1), ("min_rounds", 1), ("shuffle_top", 0)):
            value = getattr(self, name)
            if not _is_int(value) or value < low:
                raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
        for name in ("max_docs_per_prompt", "max_calls", "max_prompt_tokens"):
            value = getattr(self, name)
            if value is not None and (not _is_int(value) or value < 1):
                raise ValueError(f"{name} must be an int >= 1 or None, got {value!r}")
        if self.policy not in POLICIES:
            raise ValueError(f"unknown policy {self.policy!r}; choose one of {', '.join(POLICIES)}")
        for name in ("stop_at", "prune_below"):
            value = getattr(self, name)
            if value is not None and not (_is_real(value) and 0.0 < value < 1.0):
                raise ValueError(f"{name} must be a number in (0, 1) or None, got {value!r}")
        if self.min_gain is not None and not (_is_real(self.min_gain) and self.min_gain > 0.0):
            raise ValueError(f"min_gain must be a number > 0 or None, got {self.min_gain!r}")
        temp = self.evidence_temperature
        if temp is not None and not (_is_real(temp) and temp > 0.0):
            raise ValueError(f"evidence_temperature must be a number > 0 or None, got {temp!r}")
        if not (_is_real(self.eps) and 0.0 < self.eps < 0.5):
            raise ValueError(f"eps must be a number in (0, 0.5), got {self.eps!r}")
        if self.on_failure not in ("raise", "fallback"):
            raise ValueError(f"on_failure must be 'raise' or 'fallback', got {self.on_failure!r}")
        if self.prior not in ("base-rate", "uniform"):
            raise ValueError(f"prior must be 'base-rate' or 'uniform', got {self.prior!r}")
        if self.empty_prompts not in ("evidence", "skip", "mixture"):
            raise ValueError(
                f"empty_prompts must be 'evidence', 'skip' or 'mixture', got {self.empty_prompts!r}"
            )
        for name in ("windows", "resample_profile", "robust", "adapt_level"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")

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

    def to_dict(self) -> dict[str, Any]:
        """The options as a plain dict (JSON-ready)."""
        return asdict(self)
