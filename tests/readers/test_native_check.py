"""The crash guard of the embedded model (:mod:`gold_panning_integrations.readers._native`).

No real model and no llama.cpp here: the child's command is a small script that kills
itself with SIGILL, hangs, fails or passes, and counts its launches in a file; the reader
and CLI tests put a stand-in ``llama_cpp`` package on disk whose import kills the child
with SIGILL, as a llama-cpp-python built for another CPU kills its first decode.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import sys
import time
import types
from pathlib import Path

import pytest

from gold_panning_integrations.errors import FatalReaderError, NativeCrashError
from gold_panning_integrations.readers import _native
from gold_panning_integrations.readers._native import (
    SKIP_ENV,
    LlamaLibrary,
    check_llama_runs_here,
    signal_name,
)

posix_signals = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

_PRELUDE = (
    "import os, signal, sys, time\n"
    "import resource\n"
    "resource.setrlimit(resource.RLIMIT_CORE, (0, 0))\n"
    "with open(sys.argv[1], 'a') as fh:\n"
    "    fh.write(f'{os.getpid()}\\n')\n"
)


def _child(counter: Path, body: str) -> list[str]:
    """A child that appends its pid to ``counter``, then runs ``body``."""
    return [sys.executable, "-c", _PRELUDE + body, str(counter)]


def _launches(counter: Path) -> list[int]:
    return [int(x) for x in counter.read_text().split()] if counter.exists() else []


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No pass remembered in this process; the user's cache folder is a temporary one."""
    monkeypatch.setattr(_native, "_PASSED", set())
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(SKIP_ENV, raising=False)


@pytest.fixture
def library(tmp_path: Path) -> LlamaLibrary:
    return LlamaLibrary(init_file=tmp_path / "llama_cpp" / "__init__.py", version="0.3.99")


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF")
    return path


# ------------------------------------------------------------------ the check
@posix_signals
def test_a_child_killed_by_sigill_is_one_error_and_this_process_survives(
    tmp_path: Path, library: LlamaLibrary, model: Path
) -> None:
    counter, cache = tmp_path / "launches", tmp_path / "check.json"
    command = _child(counter, "os.kill(os.getpid(), signal.SIGILL)\n")
    t0 = time.monotonic()
    with pytest.raises(NativeCrashError) as info:
        check_llama_runs_here(model, library=library, command=command, cache_file=cache)
    assert time.monotonic() - t0 < 10
    err = info.value
    assert isinstance(err, FatalReaderError)  # the panner ends the run at once, no retry
    assert (err.signal_name, err.timeout) == ("SIGILL", None)
    text = str(err)
    assert "a check of llama-cpp-python 0.3.99 on m.gguf" in text
    assert "was killed by SIGILL (illegal instruction)" in text
    assert "this llama-cpp-python build uses CPU instructions this machine cannot run" in text
    assert "-m pip cache remove llama_cpp_python`, then `" in text
    assert (
        'CMAKE_ARGS="-DGGML_NATIVE=OFF" ' in text
        and '-m pip install --no-cache-dir --force-reinstall --no-deps "llama-cpp-python==0.3.99"' in text
    )
    assert text.endswith(f"to skip this check, set {SKIP_ENV}=1")
    # a failure is not remembered: the next reader checks again
    assert not cache.exists()
    with pytest.raises(NativeCrashError):
        check_llama_runs_here(model, library=library, command=command, cache_file=cache)
    assert len(_launches(counter)) == 2


@posix_signals
@pytest.mark.parametrize(("sig", "name"), [(signal.SIGSEGV, "SIGSEGV"), (signal.SIGBUS, "SIGBUS")])
def test_other_fatal_signals_name_themselves(
    tmp_path: Path, library: LlamaLibrary, model: Path, sig: int, name: str
) -> None:
    command = _child(tmp_path / "n", f"os.kill(os.getpid(), {int(sig)})\n")
    with pytest.raises(NativeCrashError, match=f"was killed by {name} in llama.cpp's native code"):
        check_llama_runs_here(model, library=library, command=command, cache_file=tmp_path / "c.json")


def test_a_pass_is_remembered_and_not_run_again(
    tmp_path: Path, library: LlamaLibrary, model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter, cache = tmp_path / "launches", tmp_path / "cache" / "check.json"
    command = _child(counter, "print('llama.cpp ran')\n")

    def check(lib: LlamaLibrary = library) -> str:
        return check_llama_runs_here(model, library=lib, command=command, cache_file=cache)

    assert check() == "passed"
    assert check() == "cached"  # remembered in this process
    monkeypatch.setattr(_native, "_PASSED", set())
    assert check() == "cached"  # remembered in the file: another process
    assert len(_launches(counter)) == 1
    data = json.loads(cache.read_text())
    assert data["format"] == 1 and len(data["passes"]) == 1
    entry = data["passes"][0]
    assert (entry["llama_cpp_python"], entry["model"]) == ("0.3.99", str(model))
    assert sorted(p.name for p in cache.parent.iterdir()) == ["check.json"]  # no temporary file left
    # a rebuilt library (another size or mtime), another CPU, another model: checked again
    rebuilt = LlamaLibrary(library.init_file, "0.3.99", (("lib/libllama.so", 10, 2),))
    assert check(rebuilt) == "passed"
    monkeypatch.setattr(_native, "cpu_signature", lambda: "fpu sse2 amx_tile")
    assert check() == "passed"
    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGUF")
    assert check_llama_runs_here(other, library=library, command=command, cache_file=cache) == "passed"
    assert len(_launches(counter)) == 4
    assert len(json.loads(cache.read_text())["passes"]) == 4


def test_the_default_cache_is_under_xdg_cache_home(
    tmp_path: Path, library: LlamaLibrary, model: Path
) -> None:
    command = _child(tmp_path / "n", "pass\n")
    assert check_llama_runs_here(model, library=library, command=command) == "passed"
    assert (tmp_path / "xdg" / "gold-panning" / "llama-cpu-check.json").is_file()


def test_a_hanging_child_is_killed_at_the_deadline(
    tmp_path: Path, library: LlamaLibrary, model: Path
) -> None:
    counter = tmp_path / "launches"
    command = _child(counter, "time.sleep(120)\n")
    t0 = time.monotonic()
    with pytest.raises(NativeCrashError) as info:
        check_llama_runs_here(model, library=library, command=command, timeout=1.0, cache_file=tmp_path / "c")
    assert time.monotonic() - t0 < 10
    assert (info.value.signal_name, info.value.timeout) == (None, 1.0)
    assert "did not finish within 1 s and was stopped" in str(info.value)
    (pid,) = _launches(counter)
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(pid, 0)


def test_a_child_that_fails_by_itself_is_inconclusive_and_not_remembered(
    tmp_path: Path, library: LlamaLibrary, model: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A model file llama.cpp cannot load, say: the reader's own load reports it; the
    warning says the check did not run."""
    cache = tmp_path / "c.json"
    command = _child(tmp_path / "n", "sys.exit('llama_load_model_from_file: failed to load model')\n")
    assert check_llama_runs_here(model, library=library, command=command, cache_file=cache) == "inconclusive"
    assert not cache.exists()
    assert "failed without crashing (exit 1: llama_load_model_from_file: failed to load model)" in caplog.text


def test_the_check_can_be_skipped(
    tmp_path: Path, library: LlamaLibrary, model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = tmp_path / "launches"
    monkeypatch.setenv(SKIP_ENV, "1")
    command = _child(counter, "os.kill(os.getpid(), signal.SIGILL)\n")
    assert check_llama_runs_here(model, library=library, command=command) == "skipped"
    assert _launches(counter) == []


def test_a_damaged_cache_file_is_ignored_and_replaced(
    tmp_path: Path, library: LlamaLibrary, model: Path
) -> None:
    cache = tmp_path / "c.json"
    cache.write_text("{not json")
    command = _child(tmp_path / "n", "pass\n")
    assert check_llama_runs_here(model, library=library, command=command, cache_file=cache) == "passed"
    assert json.loads(cache.read_text())["format"] == 1


def test_no_library_on_disk_means_nothing_to_check(monkeypatch: pytest.MonkeyPatch, model: Path) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", types.ModuleType("llama_cpp"))  # a stand-in
    assert LlamaLibrary.installed() is None
    assert check_llama_runs_here(model) == "skipped"
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # blocked
    assert check_llama_runs_here(model) == "skipped"


def test_signal_names() -> None:
    assert (signal_name(None), signal_name(0), signal_name(3)) == (None, None, None)
    if sys.platform != "win32":
        assert (signal_name(-4), signal_name(-11), signal_name(-signal.SIGBUS)) == (
            "SIGILL",
            "SIGSEGV",
            "SIGBUS",
        )


def test_the_probe_command_runs_this_interpreter_on_the_library_found(
    library: LlamaLibrary, model: Path
) -> None:
    argv = _native.probe_command(model, library)
    assert argv[0] == sys.executable and argv[1:4] == ["-X", "faulthandler", "-c"]
    assert argv[4] == _native.PROBE and argv[5:] == [str(library.init_file), str(model)]
    compile(_native.PROBE, "PROBE", "exec")  # the child's program is valid Python


# ------------------------------------------------------------------ the reader and the CLI
@pytest.fixture
def sigill_llama(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in llama-cpp-python on disk whose import kills the process with SIGILL; in
    this process ``llama_cpp`` is that package's module object, never executed here
    (its ``Llama`` fails the test if the reader ever loads the model itself)."""
    pkg = tmp_path / "site" / "llama_cpp"
    pkg.mkdir(parents=True)
    init = pkg / "__init__.py"
    init.write_text(
        "import os, resource, signal\n"
        "resource.setrlimit(resource.RLIMIT_CORE, (0, 0))\n"
        "os.kill(os.getpid(), signal.SIGILL)\n"
    )
    spec = importlib.util.spec_from_file_location("llama_cpp", init, submodule_search_locations=[str(pkg)])
    assert spec is not None
    mod = importlib.util.module_from_spec(spec)

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model was loaded in this process after a crash of the check")

    mod.Llama = never  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "llama_cpp", mod)
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    return gguf


@posix_signals
def test_the_local_reader_raises_the_error_instead_of_dying(sigill_llama: Path) -> None:
    from gold_panning_integrations import GoldPanner
    from gold_panning_integrations.readers.local import LocalReader

    reader = LocalReader(sigill_llama)
    t0 = time.monotonic()
    with pytest.raises(NativeCrashError, match="killed by SIGILL .*cannot run"):
        reader.read("Which document is about rain?", ["Rain falls.", "Sun shines."])
    with pytest.raises(NativeCrashError, match="SIGILL"):  # ends a panning run at once
        GoldPanner(reader, profile="lost-in-the-middle", rng=0).run("q?", ["a", "b", "c"])
    assert time.monotonic() - t0 < 20
    assert reader.calls == 0


@posix_signals
def test_gold_panning_run_prints_one_line_and_exits_2(
    sigill_llama: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gold_panning_integrations.cli import main

    assert main(["run", "--demo", "--model-path", str(sigill_llama), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("gold-panning run: error: a check of llama-cpp-python")
    assert "SIGILL" in err[-1] and "pip cache remove llama_cpp_python" in err[-1]
