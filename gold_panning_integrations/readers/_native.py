"""The crash guard of the embedded model: before llama.cpp runs in this process, a child
process checks that the installed llama-cpp-python runs on this CPU.

llama-cpp-python has no wheel on PyPI: pip compiles llama.cpp, by default for the CPU it
builds on (``GGML_NATIVE``). On a machine that cannot run an instruction the build uses (a
wheel built elsewhere, or a virtual machine that forbids instructions its CPU advertises,
such as AMX or AVX512-FP16), llama.cpp dies of SIGILL in its first decode and takes the
Python process with it (a shell shows exit 132). :func:`check_llama_runs_here` runs
:data:`PROBE` in a child (``python -c``): it imports the same library, loads the model the
reader is about to use with a tiny context and decodes a short prompt and two tokens,
which runs the SIMD kernels (a few seconds). A child killed by a signal, or still running
at the deadline, becomes one :class:`~gold_panning_integrations.errors.NativeCrashError`
naming the signal and the commands that rebuild llama-cpp-python for any CPU; this
process survives.

A pass is remembered in a small JSON file under the user's cache folder
(``$XDG_CACHE_HOME/gold-panning/`` or ``~/.cache/gold-panning/``, :func:`default_cache_file`),
keyed by the library (its folder, version, and each shared library's size and modification
time), the CPU (its flags in ``/proc/cpuinfo`` where there is one) and the model file
(quantisations run different kernels): a rebuilt library, another CPU or another model is
checked again. A failure is never remembered as a pass. ``GOLD_PANNING_SKIP_CPU_CHECK=1``
skips the check.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .._io import atomic_text_file, read_regular_file
from ..errors import NativeCrashError

__all__ = [
    "CHECK_TIMEOUT",
    "PROBE",
    "SKIP_ENV",
    "CheckOutcome",
    "LlamaLibrary",
    "check_llama_runs_here",
    "cpu_signature",
    "default_cache_file",
    "probe_command",
    "signal_name",
]

logger = logging.getLogger(__name__)

SKIP_ENV = "GOLD_PANNING_SKIP_CPU_CHECK"
"""Set to ``1`` to skip the check (for a machine where it is known to pass, or cannot run)."""
CHECK_TIMEOUT = 120.0
"""Seconds the child may take before it counts as hung: the check takes 2 s on SmolLM2 on an idle
2-core machine, 15 s cold on a loaded one."""
CACHE_FORMAT = 1
_CACHE_NAME = "llama-cpu-check.json"
_MAX_ENTRIES = 64  # the remembered passes kept (the newest)
_MAX_CACHE_BYTES = 1 << 20
_TAIL_CHARS = 2000

CheckOutcome = Literal["passed", "cached", "skipped", "inconclusive"]
"""``passed``: the child ran and exited 0 (remembered); ``cached``: a remembered pass;
``skipped``: :data:`SKIP_ENV` is set, or no llama-cpp-python is on disk to check (not
installed, or a stand-in module); ``inconclusive``: the child exited with an error of its
own (say, a model file llama.cpp cannot load), which the reader's own load reports."""

PROBE = """\
import importlib.util, os, sys
try:
    import resource
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file from a crash
except (ImportError, ValueError, OSError):
    pass
init, model = sys.argv[1], sys.argv[2]
spec = importlib.util.spec_from_file_location(
    "llama_cpp", init, submodule_search_locations=[os.path.dirname(init)]
)
sys.modules["llama_cpp"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sys.modules["llama_cpp"])
llama_cpp = sys.modules["llama_cpp"]  # what `import` returns, also if the package swapped itself
llm = llama_cpp.Llama(model_path=model, n_ctx=128, n_batch=64, n_threads=1, seed=0, verbose=False)
out = llm.create_completion("gold river stone " * 10, max_tokens=2, temperature=0.0)
print("llama.cpp ran:", repr(out["choices"][0]["text"]))
"""
"""The child's program (argv: the library's ``__init__.py``, the model file): import that
library, load the model with a 128-token context, decode a ~30-token prompt (a batch) and
two tokens (one at a time)."""

_PASSED: set[tuple[str, str]] = set()  # (cache file, key) passed in this process
_LOCK = threading.Lock()


@dataclass(frozen=True)
class LlamaLibrary:
    """An installed llama-cpp-python, found on disk without importing it.

    Attributes:
        init_file: The package's ``llama_cpp/__init__.py``.
        version: The distribution's version (None when it has no metadata).
        files: ``(name relative to the package, size in bytes, mtime in ns)`` of each
            shared library in the package (``libllama.so``, ``libggml-cpu.so``...).
    """

    init_file: Path
    version: str | None
    files: tuple[tuple[str, int, int], ...] = ()

    @classmethod
    def installed(cls) -> LlamaLibrary | None:
        """The llama-cpp-python that ``import llama_cpp`` loads here, or None: not
        installed, blocked, or a module that is no file on disk (a test's stand-in)."""
        if "llama_cpp" in sys.modules:
            origin = getattr(sys.modules["llama_cpp"], "__file__", None)
        else:
            try:
                spec = importlib.util.find_spec("llama_cpp")
            except (ImportError, ValueError):
                return None
            origin = spec.origin if spec is not None else None
        if not origin or not os.path.isfile(origin):
            return None
        init = Path(origin).resolve()
        files = []
        for p in sorted(init.parent.rglob("*")):
            if p.suffix in (".so", ".dylib", ".dll") or ".so." in p.name:
                with contextlib.suppress(OSError):
                    st = p.stat()
                    files.append((p.relative_to(init.parent).as_posix(), st.st_size, st.st_mtime_ns))
        try:
            version: str | None = importlib.metadata.version("llama_cpp_python")
        except importlib.metadata.PackageNotFoundError:
            version = None
        return cls(init_file=init, version=version, files=tuple(files))


def cpu_signature() -> str:
    """The CPU's instruction-set flags (``/proc/cpuinfo``: ``flags`` on x86, ``Features``
    on ARM), sorted; without ``/proc/cpuinfo``, the machine and processor names."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            text = fh.read(1 << 16)  # the first CPU's block is enough
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return " ".join(sorted(set(value.split())))
    return f"{platform.machine()} {platform.processor()}".strip()


def default_cache_file() -> Path | None:
    """``$XDG_CACHE_HOME/gold-panning/llama-cpu-check.json`` (an absolute
    ``XDG_CACHE_HOME`` only, as the XDG spec says), else under ``~/.cache``; None when
    there is no home folder."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "gold-panning" / _CACHE_NAME
    try:
        return Path.home() / ".cache" / "gold-panning" / _CACHE_NAME
    except RuntimeError:  # no home folder
        return None


def signal_name(returncode: int | None) -> str | None:
    """The name of the signal that ended a child process (``-4`` -> ``"SIGILL"``; on
    Windows, the status of an illegal instruction or an access violation), or None."""
    if returncode is None:
        return None
    if sys.platform == "win32":
        statuses = {0xC000001D: "SIGILL", 0xC0000096: "SIGILL", 0xC0000005: "SIGSEGV"}
        return statuses.get(returncode & 0xFFFFFFFF)
    if returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def probe_command(model_path: str | os.PathLike[str], library: LlamaLibrary) -> list[str]:
    """The child's argv: this interpreter, with faulthandler (a crash prints the Python
    frame it happened in), running :data:`PROBE` on ``library`` and ``model_path``."""
    return [sys.executable, "-X", "faulthandler", "-c", PROBE, str(library.init_file), str(model_path)]


def _model_identity(model: Path) -> list[Any]:
    try:
        st = model.stat()
        return [str(model.resolve()), st.st_size, st.st_mtime_ns]
    except OSError:
        return [str(model), None, None]


def check_key(library: LlamaLibrary, model_path: str | os.PathLike[str]) -> str:
    """SHA-256 of the library (folder, version, shared libraries' sizes and mtimes), the
    CPU (:func:`cpu_signature`, the machine) and the model file (path, size, mtime)."""
    ident = {
        "library": [str(library.init_file.parent), library.version, [list(f) for f in library.files]],
        "cpu": [platform.machine(), cpu_signature()],
        "model": _model_identity(Path(model_path)),
    }
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode("utf-8")).hexdigest()


class _Unreadable(Exception):
    pass


def _entries(path: Path) -> list[dict[str, Any]]:
    """The remembered passes in ``path`` ([] when missing, unreadable or not ours)."""
    if not path.exists():
        return []
    try:
        data = json.loads(
            read_regular_file(path, max_bytes=_MAX_CACHE_BYTES, what="check cache", error=_Unreadable)
        )
    except (_Unreadable, ValueError) as err:
        logger.info("ignoring the llama.cpp check cache %s: %s", path, err)
        return []
    passes = data.get("passes") if isinstance(data, dict) and data.get("format") == CACHE_FORMAT else None
    return (
        [e for e in passes if isinstance(e, dict) and isinstance(e.get("key"), str)]
        if isinstance(passes, list)
        else []
    )


def _remember(path: Path, entry: dict[str, Any]) -> None:
    """Add ``entry`` to the passes in ``path``, written atomically (a temporary file in
    the same folder, then renamed); an unwritable folder is logged, not raised."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        entries = [e for e in _entries(path) if e["key"] != entry["key"]] + [entry]
        with atomic_text_file(path) as fh:
            json.dump({"format": CACHE_FORMAT, "passes": entries[-_MAX_ENTRIES:]}, fh, indent=1)
    except OSError as err:
        logger.info("could not remember the llama.cpp check in %s: %s", path, err)


def _tail(output: bytes | str | None) -> str:
    if output is None:
        return ""
    text = output.decode("utf-8", errors="replace") if isinstance(output, bytes) else output
    return text[-_TAIL_CHARS:]


def check_llama_runs_here(
    model_path: str | os.PathLike[str],
    *,
    library: LlamaLibrary | None = None,
    command: Sequence[str] | None = None,
    timeout: float = CHECK_TIMEOUT,
    cache_file: str | os.PathLike[str] | None = None,
) -> CheckOutcome:
    """Check, in a child process and once per library, CPU and model, that llama.cpp runs
    ``model_path`` here (see the module doc); a pass is remembered in ``cache_file``.

    Args:
        model_path: The GGUF file the caller is about to load.
        library: The llama-cpp-python to check; default: :meth:`LlamaLibrary.installed`.
        command: The child's argv; default: :func:`probe_command` (tests put a script here).
        timeout: Seconds before the child is killed and the check fails.
        cache_file: Where passes are remembered; default: :func:`default_cache_file`.

    Returns:
        What happened (:data:`CheckOutcome`).

    Raises:
        NativeCrashError: The child was killed by a signal, or did not finish in time.
    """
    if os.environ.get(SKIP_ENV, "").strip().lower() in ("1", "true", "yes", "on"):
        return "skipped"
    lib = library if library is not None else LlamaLibrary.installed()
    if lib is None:
        return "skipped"
    key = check_key(lib, model_path)
    path = Path(cache_file) if cache_file is not None else default_cache_file()
    memo = (str(path), key)
    with _LOCK:  # one check at a time: readers built in threads wait for the first
        if memo in _PASSED:
            return "cached"
        if path is not None and any(e["key"] == key for e in _entries(path)):
            _PASSED.add(memo)
            return "cached"
        return _run_check(model_path, lib, key, path, memo, command=command, timeout=timeout)


def _run_check(
    model_path: str | os.PathLike[str],
    lib: LlamaLibrary,
    key: str,
    path: Path | None,
    memo: tuple[str, str],
    *,
    command: Sequence[str] | None,
    timeout: float,
) -> CheckOutcome:
    what = (
        f"a check of llama-cpp-python {lib.version or '(version unknown)'} on {Path(model_path).name} "
        "(a child process running it before this process does)"
    )
    argv = list(command) if command is not None else probe_command(model_path, lib)
    logger.info("checking that llama.cpp runs on this CPU: %s", Path(model_path).name)
    t0 = time.monotonic()
    try:
        done = subprocess.run(
            argv,
            check=False,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as err:  # run() has killed the child
        raise NativeCrashError(
            what, timeout=timeout, version=lib.version, skip_env=SKIP_ENV, output=_tail(err.output)
        ) from None
    except OSError as err:  # the interpreter could not be started: nothing learned
        logger.warning("could not run the llama.cpp check (%s); going on without it", err)
        return "inconclusive"
    seconds = time.monotonic() - t0
    output = _tail(done.stdout)
    sig = signal_name(done.returncode)
    if sig is not None:
        logger.debug("the llama.cpp check died of %s; its output:\n%s", sig, output)
        raise NativeCrashError(what, signal_name=sig, version=lib.version, skip_env=SKIP_ENV, output=output)
    if done.returncode != 0:
        last = output.strip().splitlines()[-1:] or ["no output"]
        logger.warning(
            "the check that llama.cpp runs on this CPU failed without crashing (exit %d: %s); "
            "going on without it",
            done.returncode,
            last[0][:300],
        )
        return "inconclusive"
    if path is not None:
        now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        entry = {
            "key": key,
            "checked": now,
            "seconds": round(seconds, 2),
            "llama_cpp_python": lib.version,
            "library": str(lib.init_file.parent),
            "model": str(model_path),
            "machine": platform.machine(),
        }
        _remember(path, entry)
    _PASSED.add(memo)
    logger.info("llama.cpp ran on this CPU (%.1f s); remembered in %s", seconds, path)
    return "passed"
