"""The one panner class, :class:`GoldPanner`: the reader, the profile and the options
resolved once, at construction (by the rules every entry point follows); each query
(:meth:`GoldPanner.run`, :meth:`GoldPanner.arun`) checked (:func:`check_question`,
:func:`check_documents`) and then panned by the engine's loop
(:class:`~gold_panning_integrations.engine.panner.PanningRun`) with the per-query
options alone (``k``, scores, priors, the reader's keywords)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from typing_extensions import Unpack

from .engine.beliefs import recalibration_of
from .engine.config import (
    EmptyPromptRule,
    OnFailure,
    PanningConfig,
    PriorSpec,
    RetrieverPrior,
    Spread,
)
from .engine.panner import (
    PanningResult,
    PanningRun,
    RunOptions,
    _retriever_prior,
    aread_round,
    check_profile,
    rank_map_of,
    rank_shape_of,
    read_round,
    score_map_of,
    score_temperature,
)
from .engine.records import Seed, check_rng_option, derived_rng, query_scope
from .engine.reranked import RerankHit, check_top_n, document_text, reranked
from .engine.rounds import DecisionRates
from .errors import InvalidInputError
from .profiles import DetectorProfile, resolved_profile
from .profiles._lookup import TaskKind

__all__ = ["GoldPanner", "PanningConfig", "RerankHit", "check_documents", "check_question", "short_repr"]

_LISTED = 5
"""How many further bad documents' indices :func:`check_documents` lists."""

_NO_OPTIONS: Mapping[str, Any] = {}


class _FromConfig:
    """The default of every :class:`GoldPanner` option: ``config``'s value, else
    :class:`PanningConfig`'s default (declared once, there)."""

    def __repr__(self) -> str:
        return "<from config>"


FROM_CONFIG: Any = _FromConfig()
_OPTIONS = frozenset(spec.name for spec in PanningConfig.options())


class GoldPanner:
    """Bayesian active search for the relevant documents of one question.

    Each round the panner scores documents by their belief (``policy="belief"``),
    matches the best to the most diagnostic positions of the detector profile, shows them
    under labels drawn at random for every prompt, asks the reader which shown documents
    answer the question, and updates every shown document's log-odds by Bayes' rule.
    ``run``/``arun(question, documents, *, scores=None, prior_probs=None, ...)`` start
    from the retriever prior over the documents' order and, with ``scores`` for 5
    documents or more, their scores (``retriever_prior``, default ``"auto"``) unless
    ``prior_probs`` or ``prior_log_odds`` is given; pass ``retriever_prior="none"`` for
    documents in no meaningful order. Before any model call they check the input: a
    question with more than whitespace in it, and documents that are all ``str`` (an
    empty one is allowed), else one :class:`~gold_panning_integrations.errors.InvalidInputError`
    naming the value (:func:`check_question`, :func:`check_documents`).

    The reader and the profile are resolved here, once; build one panner and run it for
    every query (concurrent queries share no state but the reader's limits). The options
    are readable as attributes (``panner.rounds``, ``panner.k``).

    Args:
        reader: A reader (``read``/``aread`` of the
            :class:`~gold_panning_integrations.engine.records.Reader` protocol), a
            LangChain chat model, a LlamaIndex LLM, or ``"local"`` for the embedded model;
            adapted once by :func:`~gold_panning_integrations.readers.as_reader` (a
            ``read`` without ``labels`` is wrapped, with one warning). None: only the
            planning helpers are used.
        profile: A ``DetectorProfile`` (or any object with ``tpr``/``fpr``), a bundled
            profile name (``gold_panning_integrations.bundled_profiles()``), a path to a
            profile JSON file (e.g. from ``gold-panning calibrate``), or None: the profile
            the reader recommends for itself (its ``recommended_profile``; for a bundled
            profile of the reader's own model, that model's one measured on ``task``'s
            documents), else the generic ``lost-in-the-middle`` profile with a one-time
            warning (:func:`~gold_panning_integrations.profiles.resolved_profile`). It may
            set options (:meth:`PanningConfig.with_profile`).
        config: A :class:`PanningConfig`; None for the defaults.
        seed: The seed of each run's random stream (placements, labels, tie-breaks), as on
            the adapters and ``gold-panning run --seed``: None (default): derived from the
            question and the documents' text, so the same query gives the same prompts
            and ranking; an int: every run starts that seed's stream anew, so the same call
            twice gives the same output (as on the adapters); ``"fresh"``: fresh entropy on
            every run; a ``numpy.random.Generator``: one stream that this panner's runs
            continue (each run draws where the last stopped).
        rng: The same option under the engine's name; give ``seed`` or ``rng``, not both.
        task: What the documents are, for the profile rule when ``profile`` is None:
            ``"passages"`` (retrieved text, as the integrations pan; the default) or
            ``"kv"`` (one-sentence key-value facts, the calibration task).
        rounds, prompts_per_round, ...: Every :class:`PanningConfig` option, by name
            (listed below, each with its default), laid over ``config``; one left out
            takes ``config``'s value, else :class:`PanningConfig`'s default (declared
            there, once).

    Raises:
        ProfileError: the name or file is not a valid profile (the message says which).
        TypeError: the reader cannot be used as one, or the profile object has no
            ``tpr``/``fpr`` (the message says what is needed).
        ValueError: an option is out of range (the message names it and its value).
        InvalidInputError: ``seed`` and ``rng`` are both given.
    """

    def __init__(
        self,
        reader: Any = None,
        profile: DetectorProfile | str | Path | Any | None = None,
        config: PanningConfig | None = None,
        *,
        seed: Seed = None,
        rng: Seed = None,
        task: TaskKind = "passages",
        rounds: int = FROM_CONFIG,
        prompts_per_round: int = FROM_CONFIG,
        spread: Spread = FROM_CONFIG,
        k: int | None = FROM_CONFIG,
        policy: str = FROM_CONFIG,
        max_docs_per_prompt: int | None = FROM_CONFIG,
        windows: bool = FROM_CONFIG,
        prior: PriorSpec = FROM_CONFIG,
        retriever_prior: RetrieverPrior = FROM_CONFIG,
        prior_top10_recall: float = FROM_CONFIG,
        prior_head_decay: float | None = FROM_CONFIG,
        expected_relevant: float | None = FROM_CONFIG,
        min_relevance: float | None = FROM_CONFIG,
        recall_target: float | None = FROM_CONFIG,
        prior_temperature: float | None = FROM_CONFIG,
        stop_at: float | None = FROM_CONFIG,
        min_gain: float | None = FROM_CONFIG,
        min_rounds: int = FROM_CONFIG,
        max_calls: int | None = FROM_CONFIG,
        max_prompt_tokens: int | None = FROM_CONFIG,
        prune_below: float | None = FROM_CONFIG,
        evidence_temperature: float | None = FROM_CONFIG,
        on_failure: OnFailure = FROM_CONFIG,
        eps: float = FROM_CONFIG,
        resample_profile: bool = FROM_CONFIG,
        shuffle_top: int = FROM_CONFIG,
        robust: bool = FROM_CONFIG,
        empty_prompts: EmptyPromptRule = FROM_CONFIG,
        silent_rate: float | None = FROM_CONFIG,
        adapt_level: bool = FROM_CONFIG,
        false_leads: float | None = FROM_CONFIG,
        blind_rate: float | None = FROM_CONFIG,
        content_free: float | None = FROM_CONFIG,
        self_citing: float = FROM_CONFIG,
    ) -> None:
        if seed is not None and rng is not None:
            raise InvalidInputError(
                f"give seed= or rng=, not both (got seed={seed!r}, rng={rng!r}): they are one option, "
                "the seed of the random stream; seed is its name on the adapters and `gold-panning run`"
            )
        rng = check_rng_option(rng if seed is None else seed, name="rng" if seed is None else "seed")
        if reader is not None:
            from .readers import as_reader

            reader = as_reader(reader)
        if profile is None or isinstance(profile, (str, Path, DetectorProfile)):
            profile, label = resolved_profile(profile, reader=reader, task=task)
        else:  # any object with tpr/fpr
            label = f"{getattr(profile, 'model', 'custom')} ({getattr(profile, 'task', 'unknown')})"
        self.reader = reader
        given = {name: v for name, v in locals().items() if name in _OPTIONS and v is not FROM_CONFIG}
        self._options = PanningConfig.from_options(config, **given)
        # None: each run derives its own stream from its input (:func:`~.engine.records.derived_rng`);
        # an int: each run starts the stream of that seed anew, so a repeated call repeats
        self.seed: int | None = rng if isinstance(rng, int) else None
        """The int seed every run starts its stream from (None: see :attr:`rng`)."""
        self.rng: np.random.Generator | None = (
            None
            if rng is None or isinstance(rng, int)
            else np.random.default_rng(None if rng == "fresh" else rng)
        )
        """The one stream this panner's runs continue (a Generator given, or ``"fresh"``), else None."""
        self._learner: Any = None
        self.use_profile(profile, label=label)

    def use_profile(self, profile: Any, *, label: str | None = None) -> None:
        """Pan the next queries with ``profile`` (any object with ``tpr``/``fpr``): the
        options left to the profile, the decision rates, the maps of the prior and the
        recalibration map are derived from it again; the options given stay."""
        self.profile_label = (
            label or f"{getattr(profile, 'model', 'custom')} ({getattr(profile, 'task', 'unknown')})"
        )
        """How reports name the profile in use (:class:`~.profiles.ResolvedProfile`)."""
        self.profile = check_profile(profile)
        self.config = self._options.with_profile(profile)
        self.evidence_temperature = self.config.resolved("evidence_temperature")
        self.geometry = DecisionRates(
            profile.tpr,
            profile.fpr,
            config=self.config,
            temperature=self.evidence_temperature,
            abstention=getattr(profile, "abstention_map", None),
        )
        self.recalibration = recalibration_of(profile)
        self.score_temperature = score_temperature(self.config, profile)
        self.score_map = score_map_of(self.config, profile)
        self.rank_map = rank_map_of(self._options, profile)
        self.rank_shape = rank_shape_of(self._options, profile)
        self._by_k: dict[int | None, PanningConfig] = {self.config.k: self.config}
        self._priors: dict[int, NDArray[np.float64] | None] = {}

    def _prior(
        self, config: PanningConfig, n: int, scores: Sequence[float | None] | None
    ) -> NDArray[np.float64] | None:
        """The retriever prior of ``n`` documents (:func:`~.engine.panner._retriever_prior`);
        without scores the same for every query of ``n`` documents, so kept per ``n``."""
        if scores is not None and all(v is None for v in scores):
            scores = None  # no document has one
        if scores is None and n in self._priors:
            return self._priors[n]
        prior = _retriever_prior(
            config,
            n,
            scores,
            self.score_temperature,
            self.score_map,
            self.rank_map,
            self.rank_shape,
            mass_given=self._options.expected_relevant is not None,
        )
        if scores is None and len(self._priors) < 256:
            self._priors[n] = prior
        return prior

    def learn_from_traffic(self, *, every: int = 50, window: int = 1000) -> Any:
        """Opt in to learning this panner's profile from the queries it pans, without labels:
        from the :data:`~.calibration.unlabelled.MIN_UNLABELLED_QUERIES`-th query on, every
        ``every`` queries the profile is learned again from the last ``window`` queries'
        traces (:func:`~.calibration.unlabelled.learn_unlabelled`, starting from the
        profile in use now) and used for the next ones (:meth:`use_profile`). Returns the
        :class:`~.calibration.unlabelled.TrafficLearner` (its ``fits`` tell what was learned)."""
        from .calibration.unlabelled import TrafficLearner
        from .profiles import DetectorProfile

        if not isinstance(self.profile, DetectorProfile):
            raise TypeError(
                "learn_from_traffic learns a DetectorProfile from the one in use; this panner's "
                f"profile is a {type(self.profile).__name__}: pass a DetectorProfile, a bundled name or a path"
            )
        self._learner = TrafficLearner(self.profile, every=every, window=window)
        return self._learner

    def _learned(self, result: PanningResult) -> PanningResult:
        """``result``, after the traffic learner (if any) saw it and maybe refitted the profile."""
        learner = self._learner
        if learner is not None:
            profile = learner.observe(result)
            if profile is not None:
                self.use_profile(profile, label=f"learned from {learner.queries} queries' traffic")
        return result

    def __getattr__(self, name: str) -> Any:
        # Read access to the options as attributes (panner.rounds, panner.k, ...).
        if name != "config" and "config" in self.__dict__ and hasattr(self.config, name):
            return getattr(self.config, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _config(self, k: int | None) -> PanningConfig:
        """The panner's config with ``k`` (checked once per value, then kept)."""
        config = self._by_k.get(k)
        if config is None:
            if len(self._by_k) > 64:  # many distinct k: keep the panner's own only
                self._by_k = {self.config.k: self.config}
            config = self._by_k[k] = replace(self.config, k=k)
        return config

    def _start(
        self, method: str, question: str, documents: Sequence[Any], options: RunOptions
    ) -> tuple[PanningRun, Mapping[str, Any]]:
        """The run of one call of :meth:`run` (``method="read"``) or :meth:`arun`, after
        :func:`check_question` and :func:`check_documents`, and the reader's keywords."""
        check_question(question)
        check_documents(documents)
        unknown = sorted(set(options) - set(RunOptions.__annotations__))
        if unknown:
            raise TypeError(f"GoldPanner.run/arun got unexpected keyword argument(s) {', '.join(unknown)}")
        if self.reader is None or not hasattr(self.reader, method):
            sync = method == "read"
            raise TypeError(
                f"GoldPanner.{'run' if sync else 'arun'} needs a reader with "
                f"{'a' if sync else 'an async'} {method}(question, documents, *, labels) method"
            )
        k = options.get("k")
        config = self.config if k is None else self._config(k)
        rng = options.get("rng")
        if rng is None:  # the seed's stream anew, the panner's stream, else one derived from the input
            if self.seed is not None:
                rng = np.random.default_rng(self.seed)
            else:
                rng = self.rng if self.rng is not None else derived_rng(question, documents)
        prior_probs, prior_log_odds = options.get("prior_probs"), options.get("prior_log_odds")
        if prior_probs is None and prior_log_odds is None:
            prior_probs = self._prior(config, len(documents), options.get("scores"))
        run = PanningRun(
            len(documents),
            config=config,
            geometry=self.geometry,
            recalibration=self.recalibration,
            reader=self.reader,
            prior_probs=prior_probs,
            prior_log_odds=prior_log_odds,
            rng=rng,
            truth=options.get("truth"),
            scores=options.get("scores"),
        )
        return run, options.get("reader_options") or _NO_OPTIONS

    def run(self, question: str, documents: Sequence[Any], **options: Unpack[RunOptions]) -> PanningResult:
        """Pan ``n`` ``documents`` (in the base retriever's order) for ``question`` with the
        synchronous reader.

        Args (the keyword options are :class:`~.engine.panner.RunOptions`, all optional):
            k: Override of the panner's ``k`` for this call.
            scores: The retriever's score per document (None where unknown), ``(n,)``;
                for ``retriever_prior="auto"`` (the default) and ``"score"``.
            prior_probs: Prior probabilities, ``(n,)``; replace the retriever prior.
            prior_log_odds: Prior log-odds, ``(n,)``; replace the retriever prior.
            rng: Generator for this call (default: the panner's, else derived).
            truth: Relevance labels, ``(n,)``, for the ``oracle`` policy.
            reader_options: Keyword arguments of every ``read`` call of this query (e.g.
                ``{"config": {"callbacks": ...}}`` for a LangChain chat-model reader, so its
                model calls nest under the caller's run).

        Raises:
            InvalidInputError: the question or the documents are not text.
            FatalReaderError: the reader reported a permanent failure; the run ends at once.
            AllRoundsFailedError: every round failed and ``on_failure="raise"``.
        """
        run, extra = self._start("read", question, documents, options)
        with query_scope():  # one query: the reader's per-query state (its deadline)
            while (plan := run.next_round()) is not None:
                run.observe(plan, read_round(self.reader, question, documents, plan.windows, extra))
        return self._learned(run.result())

    async def arun(
        self, question: str, documents: Sequence[Any], **options: Unpack[RunOptions]
    ) -> PanningResult:
        """Asynchronous :meth:`run` (``reader.aread``; a round's prompts sent concurrently)."""
        run, extra = self._start("aread", question, documents, options)
        with query_scope():  # as in run
            while (plan := run.next_round()) is not None:
                run.observe(plan, await aread_round(self.reader, question, documents, plan.windows, extra))
        return self._learned(run.result())

    def rerank(
        self,
        documents: Sequence[Any],
        query: str,
        *,
        top_n: int | None = None,
        **options: Unpack[RunOptions],
    ) -> list[RerankHit]:
        """``documents`` reranked for ``query``, the shape of LangChain's
        ``CohereRerank.rerank``: ``[{"index": i, "relevance_score": p}, ...]``, best first,
        the first ``top_n`` of the ranking (None or -1: every document), each with its
        posterior probability of relevance (:func:`~.engine.reranked.reranked`).

        A document is a text or a ``{"text": ...}`` dict (Cohere's form; other fields are not
        read); the keyword options are :meth:`run`'s.

        Raises:
            ValueError: ``top_n`` is not an int >= 1, None or -1.
            InvalidInputError: as :meth:`run`, or a dict without a ``"text"`` string.
        """
        top_n = check_top_n(top_n)
        return reranked(self.run(query, _texts(documents), **options), top_n=top_n)

    async def arerank(
        self,
        documents: Sequence[Any],
        query: str,
        *,
        top_n: int | None = None,
        **options: Unpack[RunOptions],
    ) -> list[RerankHit]:
        """Asynchronous :meth:`rerank` (:meth:`arun`, the reader's ``aread``)."""
        top_n = check_top_n(top_n)
        return reranked(await self.arun(query, _texts(documents), **options), top_n=top_n)


def _texts(documents: Any) -> Any:
    """Cohere's ``{"text": ...}`` dicts as their texts (:func:`~.engine.reranked.document_text`);
    anything else as given, for :func:`check_documents` to check."""
    if isinstance(documents, (str, bytes, Mapping)) or not isinstance(documents, Sequence):
        return documents
    return [document_text(d, i) for i, d in enumerate(documents)]


def short_repr(value: Any, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters (``...`` at the end when cut)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_question(question: Any) -> str:
    """``question`` when it is a ``str`` holding more than whitespace.

    Raises:
        InvalidInputError: ``question`` is not a ``str`` (``None``, ``bytes``, ...), or is
            empty or whitespace only; the message shows the value.
    """
    if not isinstance(question, str):
        hint = " (decode it first, e.g. .decode('utf-8'))" if isinstance(question, bytes) else ""
        raise InvalidInputError(
            f"the question must be text (a str), got {type(question).__name__} {short_repr(question)}{hint}"
        )
    if not question.strip():
        what = "empty" if not question else "whitespace only"
        raise InvalidInputError(
            f"the question is {what} ({short_repr(question)}): pass the question the documents "
            "are to be ranked for"
        )
    return question


def check_documents(documents: Any) -> Sequence[str]:
    """``documents`` when it is a sequence (a list, a tuple) of ``str``, ``(n,)``; empty
    strings and an empty sequence are allowed (an empty document is data, not an error).

    Raises:
        InvalidInputError: ``documents`` is None, a single string, a mapping or not a
            sequence, or a document is not a ``str`` (``None``, ``bytes``, a number, any
            other object, which a reader would show as its ``str()``): the message names
            the first such document by index, type and value, and the indices of up to
            five more.
    """
    if (
        documents is None
        or isinstance(documents, (str, bytes, bytearray, Mapping))
        or not hasattr(documents, "__len__")
        or not hasattr(documents, "__getitem__")
    ):
        raise InvalidInputError(
            "documents must be a list of str (one text per document), got "
            f"{type(documents).__name__} {short_repr(documents)}"
        )
    bad = [i for i, doc in enumerate(documents) if not isinstance(doc, str)]
    if not bad:
        return documents  # type: ignore[no-any-return]
    first = documents[bad[0]]
    if isinstance(first, (bytes, bytearray)):
        hint = "decode it first (e.g. .decode('utf-8'))"
    elif first is None:
        hint = "drop it, or pass its text"
    else:
        hint = "pass its text"
    more = ""
    if len(bad) > 1:
        listed = ", ".join(str(i) for i in bad[1 : 1 + _LISTED]) + (", ..." if len(bad) > 1 + _LISTED else "")
        more = f"; {len(bad) - 1} more document(s) are not text either (at {listed})"
    raise InvalidInputError(
        f"document {bad[0]} is not text: {type(first).__name__} {short_repr(first)}; {hint}. "
        f"Every document must be a str (an empty string is allowed){more}"
    )


def _options_doc() -> str:
    """The options' part of :class:`GoldPanner`'s docstring, from their declarations."""
    lines = ["", "    Panning options (keyword-only; :class:`PanningConfig` documents each in full):"]
    for spec in PanningConfig.options():
        lines.append(f"        {spec.name}: {spec.summary} (default ``{spec.default!r}``).")
    return "\n".join(lines) + "\n"


GoldPanner.__doc__ = (GoldPanner.__doc__ or "").rstrip() + "\n" + _options_doc()
