"""``python -m benchmarks rerank-ray-faults``: the Ray path of ``gold-panning rerank`` on a local
Ray instance (``ray.init(num_cpus=2)``) against a loopback endpoint that is killed (SIGKILL)
once a quarter of the questions are in the checkpoint and started again on the same port
``--down`` seconds later; then the same call again, then the local command on the same input
and seed. It prints what survived:

* run 1: every question recorded once (panned, or a fallback while the endpoint was down),
  and no question asked after its record was written (the endpoint's log of arrivals against
  the moment each record appeared in the checkpoint, polled every 20 ms);
* run 2 (the same call): the questions asked, which must be the fallbacks of run 1 only, and
  whether its records, and the run file written from them, equal the local command's;
* the most calls in flight at the endpoint (the allowed ``--max-concurrency``) and how many
  questions each actor took (each worker's reader sends its process id in a header).

The endpoint is :class:`~._loopback.LoopbackServer` (the position-biased model, ``--latency``
seconds a call, ``--capacity`` calls at once) in a child process, logging each request's
arrival and end to a file, so the log survives the kill.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import signal
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from ._loopback import LoopbackServer, PositionBiasedModel, _Handler, _Server
from ._peer_formats import normalize
from .rerank_throughput import MODEL_NAME

__all__ = ["format_report", "main", "peak_in_flight", "register", "run_rerank_ray_faults"]

WORKER_HEADER = "x-gp-worker"
_LOCAL = threading.local()


class _LoggedModel(PositionBiasedModel):
    """The loopback model, writing each request's arrival (time, question, worker) to the log."""

    log: Any = None

    def answer(self, body: Any) -> Any:
        req, message, known = super().answer(body)
        question = self.question_of(req.text)
        _LOCAL.rid = rid = f"{os.getpid()}-{threading.get_ident()}-{time.monotonic_ns()}"
        self.log.write(json.dumps({"a": rid, "t": time.time(), "q": question, "w": _LOCAL.worker}) + "\n")
        return req, message, known


class _LoggedHandler(_Handler):
    def _serve(self, owner: Any, reply: Any, state: dict[str, bool]) -> None:
        _LOCAL.worker, _LOCAL.rid = self.headers.get(WORKER_HEADER), None
        try:
            super()._serve(owner, reply, state)
        finally:
            if _LOCAL.rid is not None:
                owner.model.log.write(json.dumps({"e": _LOCAL.rid, "t": time.time()}) + "\n")


class _PortServer(LoopbackServer):
    def __init__(self, model: PositionBiasedModel, *, port: int, **options: Any) -> None:
        super().__init__(model, **options)
        self.port = port

    def _new_server(self) -> _Server:
        return _Server(("127.0.0.1", self.port), _LoggedHandler)


def _serve(
    port: int, log: str, relevant: list[tuple[str, list[str]]], options: dict[str, Any], ready: Any
) -> None:
    """Child process: the logged loopback endpoint on ``port`` until killed."""
    from gold_panning_integrations.profiles import load_profile

    model = _LoggedModel(load_profile(options["profile"]), seed=options["seed"])
    model.log = open(log, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - lives as long as the process
    for question, texts in relevant:
        model.add_relevant(question, texts)
    server = _PortServer(model, port=port, latency=options["latency"], capacity=options["capacity"])
    server.start()
    ready.set()
    signal.pause() if hasattr(signal, "pause") else time.sleep(10**6)


def _write_input(path: Path, *, questions: int, n: int, seed: int) -> list[tuple[str, list[str]]]:
    """The ``kv`` task's instances as the command's JSONL input, each question made unique
    (``" (#i)"``: the endpoint's log tells questions apart by their text); ``(question,
    relevant texts)``."""
    from gold_panning_integrations.evaluate._instances import make_instances

    out = []
    with path.open("w", encoding="utf-8") as fh:
        for inst in make_instances("kv", n=n, instances=questions, seed=seed):
            question = f"{inst.question} (#{inst.index})"
            fh.write(
                json.dumps({"id": f"kv-{inst.index}", "question": question, "passages": inst.documents})
                + "\n"
            )
            out.append((question, [inst.documents[g] for g in inst.gold]))
    return out


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _reader_factory(base_url: str, share: int) -> Any:
    """Build, in a worker, the ``OpenAIReader`` of ``rerank_dataset(reader={...})`` whose
    client also sends the worker's process id (what the endpoint's log tells actors apart by)."""
    import openai

    from gold_panning_integrations.readers.openai import OpenAIReader

    client = openai.AsyncOpenAI(
        api_key="not-needed",
        base_url=base_url,
        max_retries=0,
        default_headers={WORKER_HEADER: str(os.getpid())},
    )
    return OpenAIReader(model=MODEL_NAME, base_url=base_url, async_client=client, max_concurrency=share)


def peak_in_flight(events: list[dict[str, Any]], *, cut: float) -> int:
    """The most requests between arrival and end at once, from the log's ``{"a", "t"}`` and
    ``{"e", "t"}`` lines; a request without an end (killed with the endpoint) ends at ``cut``
    or at the next arrival after a restart, whichever the log says first (``cut``)."""
    ends = {e["e"]: e["t"] for e in events if "e" in e}
    points = []
    for e in events:
        if "a" in e:
            points += [(e["t"], 1), (ends.get(e["a"], cut), -1)]
    peak = level = 0
    for _, step in sorted(points, key=lambda p: (p[0], p[1])):
        level += step
        peak = max(peak, level)
    return peak


def _read_log(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:  # the line the kill cut
            continue
    return out


def run_rerank_ray_faults(
    *,
    questions: int = 200,
    n: int = 20,
    latency: float = 0.2,
    capacity: int = 64,
    workers: int = 2,
    max_concurrency: int = 16,
    kill_at: float = 0.25,
    down: float = 3.0,
    question_attempts: int = 4,
    backoff: float = 1.0,
    seed: int = 1,
    profile: str = "lost-in-the-middle",
    out: str | Path | None = None,
) -> dict[str, Any]:
    """Run the scenario of the module docstring once and measure it (see its report's keys)."""
    import ray

    from gold_panning_integrations.batch import JsonlQuestions, write_outputs
    from gold_panning_integrations.batch.ray import (
        questions_dataset,
        records,
        rerank_dataset,
        worker_concurrency,
    )
    from gold_panning_integrations.cli import main as cli

    tmp = tempfile.TemporaryDirectory(prefix="gp-ray-faults-") if out is None else None
    root = Path(tmp.name if tmp is not None else str(out))
    root.mkdir(parents=True, exist_ok=True)
    relevant = _write_input(root / "questions.jsonl", questions=questions, n=n, seed=seed)
    index_of = {normalize(q.question): q.index for q in JsonlQuestions(root / "questions.jsonl", depth=None)}
    port, log = _free_port(), root / "endpoint.log"
    base_url = f"http://127.0.0.1:{port}/v1"
    options = {"latency": latency, "capacity": capacity, "profile": profile, "seed": seed}
    ctx: Any = multiprocessing.get_context("spawn")  # the driver has Ray's threads: no fork

    def start() -> Any:
        ready = ctx.Event()
        proc = ctx.Process(target=_serve, args=(port, str(log), relevant, options, ready), daemon=True)
        proc.start()
        if not ready.wait(60):
            raise RuntimeError("the loopback endpoint did not start within 60 s")
        return proc

    folder, checkpoint = root / "ray", root / "ray" / "checkpoint.jsonl"
    seen: dict[int, float] = {}  # question index -> when its record first appeared
    marks: dict[str, float] = {}
    stop = threading.Event()
    endpoint = {"proc": start()}

    def watch() -> None:
        """Poll the checkpoint; kill the endpoint at ``kill_at`` of the questions, restart it ``down`` s later."""
        offset = 0
        while not stop.is_set():
            if checkpoint.exists():
                with checkpoint.open("rb") as fh:
                    fh.seek(offset)
                    for line in fh:
                        if not line.endswith(b"\n"):
                            break
                        offset += len(line)
                        obj = json.loads(line)
                        if obj.get("type") == "question":
                            seen.setdefault(int(obj["index"]), time.time())
            if "kill" not in marks and len(seen) >= kill_at * questions:
                endpoint["proc"].kill()  # SIGKILL
                marks["kill"] = time.time()
            if "kill" in marks and "restart" not in marks and time.time() >= marks["kill"] + down:
                endpoint["proc"] = start()
                marks["restart"] = time.time()
            stop.wait(0.02)

    share = worker_concurrency(max_concurrency, workers)
    call: dict[str, Any] = {
        "reader": lambda: _reader_factory(base_url, share),
        "profile": profile,
        "seed": seed,
        "workers": workers,
        "max_concurrency": max_concurrency,
        "num_cpus": 0.5,
        "checkpoint": folder,
        "question_attempts": question_attempts,
        "backoff": backoff,
    }
    env = {
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH")) if p
        )
    }
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": env})
    try:
        watcher = threading.Thread(target=watch, daemon=True)
        t0 = time.time()
        watcher.start()
        first = records(rerank_dataset(questions_dataset(root / "questions.jsonl", depth=None), **call))
        marks["run1"] = time.time()
        stop.set()
        watcher.join()
        if "restart" not in marks:  # the job ended before the endpoint came back
            endpoint["proc"] = start()
        run1 = _read_log(log)
        lines = Counter(
            json.loads(x)["index"] for x in checkpoint.read_text(encoding="utf-8").splitlines()[1:]
        )
        second = records(rerank_dataset(questions_dataset(root / "questions.jsonl", depth=None), **call))
        marks["run2"] = time.time()
    finally:
        ray.shutdown()
    try:
        local = root / "local"
        args = ["rerank", "--input", str(root / "questions.jsonl"), "--depth", str(n), "--out", str(local)]
        args += ["--base-url", base_url, "--model", MODEL_NAME, "--profile", profile, "--seed", str(seed)]
        assert cli([*args, "--max-concurrency", str(max_concurrency), "-q"]) == 0
        local_records = [
            json.loads(x) for x in (local / "rerank.jsonl").read_text(encoding="utf-8").splitlines()
        ]
        write_outputs(second, root / "ray-out", tag="gold-panning")
    finally:
        endpoint["proc"].kill()
    events = _read_log(log)
    arrivals = [e for e in run1 if "a" in e]
    asked_late = sum(1 for e in arrivals if index_of.get(e["q"]) in seen and e["t"] > seen[index_of[e["q"]]])
    failed = {r["index"] for r in first if not r["panned"]}
    run2 = [e for e in events if "a" in e and marks["run1"] < e["t"] <= marks["run2"]]
    asked2 = Counter(index_of.get(e["q"]) for e in run2)
    by_worker: dict[str, set[int]] = defaultdict(set)
    for e in arrivals:
        by_worker[str(e["w"])].add(index_of.get(e["q"], -1))
    same_trec = (root / "ray-out" / "run.trec").read_bytes() == (local / "run.trec").read_bytes()
    report = {
        "questions": questions,
        "n": n,
        "latency": latency,
        "workers": workers,
        "max_concurrency": max_concurrency,
        "kill_after": len([i for i, t in seen.items() if t <= marks.get("kill", 0)]),
        "down_seconds": round(marks.get("restart", marks["run1"]) - marks.get("kill", marks["run1"]), 2),
        "run1_seconds": round(marks["run1"] - t0, 1),
        "recorded": len(first),
        "panned": len(first) - len(failed),
        "failed": len(failed),
        "recorded_in_checkpoint_run1": len(lines),
        "records_per_question_max": max(lines.values()),
        "asked_after_recorded": asked_late,
        "run2_asked_questions": len([q for q in asked2 if q is not None]),
        "run2_asked_only_failed": set(asked2) == failed,
        "run2_calls": sum(asked2.values()),
        "run2_equals_local": second == local_records,
        "run_trec_equals_local": same_trec,
        "peak_in_flight": peak_in_flight(run1, cut=marks.get("kill", marks["run1"])),
        "questions_per_actor": sorted(len(v) for v in by_worker.values()),
    }
    if tmp is not None:
        tmp.cleanup()
    return report


def format_report(r: dict[str, Any]) -> str:
    """The report's lines."""
    return "\n".join(
        [
            (
                f"rerank on Ray: {r['questions']} questions x {r['n']} candidates, {r['workers']} workers, "
                f"max_concurrency {r['max_concurrency']}; loopback endpoint {r['latency']} s per call, killed "
                f"(SIGKILL) after {r['kill_after']} records, back {r['down_seconds']} s later"
            ),
            (
                f"  run 1 ({r['run1_seconds']} s): {r['recorded']} recorded = {r['panned']} panned + {r['failed']} "
                f"fallback while down; in the checkpoint: {r['recorded_in_checkpoint_run1']} questions, at most "
                f"{r['records_per_question_max']} line(s) each; requests after a question's record was written: "
                f"{r['asked_after_recorded']}"
            ),
            (
                f"  run 2, the same call: asked {r['run2_asked_questions']} questions ({r['run2_calls']} calls), "
                f"only run 1's fallbacks: {r['run2_asked_only_failed']}; records equal the local command's: "
                f"{r['run2_equals_local']}; run.trec equal: {r['run_trec_equals_local']}"
            ),
            (
                f"  most calls in flight at the endpoint: {r['peak_in_flight']} of {r['max_concurrency']} allowed; "
                f"questions per actor: {r['questions_per_actor']}"
            ),
        ]
    )


def register(sub: Any) -> None:
    p = sub.add_parser(
        "rerank-ray-faults",
        description="rerank_dataset on a local Ray instance with its endpoint killed and restarted: what "
        "survives, the same call again, the local command's output, calls in flight (about a minute).",
    )
    p.add_argument("--questions", type=int, default=200, help="questions (default 200)")
    p.add_argument("--n", type=int, default=20, help="candidates per question (default 20)")
    p.add_argument(
        "--latency", type=float, default=0.2, help="seconds per call at the endpoint (default 0.2)"
    )
    p.add_argument("--capacity", type=int, default=64, help="calls the endpoint serves at once (default 64)")
    p.add_argument("--workers", type=int, default=2, help="Ray actors (default 2)")
    p.add_argument(
        "--max-concurrency", type=int, default=16, help="calls in flight over all workers (default 16)"
    )
    p.add_argument(
        "--kill-at", type=float, default=0.25, help="share of questions recorded at the kill (0.25)"
    )
    p.add_argument("--down", type=float, default=3.0, help="seconds the endpoint stays down (default 3)")
    p.add_argument("--question-attempts", type=int, default=4, help="rerank_dataset's question_attempts (4)")
    p.add_argument("--backoff", type=float, default=1.0, help="rerank_dataset's backoff in seconds (1)")
    p.add_argument("--seed", type=int, default=1, help="seed of the questions, the model and the job (1)")
    p.add_argument("--out", default=None, help="keep the folders here (default: a temporary folder)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the report")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    report = run_rerank_ray_faults(
        questions=args.questions,
        n=args.n,
        latency=args.latency,
        capacity=args.capacity,
        workers=args.workers,
        max_concurrency=args.max_concurrency,
        kill_at=args.kill_at,
        down=args.down,
        question_attempts=args.question_attempts,
        backoff=args.backoff,
        seed=args.seed,
        out=args.out,
    )
    print(json.dumps(report) if args.json else format_report(report))
    sys.stdout.flush()
    return 0
