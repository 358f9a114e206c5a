"""SIGTERM and SIGINT stop every long command within a few seconds, even while model
calls hang: exit 143 / 130, one line on stderr, the checkpoint valid JSONL.

Each test runs the real CLI in a subprocess against a loopback server that answers
every request after 30 s, signals it once the first request arrived, and gives it
:data:`DEADLINE` seconds to exit. On 0.5, ``run`` with prompts in flight was still
running 60 s after SIGINT (Python joined the pool threads waiting on the model), and
``run`` and ``calibrate`` died of SIGTERM (exit -15) without a word."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from openai_server import FakeOpenAIServer, cite, delay

from gold_panning_integrations.evaluate._endpoints import EmbeddedServer, free_port

REPO = Path(__file__).resolve().parents[2]
DEADLINE = 10.0
"""Seconds a signalled command may take to exit (it measured about 2 s on 2 busy cores)."""


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _run_and_signal(args: list[str], server: FakeOpenAIServer, sig: int) -> tuple[int, str, float]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gold_panning_integrations.cli", *args],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        # a test earlier in the run may leave SIGINT ignored in pytest's process, and an
        # ignored SIGINT is inherited (Python then installs no KeyboardInterrupt handler):
        # start the command as a shell in the foreground would
        preexec_fn=_default_sigint,  # noqa: PLW1509 (one signal call, no locks)
    )
    try:
        deadline = time.monotonic() + 60
        while not server.requests:
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the command sent no request (exit {proc.poll()})")
            time.sleep(0.05)
        time.sleep(0.5)  # the round's other prompts are in flight too
        sent = time.monotonic()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=DEADLINE)
        return proc.returncode, err.decode(), time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _valid_jsonl(path: Path) -> list[dict[str, object]]:
    data = path.read_bytes()
    assert data.endswith(b"\n")
    return [json.loads(line) for line in data.splitlines()]


@pytest.fixture
def slow_server() -> FakeOpenAIServer:
    server = FakeOpenAIServer(default=delay(30, cite(1))).start()
    yield server  # type: ignore[misc]
    server.stop()


def _endpoint(server: FakeOpenAIServer) -> list[str]:
    return ["--reader", "openai", "--base-url", server.base_url, "--model", "m"]


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_run_stops_with_prompts_in_flight(slow_server: FakeOpenAIServer, sig: int, code: int) -> None:
    got, err, seconds = _run_and_signal(["run", *_endpoint(slow_server), "--demo", "kv"], slow_server, sig)
    assert (got, seconds < DEADLINE) == (code, True)
    assert err.splitlines()[-1] == "gold-panning run: interrupted"


def test_calibrate_stops_and_keeps_its_checkpoint(slow_server: FakeOpenAIServer, tmp_path: Path) -> None:
    ck = tmp_path / "ck.jsonl"
    args = ["calibrate", *_endpoint(slow_server), "--task", "kv", "--n", "6", "--budget", "12"]
    got, err, _ = _run_and_signal(
        [*args, "--checkpoint", str(ck), "--out", str(tmp_path / "p.json")], slow_server, signal.SIGTERM
    )
    assert got == 143
    assert err.splitlines()[-1] == "gold-panning calibrate: interrupted"
    assert _valid_jsonl(ck)


def test_bench_compare_stops_and_keeps_its_checkpoint(slow_server: FakeOpenAIServer, tmp_path: Path) -> None:
    ck = tmp_path / "ck.jsonl"
    args = ["evaluate", *_endpoint(slow_server), "--mode", "answer", "--profile", "smollm2-135m-kv"]
    args += ["--n", "6", "--instances", "2", "--rounds", "2", "--methods", "gp-belief", "--json"]
    got, err, _ = _run_and_signal([*args, "--checkpoint", str(ck)], slow_server, signal.SIGTERM)
    assert got == 143
    assert err.splitlines()[-1] == "gold-panning evaluate: interrupted"
    assert _valid_jsonl(ck)[0]["type"] == "meta"


def test_a_server_that_ignores_sigterm_is_killed_soon(tmp_path: Path) -> None:
    """As llama-cpp-python's server does while it finishes a completion."""
    port = free_port()
    script = (
        "import signal, http.server as h\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "class H(h.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        self.send_response(200); self.end_headers(); self.wfile.write(b'{}')\n"
        f"h.HTTPServer(('127.0.0.1', {port}), H).serve_forever()\n"
    )
    server = EmbeddedServer(
        [sys.executable, "-c", script], port=port, log=tmp_path / "s.log", poll=0.05, stop_timeout=0.5
    )
    with server:
        proc = server.proc
    assert proc is not None and proc.returncode == -signal.SIGKILL
