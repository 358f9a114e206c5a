"""Key-value needles: synthetic ``name -> attribute -> value`` facts (:class:`KVTask`), and
the "Lost in the Middle" UUID key-value retrieval data (:class:`KVRetrievalTask`).

Each :class:`KVTask` document states one person's value of one attribute ("Lena Park's access code is
48213."). The question asks for the gold person's value; the distractors state the same
attribute for other people, so they look alike and only the name tells them apart. The
gold value never appears in a distractor, which keeps answer attribution unambiguous.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ._words import CITIES, COLORS, FULL_NAMES, full_names
from .base import TaskInstance, check_make_args
from .samples import KVExample, KVSample, load_sample

__all__ = ["VALUE_FORMATS", "KVRetrievalTask", "KVTask"]

_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ"


def _number(rng: np.random.Generator, digits: int) -> str:
    return str(int(rng.integers(10 ** (digits - 1), 10**digits)))


def _code(rng: np.random.Generator, digits: int) -> str:
    letters = "".join(_LETTERS[int(i)] for i in rng.integers(0, len(_LETTERS), size=2))
    return f"{letters}-{_number(rng, digits)}"


VALUE_FORMATS: dict[str, tuple[str, Callable[[np.random.Generator, int], str]]] = {
    "number": ("access code", _number),
    "code": ("locker code", _code),
    "color": ("favorite color", lambda rng, d: COLORS[int(rng.integers(len(COLORS)))]),
    "city": ("home town", lambda rng, d: CITIES[int(rng.integers(len(CITIES)))]),
}
"""Value format -> (default attribute, value generator ``(rng, digits) -> str``)."""


@dataclass(frozen=True)
class KVTask:
    """Builder of key-value needle instances.

    Args:
        value_format: ``"number"`` (digits, the default), ``"code"`` (``"KX-4821"``),
            ``"color"`` or ``"city"`` (words from a fixed list).
        attribute: Attribute name; default depends on the format (e.g. "access code").
        digits: Digits of numeric values.
        template: Fact template with ``{name}``, ``{attribute}``, ``{value}``.
        question_template: Question template with ``{name}``, ``{attribute}``.
    """

    value_format: str = "number"
    attribute: str | None = None
    digits: int = 5
    template: str = "{name}'s {attribute} is {value}."
    question_template: str = "What is {name}'s {attribute}?"
    name: str = "kv"

    def __post_init__(self) -> None:
        if self.value_format not in VALUE_FORMATS:
            raise ValueError(
                f"unknown value_format {self.value_format!r}; choose one of {', '.join(VALUE_FORMATS)}"
            )
        if not 1 <= self.digits <= 12:
            raise ValueError(f"digits must be in 1..12, got {self.digits!r}")

    @property
    def max_n(self) -> int:
        """Largest ``n`` (distinct full names available)."""
        return FULL_NAMES

    def make(self, n: int, *, gold_position: int, rng: np.random.Generator) -> TaskInstance:
        """An instance of ``n`` facts about distinct people; the gold at ``gold_position``."""
        check_make_args(n, gold_position, max_n=self.max_n, task=self.name)
        attribute, gen = VALUE_FORMATS[self.value_format]
        attribute = self.attribute or attribute
        names = full_names(n, rng)
        gold_value = gen(rng, self.digits)
        values: list[str] = []
        for _ in range(n - 1):
            v = gen(rng, self.digits)
            while v == gold_value or gold_value in v.split():
                v = gen(rng, self.digits)
            values.append(v)
        values.insert(gold_position, gold_value)
        docs = [self.template.format(name=nm, attribute=attribute, value=v) for nm, v in zip(names, values)]
        question = self.question_template.format(name=names[gold_position], attribute=attribute)
        return TaskInstance(
            question=question,
            documents=docs,
            gold=(gold_position,),
            answers=(gold_value,),
            task=self.name,
            metadata={
                "name": names[gold_position],
                "attribute": attribute,
                "value_format": self.value_format,
            },
        )


@dataclass(frozen=True)
class KVRetrievalTask:
    """Builder of "Lost in the Middle" key-value retrieval instances (UUID keys and values).

    Each document is one pair of a kv-retrieval-75 example, rendered with ``template``; the
    question asks for the value of the example's queried key. An instance shows the queried
    pair at ``gold_position`` and ``n - 1`` other pairs of the same example in random
    order, from the shipped sample (``load_sample("kv")``) unless ``sample`` is given. A
    task for capable models (docs/embedded-model.md), or for the simulator.

    Args:
        sample: A :class:`~gold_panning_integrations.tasks.samples.KVSample`; default the shipped one.
        template: Document template with ``{key}`` and ``{value}``.
        question_template: Question template with ``{key}``.
    """

    sample: KVSample | None = None
    template: str = 'Key: "{key}" Value: "{value}"'
    question_template: str = 'What is the value of key "{key}"?'
    name: str = "kv-retrieval"

    def _examples(self) -> tuple[KVExample, ...]:
        return (self.sample if self.sample is not None else load_sample("kv")).examples

    @property
    def max_n(self) -> int:
        """Largest ``n``: the fewest pairs of any example (75 for the shipped sample)."""
        return min(len(e.records) for e in self._examples())

    def make(self, n: int, *, gold_position: int, rng: np.random.Generator) -> TaskInstance:
        """An instance of ``n`` pairs of one random example, the queried pair at ``gold_position``."""
        examples = self._examples()
        check_make_args(n, gold_position, max_n=self.max_n, task=self.name)
        ex = examples[int(rng.integers(len(examples)))]
        others = [r for r in ex.records if r[0] != ex.key and ex.value not in r]
        pick = rng.choice(len(others), size=n - 1, replace=False)
        pairs = [others[int(i)] for i in pick]
        pairs.insert(gold_position, (ex.key, ex.value))
        return TaskInstance(
            question=self.question_template.format(key=ex.key),
            documents=[self.template.format(key=k, value=v) for k, v in pairs],
            gold=(gold_position,),
            answers=(ex.value,),
            task=self.name,
            metadata={"example": ex.id, "key": ex.key},
        )
