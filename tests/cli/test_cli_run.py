"""``gold-panning run`` and ``calibrate`` end to end with the hidden simulated reader."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gold_panning_integrations.cli import EXIT_ERROR, main
from gold_panning_integrations.cli.commands.run import load_documents
from gold_panning_integrations.profiles import DetectorProfile


def _json_out(capsys: pytest.CaptureFixture[str]) -> dict:
    out = capsys.readouterr().out.strip().splitlines()
    return json.loads(out[-1])


def test_run_demo_json(capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "--rounds",
        "3",
        "--prompts-per-round",
        "1",
        "--json",
        "--profile",
        "lost-in-the-middle",
        "--k",
        "1",
    ]
    assert main(["run", "--demo", "--reader", "simulated", *args]) == 0
    out = _json_out(capsys)
    assert out["calls"] == 3 and len(out["rounds"]) == 3
    assert len(out["posteriors"]) == 10 and len(out["selected"]) == 1
    assert out["profile"] == "lost-in-the-middle"
    assert out["gold"] and 0 <= out["gold"][0] < 10
    assert out["selected_documents"][0]["index"] == out["selected"][0]
    assert out["question"].startswith("What is ")


def test_run_demo_is_deterministic_and_text_mentions_rounds(capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "run",
        "--demo",
        "--reader",
        "simulated",
        "--rounds",
        "2",
        "--prompts-per-round",
        "1",
        "--seed",
        "4",
    ]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert main(args) == 0

    def untimed(text: str) -> str:  # wall times differ between runs; everything else must not
        return re.sub(r"\d+\.\d+s", "", text)

    assert untimed(capsys.readouterr().out) == untimed(first)
    assert "round 1" in first and "round 2" in first and "round 3" not in first
    assert "selected (stopped: rounds; 2 calls" in first and "(demo: the relevant document is #" in first


def test_run_demo_uses_the_documented_seed_unless_given(capsys: pytest.CaptureFixture[str]) -> None:
    """The demo repeats the run the docs show (seed 0); --seed still wins."""
    base = ["run", "--demo", "--reader", "simulated", "--json"]
    runs = {}
    for extra in ((), ("--seed", "0"), ("--seed", "5")):
        assert main([*base, *extra]) == 0
        out = _json_out(capsys)
        runs[extra] = [r["labels"] for r in out["rounds"]]
    assert runs[()] == runs[("--seed", "0")] != runs[("--seed", "5")]


def test_run_docs_jsonl_keeps_metadata(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = tmp_path / "docs.jsonl"
    rows = [{"text": f"Person {i}'s locker number is {100 + i}.", "id": f"doc-{i}"} for i in range(6)]
    docs.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    code = main(
        [
            "run",
            "--docs",
            str(docs),
            "--question",
            "What is Person 3's locker number?",
            "--reader",
            "simulated",
            "--k",
            "2",
            "--rounds",
            "2",
            "--json",
        ]
    )
    assert code == 0
    out = _json_out(capsys)
    assert len(out["selected_documents"]) == 2
    sel = out["selected_documents"][0]
    assert sel["metadata"] == {"id": f"doc-{sel['index']}"}
    assert sel["text"] == rows[sel["index"]]["text"]


def test_load_documents_txt_and_errors(tmp_path: Path) -> None:
    txt = tmp_path / "d.txt"
    txt.write_text("first\n\n second \n")
    assert load_documents(txt) == (["first", "second"], [{}, {}])
    bad = tmp_path / "d.jsonl"
    bad.write_text('{"text": "ok"}\n{"body": "no text"}\n')
    with pytest.raises(ValueError, match="line 2 must be a JSON object with a string 'text' field"):
        load_documents(bad)
    with pytest.raises(FileNotFoundError):
        load_documents(tmp_path / "missing.txt")


def test_run_docs_needs_question(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    txt = tmp_path / "d.txt"
    txt.write_text("a\nb\n")
    assert main(["run", "--docs", str(txt), "--reader", "simulated"]) == EXIT_ERROR
    assert "--docs needs --question" in capsys.readouterr().err


def test_run_openai_without_model_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--demo", "--reader", "openai"]) == EXIT_ERROR
    assert "--model" in capsys.readouterr().err


def test_calibrate_cli_writes_profile_and_resumes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "p.json"
    base = [
        "calibrate",
        "--reader",
        "simulated",
        "--task",
        "kv",
        "--n",
        "10",
        "--grid",
        "3",
        "--trials",
        "4",
        "--out",
        str(out),
    ]
    assert main(base + ["--limit", "5"]) == 3  # incomplete
    p = DetectorProfile.load(out)
    assert "INCOMPLETE" in p.notes
    assert main(base) == 0
    text = capsys.readouterr().out
    assert "7 run now, 5 resumed" in text
    p = DetectorProfile.load(out)
    assert p.n_positions == 10 and p.grid_positions == [0, 4, 9] and p.trials == [4, 4, 4]
    assert "gold-panning" in p.notes and "12 of 12 trials completed" in p.notes
    assert Path(str(out) + ".checkpoint.jsonl").exists()


def test_calibrate_plot(tmp_path: Path) -> None:
    png = tmp_path / "p.png"
    code = main(
        [
            "calibrate",
            "--reader",
            "simulated",
            "--task",
            "pir",
            "--n",
            "6",
            "--grid",
            "3",
            "--trials",
            "2",
            "--out",
            str(tmp_path / "p.json"),
            "--plot",
            str(png),
        ]
    )
    assert code == 0
    assert png.stat().st_size > 1000


def test_run_demo_has_no_retriever_order_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--demo", "--reader", "simulated", "--rounds", "2", "--json"]) == 0
    out = _json_out(capsys)
    # the simulated reader recommends the profile it follows (--sim-profile's default)
    assert out["profile"] == "lost-in-the-middle"
    assert main(["run", "--demo", "--reader", "simulated", "--rounds", "1"]) == 0
    assert "no retriever order (retriever_prior='none')" in capsys.readouterr().out
    # given explicitly, the user's choice stands
    assert main(["run", "--demo", "--reader", "simulated", "--rounds", "1", "--retriever-prior", "rank"]) == 0
    assert "retriever_prior='none'" not in capsys.readouterr().out


def test_run_docs_start_from_the_rank_prior_over_the_file_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gold_panning_integrations.engine.priors import DEFAULT_RANK_MAP

    txt = tmp_path / "d.txt"
    txt.write_text("alpha\nbeta\ngamma\n")
    argv = [
        "run",
        "--docs",
        str(txt),
        "--question",
        "q?",
        "--reader",
        "simulated",
        "--json",
        "--max-calls",
        "1",
    ]
    assert main([*argv, "--rounds", "1", "--prompts-per-round", "2"]) == 0
    out = _json_out(capsys)
    assert out["calls"] == 1  # the budget cut the round to its first prompt
    # the default rank map over the file's 3 lines: sigmoid(-1.3802 - log(1 + r)), the odds
    # 0.251528 / (1 + r): [0.20098, 0.11171, 0.07736] (not bounded: the log-odds gap log 3 =
    # 1.099 is below 0.75 of the evidence swing at 3 documents, 3.107)
    rank = DEFAULT_RANK_MAP.probabilities(3).tolist()
    assert rank == pytest.approx([0.20098, 0.11171, 0.07736], abs=1e-5)
    assert (
        main(
            [
                "run",
                "--docs",
                str(txt),
                "--question",
                "q?",
                "--reader",
                "simulated",
                "--json",
                "--profile",
                str(_flat_profile(tmp_path)),
            ]
        )
        == 0
    )
    assert _json_out(capsys)["posteriors"] == pytest.approx(rank, abs=1e-6)  # JSON keeps 6 decimals


def _flat_profile(tmp_path: Path) -> Path:
    return DetectorProfile(n_positions=3, tpr=[0.5] * 3, fpr=[0.5] * 3).save(tmp_path / "flat.json")


@pytest.mark.parametrize(
    ("setting", "extra", "rounds", "calls"),
    [
        ("lowest-latency", [], 1, 8),  # 1 round x 8 prompts
        ("highest-accuracy", [], 3, 12),  # 3 rounds x 4 prompts
        ("highest-accuracy", ["--rounds", "1"], 1, 4),  # a flag given beside the setting wins
    ],
)
def test_run_setting_lays_its_options_under_the_flags(
    setting: str, extra: list[str], rounds: int, calls: int, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["run", "--demo", "--reader", "simulated", "--json", "--setting", setting, *extra]
    assert main(args) == 0
    out = _json_out(capsys)
    assert (len(out["rounds"]), out["calls"]) == (rounds, calls)


def test_run_unknown_setting_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--demo", "--setting", "fastest"])
    assert "invalid choice: 'fastest'" in capsys.readouterr().err
