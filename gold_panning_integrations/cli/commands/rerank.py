"""``gold-panning rerank``: rerank a first stage's output in batch, without judgements
(:mod:`gold_panning_integrations.batch`); resumable; runs on the base install."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ...engine.config import SETTINGS
from ...readers._cli_args import add_reader_arguments
from ._config_args import add_config_arguments, given_options, int_at_least

__all__ = ["main", "register"]


_positive = int_at_least(1)
_seed = int_at_least(0)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "rerank",
        help="rerank a first stage's output in batch (a TREC run file or JSONL of questions), no qrels needed",
        description=(
            "Rerank every question of a first-stage run with Gold Panning: questions run concurrently "
            "within the reader's limits, each finished question is checkpointed at once (rerun the same "
            "command to resume after any stop), and the outputs are a TREC run file (the posterior "
            "probability as the score) and a JSONL file with every candidate's probability and each "
            "question's p_none, calls, tokens and cache hits. See docs/rerank.md."
        ),
    )
    src = p.add_argument_group("input (one of)")
    src.add_argument(
        "--input",
        metavar="FILE.jsonl",
        help='JSONL, one {"id", "question", "passages"} per line; a passage is a text or {"text", "id", '
        '"title", "score"} (first-stage order; ids default to <id>-p<i>)',
    )
    src.add_argument("--run", help="first-stage TREC run file (qid Q0 docid rank score tag)")
    src.add_argument(
        "--queries", help="with --run: queries (BEIR queries.jsonl, qid<TAB>text or <top> topics)"
    )
    src.add_argument("--corpus", help="with --run: corpus (BEIR corpus.jsonl or docid<TAB>[title<TAB>]text)")
    p.add_argument(
        "--depth",
        type=_positive,
        default=20,
        help="candidates reranked per question: the first stage's top DEPTH (default 20, as evaluate)",
    )
    p.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="output folder: rerank.jsonl, run.trec, summary.json, and checkpoint.jsonl (rerun with the "
        "same folder to resume)",
    )
    p.add_argument("--tag", default="gold-panning", help="the run file's tag (default gold-panning)")
    p.add_argument(
        "--seed",
        type=_seed,
        default=None,
        help="seed of each question's placements and labels with the question's position in the input: "
        "the streams of evaluate's gp-defaults method, so the same seed and input give evaluate's "
        "rankings (default: derived from each question's text and candidates)",
    )
    p.add_argument(
        "--restart",
        action="store_true",
        help="start anew in --out: its checkpoint is set aside (renamed checkpoint.jsonl.<time>.replaced, "
        "kept) and every question is asked again; needed to change a setting the checkpoint's records "
        "depend on",
    )
    p.add_argument(
        "--keep-fallbacks",
        action="store_true",
        help="keep the checkpoint's fallback records (questions whose endpoint failed, recorded with "
        "--on-failure fallback) instead of asking them again",
    )
    p.add_argument(
        "--questions-in-flight",
        type=_positive,
        default=None,
        help="questions reranked at once (default: twice the reader's --max-concurrency)",
    )
    p.add_argument(
        "--profile",
        default=None,
        help="detector profile: bundled name or JSON path (default: the one the reader recommends, else "
        "lost-in-the-middle with a warning)",
    )
    p.add_argument(
        "--setting",
        choices=tuple(SETTINGS),
        default=None,
        help="a named setting (" + "; ".join(SETTINGS) + "); panning options given beside it win",
    )
    add_reader_arguments(p)
    p.set_defaults(reader="openai")  # a batch job goes to an endpoint; --reader local is slow
    p._option_string_actions["--reader"].help = (
        "openai: an OpenAI-compatible endpoint, --base-url and --model (default); local: the embedded "
        "model in process (one call at a time)"
    )
    if "--max-concurrency" not in p._option_string_actions:
        p.add_argument(
            "--max-concurrency",
            type=_positive,
            default=None,
            dest="max_concurrency",
            help="most calls in flight to the endpoint, shared by every question (default 16)",
        )
    add_config_arguments(p, hidden=("policy",))
    p.set_defaults(func=main)


def _source(args: argparse.Namespace) -> Any:
    from ...batch import JsonlQuestions, RunQuestions

    trec = {"--run": args.run, "--queries": args.queries, "--corpus": args.corpus}
    if args.input and any(trec.values()):
        raise ValueError("give either --input FILE.jsonl or --run with --queries and --corpus, not both")
    if args.input:
        return JsonlQuestions(args.input, depth=args.depth)
    missing = [k for k, v in trec.items() if not v]
    if missing:
        raise ValueError(
            "give --input FILE.jsonl, or --run RUN --queries QUERIES --corpus CORPUS"
            + (f" (missing {', '.join(missing)})" if len(missing) < 3 else "")
        )
    return RunQuestions(args.run, queries=args.queries, corpus=args.corpus, depth=args.depth)


def _reader(args: argparse.Namespace) -> Any:
    """The reader of the reader options, with ``--max-concurrency`` calls in flight."""
    from ...readers._cli_args import make_reader
    from ...readers._reader_base import CallLimit

    reader = make_reader(args)
    limit = args.max_concurrency
    if limit is not None and reader.max_concurrency != limit:
        if args.reader != "openai":
            raise ValueError(
                "--max-concurrency applies to --reader openai (an endpoint that takes calls at once)"
            )
        reader.call_limit = CallLimit(limit)  # set before any call: every question shares it
    return reader


def main(args: argparse.Namespace) -> int:
    import asyncio

    from ..._console import Progress
    from ...batch import arerank_job
    from ...panning import GoldPanner, PanningConfig

    source = _source(args)  # every input line checked before any model call
    if source.left_out:
        q, why = next(iter(source.left_out.items()))
        sys.stderr.write(f"rerank: {len(source.left_out)} queries left out (e.g. {q!r}: {why})\n")
    options = {**(SETTINGS[args.setting] if args.setting else {}), **given_options(args)}
    reader = _reader(args)
    panner = GoldPanner(reader, args.profile or None, PanningConfig.from_options(**options))
    bar = Progress(len(source), label="rerank")
    try:
        job = asyncio.run(
            arerank_job(
                source,
                args.out,
                panner=panner,
                seed=args.seed,
                in_flight=args.questions_in_flight,
                tag=args.tag,
                progress=bar.update,
                restart=args.restart,
                keep_fallbacks=args.keep_fallbacks,
                restart_hint="--restart",
            )
        )
    except BaseException:
        sys.stderr.write(
            f"rerank: finished questions are kept in {args.out}; rerun the same command to resume\n"
        )
        raise
    finally:
        bar.close()
    t = job.totals
    qps = job.questions_per_second
    fallback = (
        f", {t['fallback']} fallback (the endpoint failed: in the first stage's order, asked again on the "
        "next run)"
        if t["fallback"]
        else ""
    )
    print(
        f"rerank: {job.questions} questions ({job.resumed} from the checkpoint, {job.ran} reranked now"
        + (f" in {job.seconds:.1f} s, {qps:.2f} questions/s" if qps else "")
        + f"); {t['panned']} panned{fallback}; {t['calls']} calls, {t['prompt_tokens']} prompt and "
        f"{t['completion_tokens']} completion tokens, {t['cache_hits']} cache hits; model {reader.model_name}, "
        f"profile {panner.profile_label}"
    )
    print(f"rerank: wrote {job.out / 'run.trec'}, {job.out / 'rerank.jsonl'} and {job.out / 'summary.json'}")
    return 0
