"""Real data samples that ship inside the package, loadable by name.

* ``load_sample("nq")``: 400 Natural Questions (NQ-Open) questions in the "Lost in the
  Middle" multi-document format: each with its gold Wikipedia passage and the 20 passages
  BM25 ranks highest among the gold passages of other questions (none containing an
  answer). 200 questions are split ``calibration``, 200 ``test`` (held out).
* ``load_sample("kv")``: 100 examples of kv-retrieval-75 (75 UUID key-value pairs each).

Sources, licences (MIT; the passages are Wikipedia text under CC BY-SA 3.0) and the exact
construction are in ``gold_panning_integrations/_data/NOTICE.md``; the repository's
``python -m benchmarks.build_samples`` builds them (and larger ones, for ``load_sample(name, path=...)``).
"""

from __future__ import annotations

import functools
import gzip
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, overload

from .._io import read_regular_file

__all__ = [
    "MAX_SAMPLE_BYTES",
    "SAMPLES",
    "KVExample",
    "KVSample",
    "NQPassage",
    "NQQuestion",
    "NQSample",
    "load_sample",
    "sample_path",
]

SAMPLES: dict[str, str] = {"nq": "nq_sample.json.gz", "kv": "kv_sample.json.gz"}
"""Sample name -> file name in ``gold_panning_integrations/_data``."""

MAX_SAMPLE_BYTES = 64 * 1024 * 1024
"""Largest sample file read, compressed and decompressed (a sane-size guard)."""

_PACKAGE = "gold_panning_integrations._data"
_FORMAT = 1


@dataclass(frozen=True)
class NQPassage:
    """One Wikipedia passage (CC BY-SA 3.0): its index into :attr:`NQSample.passages`, the
    article title and the text (whitespace collapsed)."""

    id: int
    title: str
    text: str

    @property
    def content(self) -> str:
        """``"title: text"``, the form the NQ task shows the model."""
        return f"{self.title}: {self.text}" if self.title else self.text


@dataclass(frozen=True)
class NQQuestion:
    """One NQ-Open question with its gold passage and retrieved distractors.

    Attributes:
        id: ``"nq-<line>"``, the 0-based line of the source file.
        answers: Accepted answers (at least one occurs in the gold passage; none in a distractor).
        gold: Passage id of the gold passage.
        distractors: Passage ids of the distractors, best BM25 rank first.
        split: ``"calibration"`` or ``"test"`` (held out).
    """

    id: str
    question: str
    answers: tuple[str, ...]
    gold: int
    distractors: tuple[int, ...]
    split: str


@dataclass(frozen=True)
class NQSample:
    """The NQ sample: passages stored once (``passages[i].id == i``), questions (in draw
    order) referencing them by id, and build details (source, format, sizes)."""

    passages: tuple[NQPassage, ...]
    questions: tuple[NQQuestion, ...]
    metadata: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def split(self, name: str | None) -> tuple[NQQuestion, ...]:
        """Questions of one split (``"calibration"`` or ``"test"``); ``None`` means all."""
        if name is None:
            return self.questions
        out = tuple(q for q in self.questions if q.split == name)
        if not out:
            names = sorted({q.split for q in self.questions})
            raise ValueError(f"unknown split {name!r}; this sample has {', '.join(names)} (or None for all)")
        return out

    def gold_passage(self, question: NQQuestion) -> NQPassage:
        """The question's gold passage."""
        return self.passages[question.gold]

    def distractor_passages(self, question: NQQuestion, k: int | None = None) -> list[NQPassage]:
        """The question's first ``k`` distractors (all when ``None``), best BM25 rank first."""
        ids = question.distractors if k is None else question.distractors[:k]
        return [self.passages[i] for i in ids]


@dataclass(frozen=True)
class KVExample:
    """One kv-retrieval-75 example: ``id`` is ``"kv-<line>"`` (0-based line of the source),
    ``key`` the queried UUID, ``value`` its value (the answer), ``records`` all ``(key,
    value)`` pairs in source order, the queried pair among them."""

    id: str
    key: str
    value: str
    records: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class KVSample:
    """The kv-retrieval sample: the examples in draw order and build details (source, format)."""

    examples: tuple[KVExample, ...]
    metadata: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


def sample_path(name: str) -> Path:
    """Filesystem path of a shipped sample file (from a clone or an installed wheel)."""
    if name not in SAMPLES:
        raise ValueError(f"unknown sample {name!r}; choose one of {', '.join(SAMPLES)}")
    return Path(str(resources.files(_PACKAGE).joinpath(SAMPLES[name])))


def _read_json_gz(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise FileNotFoundError(
            f"sample file not found: {str(path)!r}; reinstall the package, or build one with "
            "python -m benchmarks.build_samples --source DIR --out DIR (from a clone of the repository)"
        )
    data = read_regular_file(path, max_bytes=MAX_SAMPLE_BYTES, what="sample file", error=ValueError)
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as gz:
            raw = gz.read(MAX_SAMPLE_BYTES + 1)
        if len(raw) > MAX_SAMPLE_BYTES:
            raise ValueError(f"sample file {str(path)!r} decompresses to more than {MAX_SAMPLE_BYTES} bytes")
        obj = json.loads(raw.decode("utf-8"))
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"sample file {str(path)!r} is not gzip-compressed JSON: {err}") from err
    if not isinstance(obj, dict) or obj.get("format") != _FORMAT:
        found = obj.get("format") if isinstance(obj, dict) else type(obj).__name__
        raise ValueError(
            f"sample file {str(path)!r} has format {found!r}, expected {_FORMAT}; rebuild it with "
            "python -m benchmarks.build_samples (from a clone of the repository)"
        )
    return obj


def _parse_nq(obj: dict[str, Any], where: str) -> NQSample:
    try:
        passages = tuple(NQPassage(i, str(t), str(x)) for i, (t, x) in enumerate(obj["passages"]))
        questions = tuple(
            NQQuestion(
                id=str(q["id"]),
                question=str(q["question"]),
                answers=tuple(str(a) for a in q["answers"]),
                gold=int(q["gold"]),
                distractors=tuple(int(p) for p in q["distractors"]),
                split=str(q["split"]),
            )
            for q in obj["questions"]
        )
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{where} is not an NQ sample ({type(err).__name__}: {err})") from err
    n = len(passages)
    for q in questions:
        bad = [p for p in (q.gold, *q.distractors) if not 0 <= p < n]
        if bad:
            raise ValueError(f"{where}: question {q.id} references passage {bad[0]}, outside 0..{n - 1}")
    meta = {k: v for k, v in obj.items() if k not in ("passages", "questions")}
    return NQSample(passages, questions, MappingProxyType(meta))


def _parse_kv(obj: dict[str, Any], where: str) -> KVSample:
    try:
        examples = tuple(
            KVExample(
                id=str(e["id"]),
                key=str(e["key"]),
                value=str(e["value"]),
                records=tuple((str(k), str(v)) for k, v in e["records"]),
            )
            for e in obj["examples"]
        )
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{where} is not a kv sample ({type(err).__name__}: {err})") from err
    for e in examples:
        if (e.key, e.value) not in e.records:
            raise ValueError(f"{where}: example {e.id} does not hold its queried pair among its records")
    meta = {k: v for k, v in obj.items() if k != "examples"}
    return KVSample(examples, MappingProxyType(meta))


@functools.lru_cache(maxsize=8)
def _load(name: str, path: str) -> NQSample | KVSample:
    obj = _read_json_gz(Path(path))
    if obj.get("name") != name:
        raise ValueError(f"{path!r} holds the {obj.get('name')!r} sample, not {name!r}")
    return _parse_nq(obj, repr(path)) if name == "nq" else _parse_kv(obj, repr(path))


@overload
def load_sample(name: Literal["nq"], *, path: str | Path | None = None) -> NQSample: ...
@overload
def load_sample(name: Literal["kv"], *, path: str | Path | None = None) -> KVSample: ...
@overload
def load_sample(name: str, *, path: str | Path | None = None) -> NQSample | KVSample: ...


def load_sample(name: str, *, path: str | Path | None = None) -> NQSample | KVSample:
    """A shipped data sample by name: ``"nq"`` -> :class:`NQSample`, ``"kv"`` -> :class:`KVSample`,
    cached per ``(name, path)`` (the records are immutable).

    ``path``: a sample file in the same format instead of the shipped one (e.g. a larger
    one built with ``python -m benchmarks.build_samples``).

    Raises:
        ValueError: Unknown name, or a file that is not a sample of that name.
        FileNotFoundError: ``path`` does not exist.
    """
    if name not in SAMPLES:
        raise ValueError(f"unknown sample {name!r}; choose one of {', '.join(SAMPLES)}")
    p = Path(path) if path is not None else sample_path(name)
    return _load(name, str(p.resolve()))
