"""``python -m benchmarks rerank-throughput``: ``gold-panning rerank``'s batch job against a
loopback endpoint of known capacity, its questions per second printed beside the ideal,
with the job's memory (RSS) at the start, the middle and the end.

The endpoint (:class:`~._loopback.LoopbackServer`, in a child process so that its CPU is not
the job's) answers each call after ``--latency`` seconds and serves ``--capacity`` calls at
once (more wait in its queue); it cites documents as the detector profile's position-biased
reader would (:class:`~._loopback.PositionBiasedModel`). The questions are the ``kv`` task's
(``--questions`` of ``--n`` one-sentence facts), written as the command's JSONL input.

The ideal is the endpoint's capacity in questions: ``capacity / (calls per question x
latency)`` questions per second, calls per question ``rounds x prompts_per_round`` of the
engine's defaults (2 x 3 = 6; 32 calls at once, 0.2 s each: 26.7 questions per second). The
rounds of a question run one after another, so it takes at least ``rounds x latency``; the
job keeps enough questions in flight that this does not cap the throughput.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import multiprocessing
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gold_panning_integrations.engine.config import PanningConfig

__all__ = ["ideal_questions_per_second", "main", "register", "rss_bytes", "run_rerank_throughput"]

logger = logging.getLogger(__name__)

MODEL_NAME = "loopback-position-biased"


def ideal_questions_per_second(
    *, capacity: int, latency: float, config: PanningConfig | None = None
) -> float:
    """The endpoint's capacity in questions per second: ``capacity / (calls x latency)``,
    ``calls = rounds x prompts_per_round`` of ``config`` (the defaults: 6)."""
    cfg = config or PanningConfig()
    return capacity / (cfg.rounds * cfg.prompts_per_round * latency)


def rss_bytes() -> int:
    """This process's resident memory now (``/proc/self/statm``), else its peak (``getrusage``)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(peak) * (1 if sys.platform == "darwin" else 1024)


def _serve(conn: Any, questions: list[tuple[str, list[str]]], options: dict[str, Any]) -> None:
    """Child process: the loopback endpoint until the parent sends anything; then its stats."""
    from gold_panning_integrations.profiles import load_profile

    from ._loopback import LoopbackServer, PositionBiasedModel

    model = PositionBiasedModel(load_profile(options["profile"]), seed=options["seed"])
    for question, relevant in questions:
        model.add_relevant(question, relevant)
    server = LoopbackServer(
        model, latency=options["latency"], capacity=options["capacity"], model_name=MODEL_NAME
    )
    with server:
        conn.send(server.base_url)
        cpu0 = time.process_time()
        conn.recv()
        conn.send({**server.stats().as_dict(), "cpu_seconds": time.process_time() - cpu0})
    conn.close()


def _write_input(path: Path, *, questions: int, n: int, seed: int) -> list[tuple[str, list[str]]]:
    """The ``kv`` task's instances as the command's JSONL input; ``(question, relevant texts)``."""
    from gold_panning_integrations.evaluate._instances import make_instances

    instances = make_instances("kv", n=n, instances=questions, seed=seed)
    with path.open("w", encoding="utf-8") as fh:
        for inst in instances:
            fh.write(
                json.dumps({"id": f"kv-{inst.index}", "question": inst.question, "passages": inst.documents})
            )
            fh.write("\n")
    return [(inst.question, [inst.documents[g] for g in inst.gold]) for inst in instances]


def run_rerank_throughput(
    *,
    questions: int = 1000,
    n: int = 20,
    latency: float = 0.2,
    capacity: int = 32,
    max_concurrency: int | None = None,
    in_flight: int | None = None,
    profile: str = "lost-in-the-middle",
    seed: int = 0,
    out: str | Path | None = None,
) -> dict[str, Any]:
    """Run the batch job once against the loopback endpoint and measure it.

    Args:
        questions: Questions (``kv`` instances), each with ``n`` candidates.
        latency: Seconds the endpoint takes per call.
        capacity: Calls the endpoint serves at once.
        max_concurrency: The reader's calls in flight (default: ``capacity``).
        in_flight: Questions in flight (default: the job's, twice ``max_concurrency``).
        profile: The loopback model's and the panner's detector profile.
        seed: Seed of the questions and of the loopback model's draws.
        out: The job's folder (default: a temporary one, removed after).

    Returns:
        ``{"questions", "n", "latency", "capacity", "max_concurrency", "in_flight",
        "calls_per_question", "ideal_qps", "achieved_qps", "share_of_ideal", "steady_qps",
        "job_cpu_ms_per_call", "job_cores" (CPU seconds per second of the run), "cpus", "load":
        {"start", "end"} (the 1, 5 and 15-minute load averages), "seconds",
        "calls", "server", "rss_mb": {"start", "warm" (after the first question), "middle", "end"}}``.
    """
    from gold_panning_integrations.batch import JsonlQuestions, arerank_job, default_in_flight
    from gold_panning_integrations.panning import GoldPanner
    from gold_panning_integrations.readers.openai import OpenAIReader

    for name, value in (("questions", questions), ("n", n), ("capacity", capacity)):
        if isinstance(value, bool) or not isinstance(value, int) or value < (2 if name == "n" else 1):
            raise ValueError(f"{name} must be an int >= {2 if name == 'n' else 1}, got {value!r}")
    if not latency > 0:
        raise ValueError(f"latency must be > 0 seconds, got {latency!r}")
    limit = capacity if max_concurrency is None else max_concurrency
    tmp = tempfile.TemporaryDirectory(prefix="gp-rerank-bench-") if out is None else None
    root = Path(tmp.name if tmp is not None else str(out))
    try:
        root.mkdir(parents=True, exist_ok=True)
        relevant = _write_input(root / "questions.jsonl", questions=questions, n=n, seed=seed)
        source = JsonlQuestions(root / "questions.jsonl", depth=None)
        ctx: Any = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
        parent, child = ctx.Pipe()
        options = {"latency": latency, "capacity": capacity, "profile": profile, "seed": seed}
        server = ctx.Process(target=_serve, args=(child, relevant, options), daemon=True)
        server.start()
        try:
            if not parent.poll(60):
                raise RuntimeError("the loopback endpoint did not start within 60 s")
            base_url = parent.recv()
            reader = OpenAIReader(
                model=MODEL_NAME, base_url=base_url, max_concurrency=limit, timeout=120.0, temperature=0.0
            )
            panner = GoldPanner(reader, profile)
            flying = in_flight or default_in_flight(reader)
            rss = {"start": rss_bytes()}
            half = (questions + 1) // 2
            marks: dict[int, float] = {}  # questions done -> time, at a tenth and at nine tenths
            tenth, nine = max(1, questions // 10), max(1, questions - questions // 10)

            def progress(done: int) -> None:
                if "warm" not in rss and done >= 1:  # the client and its imports are loaded
                    rss["warm"] = rss_bytes()
                if "middle" not in rss and done >= half:
                    rss["middle"] = rss_bytes()
                for mark in (tenth, nine):
                    if done >= mark and mark not in marks:
                        marks[mark] = time.perf_counter()

            load0 = _load()
            cpu0 = time.process_time()
            job = asyncio.run(
                arerank_job(
                    source, root / "out", panner=panner, seed=seed, in_flight=flying, progress=progress
                )
            )
            cpu = time.process_time() - cpu0
            load1 = _load()
            rss["end"] = rss_bytes()
            parent.send("stop")
            stats = parent.recv() if parent.poll(30) else {}
        finally:
            server.join(timeout=10)
            if server.is_alive():
                server.terminate()
    finally:
        if tmp is not None:
            tmp.cleanup()
    cfg = panner.config
    ideal = ideal_questions_per_second(capacity=capacity, latency=latency, config=cfg)
    achieved = job.ran / job.seconds
    steady = (
        (nine - tenth) / (marks[nine] - marks[tenth]) if nine > tenth and marks[nine] > marks[tenth] else None
    )
    return {
        "questions": questions,
        "n": n,
        "latency": latency,
        "capacity": capacity,
        "max_concurrency": limit,
        "in_flight": flying,
        "calls_per_question": cfg.rounds * cfg.prompts_per_round,
        "sequential_rounds": cfg.rounds,
        "ideal_qps": round(ideal, 3),
        "achieved_qps": round(achieved, 3),
        "share_of_ideal": round(achieved / ideal, 3),
        "steady_qps": None if steady is None else round(steady, 3),
        "job_cpu_ms_per_call": round(1000 * cpu / max(1, job.totals["calls"]), 2),
        "job_cores": round(cpu / job.seconds, 2) if job.seconds > 0 else None,
        "cpus": os.cpu_count(),
        "load": {"start": load0, "end": load1},
        "seconds": round(job.seconds, 2),
        "calls": job.totals["calls"],
        "not_panned": job.totals["not_panned"],
        "server": {
            k: stats.get(k)
            for k in ("requests", "answered", "max_serving", "errors", "unknown_question", "cpu_seconds")
        },
        "rss_mb": {k: round(v / 2**20, 1) for k, v in rss.items()},
    }


def _load() -> list[float] | None:
    """The machine's load average over 1, 5 and 15 minutes (None where the platform has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def _endpoint_cores(r: dict[str, Any]) -> str:
    cpu = (r.get("server") or {}).get("cpu_seconds")
    return "unknown" if cpu is None or not r.get("seconds") else f"{cpu / r['seconds']:.2f} of a core"


def _shown_load(r: dict[str, Any]) -> str:
    load = r.get("load") or {}
    start, end = load.get("start"), load.get("end")
    if not start or not end:
        return "machine load: unknown"
    return (
        f"machine load {start[0]:.2f} at the start, {end[0]:.2f} at the end (1-minute averages; 5-minute "
        f"{end[1]:.2f}) on {r.get('cpus')} CPUs"
    )


def format_report(r: dict[str, Any]) -> str:
    """The report's lines: the achieved rate beside the ideal, and memory."""
    rss = r["rss_mb"]
    return "\n".join(
        [
            (
                f"rerank throughput: {r['questions']} questions x {r['n']} candidates, loopback endpoint "
                f"{r['latency']} s per call, {r['capacity']} calls at once; reader max_concurrency "
                f"{r['max_concurrency']}, {r['in_flight']} questions in flight"
            ),
            (
                f"  ideal    {r['ideal_qps']:8.2f} questions/s  = {r['capacity']} / ({r['calls_per_question']} calls x "
                f"{r['latency']} s); {r['sequential_rounds']} rounds one after another"
            ),
            (
                f"  achieved {r['achieved_qps']:8.2f} questions/s  = {r['share_of_ideal']:.1%} of the ideal "
                f"({r['seconds']} s, {r['calls']} calls; most served at once: {r['server']['max_serving']}); "
                + _shown_load(r)
            ),
            (
                f"  between a tenth and nine tenths of the questions: {r['steady_qps']} questions/s; the job's "
                f"CPU: {r['job_cpu_ms_per_call']} ms per call, {r.get('job_cores')} of a core; the endpoint's: "
                + _endpoint_cores(r)
            ),
            (
                f"  memory (RSS, MB): start {rss['start']}, after the first question {rss.get('warm')}, middle "
                f"{rss.get('middle')}, end {rss['end']}"
            ),
        ]
    )


def register(sub: Any) -> None:
    p = sub.add_parser(
        "rerank-throughput",
        description="gold-panning rerank's batch job against a loopback endpoint of known capacity: "
        "questions per second beside the ideal, and memory at the start, middle and end (minutes).",
    )
    p.add_argument("--questions", type=int, default=1000, help="questions (default 1000)")
    p.add_argument("--n", type=int, default=20, help="candidates per question (default 20)")
    p.add_argument(
        "--latency", type=float, default=0.2, help="seconds per call at the endpoint (default 0.2)"
    )
    p.add_argument("--capacity", type=int, default=32, help="calls the endpoint serves at once (default 32)")
    p.add_argument(
        "--max-concurrency", type=int, default=None, help="the reader's limit (default: --capacity)"
    )
    p.add_argument("--in-flight", type=int, default=None, help="questions in flight (default: the job's)")
    p.add_argument(
        "--profile", default="lost-in-the-middle", help="detector profile (default lost-in-the-middle)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the questions and the model (default 0)")
    p.add_argument("--out", default=None, help="keep the job's folder here (default: a temporary folder)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the report")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    report = run_rerank_throughput(
        questions=args.questions,
        n=args.n,
        latency=args.latency,
        capacity=args.capacity,
        max_concurrency=args.max_concurrency,
        in_flight=args.in_flight,
        profile=args.profile,
        seed=args.seed,
        out=args.out,
    )
    print(json.dumps(report) if args.json else format_report(report))
    return 0
