"""The old import paths of modules that moved in 0.6 (removed in 0.7): importing one warns
with the new path and hands back the new module itself, so a name read or patched through the
old path is the new module's."""

from __future__ import annotations

import importlib
import sys
import warnings


def alias(old: str, new: str, *, submodules: tuple[str, ...] = ()) -> None:
    """Make ``old`` (the module being imported) the module ``new``, after a
    ``DeprecationWarning``; ``submodules`` of a moved package get their old names too."""
    warnings.warn(
        f"{old} is deprecated and will be removed in 0.7: import {new} instead",
        DeprecationWarning,
        stacklevel=3,
    )
    sys.modules[old] = importlib.import_module(new)
    for name in submodules:
        sys.modules[f"{old}.{name}"] = importlib.import_module(f"{new}.{name}")
