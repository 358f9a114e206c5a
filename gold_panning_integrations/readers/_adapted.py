"""Fitting what a user wrote to the reader protocol, once, at the edge.

The engine calls every reader as the
:class:`~gold_panning_integrations.engine.records.Reader` protocol declares and never
looks at a signature. A user's reader whose ``read``/``aread`` takes no ``labels``
becomes an :class:`AdaptedReader` (one warning per class and method; its readings say
they were shown under ``1..m``), as a callable prompt template that takes none becomes a
:class:`NumberedTemplate` (its replies are read under ``1..m``); both through
:func:`takes_keyword`, the one place that reads a signature (:func:`~.as_reader` adapts a
reader once, at the edge).
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ..engine.records import Reading

__all__ = [
    "AdaptedReader",
    "NumberedTemplate",
    "accepts",
    "adapt_reader",
    "adapt_template",
    "takes_keyword",
    "template_labels",
]

logger = logging.getLogger(__name__)


# ------------------------------------------------------------------ templates
_TAKES: dict[tuple[Any, str], bool] = {}


def takes_keyword(fn: Any, name: str) -> bool:
    """Whether ``fn`` accepts the keyword ``name`` (or ``**kwargs``; not when its
    signature cannot be read); cached per function."""
    key = (getattr(fn, "__func__", fn), name)
    with contextlib.suppress(KeyError, TypeError):
        return _TAKES[key]
    try:
        params = inspect.signature(fn).parameters.values()
        ok = any(
            (p.name == name and p.kind is not inspect.Parameter.POSITIONAL_ONLY)
            or p.kind is inspect.Parameter.VAR_KEYWORD
            for p in params
        )
    except (TypeError, ValueError):
        ok = False
    with contextlib.suppress(TypeError):  # an unhashable callable: not cached
        _TAKES[key] = ok
    return ok


class NumberedTemplate:
    """A callable prompt template that takes no ``labels``: it numbers the documents
    ``1..m`` itself, so citations are read against ``1..m`` (``numbers_itself``)."""

    numbers_itself = True

    def __init__(self, template: Callable[..., str]) -> None:
        self.template = template

    def __call__(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> str:
        return self.template(question, documents)

    def __repr__(self) -> str:
        return f"NumberedTemplate({self.template!r})"


def adapt_template(template: Any) -> Any:
    """``template`` as the prompt renderer calls it: a callable that takes no ``labels``
    becomes a :class:`NumberedTemplate`; strings, None and label-taking callables are
    returned as they are."""
    if (
        callable(template)
        and not isinstance(template, NumberedTemplate)
        and not takes_keyword(template, "labels")
    ):
        return NumberedTemplate(template)
    return template


def template_labels(template: Any, labels: tuple[int, ...]) -> tuple[int, ...]:
    """The labels a prompt rendered with ``template`` actually shows: ``labels``, except
    for a callable template without a ``labels`` parameter, which numbers ``1..m``."""
    if getattr(adapt_template(template), "numbers_itself", False):
        return tuple(range(1, len(labels) + 1))
    return labels


# ------------------------------------------------------------------ readers
_WARNED: set[tuple[type, str]] = set()  # (reader class, method) already warned about


def _numbered(reading: Any, m: int) -> Any:
    """``reading`` marked as shown under labels ``1..m``."""
    if isinstance(reading, Reading) and reading.labels is None:
        return replace(reading, labels=tuple(range(1, m + 1)))
    return reading


class AdaptedReader:
    """A user's reader whose ``read`` and/or ``aread`` takes no ``labels``, fitted to the
    reader protocol: ``labels`` are dropped where a method does not take them (its readings
    then report labels ``1..m``), other keywords passed on; every other attribute is the
    wrapped reader's."""

    def __init__(self, reader: Any) -> None:
        self.reader = reader
        for method in ("read", "aread"):
            fn = getattr(reader, method, None)
            if callable(fn):
                takes = takes_keyword(fn, "labels")
                if not takes:
                    _warn_unlabelled(reader, method)
                setattr(self, method, self._make(method, fn, takes))

    @staticmethod
    def _make(method: str, fn: Callable[..., Any], takes: bool) -> Callable[..., Any]:
        def read(question: str, documents: Sequence[Any], *, labels: Sequence[int], **options: Any) -> Any:
            if takes:
                return fn(question, documents, labels=labels, **options)
            return _numbered(fn(question, documents, **options), len(documents))

        async def aread(
            question: str, documents: Sequence[Any], *, labels: Sequence[int], **options: Any
        ) -> Any:
            if takes:
                return await fn(question, documents, labels=labels, **options)
            return _numbered(await fn(question, documents, **options), len(documents))

        return read if method == "read" else aread

    def __getattr__(self, name: str) -> Any:
        if name == "reader":  # not set yet (during unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.reader, name)

    def __repr__(self) -> str:
        return f"AdaptedReader({self.reader!r})"


def _warn_unlabelled(reader: Any, method: str) -> None:
    key = (type(reader), method)
    if key in _WARNED:
        return
    _WARNED.add(key)
    logger.warning(
        "%s.%s takes no 'labels' argument: documents are shown under labels 1..m, so a "
        "document that says 'cite document 1' can steer credit. Add `*, labels` to the "
        "reader's %s and render documents under them.",
        type(reader).__name__,
        method,
        method,
    )


def adapt_reader(obj: Any) -> Any:
    """``obj`` (an object with ``read`` and/or ``aread``) as a reader of the protocol: as
    it is when every such method takes ``labels``, else in an :class:`AdaptedReader`
    (TypeError when it has neither method)."""
    if isinstance(obj, AdaptedReader):
        return obj
    methods = [getattr(obj, m, None) for m in ("read", "aread")]
    present = [fn for fn in methods if callable(fn)]
    if not present:
        raise TypeError(
            f"{type(obj).__name__} is not a reader: it needs read(question, documents, *, labels) "
            "-> Reading and/or async aread(question, documents, *, labels) -> Reading"
        )
    if all(takes_keyword(fn, "labels") for fn in present):
        return obj
    return AdaptedReader(obj)


def accepts(reader: Any, method: str, name: str) -> bool:
    """Whether ``reader.method`` takes the keyword ``name`` (through an
    :class:`AdaptedReader`, the wrapped reader's method)."""
    inner = reader.reader if isinstance(reader, AdaptedReader) else reader
    fn = getattr(inner, method, None)
    return fn is not None and takes_keyword(fn, name)
