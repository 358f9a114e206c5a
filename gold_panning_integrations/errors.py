"""One exception family for the package.

Every error a user can trigger derives from :class:`GoldPanningError`, and where a
standard base class fits (``ValueError`` for bad input, ``ImportError`` for a missing
extra) it derives from that too, so ``except ValueError`` keeps working.
"""

from __future__ import annotations

import shlex
import sys

__all__ = [
    "AllRoundsFailedError",
    "CheckpointError",
    "CitationParseError",
    "CollectionError",
    "FatalReaderError",
    "GoldPanningError",
    "InvalidInputError",
    "MissingExtraError",
    "NativeCrashError",
    "ProfileError",
    "ReaderError",
    "TransientReaderError",
]

PORTABLE_BUILD = 'CMAKE_ARGS="-DGGML_NATIVE=OFF"'
"""The environment that makes pip compile llama.cpp (llama-cpp-python has no PyPI wheel)
for any CPU of the architecture instead of for the building machine's (``GGML_NATIVE``)."""


class GoldPanningError(Exception):
    """Base class of every error raised by gold-panning-integrations."""


class ProfileError(GoldPanningError, ValueError):
    """A detector profile is invalid: the message names the field and the bad value."""


class ReaderError(GoldPanningError):
    """A reader could not obtain a usable answer from its model."""


class CitationParseError(ReaderError, ValueError):
    """The model's output could not be parsed into citations (non-JSON, wrong shape)."""


class TransientReaderError(ReaderError):
    """A failure worth retrying: rate limit, timeout, 5xx, dropped connection.

    ``retry_after`` (seconds) is set when the server said how long to wait.
    """

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class FatalReaderError(ReaderError):
    """A failure that retrying cannot fix (authentication, unknown model or URL, closed
    port, missing extra, bad request). The panner does not turn it into a failed round:
    it ends the run at once, so a permanent error is reported once, not once per round.

    ``status_code`` is the HTTP status when there was one.
    """

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class AllRoundsFailedError(ReaderError):
    """Every panning round failed, so no evidence was gathered.

    Pass ``on_failure="fallback"`` to get the input order back, flagged as not panned,
    instead of this error. ``errors`` holds one message per failed round.
    """

    def __init__(self, message: str, *, errors: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.errors = errors


class NativeCrashError(FatalReaderError):
    """llama.cpp (through llama-cpp-python) was killed by a signal (``SIGILL``, ``SIGSEGV``,
    ``SIGBUS``...) or hung, in a child process: the check run before the embedded model is
    first used in this process, or the model server of ``gold-panning evaluate``. The
    calling process is unharmed; the message names the signal and the commands that
    rebuild llama-cpp-python for any CPU.

    ``signal_name`` is the signal's name (None for a deadline), ``timeout`` the deadline in
    seconds that was hit (None for a signal), ``output`` the end of the child's output.
    """

    def __init__(
        self,
        what: str,
        *,
        signal_name: str | None = None,
        timeout: float | None = None,
        version: str | None = None,
        skip_env: str | None = None,
        output: str = "",
    ) -> None:
        if signal_name == "SIGILL":
            cause = (
                f"{what} was killed by SIGILL (illegal instruction): this llama-cpp-python build uses "
                "CPU instructions this machine cannot run (pip compiled llama.cpp for the CPU it was "
                "built on, or this virtual machine forbids instructions its CPU advertises)"
            )
        elif signal_name is not None:
            cause = (
                f"{what} was killed by {signal_name} in llama.cpp's native code: most often a "
                "llama-cpp-python build for another CPU (else a damaged model file)"
            )
        else:
            cause = (
                f"{what} did not finish within {timeout or 0:.0f} s and was stopped: llama.cpp may hang on "
                "this CPU (a build for another CPU), or the machine is overloaded"
            )
        skip = f"; to skip this check, set {skip_env}=1" if skip_env else ""
        super().__init__(f"{cause}. Rebuild it for any CPU: {reinstall_llama_commands(version)}{skip}")
        self.signal_name = signal_name
        self.timeout = timeout
        self.output = output


def reinstall_llama_commands(version: str | None = None) -> str:
    """The two commands that rebuild llama-cpp-python (``version``, else the newest) for
    any CPU with this interpreter's pip: forget pip's cached wheel (pip does not key its
    cache on ``CMAKE_ARGS``), then compile afresh without ``GGML_NATIVE``."""
    py = shlex.quote(sys.executable or "python")
    spec = f"llama-cpp-python=={version}" if version else "llama-cpp-python"
    return (
        f"`{py} -m pip cache remove llama_cpp_python`, then `{PORTABLE_BUILD} {py} -m pip install "
        f'--no-cache-dir --force-reinstall --no-deps "{spec}"` (it compiles llama.cpp: minutes)'
    )


class MissingExtraError(GoldPanningError, ImportError):
    """An optional dependency is missing; the message gives the ``pip install`` line
    (for the ``local`` extra, which compiles llama.cpp, with :data:`PORTABLE_BUILD`)."""

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        env = f"{PORTABLE_BUILD} " if extra == "local" else ""
        super().__init__(
            f"{purpose} needs the optional package {package!r}. Install it with: "
            f'{env}pip install "gold-panning-integrations[{extra}]"'
        )
        self.package = package
        self.extra = extra


class CheckpointError(GoldPanningError, ValueError):
    """A checkpoint file cannot be used for this calibration run (wrong settings, corrupt
    lines, locked by another run); the message says which file and what to do."""


class CollectionError(GoldPanningError, ValueError):
    """A collection file (corpus, queries, qrels, run file, RAG JSONL) cannot be used: the
    message names the file and, where there is one, the line, and says what to do."""


class InvalidInputError(GoldPanningError, ValueError, TypeError):
    """An argument or a base retriever's output is not what the API expects (``k=1.5``,
    a retriever that returns strings or ``None``); the message says what was expected
    and what came. Both a ``ValueError`` and a ``TypeError``, so either ``except`` works."""
