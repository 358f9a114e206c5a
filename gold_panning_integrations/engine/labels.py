"""The labels documents are shown under: distinct random numbers per prompt, from at least
:data:`LABELS_PER_DOCUMENT` numbers per document shown, so a number a document writes
("cite document 1") is almost never a label on screen."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["LABELS_PER_DOCUMENT", "MIN_LABEL_DIGITS", "draw_labels", "label_range"]

LABELS_PER_DOCUMENT = 100
"""Size of the label space per document shown (a number written anywhere is a label on
screen with probability at most 1/100)."""
MIN_LABEL_DIGITS = 3
"""Fewest digits of a label (``100..999`` for the smallest prompts)."""


def label_range(size: int) -> tuple[int, int]:
    """The range ``[10**(d-1), 10**d - 1]`` the labels of a prompt of ``size`` documents
    are drawn from, ``d`` the fewest digits (>= :data:`MIN_LABEL_DIGITS`) giving
    :data:`LABELS_PER_DOCUMENT` numbers per document; one length, so a piece of a label
    is never another. 1-9 documents: ``(100, 999)``; 10-90: ``(1000, 9999)``."""
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
        raise ValueError(f"size must be an integer >= 0 (documents in one prompt), got {size!r}")
    digits = MIN_LABEL_DIGITS
    while 9 * 10 ** (digits - 1) < LABELS_PER_DOCUMENT * int(size):
        digits += 1
    return 10 ** (digits - 1), 10**digits - 1


def draw_labels(rng: np.random.Generator, sizes: NDArray[np.intp], width: int) -> NDArray[np.int64]:
    """Labels, shape ``(B, width)``: row ``b`` holds ``sizes[b]`` distinct numbers drawn
    uniformly from :func:`label_range` ``(sizes[b])``, then 0s. One uniform per slot
    (``rng.random((B, width))``); a slot repeating an earlier one in its row draws again."""
    keys = rng.random((sizes.size, width))
    if sizes.size == 1 and int(sizes[0]) == width:
        # The panner's case (a batch of one, no padding): a set tells whether any repeats.
        lo, hi = label_range(width)
        labels = lo + np.floor(keys * (hi - lo + 1)).astype(np.int64)
        if len(set(labels[0].tolist())) == width:
            return labels
        low = np.array([lo], dtype=np.int64)
        span = np.array([hi - lo + 1], dtype=np.int64)
        pad = np.zeros((1, width), dtype=bool)
    else:
        pad = np.arange(width)[None, :] >= sizes[:, None]
        low = np.empty(sizes.size, dtype=np.int64)
        span = np.empty(sizes.size, dtype=np.int64)
        for s in np.unique(sizes):
            lo, hi = label_range(int(s))
            low[sizes == s], span[sizes == s] = lo, hi - lo + 1
        labels = low[:, None] + np.floor(keys * span[:, None]).astype(np.int64)
        labels[pad] = 0
    while True:
        again = _repeats(labels) & ~pad
        if not again.any():
            return labels
        rows = np.nonzero(again)[0]
        labels[again] = low[rows] + np.floor(rng.random(rows.size) * span[rows]).astype(np.int64)


def _repeats(labels: NDArray[np.int64]) -> NDArray[np.bool_]:
    """Entries equal to an earlier entry of their row, shape ``labels.shape``."""
    order = np.argsort(labels, axis=1, kind="stable")
    ranked = np.take_along_axis(labels, order, axis=1)
    same = np.zeros(labels.shape, dtype=bool)
    same[:, 1:] = ranked[:, 1:] == ranked[:, :-1]
    out = np.zeros(labels.shape, dtype=bool)
    np.put_along_axis(out, order, same, axis=1)
    return out
