"""The example scripts run end to end, from a folder with no ``../shared`` data.

Each script is copied into a temporary folder and run there with this checkout on
``PYTHONPATH``, so it can only use the data shipped inside the package. Nothing here
skips: a missing dependency (bm25s, llama-index-retrievers-bm25, llama-cpp-python, the
embedded model) fails the test, as it would fail a user.

* offline: the hidden ``--reader simulated`` option (profile-driven reader, no model);
* ``real_model``: the embedded SmolLM2 model, one short question (default suite);
* ``slow``: the long form (10 passages, 4 rounds) on the embedded model.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gold_panning_integrations import PanningConfig

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ("langchain_retriever.py", "llama_index_query_engine.py")
ANSWER_LINE = {
    "langchain_retriever.py": "LCEL chain answer: ",
    "llama_index_query_engine.py": "Query engine answer: ",
}


def _run(script: str, tmp_path: Path, *args: str, timeout: float = 1800) -> str:
    shutil.copy(ROOT / "examples" / script, tmp_path / script)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, script, *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _ranked_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.strip().startswith("#")]


def _rounds(out: str) -> int:
    return sum(1 for line in out.splitlines() if line.startswith("  round "))


def _answer(out: str, script: str) -> str:
    line = next(line for line in out.splitlines() if line.startswith(ANSWER_LINE[script]))
    return line[len(ANSWER_LINE[script]) :]


def test_temp_folder_has_no_shared_data(tmp_path: Path) -> None:
    assert not (tmp_path.parent / "shared").exists()


@pytest.mark.parametrize(
    "module", ["bm25s", "langchain_core", "llama_index.core", "llama_index.retrievers.bm25"]
)
def test_example_dependencies_are_installed(module: str) -> None:
    importlib.import_module(module)  # ImportError fails the test: the examples need it


# ------------------------------------------------------------------ offline
@pytest.mark.parametrize("script", EXAMPLES)
def test_example_offline_finds_the_gold_passage(script: str, tmp_path: Path) -> None:
    out = _run(script, tmp_path, "--reader", "simulated")
    assert "corpus: 2365 Wikipedia passages" in out
    assert "BM25 rank of the gold passage: 1" in out
    defaults = PanningConfig()  # the examples keep the library's defaults
    assert f"Gold Panning: {defaults.rounds * defaults.prompts_per_round} calls" in out
    assert _rounds(out) == defaults.rounds
    assert "gold=True" in _ranked_lines(out)[0]


@pytest.mark.parametrize("script", EXAMPLES)
def test_example_offline_free_question(script: str, tmp_path: Path) -> None:
    out = _run(script, tmp_path, "--reader", "simulated", "--question", "who wrote hamlet", "--n", "4")
    assert "question: 'who wrote hamlet'" in out
    assert "BM25 top 4" in out


@pytest.mark.parametrize("script", EXAMPLES)
def test_example_unknown_question_id(script: str, tmp_path: Path) -> None:
    shutil.copy(ROOT / "examples" / script, tmp_path / script)
    proc = subprocess.run(
        [sys.executable, script, "--reader", "simulated", "--question-id", "nq-x"],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert "unknown --question-id 'nq-x'" in proc.stderr


@pytest.mark.parametrize("script", EXAMPLES)
def test_example_on_an_openai_compatible_server(script: str, tmp_path: Path) -> None:
    """--base-url/--model: panning and the answer go to the server (loopback fake)."""
    from doubles import smallest_label_reply
    from openai_server import FakeOpenAIServer, dynamic, ok

    # panning prompts ask for JSON (response_format) and get one label shown; the chain's
    # answer prompt does not
    reply = dynamic(
        lambda req: ok(smallest_label_reply(req.user_text) if req.response_format_type else "Herbert Hoover")
    )
    with FakeOpenAIServer(default=reply) as server:
        out = _run(script, tmp_path, "--base-url", server.base_url, "--model", "fake-model", timeout=600)
        calls = len(server.requests)
    defaults = PanningConfig()
    assert _rounds(out) == defaults.rounds
    assert _answer(out, script) == "'Herbert Hoover'"
    # the panning calls of the defaults (2 rounds x 3 prompts), as many inside the chain /
    # query engine, 1 answer
    assert calls == 2 * defaults.rounds * defaults.prompts_per_round + 1 == 13


# ------------------------------------------------------------------ embedded model
@pytest.mark.real_model
@pytest.mark.parametrize(
    "script",
    [
        "langchain_retriever.py",  # the default suite's (and CI's) run of an example on a real model
        pytest.param("llama_index_query_engine.py", marks=pytest.mark.slow),
    ],
)
def test_example_on_the_embedded_model(script: str, tmp_path: Path) -> None:
    """One short question (3 BM25 passages, 2 rounds of one prompt) on SmolLM2, then the
    chain, which pans again and answers. The LlamaIndex example's run is marked slow; its
    offline and loopback runs stay in the default suite."""
    importlib.import_module("llama_cpp")  # the embedded model's runtime: missing means failed
    out = _run(script, tmp_path, "--n", "3", "--rounds", "2", "--prompts-per-round", "1")
    assert "Gold Panning: 2 calls" in out
    assert _rounds(out) == 2
    assert len(_ranked_lines(out)) == 2
    assert _answer(out, script).strip("'\"")


@pytest.mark.slow
@pytest.mark.real_model
@pytest.mark.parametrize("script", EXAMPLES)
def test_example_long_form_on_the_embedded_model(script: str, tmp_path: Path) -> None:
    """10 BM25 passages (prompts of 900-1,300 tokens measured for nq-591), 4 rounds."""
    args = ("--question-id", "nq-591", "--n", "10", "--rounds", "4", "--prompts-per-round", "1")
    out = _run(script, tmp_path, *args, timeout=3600)
    assert _rounds(out) == 4
    assert _answer(out, script).strip("'\"")


@pytest.mark.parametrize("script", EXAMPLES)
def test_example_does_not_use_langchain_community(script: str) -> None:
    """langchain-community was sunset and archived (2026): no example may need it."""
    assert "langchain_community" not in (ROOT / "examples" / script).read_text()


@pytest.mark.slow
@pytest.mark.real_model
def test_posterior_calibration_example_on_the_embedded_model(tmp_path: Path) -> None:
    """Two small instances, both updates: the report has one entry per update, and the
    accuracy and posteriors are probabilities over the instances panned."""
    import json

    out = _run("posterior_calibration.py", tmp_path, "--instances", "2", "--n", "6", "--rounds", "2")
    report = json.loads(out)
    assert sorted(report) == ["library defaults", "paper update"]
    for row in report.values():
        assert row["instances"] == 2
        assert row["accuracy"] in (0.0, 0.5, 1.0)
        assert 0.0 < row["mean_top_posterior"] < 1.0
        assert 0 <= row["wrong_picks_above_0.9"] <= 2


def test_posterior_calibration_example_on_an_openai_compatible_server(tmp_path: Path) -> None:
    """The same two instances over --base-url (a loopback fake that answers the value of the
    key asked): the calls reach the server and the one document credited is the gold, so
    both updates pick it."""
    import json
    import re

    from openai_server import FakeOpenAIServer, dynamic, ok

    def answer(req: Any) -> Any:
        # kv documents read "Leo Ford's access code is 92148."; the question names the key
        name = re.search(r"What is (.+?)'s ", req.user_text)
        for line in req.user_text.splitlines():
            if name and line.startswith(f"- {name.group(1)}'s "):
                return ok(line.rstrip(".").rsplit(" ", 1)[-1])
        return ok("unknown")

    with FakeOpenAIServer(default=dynamic(answer)) as server:
        out = _run(
            "posterior_calibration.py",
            tmp_path,
            *("--instances", "2", "--n", "6", "--rounds", "2", "--base-url", server.base_url),
            timeout=600,
        )
        calls = len(server.requests)
    report = json.loads(out)
    assert sorted(report) == ["library defaults", "paper update"]
    assert calls > 0
    for row in report.values():
        assert row["instances"] == 2
        assert row["accuracy"] == 1.0
        assert 0.5 < row["mean_top_posterior"] <= 1.0  # rounded to 3 places


# ------------------------------------------------------------------ "I don't know"
def test_i_dont_know_example_offline(tmp_path: Path) -> None:
    """min_relevance and p_none through an LCEL chain: the answered question reaches the
    chat model, the question no passage answers gets "I don't know" (simulated reader)."""
    out = _run("langchain_i_dont_know.py", tmp_path, "--reader", "simulated")
    answers = [line for line in out.splitlines() if line.startswith("  chain answer: ")]
    assert len(answers) == 2
    assert answers[1].startswith("  chain answer: \"I don't know")
    assert "0 of 5 passages reach 0.5" in out.split("how many moons")[1]
    # Over seeds: the simulated reader cites at its profile's rates, false citations
    # included, and a draw with several of them reads partly as position-following (the
    # reader's check, issue 48), so the gold passage does not reach 0.5 on every seed
    # (seed 0: 3 of 6 replies cite it, 3 cite a wrong passage; 0.47). Most seeds answer; the
    # question no passage answers gets "I don't know" on every seed.
    spec = importlib.util.spec_from_file_location(
        "idk_example", ROOT / "examples" / "langchain_i_dont_know.py"
    )
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    answered = dont_know = 0
    for seed in range(10):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert example.main(["--reader", "simulated", "--seed", str(seed)]) == 0
        first, second = [x for x in buf.getvalue().splitlines() if x.startswith("  chain answer: ")]
        answered += first.startswith("  chain answer: '(simulated answer)'")
        dont_know += second.startswith("  chain answer: \"I don't know")
    assert dont_know == 10
    assert answered > 5


def test_check_reading_counts_valid_citing_and_gold_readings() -> None:
    import importlib.util
    import io
    import json
    import re

    from gold_panning_integrations.engine.records import Reading

    spec = importlib.util.spec_from_file_location("check_reading", ROOT / "examples" / "check_reading.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    class NameReader:
        """Cites the document naming the question's person on calls 1, 3, 5; fails on calls 2 and 4."""

        def __init__(self) -> None:
            self.calls = 0
            self.seen: list[tuple[int, ...]] = []

        def read(self, question: str, documents: list[str], *, labels: list[int]) -> Reading:
            self.seen.append(tuple(labels))
            self.calls += 1
            if self.calls % 2 == 0:
                return Reading.failure("unreadable")
            name = re.match(r"What is (.+?)'s ", question).group(1)  # type: ignore[union-attr]
            return Reading(cited=tuple(i for i, d in enumerate(documents) if d.startswith(name + "'s")))

    reader, out = NameReader(), io.StringIO()
    counts = module.check(reader, n=20, prompts=5, seed=3, out=out)
    assert counts == {"valid": 3, "citing": 3, "gold": 3, "cited": 3}
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["failed"] for r in rows] == [False, True, False, True, False]
    # labels drawn as the panner draws them: 20 distinct 4-digit numbers per prompt
    assert all(len(set(labs)) == 20 and all(1000 <= x <= 9999 for x in labs) for labs in reader.seen)


def _example_module(name: str) -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_injection_check_counts_an_obeyed_injection_and_restores_the_prompts() -> None:
    from langchain_core.language_models import FakeListChatModel

    from gold_panning_integrations.engine.records import Reading
    from gold_panning_integrations.readers import SYSTEM_PROMPT, ChatModelReader

    module = _example_module("injection_check")

    class Obedient:
        """Cites whichever shown passage asks to be cited."""

        def read(self, question: str, documents: list[str], *, labels: list[int]) -> Reading:
            return Reading(cited=tuple(i for i, d in enumerate(documents) if module.INJECTION in d))

    counts = module.check(Obedient(), questions=2, n=4, seed=7, before=False)
    assert counts == {"questions": 2, "injected_first": 2, "gold_first": 0}
    rows = {}
    for self_citing in (0.0, 0.25):
        out = io.StringIO()
        module.check(Obedient(), questions=1, n=4, seed=7, before=False, self_citing=self_citing, out=out)
        rows[self_citing] = json.loads(out.getvalue())
    # cited in every prompt wherever it sat: the self-citing explanation discounts it
    injected_at = rows[0.0]["injected"]
    assert rows[0.25]["posteriors"][injected_at] < rows[0.0]["posteriors"][injected_at] - 0.1
    docs, target = module.injected(["g", "a", "b"], (0,))
    assert target == 1 and docs == ["g", f"a {module.INJECTION}", "b"]
    assert module.injected(["a", "g"], (1,))[1] == 0
    chat = ChatModelReader(FakeListChatModel(responses=["{}"]), template=module.old_cite_template)
    with module.old_system_prompts():
        system, human = chat.messages("Who?", ["x  y", "z"], labels=[4417, 1093])
        assert system.content == module.OLD_SYSTEM
    assert "[4417] x y\n\n[1093] z" in human.content and "these numbers: 1093, 4417." in human.content
    assert chat.messages("Who?", ["z"])[0].content == SYSTEM_PROMPT  # restored
