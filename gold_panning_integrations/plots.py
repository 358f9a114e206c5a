"""Plots for people: belief trajectories of one panning run (extra ``plot``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .engine.panner import PanningResult
from .errors import MissingExtraError

__all__ = ["plot_belief_trajectories", "pyplot", "save_figure"]


def pyplot(purpose: str) -> Any:
    """``matplotlib.pyplot`` on the file-only Agg backend; :class:`MissingExtraError`
    naming ``purpose`` (e.g. ``"Plotting a profile"``) without the ``plot`` extra."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise MissingExtraError("matplotlib", "plot", purpose) from err
    return plt


def save_figure(plt: Any, fig: Any, path: str | Path) -> Path:
    """Lay out ``fig``, write it to ``path`` (PNG at 120 dpi), close it; the path written."""
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def plot_belief_trajectories(
    result: PanningResult,
    path: str | Path,
    *,
    labels: Sequence[str] | None = None,
    highlight: Sequence[int] = (),
    top: int = 8,
) -> Path:
    """Draw each document's posterior across rounds (which needle rose when).

    The ``top`` documents by peak posterior (plus any in ``highlight``) are drawn and
    labelled; the rest are faint grey lines. Round 0 is the prior. Markers show the
    rounds in which a document was cited.

    Args:
        result: A panning result with at least one round.
        path: Output PNG path.
        labels: Short label per document, shape ``(n,)`` (default ``#index``).
        highlight: Document indices to always draw (e.g. the known relevant ones).
        top: How many of the best documents to label.

    Returns:
        The written path.
    """
    plt = pyplot("Plotting belief trajectories")
    if not result.rounds:
        raise ValueError("the result has no rounds to plot (no documents, or no model calls were made)")
    n = len(result.posteriors)
    prior_lo = result.prior_log_odds if result.prior_log_odds is not None else result.log_odds * 0.0
    prior = 1.0 / (1.0 + np.exp(-prior_lo))
    traj = np.vstack([prior] + [r.posteriors for r in result.rounds])  # (rounds + 1, n)
    x = np.arange(traj.shape[0])
    # Label the documents that ever looked promising (highest peak), not just the winners.
    peak_order = np.argsort(-traj.max(axis=0), kind="stable")[:top]
    named = list(dict.fromkeys([int(i) for i in peak_order] + [int(i) for i in highlight]))
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for i in range(n):
        if i not in named:
            ax.plot(x, traj[:, i], color="0.85", lw=0.8, zorder=1)
    for i in named:
        lab = labels[i] if labels is not None else f"#{i}"
        (line,) = ax.plot(x, traj[:, i], lw=2.0 if i in highlight else 1.4, label=lab, zorder=3)
        cited_rounds = [r.round for r in result.rounds if i in r.cited]
        ax.scatter(cited_rounds, traj[cited_rounds, i], color=line.get_color(), s=28, zorder=4)
    ax.set_xlabel("round (0 = prior); dots: cited in that round")
    ax.set_ylabel("posterior probability of relevance")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xticks(x)
    ax.set_title(
        f"Belief trajectories ({result.policy}, {result.calls} calls, stopped: {result.stop_reason})"
    )
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return save_figure(plt, fig, path)
