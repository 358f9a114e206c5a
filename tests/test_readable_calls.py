"""A model call a maintainer can follow, read from the package's source: no generator
step driver (``run_steps``/``arun_steps``/``_drive``/``Steps``, a generator whose
``yield`` receives a call's result from a driver), and tenacity only through its public
API (``Retrying``/``AsyncRetrying`` iterated, never ``DoAttempt``/``DoSleep`` or ``.iter()``
stepped by hand)."""

from __future__ import annotations

import ast
from pathlib import Path

import gold_panning_integrations

PACKAGE = Path(gold_panning_integrations.__file__).parent
DRIVER_NAMES = {"run_steps", "arun_steps", "_drive", "Steps"}
TENACITY_INTERNALS = {"DoAttempt", "DoSleep", "RetryAction", "IterState"}
STEPPED = {"iter", "begin", "prepare_for_next_attempt"}
"""A retry loop's own methods, which a caller steps only when it drives the loop by hand."""


def _trees() -> dict[str, ast.AST]:
    return {
        str(p.relative_to(PACKAGE)): ast.parse(p.read_text(encoding="utf-8")) for p in PACKAGE.rglob("*.py")
    }


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def driven_generators(tree: ast.AST) -> list[int]:
    """Lines of every ``yield``/``yield from`` whose value is used (``x = yield f``,
    ``return (yield f)``, ``y = yield from g()``): a generator a driver sends results into."""
    parents = _parents(tree)
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, (ast.Yield, ast.YieldFrom)) and not isinstance(parents.get(node), ast.Expr)
    ]


def test_the_checks_see_a_step_driver() -> None:
    src = "def core():\n    x = yield f\n    return (yield g)\n\ndef ok():\n    yield 1\n    yield from range(3)\n"
    assert driven_generators(ast.parse(src)) == [2, 3]


def test_no_generator_step_driver_in_the_package() -> None:
    trees = _trees()
    assert len(trees) > 80
    driven = {name: lines for name, tree in trees.items() if (lines := driven_generators(tree))}
    assert driven == {}
    named = {
        name: sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in DRIVER_NAMES})
        for name, tree in trees.items()
    }
    defined = {
        name: sorted(
            {
                n.name
                for n in ast.walk(tree)
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name in DRIVER_NAMES
            }
        )
        for name, tree in trees.items()
    }
    assert {k: v for k, v in named.items() if v} == {} and {k: v for k, v in defined.items() if v} == {}


def test_tenacity_only_through_its_public_api() -> None:
    imported: dict[str, set[str]] = {}
    stepped: dict[str, list[int]] = {}
    for name, tree in _trees().items():
        for node in ast.walk(tree):  # .iter() anywhere: the package has no other iter method
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tenacity"):
                imported.setdefault(name, set()).update(a.name for a in node.names)
            if isinstance(node, ast.Attribute) and node.attr in STEPPED:
                stepped.setdefault(name, []).append(node.lineno)
    assert {"Retrying", "AsyncRetrying"} <= imported["readers/_reader_base.py"]  # the one retry loop
    assert {k: sorted(v & TENACITY_INTERNALS) for k, v in imported.items() if v & TENACITY_INTERNALS} == {}
    assert stepped == {}
