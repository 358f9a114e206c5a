"""Word lists for the synthetic tasks (invented names and common nouns, no real data).

Each list is whitespace-separated text, split once (as ``readers.answer`` keeps its stop
words); the order matters: the tasks draw by index, so a seed gives the same instance only
while the lists keep their order.
"""

from __future__ import annotations

import numpy as np

_FIRST_NAMES_TEXT = """
Aaron Abigail Adrian Alice Amir Ana Andre Aria Arjun Beatrix Bruno Camila Carmen Cedric Chloe Clara
Dario Daria Elena Elias Emil Erin Esme Felix Fiona Gareth Greta Hana Hugo Ines Ivan Jonas Julia Kai
Kamala Karin Lena Leo Lidia Luca Mara Marco Mila Milan Nadia Nico Nina Noah Olga Omar Oscar Paula Pedro
Priya Quinn Rafael Rosa Ruth Sami Sara Selma Soren Tara Teo Tomas Uma Vera Victor Wanda Yara Yusuf Zane
Zoe
"""
FIRST_NAMES: list[str] = _FIRST_NAMES_TEXT.split()

_LAST_NAMES_TEXT = """
Abbott Alvarez Baker Barros Berg Blake Bose Brandt Castro Chen Cole Costa Dahl Diaz Doyle Engel Farah
Ferrer Fischer Ford Garcia Gill Haas Hale Hart Holm Ibarra Ito Jensen Kato Keller Khan Klein Lang Lopes
Lund Marsh Meyer Mora Moreau Nagy Novak Ortiz Park Patel Pike Quint Reyes Rossi Ruiz Sato Sauer Silva
Stone Tan Torres Ueda Vance Varga Vogel Walsh Weber Wolfe Yilmaz Young Zeller
"""
LAST_NAMES: list[str] = _LAST_NAMES_TEXT.split()

_COLORS_TEXT = """
amber azure beige black blue bronze brown coral crimson cyan gold gray green indigo ivory khaki lavender
lilac magenta maroon mauve navy ochre olive orange peach pink plum purple red rust saffron scarlet sepia
silver tan teal turquoise violet white yellow
"""
COLORS: list[str] = _COLORS_TEXT.split()

_CITIES_TEXT = """
Accra Athens Bergen Bogota Bruges Cairo Cork Dakar Delhi Dublin Florence Geneva Hanoi Havana Kyoto Lagos
Leeds Lima Lisbon Lyon Madrid Malmo Manila Minsk Munich Nairobi Naples Osaka Oslo Porto Prague Quito
Riga Rome Seoul Sofia Tallinn Tunis Turin Vienna Vilnius Warsaw Zagreb Zurich
"""
CITIES: list[str] = _CITIES_TEXT.split()

_MATERIALS_TEXT = """
bamboo basalt birch brick cedar concrete copper cork granite linoleum maple marble oak pine quartz
rubber sandstone slate teak terracotta walnut
"""
MATERIALS: list[str] = _MATERIALS_TEXT.split()

_ROOMS_TEXT = """
attic ballroom basement cellar conservatory den gallery greenhouse gym kitchen library loft lounge
nursery office pantry parlor studio study workshop
"""
ROOMS: list[str] = _ROOMS_TEXT.split()

FULL_NAMES = len(FIRST_NAMES) * len(LAST_NAMES)
"""How many distinct "First Last" names :func:`full_names` can draw."""


def full_names(n: int, rng: np.random.Generator) -> list[str]:
    """``n`` distinct "First Last" names drawn from ``rng`` (``n <= FULL_NAMES``)."""
    flat = rng.choice(FULL_NAMES, size=n, replace=False)
    return [f"{FIRST_NAMES[int(i) // len(LAST_NAMES)]} {LAST_NAMES[int(i) % len(LAST_NAMES)]}" for i in flat]
