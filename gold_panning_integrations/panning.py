"""The public :class:`GoldPanner`: the engine's panner
(:class:`~gold_panning_integrations.engine.panner.Panner`, which never imports
:mod:`gold_panning_integrations.profiles`) with the profile and the reader resolved at the
edge, once, by the rules every entry point follows, and each run's question and documents
checked there (:func:`check_question`, :func:`check_documents`) before any model call."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from typing_extensions import Unpack

from .engine.config import PanningConfig
from .engine.panner import Panner, RunOptions
from .engine.reranked import RerankHit, check_top_n, reranked
from .engine.seeding import RngOption, check_rng_option
from .errors import InvalidInputError
from .profiles import DetectorProfile, resolved_profile
from .profiles._lookup import TaskKind

if TYPE_CHECKING:
    from .engine.panner import _Run

__all__ = ["GoldPanner", "PanningConfig", "RerankHit", "check_documents", "check_question", "short_repr"]

_LISTED = 5
"""How many further bad documents' indices :func:`check_documents` lists."""


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
    documents in no meaningful order. Before any model call they check the input: a
    question with more than whitespace in it, and documents that are all ``str`` (an
    empty one is allowed), else one :class:`~gold_panning_integrations.errors.InvalidInputError`
    naming the value (:func:`check_question`, :func:`check_documents`).

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
            the reader recommends for itself (its ``recommended_profile``; for a bundled
            profile of the reader's own model, that model's one measured on ``task``'s
            documents), else the generic ``lost-in-the-middle`` profile with a one-time
            warning (:func:`~gold_panning_integrations.profiles.resolved_profile`).
        config: A :class:`PanningConfig`; None for the defaults.
        seed: The seed of each run's random stream (placements, labels, tie-breaks), as on
            the adapters and ``gold-panning run --seed``: None (default): derived from the
            question and the documents' text, so the same query gives the same prompts
            and ranking; ``"fresh"``: fresh entropy on every run; an int (or a
            ``numpy.random.Generator``): one stream for this panner's runs.
        rng: The same option under the engine's name; give ``seed`` or ``rng``, not both.
        task: What the documents are, for the profile rule when ``profile`` is None:
            ``"passages"`` (retrieved text, as the integrations pan; the default) or
            ``"kv"`` (one-sentence key-value facts, the calibration task).
        **options: Any :class:`PanningConfig` field (``rounds=4, k=1, ...``).

    Raises:
        ProfileError: the name or file is not a valid profile (the message says which).
        TypeError: the reader cannot be used as one (the message says what is needed).
        ValueError: an option is out of range (the message names it and its value).
        InvalidInputError: ``seed`` and ``rng`` are both given.
    """

    def __init__(
        self,
        reader: Any = None,
        profile: DetectorProfile | str | Path | Any | None = None,
        config: PanningConfig | None = None,
        *,
        seed: RngOption = None,
        rng: RngOption = None,
        task: TaskKind = "passages",
        **options: Any,
    ) -> None:
        if seed is not None and rng is not None:
            raise InvalidInputError(
                f"give seed= or rng=, not both (got seed={seed!r}, rng={rng!r}): they are one option, "
                "the seed of the random stream; seed is its name on the adapters and `gold-panning run`"
            )
        if seed is not None:
            rng = check_rng_option(seed, name="seed")
        if reader is not None:
            from .readers import as_reader

            reader = as_reader(reader)
        if profile is None or isinstance(profile, (str, Path, DetectorProfile)):
            profile, label = resolved_profile(profile, reader=reader, task=task)
        else:  # any object with tpr/fpr
            label = f"{getattr(profile, 'model', 'custom')} ({getattr(profile, 'task', 'unknown')})"
        self.profile_label = label
        """How reports name the profile in use (:class:`~.profiles.ResolvedProfile`)."""
        super().__init__(reader, profile, config, rng=rng, **options)

    def _start(self, method: str, question: str, documents: Sequence[Any], options: RunOptions) -> _Run:
        """The engine's start of a run, after :func:`check_question` and :func:`check_documents`."""
        check_question(question)
        check_documents(documents)
        return super()._start(method, question, documents, options)

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
