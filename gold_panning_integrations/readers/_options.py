"""Every reader option once: name, default, check, doc and command-line flag.

A reader option is declared once, here (as
:func:`~gold_panning_integrations.engine.config.option` declares a panning option). Each
reader's constructor names the options it takes as typed keyword-only parameters, so an IDE
and ``help()`` show them; ``tests/readers/test_reader_options.py`` checks that every
signature's defaults agree with these declarations (or the reader's ``option_defaults``).
``BaseReader.__init__`` checks, defaults and stores them; :func:`declared_options` writes
their docs into each reader's ``Args:``; :mod:`._cli_args` makes the commands' flags.
"""

from __future__ import annotations

import inspect
import math
import os
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ._cache import ReplyCache, make_cache
from ._limits import Wait, check_max_attempts, check_optional_int, make_wait
from ._prompt import PromptTemplate, check_max_chars_per_doc
from .answer import AnswerAttribution

__all__ = [
    "DEFAULT_CONTEXT_TOKENS",
    "DEFAULT_MAX_CONCURRENCY",
    "READER_OPTIONS",
    "AnswerAttribution",
    "CacheOption",
    "Mode",
    "PromptTemplate",
    "ReaderOption",
    "ResponseFormat",
    "Structured",
    "Wait",
    "declared_options",
    "given_options",
    "options_taken",
    "resolve_options",
]

Mode = Literal["cite", "answer"]
Structured = Literal["auto"] | bool
ResponseFormat = Literal["auto", "json_schema", "json_object", "text"]
CacheOption = ReplyCache | str | os.PathLike[str] | bool | None
"""The types of the ``mode``, ``structured``, ``response_format`` and ``cache`` options
(the other options' types are imported here too, for the readers' signatures)."""

DEFAULT_MAX_CONCURRENCY = 16
"""Calls in flight through one network reader unless ``max_concurrency=`` says otherwise."""

DEFAULT_CONTEXT_TOKENS = 8192
"""A network reader's prompt budget in tokens (prompt and reply) unless ``context_tokens=``
says otherwise: the context of most small open models, far below hosted ones, so that a
long document is cut instead of sent whole (estimated at 3 characters per token)."""

Check = Callable[[Any], Any]


@dataclass(frozen=True)
class ReaderOption:
    """One reader option's declaration (which readers take it, and its type, are in their
    signatures).

    Attributes:
        name: The keyword (and attribute) name.
        default: The default value.
        doc: What the option does, for every reader's docstring.
        check: Returns the value validated and normalised, or raises naming it (None: any).
        base: Whether every reader has it (taken, or fixed at its default or the reader's
            ``option_defaults``); else only the readers that take it.
        store: Store the checked value as an attribute of the reader.
        flag: The command-line flag (``"--cache"``), or None for none.
        cli: Further ``argparse.add_argument`` keywords (a ``default_flag`` is the flag's
            default; without it None, and the reader's own default applies).
    """

    name: str
    default: Any
    doc: str
    check: Check | None = None
    base: bool = True
    store: bool = True
    flag: str | None = None
    cli: Mapping[str, Any] = field(default_factory=dict)

    def checked(self, value: Any) -> Any:
        """``value`` validated and normalised (the check's result)."""
        return value if self.check is None else self.check(value)


READER_OPTIONS: dict[str, ReaderOption] = {}
"""Every declared reader option by name, in declaration order."""


def _declare(
    name: str,
    *,
    default: Any,
    doc: str,
    check: Check | None = None,
    base: bool = True,
    store: bool = True,
    flag: str | None = None,
    **cli: Any,
) -> None:
    READER_OPTIONS[name] = ReaderOption(name, default, doc, check, base, store, flag, dict(cli))


def options_taken(cls: type) -> list[ReaderOption]:
    """The declared options ``cls``'s constructor takes (its keyword-only parameters)."""
    params = inspect.signature(cls).parameters
    return [o for o in READER_OPTIONS.values() if o.name in params]


def resolve_options(cls: type, given: Mapping[str, Any]) -> dict[str, Any]:
    """Checked values of every option a reader of class ``cls`` has: the ones ``given``
    (its constructor's), else the class's ``option_defaults``, else the declared default
    (TypeError, as Python words it, for a name that is no declared option)."""
    for name in given:
        if name not in READER_OPTIONS:
            raise TypeError(f"{cls.__name__}.__init__() got an unexpected keyword argument {name!r}")
    overrides: Mapping[str, Any] = getattr(cls, "option_defaults", {})
    return {
        o.name: o.checked(given.get(o.name, overrides.get(o.name, o.default)))
        for o in READER_OPTIONS.values()
        if o.name in given or o.base
    }


def given_options(names: Mapping[str, Any]) -> dict[str, Any]:
    """The declared options among ``names`` (a constructor's ``locals()``), to pass on to
    ``BaseReader.__init__``."""
    return {k: v for k, v in names.items() if k in READER_OPTIONS}


def declared_options(cls: type) -> type:
    """Class decorator: the reader's docstring gets an ``Args:`` entry for each declared
    option its constructor takes (the declared doc, plus its ``option_notes``); for
    ``BaseReader`` itself, which takes them as ``**options``, each base option."""
    notes: Mapping[str, str] = getattr(cls, "option_notes", {})
    taken = options_taken(cls) or [o for o in READER_OPTIONS.values() if o.base]  # BaseReader: **options
    entries = [(o.name, " ".join(filter(None, (o.doc, notes.get(o.name))))) for o in taken]
    cls.__doc__ = _doc_with(cls.__doc__ or "", entries)
    return cls


def _doc_with(doc: str, entries: list[tuple[str, str]]) -> str:
    """``doc`` with ``name: text`` entries added at the end of its ``Args:`` section
    (a new section at the end when it has none)."""
    lines = doc.split("\n")
    start = next((i for i, line in enumerate(lines) if line.strip() == "Args:"), None)
    if start is None:
        lines += ["", "    Args:"]
        start = len(lines) - 1
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = start + 1
    while end < len(lines) and (
        not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > indent
    ):
        end += 1
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    pad = " " * (indent + 4)
    added = [
        textwrap.fill(f"{name}: {text}", width=92, initial_indent=pad, subsequent_indent=pad + "    ")
        for name, text in entries
    ]
    return "\n".join(lines[:end] + added + lines[end:])


# ----------------------------------------------------------------------------- checks
def check_mode(mode: Any) -> str:
    """Validate ``mode`` (``"cite"`` or ``"answer"``)."""
    if mode not in ("cite", "answer"):
        raise ValueError(
            f"mode must be 'cite' (the model lists document numbers) or 'answer' "
            f"(the model answers; documents containing the answer count as cited), got {mode!r}"
        )
    return str(mode)


def check_context_tokens(value: Any) -> int | None:
    """Validate a ``context_tokens`` option: None (no fitting) or an int >= 64."""
    return check_optional_int(
        value,
        64,
        "context_tokens must be an integer >= 64 (the prompt budget in tokens, reply included) or None "
        "(no fitting)",
    )


def check_structured(structured: Any) -> Any:
    """Validate a ``structured`` option: ``"auto"``, ``True`` or ``False``."""
    if structured not in ("auto", True, False):
        raise ValueError(f"structured must be 'auto', True or False, got {structured!r}")
    return structured


def check_max_citations(max_citations: int | None) -> int | None:
    """Validate a ``max_citations`` option: None (no limit) or >= 1."""
    if max_citations is not None and max_citations < 1:
        raise ValueError(f"max_citations must be >= 1 or None, got {max_citations!r}")
    return max_citations


def _check_wait(wait: Any) -> Any:
    make_wait(wait)  # raises on a value that is no wait
    return wait


def _check_temperature(value: Any) -> float:
    if value < 0:
        raise ValueError(f"temperature must be >= 0, got {value!r}")
    return float(value)


def _check_timeout(timeout: Any) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
        raise ValueError(f"timeout must be a finite number of seconds > 0, got {timeout!r}")
    return float(timeout)


RESPONSE_FORMATS: tuple[str, ...] = ("json_schema", "json_object", "text")
"""Output format levels, strictest first; ``"auto"`` walks down this list."""


def _check_response_format(value: Any) -> str:
    if value not in ("auto", *RESPONSE_FORMATS):
        raise ValueError(
            f"response_format must be 'auto', 'json_schema', 'json_object' or 'text', got {value!r}"
        )
    return str(value)


def _positive(kind: Callable[[str], Any], what: str, rule: str) -> Callable[[str], Any]:
    """An argparse ``type``: ``text`` read with ``kind``, refused unless it is finite and > 0."""

    def parse(text: str) -> Any:
        import argparse

        try:
            value = kind(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from err
        if not 0 < value < math.inf:
            raise argparse.ArgumentTypeError(f"expected {what}{rule}, got {text!r}")
        return value

    return parse


_positive_int = _positive(int, "a whole number >= 1", "")
_positive_float = _positive(float, "a number of seconds", " > 0")


# ----------------------------------------------------------------------------- the options
_declare(
    "mode",
    default="cite",
    check=check_mode,
    doc='``"cite"``: the model lists document labels as JSON. ``"answer"``: the model answers in a '
    "few words and the shown documents containing the answer count as cited "
    "(:func:`.answer.reading_from_answer`).",
    flag="--mode",
    choices=("answer", "cite"),
    help="answer: the model answers, supporting documents count as cited (default for local); "
    "cite: the model returns document numbers (default for openai)",
)
_declare(
    "template",
    default=None,
    doc="Replacement user message (cite mode: see :data:`._prompt.PromptTemplate`; answer mode: "
    ":data:`.answer.ANSWER_TEMPLATE`).",
)
_declare(
    "max_citations",
    default=None,
    check=check_max_citations,
    doc="Most labels accepted per reading; the rest count as invalid. None: no limit.",
)
_declare(
    "max_attempts",
    default=3,
    check=check_max_attempts,
    doc="Attempts per reading, retries included (>= 1); a reader with a ``timeout`` starts none "
    "after the query's deadline.",
    flag="--max-attempts",
    type=_positive_int,
    help="attempts per reading, retries included (default 3; 1 for --reader local at temperature 0)",
)
_declare(
    "wait",
    default=None,
    check=_check_wait,
    doc="Wait between attempts: None (honour Retry-After, else exponential backoff), seconds, a "
    "tenacity wait strategy or ``(retry_state) -> seconds`` (:func:`._limits.make_wait`); inject "
    "``0`` in tests.",
)
_declare(
    "attribution",
    default=None,
    doc="Answer-mode matching rules (:class:`.answer.AnswerAttribution`).",
)
_declare(
    "max_chars_per_doc",
    default=None,
    check=check_max_chars_per_doc,
    doc="Longest document text shown in a prompt, in characters; longer documents are cut there and "
    'marked ``" [...]"`` (their label is unchanged). None (default): no limit, and a prompt too long '
    "for the model fails with an error saying so. Not applied to a callable ``template``.",
)
_declare(
    "structured",
    default="auto",
    check=check_structured,
    doc='``"auto"``, ``True`` or ``False``: whether cite mode uses the model\'s structured output.',
)
_declare(
    "max_concurrency",
    default=DEFAULT_MAX_CONCURRENCY,
    store=False,
    doc="The most model calls in flight through this reader at once, shared by every query and "
    "every prompt that goes through it (threads and event loops alike); further calls wait their "
    "turn, first come first served. ``1``: the reader takes no concurrent calls, and the panner "
    "sends a round's prompts one after another. None: no limit.",
)
_declare(
    "requests_per_minute",
    default=None,
    store=False,
    doc="The most requests this reader sends in any 60-second window where the provider counts them "
    "(at the server, however late a request arrives: a request holds its place from when it leaves "
    "until 60 s after it completes), shared by every query through it (sync and async alike); "
    "further calls wait (:class:`._limits.RateLimit`). None: no limit.",
    flag="--requests-per-minute",
    type=_positive_int,
    help="most requests to --reader openai in any 60-second window (default: no limit)",
)
_declare(
    "tokens_per_minute",
    default=None,
    store=False,
    doc="The most tokens in any 60-second window: each request counts an estimate before it is sent "
    "(a token per 4 characters of the messages, plus ``max_tokens``), replaced by the prompt and "
    "completion tokens the server reports once it answers. None: no limit.",
    flag="--tokens-per-minute",
    type=_positive_int,
    help="most tokens (estimated, then as reported) to --reader openai in any 60-second window",
)
_declare(
    "cache",
    default=None,
    check=make_cache,
    doc="The reply cache (:class:`._cache.ReplyCache`): None or False (default: none), True (in "
    "memory), a file path (in memory and in that SQLite file, shared by threads and processes) or "
    "a ``ReplyCache`` (shared with other readers). A prompt asked again with the same model and "
    "options is answered from it: no call, ``Reading.cached`` True.",
    flag="--cache",
    metavar="FILE",
    help="reply cache file (SQLite, created when absent): a prompt asked again with the same model "
    "and options is answered from it without a model call (default: no cache)",
)
_declare(
    "context_tokens",
    default=DEFAULT_CONTEXT_TOKENS,
    check=check_context_tokens,
    doc="The prompt budget in tokens, reply included (the model's context window, or less to bound "
    f"cost); default {DEFAULT_CONTEXT_TOKENS:,}. A prompt whose documents would not fit (after the "
    'fixed text and ``max_tokens``) has them cut evenly, marked ``" [...]"`` and counted in '
    "``Reading.documents_cut`` and ``Reading.chars_cut`` (:func:`._fitting.fit_documents`; lengths "
    "estimated at 3 characters per token where the reader has no tokenizer), with one warning per "
    "query, instead of a failed call or a huge one. Raise it for a model with a longer context; None: "
    "no fitting (documents go out whole).",
    flag="--context-tokens",
    type=_positive_int,
    help="prompt budget in tokens for --reader openai, reply included; longer documents are cut "
    f"evenly to fit (default {DEFAULT_CONTEXT_TOKENS})",
)
_declare(
    "response_format",
    default="auto",
    check=_check_response_format,
    base=False,
    doc='``"auto"`` (negotiate: ``json_schema``, then ``json_object``, then text, see '
    ':mod:`.openai`), ``"json_schema"``, ``"json_object"`` or ``"text"`` (cite mode only).',
    flag="--response-format",
    choices=("auto", *RESPONSE_FORMATS),
    default_flag="auto",
    help="output format asked of --reader openai in cite mode; auto (default): json_schema, falling "
    "back to json_object, then text, when the server rejects one (remembered per endpoint)",
)
_declare(
    "temperature",
    default=0.0,
    check=_check_temperature,
    base=False,
    doc="Sampling temperature (0: as deterministic as the model allows).",
    flag="--temperature",
    type=float,
    default_flag=0.0,
    help="sampling temperature (default 0)",
)
_declare(
    "timeout",
    default=60.0,
    check=_check_timeout,
    base=False,
    doc="Seconds the endpoint may keep a query waiting without a reply: each request ends within "
    "it (connection, upload, the server's reply, however slowly it is sent), and the query's "
    "requests share one deadline (:class:`._limits.Deadline`): each attempt gets what is left, "
    "no retry starts once it has passed and later prompts of the query are not sent, so an endpoint that "
    "never answers costs a query about ``timeout`` seconds and one failed reading per prompt. A "
    "reply moves the deadline to ``timeout`` after it (a slow endpoint that answers within it "
    "keeps a long query going); time queued behind the reader's own limits does not count. "
    "Outside the panner each reading is its own query.",
    flag="--timeout",
    type=_positive_float,
    default_flag=60.0,
    help="seconds --reader openai may keep a query waiting without a reply: each request ends "
    "within it and retries stop once it has passed (default 60)",
)
