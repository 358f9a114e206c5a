"""Does a model read in cite mode, or in answer mode? One prompt per instance, no panning.

Shows ``--prompts`` key-value instances of ``--n`` documents each (the gold at a random
position) to a GGUF model in process, with labels drawn as the panner draws them, and
counts, per mode: replies that parse to citations (cite mode) or to an answer found in a
shown document (answer mode), and replies whose citations include the gold. Each reply is
written to ``--out`` (JSON lines) as it comes, so an interrupted run keeps its numbers.

    python examples/check_reading.py --model-path qwen2.5-coder-0.5b-instruct-q4_k_m.gguf \\
        --mode cite --n 20 --prompts 50 --threads 1 --out cite.jsonl

Without ``--model-path`` it runs the embedded SmolLM2 model (``CMAKE_ARGS="-DGGML_NATIVE=OFF"
pip install "gold-panning-integrations[local]"``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import numpy as np

from gold_panning_integrations.engine.records import draw_labels
from gold_panning_integrations.readers.local import LocalReader
from gold_panning_integrations.tasks.kv import KVTask


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model-path", default=None, help="GGUF file (default: the embedded SmolLM2)")
    ap.add_argument("--mode", choices=("cite", "answer"), default="cite")
    ap.add_argument("--n", type=int, default=20, help="documents per prompt")
    ap.add_argument("--prompts", type=int, default=50)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None, help="JSON lines, one per reply")
    args = ap.parse_args()

    reader = LocalReader(args.model_path, mode=args.mode, n_threads=args.threads)
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(Path(args.out).open("w", encoding="utf-8")) if args.out else None
        counts = check(reader, n=args.n, prompts=args.prompts, seed=args.seed, out=out, echo=print)
    print(f"{reader.model_name}, {args.mode} mode, {args.n} documents, {args.prompts} prompts:")
    print(
        f"  valid readings {counts['valid']}/{args.prompts}, citing something {counts['citing']}/{args.prompts}, "
        f"gold among the citations {counts['gold']}/{args.prompts}, "
        f"{counts['cited'] / max(counts['citing'], 1):.2f} cited per citing reply"
    )


def check(
    reader: Any,
    *,
    n: int,
    prompts: int,
    seed: int,
    out: IO[str] | None = None,
    echo: Callable[[str], None] | None = None,
) -> dict[str, int]:
    """Show ``prompts`` kv instances of ``n`` documents to ``reader`` one by one (labels
    drawn as the panner draws them), write a JSON line per reply to ``out``, and count:
    ``valid`` readings (not failed), ``citing`` (citing something), ``gold`` (the gold
    among the citations) and ``cited`` (citations in all)."""
    rng = np.random.default_rng(seed)
    task = KVTask()
    counts = {"valid": 0, "citing": 0, "gold": 0, "cited": 0}
    for i in range(prompts):
        inst = task.make(n, gold_position=int(rng.integers(n)), rng=rng)
        labels = draw_labels(rng, np.array([n]), n)[0].tolist()
        start = time.perf_counter()
        reading = reader.read(inst.question, inst.documents, labels=labels)
        seconds = time.perf_counter() - start
        hit = inst.gold[0] in reading.cited
        counts["valid"] += not reading.failed
        counts["citing"] += bool(reading.cited)
        counts["gold"] += hit
        counts["cited"] += len(reading.cited)
        row = {
            "i": i,
            "gold": inst.gold[0],
            "cited": list(reading.cited),
            "failed": reading.failed,
            "error": reading.error,
            "raw": reading.raw,
            "seconds": round(seconds, 2),
        }
        if out is not None:
            out.write(json.dumps(row) + "\n")
            out.flush()
        if echo is not None:
            ok = "bad" if reading.failed else "ok "
            echo(f"{i + 1:3d} {ok} {'gold' if hit else '    '} {seconds:5.1f}s {reading.raw!r:.80}")
    return counts


if __name__ == "__main__":
    main()
