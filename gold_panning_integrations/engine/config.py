"""Every panning option once: a frozen :class:`PanningConfig`, validated once.

Each option is a field declared by :func:`option` (default, check, doc);
:meth:`PanningConfig.options` lists the declarations (:class:`PanningOption`), from which the
class docstring, the adapters' fields (:mod:`gold_panning_integrations.integrations._framework_base`)
and the CLI's flags (:mod:`gold_panning_integrations.cli.commands._config_args`) derive.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
import numbers
import re
import textwrap
import typing
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields, replace
from types import MappingProxyType
from typing import Any, Literal

from .beliefs import DEFAULT_EPS, POLICIES, PriorSpec
from .priors import DEFAULT_HEAD_DECAY, DEFAULT_SCORE_TEMPERATURE

__all__ = [
    "DEFAULT_BLIND_RATE",
    "DEFAULT_CONTENT_FREE",
    "DEFAULT_EXPECTED_RELEVANT",
    "DEFAULT_FALSE_LEADS",
    "DEFAULT_SELF_CITING",
    "DEFAULT_SILENT_RATE",
    "PAPER_UPDATE",
    "SETTINGS",
    "EmptyPromptRule",
    "OnFailure",
    "PanningConfig",
    "PanningOption",
    "RetrieverPrior",
    "Spread",
    "option",
]

DEFAULT_FALSE_LEADS = 0.25
"""``false_leads`` when neither the options nor the profile set it."""

DEFAULT_BLIND_RATE = 0.1
"""``blind_rate`` when neither the options nor the profile set it: a reader that reads
(the models the generic profile was measured on). Small models measure more (0.22 for
Qwen2.5-Coder-0.5B, 0.36 for SmolLM2-135M on NQ passages) and carry it in their profiles."""

DEFAULT_EXPECTED_RELEVANT = 1.0
"""``expected_relevant`` when neither the options nor the profile set it: one relevant
candidate per question on average, whatever ``k`` asks for."""

DEFAULT_SILENT_RATE = 0.1
"""``silent_rate`` when neither the options nor the profile set it."""

DEFAULT_CONTENT_FREE = 0.5
"""``content_free`` when neither the options nor the profile set it."""

DEFAULT_SELF_CITING = 0.0
"""``self_citing`` by default: off (``docs/security.md`` shows what 0.25 does, and costs)."""

# The choices of the options of the same name.
EmptyPromptRule = Literal["evidence", "skip", "mixture", "by-position"]
Spread = Literal["draw", "stride", "copies"]
RetrieverPrior = Literal["auto", "rank", "score", "none"]
OnFailure = Literal["raise", "fallback"]

PAPER_UPDATE: dict[str, Any] = {
    "robust": False,
    "shuffle_top": 0,
    "empty_prompts": "evidence",
    "adapt_level": False,
    "false_leads": 0.0,
    "blind_rate": 0.0,
    "self_citing": 0.0,
    "content_free": 0.0,
}
"""The options that turn every extension of the update off (:meth:`PanningConfig.paper`);
the prior is not among them: add ``retriever_prior="none", prior="uniform"``."""

SETTINGS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        "lowest-latency": MappingProxyType({"rounds": 1, "prompts_per_round": 8}),
        "lowest-cost": MappingProxyType({"rounds": 4, "prompts_per_round": 1, "stop_at": 0.6}),
        "highest-accuracy": MappingProxyType({"rounds": 3, "prompts_per_round": 4}),
    }
)
"""Named settings, a few options each, passed like any other
(``GoldPanningRetriever(..., **SETTINGS["lowest-cost"])``, :meth:`PanningConfig.setting`,
``gold-panning run --setting lowest-cost``); options given beside a setting win. The
defaults (2 rounds of 3 prompts) sit between them."""

Check = Callable[[Any], "str | None"]
"""An option's check: None when the value is valid, else what it must be."""


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(float(value))


def _int_at_least(low: int, *, optional: bool = False) -> Check:
    def check(value: Any) -> str | None:
        if optional and value is None:
            return None
        ok = _is_int(value) and value >= low
        return None if ok else f"an int >= {low}" + (" or None" if optional else "")

    return check


def _number_in(
    low: float,
    high: float | None,
    *,
    optional: bool = True,
    low_closed: bool = False,
    high_closed: bool = False,
) -> Check:
    """A finite number between ``low`` and ``high`` (None: no upper bound), each end
    open unless closed."""

    def check(value: Any) -> str | None:
        if optional and value is None:
            return None
        ok = (
            _is_real(value)
            and (low < value or (low_closed and value == low))
            and (high is None or value < high or (high_closed and value == high))
        )
        if high is None:
            span = f"{'>=' if low_closed else '>'} {low:g}"
        else:
            span = f"in {'[' if low_closed else '('}{low:g}, {high:g}{']' if high_closed else ')'}"
        return None if ok else f"a number {span}" + (" or None" if optional else "")

    return check


def _one_of(*choices: str) -> Check:
    def check(value: Any) -> str | None:
        if value in choices:
            return None
        return " or ".join(", ".join(repr(c) for c in choices).rsplit(", ", 1))

    return check


def _flag(value: Any) -> str | None:
    return None if isinstance(value, bool) else "True or False"


def _policy(value: Any) -> str | None:
    return None if value in POLICIES else f"one of {', '.join(POLICIES)}"


def option(
    default: Any,
    doc: str,
    *,
    check: Check | None = None,
    choices: tuple[str, ...] | None = None,
    profile_default: Any = None,
) -> Any:
    """Declare one :class:`PanningConfig` option as a dataclass field (the attributes of
    :class:`PanningOption`; ``doc``'s first sentence is the CLI's help). ``check`` defaults
    to one of ``choices``."""
    if check is None:
        if choices is None:
            raise TypeError("an option needs a check or choices")
        check = _one_of(*choices)
    metadata = {
        "doc": " ".join(doc.split()),
        "check": check,
        "choices": choices,
        "profile_default": profile_default,
    }
    return dataclasses.field(default=default, metadata=metadata)


@dataclass(frozen=True)
class PanningOption:
    """The declaration of one :class:`PanningConfig` option, as adapters and the CLI read it.

    Attributes:
        name: The field name (``max_calls``; the CLI flag is ``--max-calls``).
        default: The default value.
        doc: What the option does.
        check: ``value -> None`` when valid, else what the value must be.
        type: The field's annotation, resolved (``int``, ``float | None``, a ``Literal``).
        choices: The accepted values of a choice option, else None.
        profile_default: For an option left to the profile (default None,
            :meth:`PanningConfig.with_profile`): its value when the profile has none.
    """

    name: str
    default: Any
    doc: str
    check: Check
    type: Any
    choices: tuple[str, ...] | None = None
    profile_default: Any = None

    @property
    def summary(self) -> str:
        """The doc's first sentence, without reST markup (the CLI's help)."""
        first = re.split(r"(?<=[.:])\s+(?=[A-Z0-9`(])", self.doc, maxsplit=1)[0]
        return first.replace("``", "").rstrip(":").rstrip(".")

    @property
    def optional(self) -> bool:
        """Whether None is a valid value (it disables the option or defers to the profile)."""
        return type(None) in typing.get_args(self.type)

    @property
    def kind(self) -> type:
        """The value's Python type: ``bool``, ``int``, ``float`` or ``str``."""
        if self.choices is not None:
            return str
        args = [a for a in typing.get_args(self.type) if a is not type(None)] or [self.type]
        kind = args[0]
        if typing.get_origin(kind) is Literal:
            return str
        return kind if isinstance(kind, type) else str

    def validate(self, value: Any) -> None:
        """Raise ValueError naming the option and the value when ``value`` is invalid."""
        message = self.check(value)
        if message is not None:
            raise ValueError(f"{self.name} must be {message}, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class PanningConfig:
    # The docstring is generated from the declarations below (see _class_doc).

    rounds: int = option(
        2,
        "Maximum number of rounds, run one after another: the number of sequential model "
        "calls, which sets the latency (an int >= 1).",
        check=_int_at_least(1),
    )
    prompts_per_round: int = option(
        3,
        "Prompts sent together in each round (>= 1), each with its own placement (see "
        "``spread``) and its own labels. Beliefs are updated on all of them before the next "
        "round is planned; a round costs ``prompts_per_round`` calls (times the windows) but "
        "one call of latency when the reader takes concurrent calls.",
        check=_int_at_least(1),
    )
    spread: Spread = option(
        "draw",
        "How the prompts of one round differ when ``prompts_per_round > 1`` (the first "
        "prompt is always the policy's own placement): ``draw`` ranks by the policy's score "
        "plus Gumbel noise, so a document comes first in proportion to its odds squared and "
        "strong beliefs keep their places; ``stride`` puts the documents ranked ``b, b+B, "
        "b+2B, ...`` on the most diagnostic positions, the others after them in rank order; "
        "``copies`` ranks alike, so only the top shuffle and the labels differ.",
        choices=typing.get_args(Spread),
    )
    k: int | None = option(
        4,
        "Number of documents to select, the top-k (an int >= 1), or None for no count "
        "limit: every document that passes ``min_relevance`` and ``recall_target`` (all of "
        "them when neither is set). It chooses what is returned, after the fact: no "
        "probability depends on it.",
        check=_int_at_least(1, optional=True),
    )
    policy: str = option(
        "belief",
        "How documents are placed each round: ``belief`` (GP-Belief: the likeliest documents "
        "on the most diagnostic positions), ``entropy`` (GP-Entropy: the most uncertain "
        "there), ``random`` (PSC: a random permutation, ranked by citation votes), or "
        "``oracle`` (simulation only; needs ``truth=``).",
        check=_policy,
        choices=POLICIES,
    )
    max_docs_per_prompt: int | None = option(
        None,
        "Context budget in documents per prompt (>= 1; None: all). With more documents, the "
        "lowest-scoring ones sit out each round (left out of the prompt, beliefs unchanged), "
        "unless ``windows`` is set.",
        check=_int_at_least(1, optional=True),
    )
    windows: bool = option(
        False,
        "With more documents than ``max_docs_per_prompt``, split each round into several "
        "prompts (windows) dealt round-robin by score and sent together, instead of leaving "
        "documents out. Each window uses the profile resampled to its size.",
        check=_flag,
    )
    prior: PriorSpec = option(
        "base-rate",
        "The flat prior, used when no per-document prior applies (``retriever_prior='none'``): "
        "``base-rate`` starts every document at probability ``min(m/n, 0.5)``, ``m`` the "
        "expected number of relevant documents, so posteriors read as probabilities; "
        "``uniform`` starts every document at 0.5, the paper's setting (GP-Belief's and "
        "PSC's rankings are the same either way, GP-Entropy's are not).",
        choices=typing.get_args(PriorSpec),
    )
    retriever_prior: RetrieverPrior = option(
        "auto",
        "Prior belief from the order the documents come in (a base retriever's ranking): "
        "``rank`` decays with the rank (see ``prior_top10_recall`` and ``prior_head_decay``); "
        "``score`` is a softmax over the retriever's scores divided by their standard "
        "deviation (see ``prior_temperature``), where every document has a finite score "
        "(else ``rank``, with a warning; all scores equal: flat); ``auto`` is ``score`` where "
        "every one of at least 5 documents has a finite score, the scores never rising along "
        "the documents' order (similarities, not distances), and ``rank`` otherwise (a "
        "retriever's scores carry how sure it was; its order does not); ``none`` is the "
        "flat prior of ``prior``, for documents in no meaningful order. Not used when the "
        "caller passes per-document prior probabilities or log-odds.",
        choices=typing.get_args(RetrieverPrior),
    )
    prior_top10_recall: float | None = option(
        None,
        "Strength of the rank prior's older shape: how often the retriever's top 10 holds a "
        "relevant document, in (0, 1); higher trusts the order more, about ``10/n`` is nearly "
        "flat. Set, it (with ``prior_head_decay``) spreads the rank map's expected count over "
        "the ranks instead of the map's own slope. None: the rank map's shape.",
        check=_number_in(0.0, 1.0),
    )
    prior_head_decay: float | None = option(
        None,
        "The rank prior's older shape inside the top 10: the ratio between consecutive ranks, "
        "in (0, 1]. Closer to 1 trusts the order less (1: flat inside the top 10). Set, it "
        "(with ``prior_top10_recall``, else 0.5) spreads the rank map's expected count over "
        "the ranks instead of the map's own slope. None: the rank map's shape, unless the "
        "profile has a ``prior_head_decay`` and no ``rank_map`` (profiles learned before "
        f"issue 48); read as the profile's value, else {DEFAULT_HEAD_DECAY:g}.",
        check=_number_in(0.0, 1.0, high_closed=True),
        profile_default=DEFAULT_HEAD_DECAY,
    )
    expected_relevant: float | None = option(
        None,
        "How many relevant documents a question has on average among the retriever's first "
        "10 candidates (> 0, below 1 when some questions have none): sets the level of the "
        "prior's rank map, whose slope says how that grows with more candidates and shrinks "
        "with fewer, so one candidate is not near certain and 50 are not each unlikely. "
        "Never ``k``: how many documents you ask for says nothing about how many are "
        "relevant. None: the profile's ``rank_map`` (learned from traces), else its "
        "``expected_relevant``, else even odds that the first 10 hold something relevant "
        f"(read as the profile's value, else {DEFAULT_EXPECTED_RELEVANT:g}, by the stop rules).",
        check=_number_in(0.0, None),
        profile_default=DEFAULT_EXPECTED_RELEVANT,
    )
    min_relevance: float | None = option(
        None,
        "Return only documents whose probability of relevance is at least this, in [0, 1]: "
        "a question then yields 0 to ``k`` documents, none when nothing passes. None: no "
        "threshold.",
        check=_number_in(0.0, 1.0, low_closed=True, high_closed=True),
    )
    recall_target: float | None = option(
        None,
        "Adaptive k: return the shortest prefix of the ranking whose summed probability "
        "covers this share, in (0, 1], of the expected number of relevant documents (the "
        "sum of all posteriors); ``k`` still caps it. None: no adaptive cut.",
        check=_number_in(0.0, 1.0, high_closed=True),
    )
    prior_temperature: float | None = option(
        None,
        "Softness of the score prior, in standard deviations of the scores (> 0); larger is "
        "flatter. A retriever's scores are on its own scale (a BM25 score is not a cosine "
        "similarity), so the temperature belongs to the retriever: ``gold-panning calibrate "
        "--from-traces`` fits it on labelled traces into the profile. None: the profile's "
        "``prior_temperature``; without one ``auto`` reads only the order (the rank prior) and "
        f"``score`` uses {DEFAULT_SCORE_TEMPERATURE:g}, the fit for BM25 over Natural Questions "
        "passages (docs/embedded-model.md).",
        check=_number_in(0.0, None),
    )
    stop_at: float | None = option(
        None,
        "Stop once the mean posterior of the top ``m`` documents reaches this value, in (0, "
        "1), ``m`` the expected number of relevant ones (``expected_relevant`` rounded, >= 1; "
        "not ``k``, so the probabilities do not depend on ``k``). None disables it. Evidence per document is bounded, so a threshold close to 1 "
        "rarely stops.",
        check=_number_in(0.0, 1.0),
    )
    min_gain: float | None = option(
        None,
        "Stop once another round is expected to raise that mean posterior by less than this "
        "(> 0). None disables it.",
        check=_number_in(0.0, None),
    )
    min_rounds: int = option(
        1,
        "Rounds always run before ``stop_at`` or ``min_gain`` may stop (>= 1).",
        check=_int_at_least(1),
    )
    max_calls: int | None = option(
        None,
        "Hard budget of model calls (prompts) per question (>= 1). None: ``rounds`` is the limit.",
        check=_int_at_least(1, optional=True),
    )
    max_prompt_tokens: int | None = option(
        None,
        "Hard budget of prompt tokens per question (>= 1), enforced before each round from "
        "the tokens the reader reported so far (the first round always runs). None: no token "
        "budget.",
        check=_int_at_least(1, optional=True),
    )
    prune_below: float | None = option(
        None,
        "Evidence-ratio floor for pruning, in (0, 1): a document whose evidence (posterior "
        "odds / prior odds) falls below it after it was shown at least twice leaves later "
        "prompts (shorter prompts, the profile resampled to the smaller size). It is not a "
        "posterior floor, and the top-k are never pruned. None disables pruning.",
        check=_number_in(0.0, 1.0),
    )
    evidence_temperature: float | None = option(
        None,
        "Divides every log-likelihood ratio (> 0; above 1 tempers over-confident evidence). "
        "None: the profile's ``evidence_temperature`` when it has one, else 1.",
        check=_number_in(0.0, None),
        profile_default=1.0,
    )
    on_failure: OnFailure = option(
        "raise",
        "When every round fails: ``raise`` an ``AllRoundsFailedError``, or ``fallback`` to "
        "the prior order with ``panned=False``.",
        choices=typing.get_args(OnFailure),
    )
    eps: float = option(
        DEFAULT_EPS,
        "Clamp for rates in the update, in (0, 0.5).",
        check=_number_in(0.0, 0.5, optional=False),
    )
    resample_profile: bool = option(
        True,
        "Resample the profile to each prompt's size (by relative position). If off, "
        "documents take the most diagnostic of the profile's own positions and dummy "
        "documents fill the rest.",
        check=_flag,
    )
    shuffle_top: int = option(
        3,
        "Each round, randomly permute the ``shuffle_top`` highest-scoring documents over the "
        "``shuffle_top`` most diagnostic positions (>= 0; 0 or 1 disables it). Stops a "
        "document that says 'cite the first document listed' from confirming whichever "
        "document leads.",
        check=_int_at_least(0),
    )
    robust: bool = option(
        True,
        "Robust likelihood: before the update, rates become ``0.95 * rate + 0.025`` and any "
        "position whose TPR is below its FPR gets both set to their mean, so a profile made "
        "for another model cannot turn citations into strong evidence the wrong way.",
        check=_flag,
    )
    empty_prompts: EmptyPromptRule = option(
        "mixture",
        "What a prompt whose reply cites nothing counts as: ``evidence`` (a miss for every "
        "shown document, the paper's independent-citation model), ``skip`` (a failed "
        "reading: no update), ``mixture`` (a reply is silent with probability "
        "``silent_rate`` whatever the prompt holds; as far as that does not explain it, an "
        "empty reply says that nothing the reader recognised was shown, and weighs every "
        "shown document alike, by the prompt's mean rates), or ``by-position`` (the same, "
        "each document at its own position's rates: what the reader's likelihood says, "
        "and what learning a profile from traces reads; it sinks whatever sat where the "
        "reader reads best when a reader says nothing).",
        choices=typing.get_args(EmptyPromptRule),
    )
    silent_rate: float | None = option(
        None,
        "Probability, in [0, 1), that a reply cites nothing whatever its prompt holds (the "
        "model abstains, or answers off the documents), used by ``empty_prompts='mixture'`` "
        "and ``'by-position'``. "
        "It is learned from labelled traces, never guessed from the question at hand: a reader "
        "silent in every prompt of one question is evidence that nothing is relevant, as "
        "strong as the profile says. None: the profile's ``silent_rate``, else "
        f"{DEFAULT_SILENT_RATE:g}.",
        check=_number_in(0.0, 1.0, low_closed=True),
        profile_default=DEFAULT_SILENT_RATE,
    )
    adapt_level: bool = option(
        True,
        "Re-estimate the profile's level online: TPR and FPR are scaled by ``(observed + 1) "
        "/ (predicted + 1)`` citations so far (capped at 1), keeping the calibrated shape, "
        "counted over the replies that cite something (empty replies are ``silent_rate``'s): "
        "a model that cites fewer documents per reply than its profile predicts then weighs "
        "each miss less.",
        check=_flag,
    )
    false_leads: float | None = option(
        None,
        "Expected number of irrelevant documents per question (>= 0) cited the way a relevant "
        "one is, whatever their position: a plausible wrong answer the model keeps giving. "
        "With ``a = min(false_leads / (n - k), 0.5)``, no document's evidence lifts it by more "
        "than ``log(1 / a)`` nats in all. 0: the paper's update. None: the profile's "
        f"``false_leads`` (learned from labelled traces), else {DEFAULT_FALSE_LEADS:g}.",
        check=_number_in(0.0, None, low_closed=True),
        profile_default=DEFAULT_FALSE_LEADS,
    )
    blind_rate: float | None = option(
        None,
        "Probability, in [0, 1), that a relevant document is one this reader cannot "
        "recognise (it is cited like an irrelevant one). Bounds the total evidence against a "
        "document at ``log(blind_rate)`` nats, so a reader that cannot answer a question "
        "cannot bury the retriever's best documents either. 0: the paper's update. None: the "
        f"profile's ``blind_rate``, else {DEFAULT_BLIND_RATE:g}.",
        check=_number_in(0.0, 1.0, low_closed=True),
        profile_default=DEFAULT_BLIND_RATE,
    )

    content_free: float | None = option(
        None,
        "Prior probability, in [0, 1), that on a given question the reader's citations "
        "follow the positions, not the documents (a reader the profile does not describe: "
        "one that cites whatever comes first, or nothing at all). Each question's replies "
        "weigh that against the profile (``PanningResult.reader_fit``); as far as they fit "
        "it better, the probabilities stay at the prior's. 0: the profile is trusted, the "
        "paper's update; not applied from the ``uniform`` flat prior, whose 0.5 for every "
        "candidate is no probability to judge a reply by. None: the profile's "
        f"``content_free`` (learned from traces), else {DEFAULT_CONTENT_FREE:g}: a uniform "
        "prior on the share of a question's replies that follow the positions; 0 beside "
        "``self_citing > 0``, whose hypothesis it would stack on (``docs/security.md``).",
        check=_number_in(0.0, 1.0, low_closed=True),
        profile_default=DEFAULT_CONTENT_FREE,
    )

    self_citing: float = option(
        DEFAULT_SELF_CITING,
        "Expected number of documents per question (>= 0) that the reader cites at one rate "
        "whatever their position: a passage that tells the model to cite it, and is obeyed. "
        "A document whose citations fit one flat rate better than the profile's curve is "
        "discounted, and suspected (``PanningResult.suspected``) once that explanation "
        "outweighs all others. 0 (the default): off, the paper's update; also off with "
        "``empty_prompts='skip'``. 0.25 guards against a passage that asks to be cited, at "
        "a cost on readers much better than their profile (docs/security.md).",
        check=_number_in(0.0, None, optional=False, low_closed=True),
    )

    def __post_init__(self) -> None:
        for spec in _specs():
            value = getattr(self, spec.name)
            if value is not spec.default:  # a declared default is valid (checked in tests)
                spec.validate(value)

    @classmethod
    def options(cls) -> tuple[PanningOption, ...]:
        """The declaration of every option, in declaration order."""
        return _specs()

    @classmethod
    def from_options(cls, config: PanningConfig | None = None, **options: Any) -> PanningConfig:
        """``config`` (or the defaults) with ``options`` replaced; TypeError for an unknown
        name (the message lists the fields)."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - names)
        if unknown:
            raise TypeError(
                f"unknown panning option(s) {', '.join(unknown)}; valid options: {', '.join(sorted(names))}"
            )
        if config is None:
            return cls(**options)  # the defaults with options: one construction, one check
        if not isinstance(config, PanningConfig):
            raise TypeError(f"config must be a PanningConfig or None, got {type(config).__name__}")
        return replace(config, **options) if options else config

    @classmethod
    def setting(cls, name: str, **options: Any) -> PanningConfig:
        """The setting ``name`` (a key of :data:`SETTINGS`; else ValueError) with ``options``
        laid over it."""
        if name not in SETTINGS:
            raise ValueError(f"unknown setting {name!r}; choose one of {', '.join(SETTINGS)}")
        return cls.from_options(**{**SETTINGS[name], **options})

    @classmethod
    def paper(cls, **options: Any) -> PanningConfig:
        """The paper's update (:data:`PAPER_UPDATE`) with ``options`` laid over it."""
        return cls.from_options(cls(**PAPER_UPDATE), **options)

    def resolved(self, name: str) -> float:
        """The value of ``name``, an option left to the profile, once :meth:`with_profile`
        filled it in (ValueError before)."""
        value = getattr(self, name)
        if value is None:
            raise ValueError(
                f"{name} is left to the profile and not resolved yet: use config.with_profile(profile)"
            )
        return float(value)

    def with_profile(self, profile: Any) -> PanningConfig:
        """This config with the options left to the profile (those with a
        ``profile_default``) filled in from the profile's attribute of the same name, else
        the ``profile_default``; options set explicitly win, ``profile`` may be None.
        ValueError names an invalid value the profile carries."""
        fill: dict[str, Any] = {}
        for spec in _profile_specs():
            if getattr(self, spec.name) is not None:
                continue
            value = getattr(profile, spec.name, None)
            if value is None:
                fill[spec.name] = self._default_of(spec.name, spec.profile_default)
                continue
            message = spec.check(value)
            if message is not None:
                raise ValueError(
                    f"the profile's {spec.name} must be {message}, got {value!r}; "
                    "fix or remove it, or pass the option explicitly"
                )
            fill[spec.name] = float(value)
        if not fill:
            return self
        # Every value is checked already: skip dataclasses.replace's second full check.
        filled = copy.copy(self)
        filled.__dict__.pop("profile_resolved", None)  # the copy's own, computed anew
        for name, value in fill.items():
            object.__setattr__(filled, name, value)
        return filled

    def _default_of(self, name: str, default: float) -> float:
        """What an option left to the profile takes when the profile does not set it: its
        ``profile_default``, except ``content_free`` beside ``self_citing > 0``, which is 0.
        The reader's check and the self-citing hypothesis each explain a citation away from
        relevance; stacked, a relevant document's early citations read as positional, the
        self-citing test then shows it where it is read worst, and it sinks
        (``docs/security.md``). Set both explicitly to have both."""
        if name == "content_free" and self.self_citing > 0.0:
            return 0.0
        return default

    @functools.cached_property
    def profile_resolved(self) -> bool:
        """True when no option is left to the profile (:meth:`with_profile` has filled
        them in, or each was set): ``with_profile`` would return this config unchanged.
        Computed once per config (the mixture's rates ask it at every update)."""
        return all(getattr(self, spec.name) is not None for spec in _profile_specs())

    def to_dict(self) -> dict[str, Any]:
        """The options as a plain dict (JSON-ready)."""
        return asdict(self)

    @property
    def prior_mass(self) -> float:
        """The expected number of relevant documents: ``expected_relevant`` (resolved
        against the profile), else :data:`DEFAULT_EXPECTED_RELEVANT`; never ``k``."""
        if self.expected_relevant is not None:
            return float(self.expected_relevant)
        return DEFAULT_EXPECTED_RELEVANT

    @property
    def focus(self) -> int:
        """The top documents stop rules, pruning and the mixture's rates watch: the prior
        mass rounded (>= 1). Not ``k``, so that no probability depends on how many
        documents are returned."""
        return max(1, round(self.prior_mass))


@functools.cache
def _specs() -> tuple[PanningOption, ...]:
    hints = typing.get_type_hints(PanningConfig, globalns=globals())
    return tuple(
        PanningOption(
            name=f.name,
            default=f.default,
            doc=f.metadata["doc"],
            check=f.metadata["check"],
            type=hints[f.name],
            choices=f.metadata["choices"],
            profile_default=f.metadata["profile_default"],
        )
        for f in fields(PanningConfig)
    )


@functools.cache
def _profile_specs() -> tuple[PanningOption, ...]:
    return tuple(s for s in _specs() if s.profile_default is not None)


def _class_doc() -> str:
    """The docstring of :class:`PanningConfig`, generated from the declarations."""
    lines = [
        "Options of one panning run (GP-Belief, GP-Entropy or PSC over one question).",
        "",
        "Every option is keyword-only and checked at construction (``ValueError`` naming the",
        "option and the value). :meth:`options` lists the declarations.",
        "",
        "Attributes:",
    ]
    for spec in _specs():
        text = f"{spec.name}: {spec.doc} Default: ``{spec.default!r}``."
        lines += textwrap.wrap(
            text, width=88, initial_indent="    ", subsequent_indent="        ", break_on_hyphens=False
        )
    return "\n".join(lines) + "\n"


PanningConfig.__doc__ = _class_doc()
