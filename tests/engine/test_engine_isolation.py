"""The engine (and the top-level package) import no LLM framework.

Checked in a fresh interpreter, since this test process has long imported LangChain and
LlamaIndex through other tests.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

FORBIDDEN = ("langchain", "langchain_core", "langchain_community", "llama_index", "openai")

_PROBE = """
import json, sys
for name in {modules!r}:
    __import__(name)
{extra}
print(json.dumps(sorted(sys.modules)))
"""


def _modules_after(modules: list[str], extra: str = "") -> list[str]:
    code = _PROBE.format(modules=modules, extra=extra)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _forbidden(mods: list[str]) -> list[str]:
    return [m for m in mods if m.split(".")[0] in FORBIDDEN or m.startswith(("langchain", "llama_index"))]


@pytest.mark.parametrize(
    "modules",
    [
        ["gold_panning_integrations.engine"],
        ["gold_panning_integrations"],
        ["gold_panning_integrations.profiles", "gold_panning_integrations.errors"],
    ],
)
def test_import_pulls_in_no_framework(modules: list[str]) -> None:
    mods = _modules_after(modules)
    assert set(modules) <= set(mods)
    assert _forbidden(mods) == []


def test_panning_end_to_end_pulls_in_no_framework() -> None:
    # Use the engine for real (profile load, a run with the simulated reader, the
    # simulator), not just import it.
    extra = (
        "from gold_panning_integrations import GoldPanner, SimulatedReader, DetectorProfile, simulate\n"
        "p = DetectorProfile.bundled('lost-in-the-middle')\n"
        "docs = [f'd{i}' for i in range(10)]\n"
        "GoldPanner(SimulatedReader(p, {'d3'}, rng=0), profile=p, rounds=2).run('q', docs)\n"
        "simulate(p.tpr, p.fpr, n=10, rounds=2, trials=5, rng=0)\n"
    )
    mods = _modules_after(["gold_panning_integrations"], extra)
    assert "gold_panning_integrations.engine.panner" in mods
    assert _forbidden(mods) == []


def test_the_probe_detects_a_framework_import() -> None:
    # The check itself must be able to fail: importing langchain_core is seen.
    import langchain_core  # noqa: F401  (the test extra installs it)

    mods = _modules_after(["gold_panning_integrations.engine", "langchain_core.documents"])
    assert "langchain_core" in _forbidden(mods)
