"""The README is a front door: its Python snippets run, its links resolve, its settings
table says what ``SETTINGS`` holds, and the test command sits where ``.ci/run`` reads it."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)


def test_readme_is_a_front_door_not_a_notebook() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 300


def test_python_blocks_run_in_order() -> None:
    """Each block as a user would paste it, in order, with the embedded model
    (``"local"``) replaced by the simulated reader so that no model runs here."""
    import langchain_core  # noqa: F401 - the snippets need the extras the test extra installs
    import llama_index.core  # noqa: F401

    from gold_panning_integrations.profiles import load_profile
    from gold_panning_integrations.readers.simulated import LexicalSimulatedReader

    blocks = _python_blocks(README.read_text(encoding="utf-8"))
    assert len(blocks) >= 4
    reader = LexicalSimulatedReader(load_profile("lost-in-the-middle"), rng=np.random.default_rng(0))
    namespace: dict[str, object] = {"__name__": "readme", "_reader": reader}
    for block in blocks:
        assert '"local"' in block or "SETTINGS" in block or "import" in block
        exec(compile(block.replace('"local"', "_reader"), "README.md", "exec", dont_inherit=True), namespace)  # noqa: S102


def test_the_ci_reads_the_test_command() -> None:
    text = README.read_text(encoding="utf-8")
    after = text.split("<!-- test-command -->\n", 1)[1]
    command = after.split("```bash\n", 1)[1].split("\n```", 1)[0]
    portable = 'CMAKE_ARGS="-DGGML_NATIVE=OFF" '  # llama.cpp built for any CPU, not only this one
    assert (
        command
        == portable + 'python -m pip install -e ".[all,test]" && python -m pytest -n 2 --dist loadfile'
    )
    assert f'```bash\n{portable}python -m pip install ".[local]" && gold-panning run --demo\n```' in text


def test_settings_table_matches_the_declared_settings() -> None:
    from gold_panning_integrations.engine.config import SETTINGS

    lines = README.read_text(encoding="utf-8").splitlines()
    start = lines.index("<!-- settings-table -->") + 1
    assert lines[start] == (
        "| setting | options | sequential calls | calls | p50 s/query (loopback, 0.5 s/call) | top-1 |"
    )
    rows = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0].strip("`")] = cells[1].strip("`")
    for name, options in SETTINGS.items():
        assert rows[name] == ", ".join(f"{k}={v}" for k, v in options.items())


@pytest.mark.parametrize("page", [README, *DOCS], ids=lambda p: p.name)
def test_relative_links_resolve(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    missing = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = (page.parent / target.split("#", 1)[0]).resolve()
        if not path.exists():
            missing.append(target)
    assert missing == []
