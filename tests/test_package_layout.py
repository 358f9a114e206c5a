"""The package's layout, read from its source: ``evaluate`` never imports the CLI
(``cli`` may import ``evaluate``, never the reverse), the top level is grouped by subject and
the tests mirror it, module basenames are unique, no lab module is in the package
and the package never imports the lab (the repository's ``benchmarks/``, not installed), and
no module grows past :data:`MAX_MODULE_LINES` lines (split it along a seam, into
``_``-prefixed helper modules)."""

from __future__ import annotations

import ast
from pathlib import Path

import gold_panning_integrations

PACKAGE = Path(gold_panning_integrations.__file__).parent
MAX_MODULE_LINES = 700


def _modules(sub: str = "") -> list[Path]:
    return sorted((PACKAGE / sub).rglob("*.py"))


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


def _imported(source: str, module: str, *, is_package: bool = False) -> list[str]:
    """Every module an ``import`` or ``from ... import`` in ``source`` (the text of
    ``module``) names, relative imports resolved (``..cli.commands._util`` in
    ``gold_panning_integrations.evaluate.compare`` -> ``gold_panning_integrations.cli.commands._util``);
    a ``from X import y`` also yields ``X.y``, which may be a submodule."""
    here = module.split(".") if is_package else module.split(".")[:-1]
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            found.append(mod)
            found += [f"{mod}.{a.name}" for a in node.names]
    return found


def _is_cli(name: str) -> bool:
    return name == "gold_panning_integrations.cli" or name.startswith("gold_panning_integrations.cli.")


def test_the_resolver_sees_relative_and_lazy_cli_imports() -> None:
    src = "def f():\n    from ..cli.commands._util import regular_file\nfrom .. import cli\nimport os\n"
    names = _imported(src, "gold_panning_integrations.evaluate.compare")
    assert "gold_panning_integrations.cli.commands._util" in names
    assert "gold_panning_integrations.cli" in names
    assert [n for n in names if _is_cli(n)] != []
    assert not any(
        _is_cli(n)
        for n in _imported("from .._console import Progress\n", "gold_panning_integrations.evaluate.compare")
    )
    init = _imported(
        "from ..cli.commands import run\n", "gold_panning_integrations.evaluate", is_package=True
    )
    assert "gold_panning_integrations.cli.commands" in init


def test_no_evaluate_module_imports_the_cli() -> None:
    offenders = {
        str(path.relative_to(PACKAGE)): name
        for path in _modules("evaluate")
        for name in _imported(
            path.read_text(encoding="utf-8"), _module_name(path), is_package=path.name == "__init__.py"
        )
        if _is_cli(name)
    }
    assert offenders == {}


def test_no_module_is_longer_than_the_limit() -> None:
    modules = _modules()
    assert len(modules) > 50
    lines = {str(p.relative_to(PACKAGE)): len(p.read_text(encoding="utf-8").splitlines()) for p in modules}
    assert {name: n for name, n in lines.items() if n > MAX_MODULE_LINES} == {}


# ------------------------------------------------------------ the lab stays out of the wheel
REPO = PACKAGE.parent
LAB = REPO / "benchmarks"


def _lab_modules() -> set[str]:
    """The lab's module names (``sim``, ``_sim_panels``, ``calibration_sim``, ...)."""
    return {p.stem for p in LAB.glob("*.py") if p.stem not in ("__init__", "__main__", "_cli")}


def test_the_lab_is_where_the_layout_says() -> None:
    lab = _lab_modules()
    assert {"sim", "engine", "efficiency", "real", "real_efficiency", "latency"} <= lab
    assert {"calibration_sim", "build_samples", "_loopback", "_sim_panels"} <= lab


def test_no_lab_module_is_in_the_package_tree() -> None:
    """The wheel is the package folder (pyproject finds ``gold_panning_integrations*`` only):
    no lab module may come back into it, under any sub-package."""
    lab = _lab_modules()
    offenders = sorted(str(p.relative_to(PACKAGE)) for p in _modules() if p.stem in lab)
    assert offenders == []
    assert not (PACKAGE / "calibration_sim.py").exists()


def test_pyproject_packages_only_the_package() -> None:
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    block = text.split("[tool.setuptools.packages.find]", 1)[1].split("\n[", 1)[0]
    includes = [line for line in block.splitlines() if line.startswith("include")]
    assert includes == ['include = ["gold_panning_integrations*"]']


def test_the_package_never_imports_the_lab() -> None:
    offenders = {
        str(path.relative_to(PACKAGE)): name
        for path in _modules()
        for name in _imported(
            path.read_text(encoding="utf-8"), _module_name(path), is_package=path.name == "__init__.py"
        )
        if name == "benchmarks" or name.startswith("benchmarks.")
    }
    assert offenders == {}


# ------------------------------------------------------------ the tree, by subject
SUBPACKAGES = {
    "batch",
    "calibration",
    "cli",
    "engine",
    "evaluate",
    "integrations",
    "ir",
    "profiles",
    "readers",
    "tasks",
}


def test_the_top_level_is_grouped_by_subject() -> None:
    """Beside the sub-packages only the public front door (``panning``, ``errors``, ``plots``)
    and shared private helpers stay at the top."""
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")} - {"_data"}
    assert packages == SUBPACKAGES
    top = {p.stem for p in PACKAGE.glob("*.py")}
    assert top == {"__init__", "errors", "panning", "plots", "_console", "_io", "_streams"}


def test_module_basenames_are_unique() -> None:
    """A module's name says what it holds across the package: no two modules share a basename
    (``__init__.py`` aside), so ``langchain.py`` never needs its folder to be told apart."""
    names = sorted(p.name for p in _modules() if p.name != "__init__.py")
    assert len(names) > 50
    assert sorted({n for n in names if names.count(n) > 1}) == []


def test_the_tests_mirror_the_tree() -> None:
    tests = Path(__file__).parent
    assert SUBPACKAGES <= {p.name for p in tests.iterdir() if p.is_dir()}
    names = [p.name for p in tests.rglob("test_*.py")]
    assert len(names) == len(set(names))  # one basename per test module (no __init__.py in tests/)


# ------------------------------------------------------------ the product does not load the lab
LAB_MODULES = ("evaluate", "tasks", "engine.simulator", "plots")
"""What the wheel ships for its own study (the evaluation lab, the task builders, the batch
simulator, the plots): importing the reranker loads none of it."""

PRODUCT_IMPORTS = (
    "gold_panning_integrations",
    "gold_panning_integrations.integrations.langchain_rerankers",
    "gold_panning_integrations.integrations.llama_index_postprocessor",
    "gold_panning_integrations.readers",
    "gold_panning_integrations.readers.openai",
    "gold_panning_integrations.readers.chat_model",
    "gold_panning_integrations.readers.llama_index_llm",
    "gold_panning_integrations.readers.local",
)


def _loaded_after(imports: tuple[str, ...]) -> list[str]:
    """The package's modules in ``sys.modules`` after a fresh interpreter imports ``imports``."""
    import json
    import subprocess
    import sys

    code = (
        f"import importlib, json, sys\nfor m in {list(imports)!r}: importlib.import_module(m)\n"
        "print(json.dumps(sorted(n for n in sys.modules if n.startswith('gold_panning_integrations'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO, timeout=300
    )
    return list(json.loads(out.stdout.splitlines()[-1]))


def _lab(loaded: list[str]) -> list[str]:
    return [
        m
        for m in loaded
        if any(
            m == f"gold_panning_integrations.{lab}" or m.startswith(f"gold_panning_integrations.{lab}.")
            for lab in LAB_MODULES
        )
    ]


def test_importing_the_reranker_loads_none_of_the_lab() -> None:
    loaded = _loaded_after(PRODUCT_IMPORTS)
    assert "gold_panning_integrations.readers.openai" in loaded and len(loaded) > 20
    assert _lab(loaded) == []
    assert not any(m == "benchmarks" or m.startswith("benchmarks.") for m in loaded)


def test_the_lab_check_sees_the_lab() -> None:
    loaded = _loaded_after(("gold_panning_integrations", "gold_panning_integrations.engine.simulator"))
    assert _lab(loaded) == ["gold_panning_integrations.engine.simulator"]
    assert _lab(["gold_panning_integrations.evaluate.compare", "gold_panning_integrations.plots"]) == [
        "gold_panning_integrations.evaluate.compare",
        "gold_panning_integrations.plots",
    ]
