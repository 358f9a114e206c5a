"""The public :class:`GoldPanner`: the engine's panner
(:class:`~gold_panning_integrations.engine.panner.Panner`, which never imports
:mod:`gold_panning_integrations.profiles`) with the profile and the reader resolved at the
edge, once, by the rules every entry point follows."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from typing_extensions import Unpack

from .engine.config import PanningConfig
from .engine.panner import Panner, RunOptions
from .engine.reranked import RerankHit, check_top_n, reranked
from .engine.seeding import RngOption
from .profiles import DetectorProfile, resolved_profile

__all__ = ["GoldPanner", "PanningConfig", "RerankHit"]


class GoldPanner(Panner):
    """Bayesian active search for the relevant documents of one question.

    Each round the panner scores documents by their belief (``policy="belief"``),
    matches the best to the most diagnostic positions of the detector profile, shows them
    under labels drawn at random for every prompt, asks the reader which shown documents
    answer the question, and updates every shown document's log-odds by Bayes' rule.
    ``run``/``arun(question, documents, *, scores=None, prior_probs=None, ...)`` start
    from the retriever prior over the documents' order and, with ``scores`` for 5
    documents or more, their scores (``retriever_prior``, default ``"auto"``) unless
    ``prior_probs`` or ``prior_log_odds`` is given; pass ``retriever_prior="none"`` for
    documents in no meaningful order.

    Args:
        reader: A reader (``read``/``aread`` of the
            :class:`~gold_panning_integrations.engine.reading.Reader` protocol), a
            LangChain chat model, a LlamaIndex LLM, or ``"local"`` for the embedded model;
            adapted once by :func:`~gold_panning_integrations.readers.as_reader` (a
            ``read`` without ``labels`` is wrapped, with one warning). None: only the
            planning helpers are used.
        profile: A ``DetectorProfile`` (or any object with ``tpr``/``fpr``), a bundled
            profile name (``gold_panning_integrations.bundled_profiles()``), a path to a
            profile JSON file (e.g. from ``gold-panning calibrate``), or None: the profile
            the reader recommends for itself (its ``recommended_profile``), else the
            generic ``lost-in-the-middle`` profile with a one-time warning.
        config: A :class:`PanningConfig`; None for the defaults.
        rng: None (default): each run derives its random stream (placements, labels,
            tie-breaks) from the question and the documents' text, so the same query
            gives the same prompts and ranking; ``"fresh"``: fresh entropy on every run;
            an int or a ``numpy.random.Generator``: one stream for this panner's runs.
        **options: Any :class:`PanningConfig` field (``rounds=4, k=1, ...``).

    Raises:
        ProfileError: the name or file is not a valid profile (the message says which).
        TypeError: the reader cannot be used as one (the message says what is needed).
        ValueError: an option is out of range (the message names it and its value).
    """

    def __init__(
        self,
        reader: Any = None,
        profile: DetectorProfile | str | Path | Any | None = None,
        config: PanningConfig | None = None,
        *,
        rng: RngOption = None,
        **options: Any,
    ) -> None:
        if reader is not None:
            from .readers import as_reader

            reader = as_reader(reader)
        if profile is None or isinstance(profile, (str, Path, DetectorProfile)):
            profile, label = resolved_profile(profile, reader=reader)
        else:  # any object with tpr/fpr
            label = f"{getattr(profile, 'model', 'custom')} ({getattr(profile, 'task', 'unknown')})"
        self.profile_label = label
        """How reports name the profile in use (:class:`~.profiles.ResolvedProfile`)."""
        super().__init__(reader, profile, config, rng=rng, **options)

    def rerank(
        self,
        query: str,
        documents: Sequence[Any],
        *,
        top_n: int | None = None,
        **options: Unpack[RunOptions],
    ) -> list[RerankHit]:
        """Pan ``documents`` for ``query`` (:meth:`run`, whose keyword options it takes)
        and return ``(index, relevance_score)`` pairs, best first: the first ``top_n``
        of the ranking (None: every document), each with its posterior probability of
        relevance (:func:`~.engine.reranked.reranked`), as scoring rerankers such as
        LangChain's ``CohereRerank.rerank`` return them."""
        top_n = check_top_n(top_n)
        return reranked(self.run(query, documents, **options), top_n=top_n)

    async def arerank(
        self,
        query: str,
        documents: Sequence[Any],
        *,
        top_n: int | None = None,
        **options: Unpack[RunOptions],
    ) -> list[RerankHit]:
        """Asynchronous :meth:`rerank` (:meth:`arun`, the reader's ``aread``)."""
        top_n = check_top_n(top_n)
        return reranked(await self.arun(query, documents, **options), top_n=top_n)
