"""``gold-panning run``: pan a question's documents with GP-Belief and print the trace."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from ...engine.config import SETTINGS
from ...readers._cli_args import add_reader_arguments
from ...tasks.demo import DEMO_NQ_DOCS, DEMO_NQ_QUESTIONS, DEMOS, demo_instance, demo_nq_instances
from ._config_args import add_config_arguments, given_options, int_at_least

__all__ = [
    "EMBEDDED_PROFILE",
    "load_documents",
    "main",
    "register",
]

EMBEDDED_PROFILE = "smollm2-135m-kv"
"""The embedded model's bundled profile for ``--demo kv`` (key-value facts)."""
EMBEDDED_PASSAGES_PROFILE = "smollm2-135m-nq-labelled"
"""The embedded model's bundled profile for ``--docs`` and ``--demo nq`` (passages)."""
MAX_DOCS_BYTES = 512 * 2**20
"""Largest ``--docs`` file read (512 MiB); a folder, FIFO or device is refused unopened."""
DEMO_OPTIONS = {"retriever_prior": "none"}
"""Engine options the demos set unless given: their documents come in no retriever order."""

DEMO_RUN_SEED = 0
"""The demos' ``--seed`` (placements and labels) unless one is given: the runs docs/embedded-model.md shows
(elsewhere the default stream is derived from the question and the documents)."""


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
    src.add_argument(
        "--docs", default=None, help=".jsonl (objects with a 'text' field) or .txt (one per line)"
    )
    src.add_argument(
        "--demo",
        nargs="?",
        const="kv",
        choices=DEMOS,
        default=None,
        help="a built-in demo: kv (the default: 10 one-sentence key-value facts in no retriever order, so "
        f"it runs with --retriever-prior none unless you give it) or nq ({DEMO_NQ_QUESTIONS} held-out Natural "
        f"Questions questions from the sample shipped in the package, each with {DEMO_NQ_DOCS} Wikipedia "
        "passages in BM25 order, panned as the integrations pan a retriever's documents: the BM25 order as "
        "rank prior; reports BM25's and panning's top-1/top-3 side by side; needs bm25s)",
    )
    p.add_argument("--question", default=None, help="the question (required with --docs)")
    add_reader_arguments(p)
    p.add_argument(
        "--profile",
        default=None,
        help="detector profile: bundled name or JSON path (default: the one the reader recommends, "
        "for a GGUF the bundled one measured on the model its metadata names, on passages for --docs and "
        f"--demo nq, on key-value facts for --demo kv: {EMBEDDED_PASSAGES_PROFILE} and {EMBEDDED_PROFILE} "
        "for the embedded model; else lost-in-the-middle with a warning)",
    )
    p.add_argument("--top", type=int, default=3, help="documents shown per round in the trace (default 3)")
    p.add_argument(
        "--no-final-answer", action="store_true", help="skip the answer call on the selected documents"
    )
    p.add_argument(
        "--seed",
        type=_seed,
        default=None,
        help="random seed of the placements and labels: an int, or 'fresh' for fresh entropy (default: "
        "derived from the question and the documents, so the same input gives the same prompts and ranking; "
        "the demos: 0, the runs the docs show)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument(
        "--plot", default=None, metavar="FILE.png", help="draw belief trajectories per document (plot extra)"
    )
    p.add_argument(
        "--setting",
        choices=tuple(SETTINGS),
        default=None,
        help="a named setting ("
        + "; ".join(f"{k}: {_options_text(v)}" for k, v in SETTINGS.items())
        + "); panning options given beside it win",
    )
    add_config_arguments(p, hidden=("policy",))
    p.set_defaults(func=main)


_seed = int_at_least(0, words=("fresh",))
"""``--seed``: a non-negative int or ``fresh``."""


def _options_text(options: Any) -> str:
    return ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in options.items())


def load_documents(path: str | Path) -> tuple[list[str], list[dict[str, Any]]]:
    """Texts and metadata from ``.jsonl`` (``text`` field; other fields are metadata) or
    any other file read as one document per non-empty line."""
    from ..._io import read_regular_file

    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"--docs: no such file: {str(p)!r}")
    raw = read_regular_file(p, max_bytes=MAX_DOCS_BYTES, what="--docs", error=ValueError)
    texts: list[str] = []
    meta: list[dict[str, Any]] = []
    lines = raw.decode("utf-8").splitlines()
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
        texts = [line.strip() for line in lines if line.strip()]
        meta = [{} for _ in texts]
    if not texts:
        raise ValueError(f"{str(p)!r} holds no documents")
    return texts, meta


def _inputs(args: argparse.Namespace) -> tuple[str, list[str], list[dict[str, Any]], list[int] | None]:
    """The question (checked before any model is loaded), documents, their metadata and
    (for a demo) the gold indices."""
    from ...panning import check_question

    if args.demo:
        inst = demo_instance(args.demo)
        return (
            check_question(inst.question if args.question is None else args.question),
            list(inst.documents),
            [{} for _ in inst.documents],
            list(inst.gold),
        )
    if not args.question:
        raise ValueError("--docs needs --question TEXT")
    check_question(args.question)
    docs, meta = load_documents(args.docs)
    return args.question, docs, meta, None


def _panner(
    args: argparse.Namespace, *, defaults: Mapping[str, Any] = MappingProxyType({})
) -> tuple[Any, Any, str]:
    """The reader, the panner and the profile's label for ``args``: the options given on
    the command line over the ``--setting`` over ``defaults`` (a demo's own) over the
    declared defaults; with no ``--profile``, the reader's profile measured on key-value
    facts for ``--demo kv``, on passages otherwise."""
    from ...panning import GoldPanner, PanningConfig
    from ...readers._cli_args import make_reader

    options = {**defaults, **(SETTINGS[args.setting] if args.setting else {}), **given_options(args)}
    reader = make_reader(args, seed=args.seed if isinstance(args.seed, int) else 0)
    config = PanningConfig.from_options(**options)
    task: Literal["passages", "kv"] = "kv" if args.demo == "kv" else "passages"
    panner = GoldPanner(reader, args.profile or None, config, seed=args.seed, task=task)
    return reader, panner, panner.profile_label


def main(args: argparse.Namespace) -> int:
    if args.demo and args.seed is None:
        args.seed = DEMO_RUN_SEED
    if args.demo == "nq":
        return _demo_nq(args)
    question, docs, meta, truth = _inputs(args)
    reader, panner, profile = _panner(args, defaults=DEMO_OPTIONS if args.demo else {})
    result = panner.run(question, docs)
    if args.plot:
        from ...plots import plot_belief_trajectories

        plot_belief_trajectories(result, args.plot, highlight=truth or ())
    final = None
    if not args.no_final_answer and hasattr(reader, "answer") and result.selected.size:
        final = reader.answer(question, [docs[i] for i in result.selected])
    final = final or result.answer
    model = getattr(reader, "model_name", None)
    if not args.json:
        _print_trace(question, docs, result, panner, model=model, truth=truth, top=args.top, answer=final)
        return 0
    selected = [
        {"index": int(i), "text": docs[i], "posterior": float(result.posteriors[i]), "metadata": meta[i]}
        for i in result.selected
    ]
    out = {**result.summary(), "question": question, "model": model, "profile": profile}
    out.update(
        {"answer": final, "selected_documents": selected, **({"gold": truth} if truth is not None else {})}
    )
    print(json.dumps(out))
    return 0


def _demo_nq(args: argparse.Namespace) -> int:
    """``run --demo nq``: pan each demo question's passages in BM25 order as the
    integrations would (BM25's scores to the default prior, the profile rule), and report
    BM25's top-1/top-3 beside panning's, per question and summed."""
    import time

    if args.question:
        raise ValueError("--demo nq pans its own questions; use --docs FILE --question TEXT for yours")
    if args.plot:
        raise ValueError(
            "--plot draws one question's beliefs and --demo nq pans several; use it with --demo kv or --docs"
        )
    instances = demo_nq_instances()
    reader, panner, profile = _panner(args)
    config = panner.config
    model = getattr(reader, "model_name", None)
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    if not args.json:
        print(
            f"{len(instances)} held-out NQ questions, {DEMO_NQ_DOCS} passages each in BM25 order; model {model}, "
            f"profile {profile}, {config.rounds} rounds x {config.prompts_per_round} prompts, retriever_prior={config.retriever_prior!r}"
        )
    for number, inst in enumerate(instances, start=1):
        t0 = time.perf_counter()
        result = panner.run(inst.question, inst.documents, scores=inst.metadata["scores"])
        seconds = time.perf_counter() - t0
        gold = inst.gold[0]
        ranking = [int(i) for i in result.ranking]
        row = {
            "question": inst.question,
            "question_id": inst.metadata["question_id"],
            "answers": list(inst.answers),
            "gold": gold,
            "bm25": {"gold_rank": gold + 1, "top1": gold == 0, "top3": gold < 3},
            "panning": {
                "gold_rank": ranking.index(gold) + 1,
                "top1": ranking[0] == gold,
                "top3": gold in ranking[:3],
                "calls": result.calls,
                "failed_rounds": result.failed_rounds,
                "stop_reason": result.stop_reason,
                "seconds": round(seconds, 3),
            },
            "top": [
                {"index": i, "bm25_rank": i + 1, "posterior": float(result.posteriors[i]), "gold": i == gold}
                for i in ranking[: max(1, args.top)]
            ],
        }
        rows.append(row)
        if not args.json:
            _print_nq_row(number, len(instances), row, inst.documents)
    seconds = time.perf_counter() - started
    summary = _nq_summary(rows, seconds)
    if args.json:
        options = {name: getattr(config, name) for name in ("rounds", "prompts_per_round", "retriever_prior")}
        out = {"demo": "nq", "model": model, "profile": profile, "options": options}
        print(
            json.dumps({**out, "documents_per_question": DEMO_NQ_DOCS, "questions": rows, "summary": summary})
        )
        return 0
    q = summary["questions"]
    print(
        f"\nsummary over {q} questions: BM25 top-1 {summary['bm25_top1']}/{q}, top-3 {summary['bm25_top3']}/{q}; "
        f"panning top-1 {summary['panning_top1']}/{q}, top-3 {summary['panning_top3']}/{q}; "
        f"{summary['calls']} calls, {summary['seconds']:.1f} s"
    )
    return 0


def _nq_summary(rows: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    hits = {
        f"{by}_{top}": sum(r[by][top] for r in rows) for by in ("bm25", "panning") for top in ("top1", "top3")
    }
    calls = sum(r["panning"]["calls"] for r in rows)
    return {"questions": len(rows), **hits, "calls": calls, "seconds": round(seconds, 3)}


def _print_nq_row(number: int, total: int, row: dict[str, Any], docs: list[str]) -> None:
    def hits(part: dict[str, Any]) -> str:
        return (
            f"top-1 {'hit ' if part['top1'] else 'miss'}, top-3 {'hit ' if part['top3'] else 'miss'} "
            f"(gold at rank {part['gold_rank']})"
        )

    pan = row["panning"]
    print(f"\n[{number}/{total}] {row['question']}  (answer: {row['answers'][0]})")
    print(f"  BM25     {hits(row['bm25'])}")
    print(f"  panning  {hits(pan)}; {pan['calls']} calls, {pan['seconds']:.1f} s")
    for top in row["top"]:
        mark = "  <- gold" if top["gold"] else ""
        text = _short(docs[top["index"]], 60)
        print(f"    BM25 #{top['bm25_rank']:<2d} p={top['posterior']:.3f}  {text}{mark}")


def _print_trace(
    question: str,
    docs: list[str],
    result: Any,
    panner: Any,
    *,
    model: str | None = None,
    truth: list[int] | None,
    top: int,
    answer: str | None,
) -> None:
    """The text report: the setting, each round's citations and leaders, the selection."""
    import numpy as np

    config, profile = panner.config, panner.profile_label
    print(f"question: {question}")
    unordered = ", no retriever order (retriever_prior='none')" if config.retriever_prior == "none" else ""
    print(
        f"{len(docs)} documents, model {model}, profile {profile}, policy {config.policy}, {config.rounds} rounds"
        f" x {_count(config.prompts_per_round, 'prompt')}{unordered}"
    )
    if truth is not None:
        print(f"(demo: the relevant document is #{truth[0]})")
    for r in result.rounds:
        cited = ", ".join(f"#{i}" for i in r.cited) or "none"
        status = f"failed: {r.reading.error}" if r.failed else f"cited {cited}"
        ans = f"  answer {r.reading.answer!r}" if r.reading.answer else ""
        tok = f", {r.prompt_tokens}+{r.completion_tokens} tokens" if r.prompt_tokens else ""
        print(f"\nround {r.round} ({_count(r.calls, 'call')}, {r.seconds:.1f}s{tok}): {status}{ans}")
        for i in np.argsort(-r.posteriors, kind="stable")[:top]:
            print(f"  #{int(i):<4d} p={r.posteriors[i]:.3f}  {_short(docs[i])}")
    _print_selection(docs, result, answer)


def _print_selection(docs: list[str], result: Any, answer: str | None) -> None:
    """The end of :func:`_print_trace`: calls and tokens, the selected documents, p_none, the answer."""
    print(
        f"\nselected (stopped: {result.stop_reason}; {result.calls} calls, {result.prompt_tokens} prompt + "
        f"{result.completion_tokens} completion tokens, {result.seconds:.1f}s in the model):"
    )
    if result.cache_hits or result.cache_misses:
        print(
            f"reply cache: {_count(result.cache_hits, 'hit')}, {_count(result.cache_misses, 'miss', 'misses')} "
            f"({_count(result.calls_saved, 'model call')} saved)"
        )
    for i in result.selected:
        print(f"  #{int(i):<4d} p={result.posteriors[i]:.3f}  {_short(docs[i], 100)}")
    if not result.selected.size:
        print("  (none reaches min_relevance)")
    print(f"probability that no document is relevant (p_none): {result.p_none:.3f}")
    if result.documents_cut:
        print(
            f"{result.documents_cut} document(s) over all prompts were cut to fit the model's context "
            "(their ends marked [...])"
        )
    print(f"answer: {answer if answer else '(none)'}")


def _count(number: int, noun: str, plural: str | None = None) -> str:
    """``"1 call"``, ``"3 calls"``: ``number`` and ``noun``, plural unless ``number`` is 1."""
    return f"{number} {noun if number == 1 else plural or noun + 's'}"


def _short(text: str, width: int = 70) -> str:
    t = " ".join(text.split())
    return t if len(t) <= width else t[: width - 3] + "..."
