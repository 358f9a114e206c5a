"""The package's import graph has no cycle, counting every import statement: at module
level, under ``TYPE_CHECKING`` and inside functions (a cycle there is a design that
only works because of where the import sits)."""

from __future__ import annotations

import ast
from pathlib import Path

import gold_panning_integrations

ROOT = Path(gold_panning_integrations.__file__).parent
PACKAGE = "gold_panning_integrations"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules ``name`` imports anywhere in its source: ``from X import y``
    counts ``X.y`` when that is a module, else ``X``."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = name.split(".") if is_package else name.split(".")[:-1]
                up = here[: len(here) - (node.level - 1)]
                base = ".".join([*up, base] if base else up)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.add(sub if sub in modules else base)
    return {m for m in out if m in modules and m != name}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of ``graph`` with more than one module: each
    is a set of modules that import each other round a cycle (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                out.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return out


def test_the_graph_reader_sees_imports_under_type_checking_and_in_functions() -> None:
    graph = _graph()
    # panning imports the readers inside GoldPanner.__init__ only
    assert f"{PACKAGE}.readers" in graph[f"{PACKAGE}.panning"]
    assert f"{PACKAGE}.engine.rounds" in graph[f"{PACKAGE}.engine.panner"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_in_the_package() -> None:
    # engine.mixture and engine.rounds imported each other (under TYPE_CHECKING) before
    # suspicion/suspected_shares moved to rounds; profiles and profiles._lookup (inside a
    # function) before the profile model moved to profiles.detector_profile.
    assert _cycles(_graph()) == []
