"""FLenQA-style facts generated from templates: MonoRel and PIR.

* **MonoRel** (monotonic relations): a document chains two comparisons between three
  people ("Ana Ruiz is older than Leo Kato. Leo Kato is older than Mila Sato."); the
  question names the middle person and asks who ranks first, so answering needs the
  whole chain and the answer is never a word of the question.
* **PIR** (people in rooms): a document puts a person in a room and gives the room a
  property ("Omar Haas is in the library. The door of the library is teal."); the question
  asks for the property of the person's room, so answering composes the two facts.

As in the paper's calibration, one document is relevant and the distractors are other
instances' documents; the gold answer is in no distractor, so attribution is unambiguous.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._words import COLORS, FULL_NAMES, MATERIALS, ROOMS, full_names
from .base import TaskInstance, check_make_args

__all__ = ["PROPERTIES", "RELATIONS", "MonoRelTask", "PIRTask"]

RELATIONS: tuple[tuple[str, str], ...] = (
    ("older than", "oldest"),
    ("taller than", "tallest"),
    ("faster than", "fastest"),
    ("richer than", "richest"),
)
"""(comparative, superlative) pairs used by MonoRel."""

PROPERTIES: dict[str, tuple[str, tuple[str, ...], str]] = {
    "door": (
        "The door of the {room} is {value}.",
        tuple(COLORS),
        "What color is the door of the room {person} is in?",
    ),
    "floor": (
        "The floor of the {room} is made of {value}.",
        tuple(MATERIALS),
        "What is the floor made of in the room {person} is in?",
    ),
}
"""PIR property -> (fact template, values, question template)."""


@dataclass(frozen=True)
class MonoRelTask:
    """Builder of MonoRel instances (one three-person comparison chain per document)."""

    name: str = "monorel"

    @property
    def max_n(self) -> int:
        """Largest ``n``: three distinct people per document."""
        return FULL_NAMES // 3

    def make(self, n: int, *, gold_position: int, rng: np.random.Generator) -> TaskInstance:
        """``n`` chains over distinct people; the question is about the chain at ``gold_position``."""
        check_make_args(n, gold_position, max_n=self.max_n, task=self.name)
        people = full_names(3 * n, rng)
        comparative, superlative = RELATIONS[int(rng.integers(len(RELATIONS)))]
        docs = []
        for i in range(n):
            a, b, c = people[3 * i : 3 * i + 3]
            docs.append(f"{a} is {comparative} {b}. {b} is {comparative} {c}.")
        a, b, c = people[3 * gold_position : 3 * gold_position + 3]
        question = f"{b} is compared with two other people. Who is the {superlative} of the three?"
        return TaskInstance(
            question=question,
            documents=docs,
            gold=(gold_position,),
            answers=(a,),
            task=self.name,
            metadata={"relation": comparative, "chain": [a, b, c]},
        )


@dataclass(frozen=True)
class PIRTask:
    """Builder of PIR instances (person in a room + the room's property per document).

    Args:
        prop: ``"door"`` (a color) or ``"floor"`` (a material).
    """

    prop: str = "door"
    name: str = "pir"

    def __post_init__(self) -> None:
        if self.prop not in PROPERTIES:
            raise ValueError(f"unknown PIR property {self.prop!r}; choose one of {', '.join(PROPERTIES)}")

    @property
    def max_n(self) -> int:
        """Largest ``n`` (distinct people)."""
        return FULL_NAMES

    def make(self, n: int, *, gold_position: int, rng: np.random.Generator) -> TaskInstance:
        """``n`` person-room facts; the question is about the person at ``gold_position``."""
        check_make_args(n, gold_position, max_n=self.max_n, task=self.name)
        template, values, question_template = PROPERTIES[self.prop]
        people = full_names(n, rng)
        gold_value = values[int(rng.integers(len(values)))]
        others = [v for v in values if v != gold_value]
        docs = []
        for i, person in enumerate(people):
            room = ROOMS[int(rng.integers(len(ROOMS)))]
            value = gold_value if i == gold_position else others[int(rng.integers(len(others)))]
            docs.append(f"{person} is in the {room}. " + template.format(room=room, value=value))
        question = question_template.format(person=people[gold_position])
        return TaskInstance(
            question=question,
            documents=docs,
            gold=(gold_position,),
            answers=(gold_value,),
            task=self.name,
            metadata={"person": people[gold_position], "property": self.prop},
        )
