"""``gold-panning run``: pan a question's documents with GP-Belief and print the trace."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..engine.config import SETTINGS
from ..readers._cli_args import add_reader_arguments
from ._config_args import add_config_arguments, given_options

__all__ = ["DEMOS", "DEMO_SEED", "EMBEDDED_PROFILE", "demo_instance", "load_documents", "main", "register"]

DEMO_SEED = 7
DEMO_N = 10
DEMO_NQ_N = 5
DEMOS = ("kv", "nq")
EMBEDDED_PROFILE = "smollm2-135m-kv"
DEMO_OPTIONS = {"retriever_prior": "none"}
"""Engine options the demos set unless given: their documents come in no retriever order."""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="rank documents for a question with GP-Belief (embedded model by default)",
        description=(
            "Run Gold Panning on one question: each round the documents are reordered so the "
            "most promising sit at the model's most reliable positions, the model is asked, and "
            "every document's posterior probability of relevance is updated. Runs on the CPU with "
            "the embedded SmolLM2 model by default: no API key, no network."
        ),
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--docs", default=None, help=".jsonl (objects with a 'text' field) or .txt (one per line)")
    src.add_argument(
        "--demo",
        nargs="?",
        const="kv",
        choices=DEMOS,
        default=None,
        help="a built-in demo: kv (the default: 10 one-sentence key-value facts) or nq (one real Natural "
        f"Questions question with its gold Wikipedia passage and {DEMO_NQ_N - 1} BM25-retrieved distractors, "
        "from the sample shipped in the package); the demos' documents come in no retriever order, so they "
        "run with --retriever-prior none unless you give it",
    )
    p.add_argument("--question", default=None, help="the question (required with --docs)")
    add_reader_arguments(p)
    p.add_argument(
        "--profile",
        default=None,
        help="detector profile: bundled name or JSON path (default: the one the reader recommends, "
        f"{EMBEDDED_PROFILE} for the embedded model; else lost-in-the-middle with a warning)",
    )
    p.add_argument("--top", type=int, default=3, help="documents shown per round in the trace (default 3)")
    p.add_argument("--no-final-answer", action="store_true", help="skip the answer call on the selected documents")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument("--plot", default=None, metavar="FILE.png", help="draw belief trajectories per document (plot extra)")
    p.add_argument(
        "--setting",
        choices=tuple(SETTINGS),
        default=None,
        help="a named setting (" + "; ".join(f"{k}: {_options_text(v)}" for k, v in SETTINGS.items())
        + "); panning options given beside it win",
    )
    add_config_arguments(p, hidden=("policy",))
    p.set_defaults(func=main)


def _options_text(options: Any) -> str:
    return ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in options.items())


def load_documents(path: str | Path) -> tuple[list[str], list[dict[str, Any]]]:
    """Texts and metadata from ``.jsonl`` (``text`` field; other fields are metadata) or
    any other file read as one document per non-empty line."""
    from ._util import regular_file

    p = regular_file(path, what="--docs")
    texts: list[str] = []
    meta: list[dict[str, Any]] = []
    lines = p.read_text(encoding="utf-8").splitlines()
    if p.suffix.lower() == ".jsonl":
        for i, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{str(p)!r} line {i} is not JSON: {err.msg}") from err
            if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
                raise ValueError(  # noqa: TRY004 - a malformed --docs file: exit 2, not an internal error
                    f"{str(p)!r} line {i} must be a JSON object with a string 'text' field"
                )
            texts.append(obj.pop("text"))
            meta.append(obj)
    else:
        for line in lines:
            if line.strip():
                texts.append(line.strip())
                meta.append({})
    if not texts:
        raise ValueError(f"{str(p)!r} holds no documents")
    return texts, meta


def demo_instance(name: str) -> Any:
    """The ``--demo`` task instance: ``kv`` (synthetic, 10 documents) or ``nq`` (a real question
    of the shipped sample's held-out ``test`` split, 5 passages); fixed by :data:`DEMO_SEED`."""
    import numpy as np

    from ..tasks import KVTask, NQTask

    if name not in DEMOS:
        raise ValueError(f"unknown demo {name!r}; choose one of {', '.join(DEMOS)}")
    rng = np.random.default_rng(DEMO_SEED)
    task, n = (KVTask(), DEMO_N) if name == "kv" else (NQTask(split="test"), DEMO_NQ_N)
    return task.make(n, gold_position=int(rng.integers(n)), rng=rng)


def _inputs(args: argparse.Namespace) -> tuple[str, list[str], list[dict[str, Any]], list[int] | None]:
    """The question, documents, their metadata and (for a demo) the gold indices."""
    if args.demo:
        inst = demo_instance(args.demo)
        return args.question or inst.question, list(inst.documents), [{} for _ in inst.documents], list(inst.gold)
    if not args.question:
        raise ValueError("--docs needs --question TEXT")
    docs, meta = load_documents(args.docs)
    return args.question, docs, meta, None


def main(args: argparse.Namespace) -> int:
    from .._console import profile_label
    from ..panning import GoldPanner, PanningConfig
    from ..readers._cli_args import make_reader

    question, docs, meta, truth = _inputs(args)
    options = given_options(args)
    if args.setting:
        options = {**SETTINGS[args.setting], **options}
    if args.demo:
        options = {**DEMO_OPTIONS, **options}
    reader = make_reader(args, seed=args.seed)
    panner = GoldPanner(reader, args.profile or None, PanningConfig.from_options(**options), rng=args.seed)
    profile = profile_label(args.profile, reader=reader)
    result = panner.run(question, docs)
    if args.plot:
        from ..plots import plot_belief_trajectories

        plot_belief_trajectories(result, args.plot, highlight=truth or ())
    final = None
    if not args.no_final_answer and hasattr(reader, "answer"):
        final = reader.answer(question, [docs[i] for i in result.selected])
    final = final or result.answer
    if args.json:
        out = result.summary()
        out.update(
            {
                "question": question,
                "profile": profile,
                "answer": final,
                "selected_documents": [
                    {"index": int(i), "text": docs[i], "posterior": float(result.posteriors[i]), "metadata": meta[i]}
                    for i in result.selected
                ],
            }
        )
        if truth is not None:
            out["gold"] = truth
        print(json.dumps(out))
        return 0
    _print_trace(question, docs, result, panner.config, profile=profile, truth=truth, top=args.top, answer=final)
    return 0


def _print_trace(
    question: str,
    docs: list[str],
    result: Any,
    config: Any,
    *,
    profile: str,
    truth: list[int] | None,
    top: int,
    answer: str | None,
) -> None:
    """The text report: the setting, each round's citations and leaders, the selection."""
    import numpy as np

    print(f"question: {question}")
    unordered = ", no retriever order (retriever_prior='none')" if config.retriever_prior == "none" else ""
    print(f"{len(docs)} documents, profile {profile}, policy {config.policy}, {config.rounds} rounds{unordered}")
    if truth is not None:
        print(f"(demo: the relevant document is #{truth[0]})")
    for r in result.rounds:
        cited = ", ".join(f"#{i}" for i in r.cited) or "none"
        status = f"failed: {r.reading.error}" if r.failed else f"cited {cited}"
        ans = f"  answer {r.reading.answer!r}" if r.reading.answer else ""
        tok = f", {r.prompt_tokens}+{r.completion_tokens} tokens" if r.prompt_tokens else ""
        print(f"\nround {r.round} ({r.calls} call{'s' if r.calls != 1 else ''}, {r.seconds:.1f}s{tok}): {status}{ans}")
        for i in np.argsort(-r.posteriors, kind="stable")[:top]:
            print(f"  #{int(i):<4d} p={r.posteriors[i]:.3f}  {_short(docs[i])}")
    print(
        f"\nselected (stopped: {result.stop_reason}; {result.calls} calls, {result.prompt_tokens} prompt + "
        f"{result.completion_tokens} completion tokens, {result.seconds:.1f}s in the model):"
    )
    for i in result.selected:
        print(f"  #{int(i):<4d} p={result.posteriors[i]:.3f}  {_short(docs[i], 100)}")
    print(f"answer: {answer if answer else '(none)'}")


def _short(text: str, width: int = 70) -> str:
    t = " ".join(text.split())
    return t if len(t) <= width else t[: width - 3] + "..."
