"""``gold-panning evaluate``: Gold Panning side by side with the rerankers users would
otherwise pick, on the same instances and the same endpoint.

Methods (``--methods``; ours are :data:`PANNING_METHODS`): ``base`` (the first-stage order),
``psc`` (``policy="random"``, the paper's baseline), ``gp-belief``, ``gp-cost``,
``gp-belief-flat``, and the peers (:data:`PEERS`), run unmodified through their own packages
(skipped, with the ``pip install`` line, when missing). Every call goes through a loopback
counting proxy (:class:`UsageProxy`); the default endpoint is the embedded SmolLM2 model
(:class:`EmbeddedServer`). ``--task`` is a built-in task or a collection
(:mod:`..ir.collection`); see docs/bench-compare-collections.md.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .. import __version__
from ..errors import MissingExtraError
from ..ir.collection import Collection
from ..ir.ranking_metrics import wilson_interval
from ..readers._native import check_llama_runs_here
from ._compare_run import CHECKPOINT_FORMAT, run_compare, summarize
from ._endpoints import EmbeddedServer, UsageProxy, check_server_extra, free_port, llama_server_command
from ._instances import COLLECTION_TASKS, TASKS, CompareInstance, GPKChoice, make_instances
from ._methods import (
    ALL_METHODS,
    COST_SAVING,
    DEFAULT_METHODS,
    LABELS,
    PANNING,
    PEER_METHODS,
    PEERS,
    Endpoint,
    MethodFn,
    MethodOutcome,
    TracesNotWritten,
    _trace_writer,
    base_method,
    panning_method,
    peer_method,
    peer_methods,
    peer_missing,
)
from ._report import format_markdown, plot_compare

__all__ = [
    "ALL_METHODS",
    "DEFAULT_METHODS",
    "LABELS",
    "PEERS",
    "CompareInstance",
    "EmbeddedServer",
    "MethodOutcome",
    "TracesNotWritten",
    "UsageProxy",
    "format_markdown",
    "main",
    "make_instances",
    "peer_methods",
    "register",
    "run_compare",
    "summarize",
    "wilson_interval",
]

EMBEDDED_PROFILE = "smollm2-135m-kv"
"""The embedded model's bundled profile on the kv tasks (what :func:`embedded_profile` picks)."""
KV_TASKS = ("kv", "litm-kv")
"""The tasks whose documents are one-sentence key-value facts; the others (``nq`` and the
collections) pan passages. Which a task is picks the bundled profile (:func:`profile_task`)."""
EMBEDDED_MODEL = "SmolLM2-135M-Instruct"
"""The default embedded model; a ``--model-path`` file is named from its GGUF metadata."""


# ====================================================================================== CLI
def register(sub: Any, *, name: str = "evaluate", help: str | None = None) -> argparse.ArgumentParser:
    """Add the command's parser to ``sub`` as ``name`` (the deprecated ``bench compare`` too)."""
    p = sub.add_parser(
        name,
        help=help or "Gold Panning vs LangChain/LlamaIndex LLM rerankers on your endpoint and data",
        description=(
            "Base order, PSC, GP-Belief and GP with cost-saving settings against LangChain "
            "LLMListwiseRerank and LlamaIndex LLMRerank / RankGPTRerank (through their own packages), "
            "on the same instances and the same OpenAI-compatible endpoint. By default the embedded "
            "SmolLM2 model, served on loopback with llama-cpp-python's server."
        ),
    )
    g = p.add_argument_group("endpoint")
    g.add_argument(
        "--reader",
        choices=("embedded", "openai"),
        default="embedded",
        help="embedded: serve the embedded SmolLM2 model on loopback (default); "
        "openai: an OpenAI-compatible endpoint (--base-url, --model)",
    )
    g.add_argument("--base-url", help="endpoint for --reader openai, e.g. http://127.0.0.1:8000/v1")
    g.add_argument("--model", help="model name for --reader openai")
    g.add_argument("--api-key", help="API key for --reader openai (default: $OPENAI_API_KEY)")
    g.add_argument("--model-path", help="GGUF file for --reader embedded (default: SmolLM2-135M)")
    g.add_argument(
        "--mode",
        choices=("answer", "cite"),
        help="how our methods read the model: answer (default for embedded) or cite (default for openai)",
    )
    g.add_argument(
        "--response-format",
        choices=("auto", "json_schema", "json_object", "text"),
        default="auto",
        help="output format our methods ask for in cite mode; auto (default): json_schema, falling back "
        "to json_object, then text, when the server rejects one (remembered per endpoint)",
    )
    g.add_argument("--threads", type=int, help="CPU threads of the embedded server")
    g.add_argument("--n-ctx", type=int, default=8192, help="context of the embedded server (default 8192)")
    g.add_argument("--timeout", type=float, default=300.0, help="seconds per LLM request (default 300)")
    g.add_argument(
        "--server-timeout", type=float, default=180.0, help="seconds to wait for the embedded server"
    )
    g.add_argument("--server-log", help="log file of the embedded server (default: a temp file)")
    g.add_argument(
        "--peer-max-tokens",
        type=int,
        default=512,
        help="completion cap given to the peers' LLM clients (default 512)",
    )
    p.add_argument(
        "--task",
        choices=TASKS,
        default="kv",
        help="kv (synthetic, default), nq, litm-kv (UUIDs); or a test collection: beir (a BEIR folder, "
        "the shipped NQ fixture without --data), trec (--topics/--qrels/--corpus), rag (JSONL)",
    )
    p.add_argument(
        "--split",
        default="test",
        help="nq: questions of the shipped NQ sample, test (held out, default) or calibration (to measure "
        "a reader with --traces without touching the test questions); beir: the qrels file "
        "qrels/<split>.tsv (default test)",
    )
    p.add_argument(
        "--traces",
        metavar="FILE",
        help="append a labelled trace of every run of the first panning method in --methods (gp-belief "
        "by default) to FILE (JSONL; the gold is known), for gold-panning calibrate --from-traces",
    )
    p.add_argument(
        "--data",
        help="nq / litm-kv: a larger file in the Lost-in-the-Middle format (default: the samples shipped "
        "in the package); beir: a BEIR folder (default: the shipped fixture nq-test-beir); rag: a "
        'JSONL file, one {"question", "passages", "relevant"} per line',
    )
    p.add_argument(
        "--n",
        "--depth",
        type=int,
        default=20,
        help="documents per instance; for a collection the first stage's depth, the candidates each "
        "method reranks (default 20)",
    )
    p.add_argument(
        "--instances",
        type=int,
        help="instances (default 30; for a collection every judged query, else that many drawn with --seed)",
    )
    p.add_argument("--seed", type=int, default=1, help="instance seed (default 1; calibration used 0)")
    p.add_argument("--rounds", type=int, default=8, help="rounds of the panning methods (default 8)")
    p.add_argument(
        "--profile",
        help="detector profile (default: the bundled one measured for the served model, on passages for "
        "--task nq and a collection, on key-value facts for kv and litm-kv: for embedded SmolLM2 "
        "smollm2-135m-nq-labelled or smollm2-135m-kv, for a GGUF the model its metadata names, e.g. "
        "qwen2.5-coder-0.5b-nq or -kv; for openai: the reader's; else the generic one)",
    )
    p.add_argument(
        "--methods",
        default=",".join(DEFAULT_METHODS),
        help=f"comma-separated subset of {','.join(ALL_METHODS)} (default: all but gp-belief-flat)",
    )
    p.add_argument(
        "--top-n",
        type=int,
        help="documents each method returns; the other candidates keep their first-stage order below "
        "them, so every method is scored on a full ranking (default 3 on the built-in tasks, for "
        "top-3; 10 on a collection, for nDCG@10)",
    )
    c = p.add_argument_group("collections (--task beir, trec, rag)")
    c.add_argument("--topics", help="trec: topics file (qid<TAB>text, BEIR queries.jsonl or <top> SGML)")
    c.add_argument("--qrels", help="trec: qrels file (qid iteration docid relevance)")
    c.add_argument(
        "--corpus",
        help="trec: corpus file (docid<TAB>text as MS MARCO collection.tsv, or BEIR corpus.jsonl)",
    )
    c.add_argument(
        "--run",
        help="beir, trec: first-stage TREC run file (qid Q0 docid rank score tag); its top --depth "
        "documents per query are the candidates (default: BM25 over the corpus, through bm25s)",
    )
    c.add_argument(
        "--bm25-stemmer",
        metavar="NAME",
        help="PyStemmer algorithm for the BM25 first stage, e.g. english (default: no stemming, as "
        "the shipped NQ sample was built)",
    )
    c.add_argument(
        "--gp-k",
        default="auto",
        type=_gp_k,
        help="relevant documents the panning methods select: auto (default: 1 on the built-in tasks; "
        "on a collection the median number of relevant candidates per query, reported) or N",
    )
    c.add_argument(
        "--relevance-level",
        type=int,
        default=1,
        help="lowest grade the binary metrics (MRR, recall, top-1/3) count as relevant (default 1; "
        "TREC DL papers use 2)",
    )
    c.add_argument("--recall-k", type=int, default=10, help="cutoff of Recall@k (default 10)")
    p.add_argument("--checkpoint", help="JSONL of finished (instance, method) pairs, for resuming")
    p.add_argument(
        "--out",
        metavar="DIR",
        help="write runs/<method>.trec (TREC run files), qrels.trec (the judgements scored), summary.json "
        "and table.md here, each atomically",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the tables")
    p.add_argument(
        "--plot",
        help="write accuracy vs prompt tokens here (PNG; needs matplotlib), and the reliability diagram "
        "of the panning methods' probabilities beside it (<name>-reliability.png)",
    )
    p.set_defaults(func=main)
    return p


def _gp_k(text: str) -> int | None:
    """``--gp-k``: ``auto`` (None) or an integer >= 1."""
    if text.strip().lower() == "auto":
        return None
    with contextlib.suppress(ValueError):
        if (k := int(text)) >= 1:
            return k
    raise argparse.ArgumentTypeError(f"expected auto or an integer >= 1, got {text!r}")


def _methods(arg: str) -> list[str]:
    names = [m.strip() for m in arg.split(",") if m.strip()]
    bad = [m for m in names if m not in ALL_METHODS]
    if bad or not names:
        raise ValueError(
            f"unknown method(s) {', '.join(bad) or '(none)'}; choose from {', '.join(ALL_METHODS)}"
        )
    return list(dict.fromkeys(names))


def profile_task(task: str) -> Literal["passages", "kv"]:
    """The kind of documents ``task`` pans, for the profile rule: ``"kv"`` for
    :data:`KV_TASKS`, ``"passages"`` for ``nq`` and the collections (BEIR, TREC, RAG)."""
    return "kv" if task in KV_TASKS else "passages"


def embedded_profile(task: str, model: str, *, mode: str) -> str | None:
    """The bundled profile measured for the served GGUF model (found by name, in
    ``mode``) on ``task``'s kind of documents (:func:`profile_task`), else the model's
    other one, else None (the generic profile, with a warning): for the embedded SmolLM2
    ``smollm2-135m-nq-labelled`` on passages, :data:`EMBEDDED_PROFILE` on kv."""
    from ..profiles._lookup import bundled_profile_for

    return bundled_profile_for(model, mode=mode, task=profile_task(task))


@contextlib.contextmanager
def _endpoint(args: argparse.Namespace) -> Iterator[tuple[str, str, str]]:
    """``(upstream base URL, model name, api key)``; serves the embedded model when asked
    (its port and log are written to stderr and kept in ``args.server_info``; its
    :meth:`EmbeddedServer.check` in ``args.server_check``), once llama.cpp was seen to run
    the model on this CPU (:func:`~..readers._native.check_llama_runs_here`)."""
    args.server_check = None
    if args.reader == "openai":
        key = args.api_key or os.environ.get("OPENAI_API_KEY")
        if not args.base_url and not key:
            raise ValueError("--reader openai needs --base-url URL (or an API key for api.openai.com)")
        if not args.model:
            raise ValueError("--reader openai needs --model NAME")
        yield args.base_url or "https://api.openai.com/v1", args.model, key or "not-needed"
        return
    check_server_extra()
    from ..readers.local import default_model_path, gguf_model_name

    model_path = Path(args.model_path) if args.model_path else default_model_path()
    model = gguf_model_name(model_path) if args.model_path else EMBEDDED_MODEL
    check_llama_runs_here(model_path)  # a crash here says what to do; in the server it says nothing
    port = free_port()
    log = Path(
        args.server_log or Path(os.environ.get("TMPDIR", "/tmp")) / f"gold-panning-compare-server-{port}.log"
    )
    command = llama_server_command(model_path, port=port, n_ctx=args.n_ctx, threads=args.threads)
    server = EmbeddedServer(command, port=port, log=log, ready_timeout=args.server_timeout)
    args.server_info = {
        "command": "python -m llama_cpp.server",
        "port": port,
        "log": str(log),
        "n_ctx": args.n_ctx,
    }
    args.server_check = server.check
    sys.stderr.write(f"evaluate: serving {model_path.name} at {server.base_url} (log: {log})\n")
    with server:
        sys.stderr.write(f"evaluate: server ready on port {port}\n")
        yield server.base_url, model, "not-needed"
    sys.stderr.write(f"evaluate: server on port {port} stopped\n")


def _progress(total: int) -> tuple[Callable[[int], None], Callable[[], None]]:
    """A tqdm bar on stderr (every 30 s when stderr is not a terminal): ``(update(done), close)``."""
    from tqdm import tqdm

    t = tqdm(total=total, desc="evaluate", file=sys.stderr, mininterval=1.0 if sys.stderr.isatty() else 30.0)

    def update(done: int) -> None:
        t.update(done - t.n)

    return update, t.close


def _peer_route_notes(rows: Sequence[Any]) -> list[str]:
    """One report line per peer whose rows say how it had to be asked (a row's ``note``,
    e.g. the listwise peer's tool call where ``json_schema`` was refused), with its count."""
    peers = [r for r in rows if r.get("method") in PEER_METHODS]
    runs = Counter(r["method"] for r in peers)
    counts = Counter((r["method"], r["note"]) for r in peers if r.get("note"))
    return [f"{LABELS[m]}: {note} on {c} of {runs[m]} queries" for (m, note), c in counts.items()]


@dataclass(frozen=True)
class _Plan:
    """What a run ranks and how it is scored, derived from the CLI options."""

    instances: list[CompareInstance]
    qrels: dict[str, dict[str, int]]
    top_n: int
    gp: GPKChoice
    data: str | None
    first_stage: str | None
    notes: list[str]
    left_out: dict[str, str]


def _load(args: argparse.Namespace) -> tuple[list[CompareInstance], Collection | None, dict[str, str]]:
    """``--task``'s instances, its collection (None for a built-in task) and the queries left out."""
    if args.task not in COLLECTION_TASKS:
        if any(getattr(args, k) is not None for k in ("topics", "qrels", "corpus", "run", "bm25_stemmer")):
            raise ValueError(
                "--topics/--qrels/--corpus/--run/--bm25-stemmer apply to --task beir, trec or rag"
            )
        count = 30 if args.instances is None else args.instances
        instances = make_instances(
            args.task, n=args.n, instances=count, seed=args.seed, data=args.data, split=args.split
        )
        return instances, None, {}
    from ..ir.collection import load_collection
    from ._instances import collection_instances

    files = {"topics": args.topics, "qrels": args.qrels, "corpus": args.corpus, "run": args.run}
    collection = load_collection(args.task, data=args.data, split=args.split, depth=args.n, **files)
    instances, without = collection_instances(
        collection,
        depth=args.n,
        instances=args.instances,
        seed=args.seed,
        relevance_level=args.relevance_level,
        stemmer=args.bm25_stemmer,
        task=args.task,
    )
    return instances, collection, {**collection.left_out, **without}


def _plan(args: argparse.Namespace) -> _Plan:
    """Load the task or collection, draw the instances, choose ``k`` and ``--top-n``."""
    from ._instances import choose_gp_k, instance_qrels

    for opt in ("top_n", "recall_k", "relevance_level"):  # checked before any model call
        if (value := getattr(args, opt)) is not None and value < 1:
            raise ValueError(f"--{opt.replace('_', '-')} must be >= 1, got {value!r}")
    instances, collection, left_out = _load(args)
    gp = choose_gp_k(args.gp_k, instances, collection=collection)
    n_max = max(len(i.documents) for i in instances)
    if args.gp_k is not None and args.gp_k >= n_max:
        raise ValueError(f"--gp-k {args.gp_k} must be below the number of candidates (at most {n_max} here)")
    qrels = instance_qrels(instances, collection)
    top_n = args.top_n or (3 if collection is None else 10)
    queries = f"{len(instances)} queries" + (f" of {collection.name}" if collection else "")
    if left_out:
        q, why = next(iter(left_out.items()))
        queries += f"; {len(left_out)} left out (e.g. {q!r}: {why})"
    notes = [
        queries,
        f"each method's top {top_n} ranked, the other candidates in first-stage order below them",
        f"GP's k = {gp.how}",
        "intervals: 95% percentile bootstrap over queries (top-1/top-3: Wilson); paired differences against "
        + "the first stage per query",
    ]
    if collection is None:
        data = str(args.data) if args.data else None
        return _Plan(instances, qrels, top_n, gp, data, None, notes, left_out)
    first = "BM25 (bm25s)" if collection.first_stage == "bm25" else collection.first_stage
    first += f", stemmer {args.bm25_stemmer}" if args.bm25_stemmer else ""
    found = [
        len(i.gold) / max(1, sum(g >= args.relevance_level for g in qrels[i.query_id].values()))
        for i in instances
    ]
    notes.insert(
        1,
        f"first stage: {first}, depth {args.n}; its recall@{args.n} (every method's ceiling): "
        f"{sum(found) / len(found):.2f}",
    )
    if args.data or args.topics:
        data = str(args.data) if args.data else f"{args.topics} {args.qrels} {args.corpus}"
    else:
        data = "fixture"
    return _Plan(instances, qrels, top_n, gp, data, first, notes, left_out)


def _out_dir(path: str | None) -> Path | None:
    """``--out``: created up front, so an unusable folder fails before any model call."""
    if not path:
        return None
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {path!r} is a file; pass a folder")
    out.mkdir(parents=True, exist_ok=True)
    return out


def _profile(args: argparse.Namespace, reader: Any, model: str, mode: str) -> tuple[Any, str]:
    """The profile and its name: ``--profile``, else the embedded model's bundled one, else the
    reader's (the generic one, with a warning)."""
    from ..profiles import load_profile, resolved_profile

    name = args.profile
    if not name and args.reader == "embedded":
        name = embedded_profile(args.task, model, mode=mode)
    if name:
        return load_profile(name), name
    resolved = resolved_profile(None, reader=reader, task=profile_task(args.task))
    return resolved.profile, resolved.label


def _method_fns(
    methods: Sequence[str],
    reader: Any,
    ep: Endpoint,
    *,
    profile: Any,
    args: argparse.Namespace,
    plan: _Plan,
    traces: Callable[[Any, CompareInstance], None] | None,
) -> dict[str, MethodFn]:
    """``methods`` as ``instance -> outcome``; ``traces`` goes to the first panning method
    only (a profile is learned from one setting)."""
    traced = next((m for m in methods if m in PANNING), None)
    options = {"profile": profile, "rounds": args.rounds, "seed": args.seed, "k": plan.gp.k}
    fns: dict[str, MethodFn] = {}
    for m in methods:
        if m == "base":
            fns[m] = base_method
        elif m in PANNING:
            fns[m] = panning_method(m, reader, **options, on_result=traces if m == traced else None)
        else:
            fns[m] = peer_method(m, ep, top_n=plan.top_n)
    return fns


def main(args: argparse.Namespace) -> int:
    from .._console import sigterm_interrupts
    from ..readers.openai import OpenAIReader

    methods = _methods(args.methods)
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        raise MissingExtraError("matplotlib", "plot", "--plot")
    from ..ir.ranking_metrics import _ir_measures

    _ir_measures()  # the scoring's library, checked before any model call
    skipped = {m: why for m in methods if m in PEER_METHODS and (why := peer_missing(m)) is not None}
    for m, why in skipped.items():
        sys.stderr.write(f"evaluate: skipping {m}: {why}\n")
    plan = _plan(args)
    instances = plan.instances
    out_dir = _out_dir(args.out)
    traces = _trace_writer(getattr(args, "traces", None))
    mode: Literal["cite", "answer"] = args.mode or ("answer" if args.reader == "embedded" else "cite")
    t_start = time.perf_counter()
    with (
        sigterm_interrupts(),  # SIGTERM unwinds like Ctrl-C: the server stops too
        _endpoint(args) as (upstream, model, key),
        UsageProxy(upstream, timeout=args.timeout) as proxy,
    ):
        reader = OpenAIReader(
            model=model,
            base_url=proxy.base_url,
            api_key=key,
            mode=mode,
            temperature=0.0,
            max_tokens=32 if mode == "answer" else 256,
            timeout=args.timeout,
            response_format=getattr(args, "response_format", "auto"),
            # the embedded server returns log-probabilities: traces then carry abstain_p
            logprobs=mode == "answer" and args.reader == "embedded",
        )
        profile, profile_name = _profile(args, reader, model, mode)
        ep = Endpoint(proxy.base_url, model, key, timeout=args.timeout, peer_max_tokens=args.peer_max_tokens)
        ran = [m for m in methods if m not in skipped]
        fns = _method_fns(ran, reader, ep, profile=profile, args=args, plan=plan, traces=traces)
        meta = {k: getattr(args, k) for k in ("task", "split", "n", "seed", "rounds")}
        meta.update(model=model, mode=mode, profile=profile_name, top_n=plan.top_n, version=__version__)
        meta.update(format=CHECKPOINT_FORMAT, data=plan.data, first_stage=plan.first_stage, gp_k=plan.gp.k)
        update, close = _progress(len(instances) * len(fns))
        try:
            rows = run_compare(
                instances,
                fns,
                usage=proxy,
                checkpoint=args.checkpoint,
                meta=meta,
                progress=update,
                top_n=plan.top_n,
                alive=getattr(args, "server_check", None),
            )
        finally:
            close()
    summary = summarize(
        rows,
        methods,
        rounds=args.rounds,
        skipped=skipped,
        instances=instances,
        qrels=plan.qrels,
        top_n=plan.top_n,
        recall_k=args.recall_k,
        relevance_level=args.relevance_level,
    )
    notes = [*plan.notes, *_peer_route_notes(rows)]
    res = {
        **meta,
        "instances": len(instances),
        "endpoint": getattr(args, "server_info", None) or upstream,
        "seconds": round(time.perf_counter() - t_start, 1),
        "cost_saving": COST_SAVING,
        "gp_k_how": plan.gp.how,
        "relevance_level": args.relevance_level,
        "left_out": plan.left_out,
        "notes": notes,
        "methods": summary,
    }
    base_label = f"first stage: {plan.first_stage}" if plan.first_stage else None
    markdown = format_markdown(summary, notes=notes, base_label=base_label)
    if out_dir is not None:
        from ._report import write_outputs

        write_outputs(
            out_dir,
            rows=rows,
            instances=instances,
            qrels=plan.qrels,
            methods=ran,
            top_n=plan.top_n,
            summary=res,
            markdown=markdown,
        )
        sys.stderr.write(f"evaluate: wrote runs/*.trec, qrels.trec, summary.json and table.md to {out_dir}\n")
    if args.plot:
        plot_compare(
            summary, args.plot, title=f"{model}, {args.task}, n={args.n}, {len(instances)} instances"
        )
    if args.json:
        from .._console import print_json

        print_json(res)
        return 0
    print(
        f"evaluate: task {args.task}, n={args.n}, {len(instances)} instances, seed {args.seed}, model {model} "
        f"({mode} mode for ours, profile {profile_name}), {args.rounds} rounds, {res['seconds']} s"
    )
    print()
    print(markdown)
    return 0
