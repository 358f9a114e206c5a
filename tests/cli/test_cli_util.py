"""CLI helpers: tqdm progress bar, the regular-file check of --docs, tables."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from gold_panning_integrations import GoldPanner
from gold_panning_integrations._console import Progress, format_table, progress_quiet
from gold_panning_integrations.cli import EXIT_ERROR, build_parser, main
from gold_panning_integrations.cli.commands import run as run_command
from gold_panning_integrations.cli.commands.run import load_documents
from gold_panning_integrations.profiles import DetectorProfile, resolved_profile


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


# ------------------------------------------------------------ progress
def test_progress_draws_on_a_terminal_and_closes_at_the_total() -> None:
    stream = _Tty()
    bar = Progress(3, label="work", stream=stream)
    bar.update(1)
    bar.update(3)
    assert "3/3" in stream.getvalue()
    assert "work" in stream.getvalue()
    assert bar._bar is None


def test_progress_is_silent_when_not_a_terminal() -> None:
    stream = io.StringIO()
    bar = Progress(3, label="work", stream=stream)
    bar.update(3)
    assert stream.getvalue() == ""


def test_progress_force_draws_into_a_file() -> None:
    stream = io.StringIO()
    Progress(2, stream=stream, force=True).update(2)
    assert "2/2" in stream.getvalue()


def test_progress_quiet_wins_over_force_and_terminal() -> None:
    stream = _Tty()
    with progress_quiet(True):
        Progress(2, stream=stream, force=True).update(2)
    assert stream.getvalue() == ""


def test_progress_quiet_is_restored() -> None:
    with progress_quiet(True):
        pass
    assert Progress(1, stream=_Tty()).enabled


def test_progress_total_can_be_corrected_and_update_ignores_a_second_argument() -> None:
    stream = _Tty()
    bar = Progress(1, stream=stream)
    bar.total = 5
    bar.update(4, 5)
    bar.update(5, 5)
    assert "5/5" in stream.getvalue()


def test_quiet_flag_after_the_subcommand() -> None:
    assert build_parser().parse_args(["simulate", "--quiet"]).quiet is True


def test_quiet_flag_before_the_subcommand() -> None:
    assert build_parser().parse_args(["-q", "evaluate"]).quiet is True


def test_verbose_defaults_to_zero_with_a_subcommand() -> None:
    assert build_parser().parse_args(["evaluate"]).verbose == 0


# ------------------------------------------------------------ --docs: a regular file of sane size
def test_docs_a_folder_fifo_or_device_is_refused_before_reading(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"--docs '.*' is a directory; pass a regular file"):
        load_documents(tmp_path)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match=r"is a FIFO \(named pipe\); pass a regular file"):
        load_documents(fifo)
    link = tmp_path / "zero.jsonl"
    link.symlink_to("/dev/zero")
    with pytest.raises(ValueError, match="is a device; pass a regular file"):
        load_documents(link)


def test_docs_missing_or_too_large(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(FileNotFoundError, match=r"--docs: no such file: '.*nope.jsonl'"):
        load_documents(tmp_path / "nope.jsonl")
    f = tmp_path / "big.txt"
    f.write_text("12345")
    monkeypatch.setattr(run_command, "MAX_DOCS_BYTES", 4)
    with pytest.raises(ValueError, match="has 5 bytes, more than the 4 read"):
        load_documents(f)


def test_run_docs_folder_is_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "--docs", str(tmp_path), "--question", "q", "--reader", "simulated"])
    lines = capsys.readouterr().err.splitlines()
    assert code == EXIT_ERROR
    assert len(lines) == 1
    assert "is a directory; pass a regular file" in lines[0]


# ------------------------------------------------------------ tables and labels
def test_format_table_right_aligns() -> None:
    assert format_table(["a", "bb"], [[1, 0.5]]).splitlines() == ["a     bb", "-  -----", "1  0.500"]


def test_format_table_refuses_a_short_row() -> None:
    with pytest.raises(ValueError, match="table row 1 has 1 cells for 2 headers"):
        format_table(["a", "b"], [[1]])


def test_resolved_profile_label_names_the_file_the_profile_came_from(tmp_path: Path) -> None:
    class R:
        recommended_profile = "smollm2-135m-kv"

    path = tmp_path / "my.json"
    DetectorProfile.bundled("smollm2-135m-kv").save(path)
    assert resolved_profile(str(path), reader=R()).label == str(path)


def test_resolved_profile_label_uses_the_readers_profile() -> None:
    class R:
        recommended_profile = "smollm2-135m-kv"

    assert resolved_profile(None, reader=R()).label == "smollm2-135m-kv"


def test_resolved_profile_label_falls_back_to_the_generic_profile() -> None:
    assert resolved_profile(None, reader=object()).label == "lost-in-the-middle"


def test_resolved_profile_label_of_a_profile_built_in_code() -> None:
    built = DetectorProfile.bundled("smollm2-135m-kv").model_copy(update={"model": "m1", "task": "kv"})
    assert resolved_profile(built).label == "m1 (kv)"
    assert GoldPanner(None, built).profile_label == "m1 (kv)"
    assert GoldPanner(None, "smollm2-135m-kv").profile_label == "smollm2-135m-kv"
