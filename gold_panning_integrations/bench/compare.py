"""``gold-panning bench compare``: Gold Panning side by side with the rerankers users
would otherwise pick, on the same instances and the same endpoint.

Methods (``--methods``, all but ``gp-belief-flat`` by default; ours are the entries of
:data:`PANNING_METHODS`):

* ``base``: the base order (the retriever's order for NQ, the input order otherwise).
* ``psc``: permutation self-consistency, :class:`~..engine.panner.Panner` with
  ``policy="random"`` (the paper's baseline).
* ``gp-belief``: GP-Belief as ``GoldPanningRetriever``/``GoldPanningPostprocessor`` run it
  by default: the panner's defaults with the base order as a rank prior
  (``retriever_prior="rank"``), ``--rounds``.
* ``gp-cost``: GP-Belief with the README's cost-saving settings: the same rank prior and
  ``stop_at=0.6``.
* ``gp-belief-flat``: GP-Belief without the base order (the engine's base-rate prior): what
  the reader alone finds. Not run unless named.
* ``langchain-listwise``: LangChain ``LLMListwiseRerank`` (langchain-classic) with
  ``ChatOpenAI`` (langchain-openai).
* ``llamaindex-llmrerank``: LlamaIndex ``LLMRerank`` (llama-index-core) with
  ``OpenAILike`` (llama-index-llms-openai-like).
* ``llamaindex-rankgpt``: LlamaIndex ``RankGPTRerank``
  (llama-index-postprocessor-rankgpt-rerank) with ``OpenAILike``.

The peers run through their own packages, unmodified: the bench only builds their LLM
client (model, endpoint, temperature 0, a completion cap) and maps the documents they
return back to input indices. A peer whose packages are not installed is reported as
skipped, with the ``pip install`` line.

Every method talks to the endpoint through a loopback counting proxy
(:class:`UsageProxy`), so LLM calls and the server's prompt/completion token usage are
counted the same way for our methods and for the peers, without touching their code.
By default the endpoint is the embedded SmolLM2 model, served by the bench itself with
``python -m llama_cpp.server`` (:class:`EmbeddedServer`: started, waited for, always
stopped). Our methods read it in answer mode (citation by number carries no signal on
that model).

What is ranked (``--task``): a built-in task (``kv``, ``nq``, ``litm-kv``: one gold document
per instance) or a test collection in the field's formats (``beir``, ``trec``, ``rag``,
:mod:`..ir.collection`; the shipped BEIR fixture of held-out NQ questions without
``--data``), whose first stage is a run file (``--run``) or BM25 through bm25s at
``--depth``. Several relevant documents: the panners select ``k`` of them
(:func:`~._instances.choose_gp_k`: ``--gp-k``, else the median relevant count, reported).

Scoring (:mod:`._scoring`): every method's ``--top-n`` returned documents, then the other
candidates in first-stage order, so each is scored on a full ranking; a method that raised
returned nothing (the exception is counted). nDCG@10, MRR@10 and Recall@k through
ir-measures with 95% bootstrap intervals over queries, the paired nDCG@10 wins, losses and
ties against the first stage, and top-1 / top-3 with Wilson intervals
(:func:`wilson_interval`) when every query has one relevant document. Accuracy per round
for the panning methods follows ``bench real`` (:func:`.real.per_round_hits`): GP ranks by
posterior; PSC by votes with random tie-breaks drawn from its own generator, so PSC's
last-round value can differ from its top-1 column (the panner's own ranking) when votes
tie. ``--out DIR`` writes a TREC run file per method, the qrels, the JSON summary and the
Markdown tables (:mod:`._compare_report`), each atomically.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import http.client
import importlib.util
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

import numpy as np
from typing_extensions import Self

from .. import __version__
from .._jsonl import checkpoint_lines
from ..errors import CheckpointError, MissingExtraError
from ..ir.collection import FORMATS
from ..ir.metrics import wilson_interval
from ._instances import CompareInstance, complete_ranking, query_k

__all__ = [
    "ALL_METHODS",
    "DEFAULT_METHODS",
    "PEERS",
    "CompareInstance",
    "EmbeddedServer",
    "MethodOutcome",
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

logger = logging.getLogger(__name__)

COST_SAVING: dict[str, Any] = {"prune_below": None, "min_rounds": 1, "stop_at": 0.6, "prior_top10_recall": 0.5}
LATENCY_SETTING: dict[str, Any] = {"rounds": 2, "prompts_per_round": 3}
"""The README's latency setting: two rounds one after another, three prompts sent together in each."""
"""The README's recommended cost-saving settings (plus the base order as a rank prior)."""


@dataclass(frozen=True)
class PanningSpec:
    """One of our panning methods: how :func:`panning_method` builds its panner.

    Attributes:
        label: The name in tables.
        options: Keyword options of ``GoldPanner`` beyond the shared ones (reader, profile,
            rounds, k, ``on_failure="fallback"``, rng).
        rank_prior: Whether the base order is given as the rank prior (the integrations'
            default).
        default: Whether ``--methods`` runs it by default.
    """

    label: str
    options: Mapping[str, Any]
    rank_prior: bool
    default: bool = True


PANNING_METHODS: dict[str, PanningSpec] = {
    "psc": PanningSpec("PSC (policy=random)", {"policy": "random", "prior": "uniform"}, rank_prior=False),
    "gp-belief": PanningSpec("GP-Belief (integration defaults: base order as rank prior)", {}, rank_prior=True),
    "gp-cost": PanningSpec("GP, cost-saving settings", {k: COST_SAVING[k] for k in ("prune_below", "min_rounds", "stop_at")},
                           rank_prior=True),
    "gp-belief-flat": PanningSpec("GP-Belief, no prior (the reader alone)", {}, rank_prior=False, default=False),
    "gp-latency": PanningSpec(
        "GP, latency setting (2 rounds x 3 prompts)", dict(LATENCY_SETTING), rank_prior=True, default=False
    ),
}
"""Our panning methods, one line each: a new setting (e.g. the latency one) is one more entry."""

PANNING: tuple[str, ...] = tuple(PANNING_METHODS)
OURS: tuple[str, ...] = ("base", *PANNING)
PEER_METHODS = ("langchain-listwise", "llamaindex-llmrerank", "llamaindex-rankgpt")
ALL_METHODS: tuple[str, ...] = OURS + PEER_METHODS
DEFAULT_METHODS: tuple[str, ...] = tuple(
    m for m in ALL_METHODS if m not in PANNING_METHODS or PANNING_METHODS[m].default
)
LABELS = {
    "base": "base order",
    **{m: spec.label for m, spec in PANNING_METHODS.items()},
    "langchain-listwise": "LangChain LLMListwiseRerank + ChatOpenAI",
    "llamaindex-llmrerank": "LlamaIndex LLMRerank + OpenAILike",
    "llamaindex-rankgpt": "LlamaIndex RankGPTRerank + OpenAILike",
}

PEERS: dict[str, tuple[tuple[str, ...], str]] = {
    "langchain-listwise": (("langchain_classic", "langchain_openai"), "pip install langchain-classic langchain-openai"),
    "llamaindex-llmrerank": (
        ("llama_index.core", "llama_index.llms.openai_like"),
        "pip install llama-index-core llama-index-llms-openai-like",
    ),
    "llamaindex-rankgpt": (
        ("llama_index.core", "llama_index.llms.openai_like", "llama_index.postprocessor.rankgpt_rerank"),
        "pip install llama-index-llms-openai-like llama-index-postprocessor-rankgpt-rerank",
    ),
}
"""Peer -> (modules it needs, the install line shown when one is missing)."""

BUILTIN_TASKS = ("kv", "nq", "litm-kv")
COLLECTION_TASKS = FORMATS
"""Test collections in the field's formats (:mod:`..ir.collection`): a BEIR folder (the
shipped fixture without ``--data``), TREC topics/qrels/corpus files, RAG JSONL."""
TASKS = BUILTIN_TASKS + COLLECTION_TASKS
SPLITS = ("test", "calibration")
CHECKPOINT_FORMAT = 2
"""Rows of format 2 keep each method's ranking (scored on resume) and the fingerprint of
their instance; a format-1 checkpoint (0.4 and before) is refused."""
EMBEDDED_PROFILE = "smollm2-135m-kv"
EMBEDDED_TASK_PROFILES: dict[str, str] = {"nq": "smollm2-135m-nq-labelled"}
"""The embedded model's bundled profile measured on a task, where one ships: on ``nq`` the
one learned from 25 labelled calibration-split questions (it also carries the model's
measured ``blind_rate``/``false_leads`` and BM25's ``prior_head_decay``)."""
EMBEDDED_COLLECTION_PROFILE = "smollm2-135m-nq-labelled"
"""The embedded model's profile on a collection: passages answered as on NQ (override with
``--profile``)."""
EMBEDDED_MODEL = "SmolLM2-135M-Instruct"

_CHECKPOINT_KEYS = ("task", "split", "n", "seed", "rounds", "model", "mode", "profile", "top_n", "version",
                    "format", "data", "first_stage", "gp_k")
"""Settings a checkpoint must share with the run resuming it; ``version`` (the package's)
because a method's meaning can change between versions (``gp-belief`` gained the rank
prior in 0.3), so rows of another version are never mixed in silently; ``format`` the
row layout (:data:`CHECKPOINT_FORMAT`); ``data``/``first_stage``/``gp_k`` what a
collection run ranked and with which ``k``. Each row also carries its instance's
fingerprint, checked on resume."""


# ==================================================================================== tasks
def make_instances(
    task: str, *, n: int, instances: int, seed: int, data: str | Path | None = None, split: str = "test"
) -> list[CompareInstance]:
    """The evaluation instances of ``task`` (``kv``, ``nq``, ``litm-kv``), a pure
    function of its arguments.

    * ``kv``: synthetic one-sentence key-value facts (:class:`~..tasks.kv.KVTask`), the
      gold at a uniform random position; base order = input order.
    * ``nq``: an NQ question, its gold passage and the ``n - 1`` passages BM25 ranks
      highest for the question (without the answer); base order = BM25's order.
    * ``litm-kv``: Lost-in-the-Middle key-value retrieval (UUID keys and values), ``n``
      pairs of one record, the queried pair at a uniform random position.

    Collections (``beir``, ``trec``, ``rag``) are loaded by
    :func:`~..ir.collection.load_collection` and turned into instances by
    :func:`~._instances.collection_instances`.

    ``split`` picks the shipped NQ sample's questions: ``test`` (held out, the default)
    or ``calibration`` (for measuring a reader, e.g. labelled traces); other tasks and
    ``data`` files have no split.
    """
    if task in COLLECTION_TASKS:
        raise ValueError(f"--task {task} is a collection: load it with ir.collection.load_collection()")
    if split not in SPLITS:
        raise ValueError(f"--split must be one of {', '.join(SPLITS)}, got {split!r}")
    if split != "test" and (task != "nq" or data is not None):
        raise ValueError("--split calibration applies to the shipped NQ sample only (--task nq without --data)")
    if n < 2:
        raise ValueError(f"--n must be >= 2 documents, got {n!r}")
    if instances < 1:
        raise ValueError(f"--instances must be >= 1, got {instances!r}")
    rng = np.random.default_rng(seed)
    out = _make(task, n=n, instances=instances, rng=rng, data=data, split=split)
    return [replace(inst, index=i) for i, inst in enumerate(out)]


def _make(
    task: str, *, n: int, instances: int, rng: np.random.Generator, data: str | Path | None, split: str = "test"
) -> list[CompareInstance]:
    if task == "kv":
        from ..tasks.kv import KVTask

        kv = KVTask()
        out = []
        for _ in range(instances):
            inst = kv.make(n, gold_position=int(rng.integers(n)), rng=rng)
            out.append(CompareInstance(inst.question, list(inst.documents), inst.gold, inst.answers, "kv"))
        return out
    if task == "nq":
        if data is None:
            return _nq_sample_instances(n=n, instances=instances, rng=rng, split=split)
        return _nq_instances(_nq_items(data), n=n, instances=instances, rng=rng)
    if task == "litm-kv":
        return _litm_kv_instances(_litm_kv_records(data), n=n, instances=instances, rng=rng)
    raise ValueError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")


def _nq_sample_instances(
    *, n: int, instances: int, rng: np.random.Generator, split: str = "test"
) -> list[CompareInstance]:
    """Questions of the shipped NQ sample (``load_sample("nq")``, by default the held-out
    split ``test``; calibration uses the other split): the gold passage and its ``n - 1`` BM25-retrieved
    distractors, in the order BM25 over all shipped passages ranks them (the retriever's
    order; the gold is not always first)."""
    from ..tasks import BM25, load_sample

    sample = load_sample("nq")
    if n - 1 > min(len(q.distractors) for q in sample.questions):
        raise ValueError(f"the shipped NQ sample has {len(sample.questions[0].distractors)} distractors per question; use --n <= 21")
    bm25 = BM25([p.content for p in sample.passages])
    test = sample.split(split)
    out = []
    for qi in rng.choice(len(test), size=min(instances, len(test)), replace=False):
        q = test[int(qi)]
        ids = [q.gold, *q.distractors[: n - 1]]
        s = bm25.scores(q.question)
        ids.sort(key=lambda j: (-float(s[j]), j != q.gold))
        docs = [sample.passages[j].content for j in ids]
        out.append(CompareInstance(q.question, docs, (ids.index(q.gold),), tuple(q.answers), "nq"))
    return out


def _nq_items(data: str | Path) -> list[Any]:
    """NQ questions with their gold passage (``NQItem``) from a Lost-in-the-Middle NQ file
    given with ``--data`` (the larger source; by default the shipped sample is used)."""
    from ..tasks.nq import load_nq

    return load_nq(data)


def _litm_kv_records(data: str | Path | None) -> list[dict[str, Any]]:
    """Lost-in-the-Middle kv-retrieval records (``ordered_kv_records``, ``key``, ``value``):
    the shipped sample (``load_sample("kv")``), or a kv-retrieval file given with ``--data``."""
    if data is None:
        from ..tasks import load_sample

        return [
            {"key": ex.key, "value": ex.value, "ordered_kv_records": [list(r) for r in ex.records]}
            for ex in load_sample("kv").examples
        ]
    path = Path(data)
    if not path.is_file():
        raise FileNotFoundError(
            f"kv-retrieval data not found: {str(path)!r}; pass --data PATH to kv-retrieval-75_keys.jsonl.gz "
            "(nelson-liu/lost-in-the-middle)"
        )
    opener: Any = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _litm_kv_instances(
    records: Sequence[Mapping[str, Any]], *, n: int, instances: int, rng: np.random.Generator
) -> list[CompareInstance]:
    out = []
    picks = rng.choice(len(records), size=min(instances, len(records)), replace=False)
    for r in picks:
        rec = records[int(r)]
        key, value = str(rec["key"]), str(rec["value"])
        others = [(str(k), str(v)) for k, v in rec["ordered_kv_records"] if str(k) != key]
        if len(others) < n - 1:
            raise ValueError(f"a kv-retrieval record has {len(others) + 1} pairs; use --n <= {len(others) + 1}")
        chosen = [others[int(i)] for i in rng.choice(len(others), size=n - 1, replace=False)]
        g = int(rng.integers(n))
        chosen.insert(g, (key, value))
        docs = [f'"{k}": "{v}"' for k, v in chosen]
        question = f'What is the value associated with the key "{key}"?'
        out.append(CompareInstance(question, docs, (g,), (value,), "litm-kv"))
    return out


def _nq_instances(items: Sequence[Any], *, n: int, instances: int, rng: np.random.Generator) -> list[CompareInstance]:
    """Gold passage + the ``n - 1`` passages BM25 ranks highest for the question among
    the other questions' gold passages (those containing an answer, and repeats,
    skipped), in BM25 order (the retriever's order; the gold is often first)."""
    from ..ir.bm25 import BM25
    from ..readers.answer import token_matcher

    passages = [it.passage for it in items]
    bm25 = BM25(passages)
    out = []
    for qi in rng.choice(len(items), size=min(instances, len(items)), replace=False):
        item = items[int(qi)]
        s = bm25.scores(item.question)
        chosen: list[int] = []
        seen = {item.passage}
        for j in bm25.rank(item.question):
            if len(chosen) == n - 1:
                break
            if int(j) == int(qi) or passages[j] in seen:  # questions can share a passage
                continue
            if any(token_matcher(a, passages[j]) for a in item.answers):
                continue
            chosen.append(int(j))
            seen.add(passages[j])
        ids = sorted([int(qi), *chosen], key=lambda j: (-s[j], j != int(qi)))
        docs = [passages[j] for j in ids]
        out.append(CompareInstance(item.question, docs, (ids.index(int(qi)),), tuple(item.answers), "nq"))
    return out


# ============================================================================ usage proxy
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "accept-encoding", "upgrade",
        "proxy-connection", "te", "trailer"}


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Any

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._forward()

    def do_POST(self) -> None:
        self._forward()

    def _forward(self) -> None:
        proxy: UsageProxy = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
        headers["Accept-Encoding"] = "identity"
        path = self.path
        path = path.removeprefix(proxy.prefix)
        target = proxy.upstream_path + path
        is_llm = self.command == "POST" and path.rstrip("/").endswith(("/chat/completions", "/completions"))
        try:
            conn_cls = http.client.HTTPSConnection if proxy.scheme == "https" else http.client.HTTPConnection
            conn = conn_cls(proxy.host, proxy.port, timeout=proxy.timeout)
            try:
                conn.request(self.command, target, body=body or None, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                status, reason, rheaders = resp.status, resp.reason, resp.getheaders()
            finally:
                conn.close()
        except (OSError, http.client.HTTPException) as err:
            if is_llm:
                proxy._record(status=502, data=b"")
            msg = json.dumps({"error": {"message": f"bench proxy: upstream unreachable: {err}", "type": "proxy"}})
            self._reply(502, "Bad Gateway", [("Content-Type", "application/json")], msg.encode())
            return
        if is_llm:
            proxy._record(status=status, data=data)
        self._reply(status, reason, [(k, v) for k, v in rheaders if k.lower() not in _HOP], data)

    def _reply(self, status: int, reason: str, headers: Sequence[tuple[str, str]], data: bytes) -> None:
        try:
            self.send_response(status, reason)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client gave up (timeout); nothing to answer
            self.close_connection = True


class UsageProxy:
    """A loopback reverse proxy that counts LLM calls and the server's token usage.

    Every method (ours and the peers) is pointed at :attr:`base_url`; requests are
    forwarded unchanged to ``upstream`` and every ``POST .../chat/completions`` (or
    ``.../completions``) is counted with the ``usage`` of its response. Counting at the
    HTTP level needs no change to any peer and counts retries as calls.

    Args:
        upstream: The real endpoint root, e.g. ``"http://127.0.0.1:8080/v1"``.
        timeout: Seconds to wait for the upstream per request.
    """

    def __init__(self, upstream: str, *, timeout: float = 600.0) -> None:
        u = urllib.parse.urlsplit(upstream)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"base URL must be http(s)://host[:port]/path, got {upstream!r}")
        self.upstream = upstream
        self.scheme = u.scheme
        self.host = u.hostname
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.upstream_path = u.path.rstrip("/")
        self.prefix = "/v1"
        self.timeout = timeout
        self._lock = threading.Lock()
        self._stats = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "http_errors": 0, "usage_missing": 0}
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def _record(self, *, status: int, data: bytes) -> None:
        pt = ct = None
        if status < 400:
            with contextlib.suppress(ValueError, AttributeError, TypeError):
                usage = json.loads(data).get("usage") or {}
                pt, ct = usage.get("prompt_tokens"), usage.get("completion_tokens")
        with self._lock:
            s = self._stats
            s["calls"] += 1
            if status >= 400:
                s["http_errors"] += 1
            elif isinstance(pt, int) and isinstance(ct, int):
                s["prompt_tokens"] += pt
                s["completion_tokens"] += ct
            else:
                s["usage_missing"] += 1

    def stats(self) -> dict[str, int]:
        """Counters so far: ``calls``, ``prompt_tokens``, ``completion_tokens``,
        ``http_errors`` (status >= 400) and ``usage_missing`` (a 2xx without usage)."""
        with self._lock:
            return dict(self._stats)

    def start(self) -> Self:
        """Bind 127.0.0.1 on a free port and serve in a daemon thread."""
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _ProxyHandler)
        httpd.daemon_threads = True
        httpd.owner = self  # type: ignore[attr-defined]
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``, the endpoint every method is given."""
        if self._httpd is None:
            raise RuntimeError("the proxy is not running; call start() first")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}{self.prefix}"

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ========================================================================= embedded server
def free_port() -> int:
    """A free TCP port on 127.0.0.1 (bound and released; a tiny race remains)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def llama_server_command(
    model_path: str | Path, *, port: int, n_ctx: int = 8192, threads: int | None = None
) -> list[str]:
    """``python -m llama_cpp.server`` on loopback for ``model_path``."""
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path), "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", str(n_ctx)]
    if threads is not None:
        cmd += ["--n_threads", str(threads)]
    return cmd


def check_server_extra() -> None:
    """Raise :class:`MissingExtraError` unless llama-cpp-python and its server extra import."""
    for mod, pkg in (("llama_cpp", "llama-cpp-python"), ("uvicorn", "llama-cpp-python[server]"),
                     ("fastapi", "llama-cpp-python[server]"), ("sse_starlette", "llama-cpp-python[server]"),
                     ("starlette_context", "llama-cpp-python[server]"),
                     ("pydantic_settings", "llama-cpp-python[server]")):
        if importlib.util.find_spec(mod) is None:
            raise MissingExtraError(pkg, "compare", "Serving the embedded model for `bench compare`")


class EmbeddedServer:
    """Runs an OpenAI-compatible server as a child process for the length of a ``with``.

    Started with ``command`` (see :func:`llama_server_command`), its output to ``log``;
    ready when ``GET /v1/models`` answers 200 within ``ready_timeout`` seconds. Always
    stopped on exit, also on an error or Ctrl-C (terminate, then kill after 10 s).

    Args:
        command: The argv to run; the server must listen on ``port``.
        port: The port it listens on.
        log: File receiving the server's stdout and stderr.
        ready_timeout: Deadline in seconds for readiness.
        poll: Seconds between readiness checks.
    """

    def __init__(
        self, command: Sequence[str], *, port: int, log: str | Path, ready_timeout: float = 180.0, poll: float = 0.25
    ) -> None:
        self.command = list(command)
        self.port = port
        self.log = Path(log)
        self.ready_timeout = ready_timeout
        self.poll = poll
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def _ready(self) -> bool:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
        try:
            conn.request("GET", "/v1/models")
            return conn.getresponse().status == 200
        except (OSError, http.client.HTTPException):
            return False
        finally:
            conn.close()

    def _tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def start(self) -> Self:
        """Start the process and wait for readiness (raises RuntimeError naming the log)."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("wb") as fh:
            self.proc = subprocess.Popen(
                self.command, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
            )
        deadline = time.monotonic() + self.ready_timeout
        try:
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"the model server exited with code {self.proc.returncode} before it was ready; "
                        f"log {str(self.log)!r}:\n{self._tail()}"
                    )
                if self._ready():
                    return self
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"the model server was not ready within {self.ready_timeout:.0f} s on port {self.port}; "
                        f"log {str(self.log)!r}:\n{self._tail()}"
                    )
                time.sleep(self.poll)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Terminate the process (kill after 10 s); safe to call twice."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ================================================================================= methods
@dataclass
class MethodOutcome:
    """What one method returned for one instance.

    Attributes:
        ranking: Input indices best first (may be shorter than ``n`` for peers' top-n).
        per_round: Top-1 hit after each round (panning methods), shape ``(rounds,)``.
        round_tokens: Cumulative prompt tokens after each round (reader-reported),
            shape ``(rounds,)``.
        unusable: Model outputs that could not be used (failed rounds, empty results).
        note: Free text for the checkpoint (e.g. the stop reason).
    """

    ranking: list[int]
    per_round: list[float] | None = None
    round_tokens: list[int] | None = None
    unusable: int = 0
    note: str | None = None


MethodFn = Callable[[CompareInstance], MethodOutcome]
AsyncMethodFn = Callable[[CompareInstance], Coroutine[Any, Any, MethodOutcome]]


@dataclass(frozen=True)
class Endpoint:
    """Where the methods send their requests (the proxy's URL) and with what model."""

    base_url: str
    model: str
    api_key: str = "not-needed"
    timeout: float = 300.0
    peer_max_tokens: int = 512


def _per_round(result: Any, gold: Sequence[int], rounds: int, rng: np.random.Generator) -> tuple[list[float], list[int]]:
    from .real import per_round_hits

    hits = per_round_hits(result, gold, rng=rng, rounds=rounds)
    toks = np.cumsum([r.prompt_tokens for r in result.rounds]) if result.rounds else np.zeros(0)
    toks = np.concatenate([toks[:rounds], np.full(max(rounds - toks.size, 0), toks[-1] if toks.size else 0)])
    return [float(h) for h in hits], [int(t) for t in toks]


def panning_method(
    name: str,
    reader: Any,
    *,
    profile: Any,
    rounds: int,
    seed: int,
    k: int = 1,
    on_result: Callable[[Any, CompareInstance], None] | None = None,
) -> MethodFn:
    """One of our methods (an entry of :data:`PANNING_METHODS`) as ``instance ->
    outcome``; ``profile`` is a profile object, a bundled name or a path (resolved here,
    at the edge: the engine takes profile objects); ``k`` the relevant documents the
    panner selects. ``on_result(result, instance)`` is called with every finished panning
    result (``--traces``); a query with ``n <= k`` candidates pans with ``k = n - 1``
    (:func:`~._instances.query_k`). A method's generator is seeded by ``seed``, the instance and the
    method's position in :data:`ALL_METHODS` (new entries go last, so seeds stay put)."""
    from ..engine.config import PanningConfig
    from ..engine.panner import Panner
    from ..engine.priors import rank_prior_probs

    if name not in PANNING_METHODS:
        raise ValueError(f"{name!r} is not a panning method; choose one of {', '.join(PANNING)}")
    spec = PANNING_METHODS[name]
    if isinstance(profile, (str, Path)):
        from ..profiles import load_profile

        profile = load_profile(profile)
    head_decay = PanningConfig().with_profile(profile).prior_head_decay  # the profile's, else 0.6

    def run(inst: CompareInstance) -> MethodOutcome:
        rng = np.random.default_rng([seed, inst.index, ALL_METHODS.index(name)])
        kq = query_k(k, len(inst.documents))
        # a method's own rounds (gp-latency) win; without the rank prior, the flat one
        options = {"rounds": rounds, **({} if spec.rank_prior else {"retriever_prior": "none"}), **spec.options}
        panner = Panner(reader, profile=profile, k=kq, on_failure="fallback", rng=rng, **options)
        prior_probs = None
        if spec.rank_prior:  # the base order as the integrations' default rank prior
            prior_probs = rank_prior_probs(len(inst.documents), k=kq, top10_recall=COST_SAVING["prior_top10_recall"],
                                           head_decay=float(head_decay))  # type: ignore[arg-type]  # resolved
        res = panner.run(inst.question, inst.documents, prior_probs=prior_probs)
        if on_result is not None:
            on_result(res, inst)
        hits, toks = _per_round(res, inst.gold, rounds, rng)
        return MethodOutcome(
            ranking=[int(i) for i in res.ranking], per_round=hits, round_tokens=toks,
            unusable=res.failed_rounds, note=res.stop_reason,
        )

    run.__name__ = name
    return run


class TracesNotWritten(OSError):
    """``--traces`` could not be written: the run stops (the traces are what was asked for),
    instead of counting the failure as the method's miss."""


def _trace_writer(path: str | None) -> Callable[[Any, CompareInstance], None] | None:
    """``--traces``: an ``on_result`` that appends each result labelled with its gold. The
    file is opened once up front, so an unwritable path fails before any model call."""
    if not path:
        return None
    from ..traces import TraceWriter

    try:
        writer = TraceWriter(path)
        writer.path.parent.mkdir(parents=True, exist_ok=True)
        with open(writer.path, "a", encoding="utf-8"):
            pass
    except (OSError, ValueError) as err:
        raise TracesNotWritten(f"cannot write --traces {path!r}: {getattr(err, 'strerror', None) or err}") from err

    def write(result: Any, inst: CompareInstance) -> None:
        try:
            writer(result, relevant=list(inst.gold))
        except OSError as err:
            raise TracesNotWritten(
                f"cannot append to --traces {path!r}: {err.strerror or err}; the rows so far are in the checkpoint"
            ) from err

    return write


def base_method(inst: CompareInstance) -> MethodOutcome:
    """The base order: no model call."""
    return MethodOutcome(ranking=list(range(len(inst.documents))))


def peer_missing(name: str) -> str | None:
    """The install line when a peer's packages are missing, else None."""
    modules, hint = PEERS[name]
    for mod in modules:
        try:
            found = importlib.util.find_spec(mod) is not None
        except (ImportError, ValueError):  # a parent package is missing
            found = False
        if not found:
            return f"{mod} not installed ({hint})"
    return None


def _index_of(obj: Any, key: str) -> int | None:
    meta = getattr(obj, "metadata", None) or {}
    v = meta.get(key)
    return int(v) if isinstance(v, int) else None


def _node_index(node: Any) -> int | None:
    nid = str(getattr(node, "node_id", ""))
    return int(nid[len("gp-doc-"):]) if nid.startswith("gp-doc-") and nid[len("gp-doc-"):].isdigit() else None


def _mapped(items: Sequence[Any], get: Callable[[Any], int | None]) -> tuple[list[int], int]:
    """Indices of returned items in order (unknown or repeated ones dropped and counted)."""
    out: list[int] = []
    bad = 0
    for it in items:
        i = get(it)
        if i is None or i in out:
            bad += 1
            continue
        out.append(i)
    return out, bad


def peer_method(name: str, ep: Endpoint, *, top_n: int = 3) -> MethodFn:
    """A peer reranker, built from its own package, as ``instance -> outcome``.

    The peer returns its top ``top_n`` documents; those are the ranking. An empty result
    counts as an unusable output (a miss).
    """
    return peer_methods(name, ep, top_n=top_n)[0]


def peer_methods(name: str, ep: Endpoint, *, top_n: int = 3) -> tuple[MethodFn, AsyncMethodFn]:
    """A peer reranker as ``(instance -> outcome, async instance -> outcome)``: its sync
    call (``compress_documents`` / ``postprocess_nodes``) and its async one
    (``acompress_documents`` / ``apostprocess_nodes``), both from one peer object as
    :func:`peer_method` builds it."""
    if name == "langchain-listwise":
        from langchain_classic.retrievers.document_compressors import LLMListwiseRerank
        from langchain_core.documents import Document
        from langchain_openai import ChatOpenAI
        from pydantic import SecretStr

        llm = ChatOpenAI(
            model=ep.model, base_url=ep.base_url, api_key=SecretStr(ep.api_key), temperature=0,
            max_completion_tokens=ep.peer_max_tokens, timeout=ep.timeout,
        )
        reranker = LLMListwiseRerank.from_llm(llm, top_n=top_n)

        def lc_docs(inst: CompareInstance) -> list[Any]:
            return [Document(page_content=d, metadata={"gp_index": i}) for i, d in enumerate(inst.documents)]

        def lc_outcome(got: Sequence[Any]) -> MethodOutcome:
            ranking, bad = _mapped(list(got), lambda d: _index_of(d, "gp_index"))
            return MethodOutcome(ranking=ranking, unusable=int(not ranking) + bad)

        def run_lc(inst: CompareInstance) -> MethodOutcome:
            return lc_outcome(reranker.compress_documents(lc_docs(inst), inst.question))

        async def arun_lc(inst: CompareInstance) -> MethodOutcome:
            return lc_outcome(await reranker.acompress_documents(lc_docs(inst), inst.question))

        return run_lc, arun_lc
    if name in ("llamaindex-llmrerank", "llamaindex-rankgpt"):
        from llama_index.core.schema import NodeWithScore, TextNode
        from llama_index.llms.openai_like import OpenAILike

        li_llm = OpenAILike(
            model=ep.model, api_base=ep.base_url, api_key=ep.api_key, is_chat_model=True,
            context_window=8192, max_tokens=ep.peer_max_tokens, temperature=0.0, timeout=ep.timeout,
        )
        post: Any
        if name == "llamaindex-llmrerank":
            from llama_index.core.postprocessor import LLMRerank

            post = None  # choice_batch_size follows n (one call per query), set per instance
        else:
            from llama_index.postprocessor.rankgpt_rerank import RankGPTRerank

            post = RankGPTRerank(llm=li_llm, top_n=top_n)

        def li_post(inst: CompareInstance) -> Any:
            return post if post is not None else LLMRerank(
                llm=li_llm, top_n=top_n, choice_batch_size=len(inst.documents)
            )

        def li_nodes(inst: CompareInstance) -> list[Any]:
            # No metadata: both peers show node metadata to the model; the id is not shown.
            return [NodeWithScore(node=TextNode(text=d, id_=f"gp-doc-{i}"), score=None)
                    for i, d in enumerate(inst.documents)]

        def li_outcome(got: Sequence[Any]) -> MethodOutcome:
            ranking, bad = _mapped(list(got), lambda nw: _node_index(nw.node))
            return MethodOutcome(ranking=ranking, unusable=int(not ranking) + bad)

        def run_li(inst: CompareInstance) -> MethodOutcome:
            return li_outcome(li_post(inst).postprocess_nodes(li_nodes(inst), query_str=inst.question))

        async def arun_li(inst: CompareInstance) -> MethodOutcome:
            return li_outcome(await li_post(inst).apostprocess_nodes(li_nodes(inst), query_str=inst.question))

        return run_li, arun_li
    raise ValueError(f"unknown peer {name!r}; choose one of {', '.join(PEER_METHODS)}")


# =================================================================================== runner
class _Checkpoint:
    """JSONL: a meta line with the run's settings, then one line per (instance, method)."""

    def __init__(self, path: str | Path, meta: Mapping[str, Any]) -> None:
        self.path = Path(path)
        self.rows: dict[tuple[int, str], dict[str, Any]] = {}
        old_meta = None
        if self.path.exists():
            if not self.path.is_file():
                raise CheckpointError(f"checkpoint {str(self.path)!r} is not a regular file")
            for _, obj in checkpoint_lines(
                self.path,
                self.path.read_bytes(),
                corrupt=lambda lineno, err: CheckpointError(
                    f"checkpoint {str(self.path)!r} line {lineno} is corrupt ({err}); delete the file "
                    "to start over"
                ),
                torn="checkpoint %s: dropping a cut last line; that row reruns",
                log=logger,
                not_object="not a JSON object",
            ):
                if obj.get("type") == "meta":
                    old_meta = obj
                elif obj.get("type") == "row":
                    self.rows[(int(obj["instance"]), str(obj["method"]))] = obj
        if old_meta is not None:
            diff = [k for k in _CHECKPOINT_KEYS if old_meta.get(k) != meta.get(k)]
            if diff:
                shown = ", ".join(f"{k}: {old_meta.get(k)!r} in the file vs {meta.get(k)!r} now" for k in diff)
                raise CheckpointError(
                    f"checkpoint {str(self.path)!r} belongs to another comparison ({shown}); "
                    "use another --checkpoint path or delete the file"
                )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.path.open("a", encoding="utf-8")
        if old_meta is None:
            self.write({"type": "meta", **{k: meta.get(k) for k in _CHECKPOINT_KEYS}})

    def write(self, obj: Mapping[str, Any]) -> None:
        self._fh.write(json.dumps(obj) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


class _NoUsage:
    def stats(self) -> dict[str, int]:
        return {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "http_errors": 0, "usage_missing": 0}


def run_compare(
    instances: Sequence[CompareInstance],
    methods: Mapping[str, MethodFn],
    *,
    usage: Any = None,
    checkpoint: str | Path | None = None,
    meta: Mapping[str, Any] | None = None,
    progress: Callable[[int], None] | None = None,
    top_n: int | None = None,
) -> list[dict[str, Any]]:
    """Run every method on every instance, instance after instance; one row per pair.

    Args:
        instances: The evaluation instances (same for every method).
        methods: Name -> ``instance -> MethodOutcome``. An exception is recorded with
            its type, and the method returned nothing for that instance
            (``KeyboardInterrupt``/``SystemExit`` end the run).
        usage: Object with ``stats()`` (a :class:`UsageProxy`) read before and after
            each call; None counts nothing.
        checkpoint: JSONL path; finished pairs are appended and skipped on a rerun (a
            row made on other documents for that instance is an error).
        meta: Settings recorded in the checkpoint's meta line and checked on resume
            (keys in ``_CHECKPOINT_KEYS``).
        progress: Called with the number of finished pairs.
        top_n: How many returned documents count (:func:`~._instances.complete_ranking`);
            None: all of them.

    Returns:
        Rows ``{"instance", "qid", "fingerprint", "method", "ranking" (returned indices),
        "top1", "top3", "gold_rank" (on the completed ranking), "ranking_len",
        "per_round", "round_tokens", "calls", "prompt_tokens", "completion_tokens",
        "http_errors", "usage_missing", "seconds", "error", "error_message", "unusable",
        "same_as_base", "note"}`` in (instance, method) order.
    """
    usage = usage or _NoUsage()
    ck = _Checkpoint(checkpoint, meta or {}) if checkpoint is not None else None
    rows: list[dict[str, Any]] = []
    done = 0
    try:
        for i, inst in enumerate(instances):
            base_top = list(range(min(3, len(inst.documents))))
            fingerprint = inst.fingerprint()
            for name, fn in methods.items():
                if ck is not None and (i, name) in ck.rows:
                    old = ck.rows[(i, name)]
                    if old.get("fingerprint") != fingerprint:
                        raise CheckpointError(
                            f"checkpoint {str(ck.path)!r} holds a {name} row for instance {i} made on other documents "
                            f"(query {old.get('qid')!r}, now {inst.query_id!r}); use another --checkpoint path or "
                            "delete the file"
                        )
                    rows.append(old)
                    done += 1
                    if progress:
                        progress(done)
                    continue
                before = usage.stats()
                t0 = time.perf_counter()
                error = error_message = None
                try:
                    out = fn(inst)
                except TracesNotWritten:
                    raise
                except Exception as err:  # noqa: BLE001 - recorded with its type; the method returned nothing
                    logger.info("%s raised on instance %d: %s: %s", name, i, type(err).__name__, err)
                    error, error_message = type(err).__name__, str(err)[:300]
                    out = MethodOutcome(ranking=[])
                seconds = time.perf_counter() - t0
                after = usage.stats()
                n = len(inst.documents)
                full = complete_ranking(out.ranking, n, top_n=n if top_n is None else top_n)
                gold = set(inst.gold)
                rank = next((r for r, j in enumerate(full) if j in gold), None)
                row = {
                    "type": "row",
                    "instance": i,
                    "qid": inst.query_id,
                    "fingerprint": fingerprint,
                    "method": name,
                    "ranking": [int(j) for j in out.ranking],
                    "top1": rank is not None and rank < 1,
                    "top3": rank is not None and rank < 3,
                    "gold_rank": rank,
                    "ranking_len": len(out.ranking),
                    "per_round": out.per_round,
                    "round_tokens": out.round_tokens,
                    "seconds": round(seconds, 3),
                    "error": error,
                    "error_message": error_message,
                    "unusable": int(out.unusable),
                    "same_as_base": name != "base" and bool(out.ranking) and full[:3] == base_top,
                    "note": out.note,
                    **{k: after[k] - before[k] for k in after},
                }
                rows.append(row)
                if ck is not None:
                    ck.write(row)
                done += 1
                if progress:
                    progress(done)
    finally:
        if ck is not None:
            ck.close()
    return rows


def _per_query(rs: Sequence[Mapping[str, Any]], key: str, digits: int) -> float | None:
    """Mean of ``key`` over the rows, rounded to ``digits``; ``None`` for no rows."""
    return round(sum(r[key] for r in rs) / len(rs), digits) if rs else None


def _accuracy(rs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``top1``/``top3`` hit rates (``None`` for no rows) with their Wilson 95% intervals."""
    k = len(rs)
    out: dict[str, Any] = {}
    for key in ("top1", "top3"):
        hits = sum(bool(r[key]) for r in rs)
        out[key] = round(hits / k, 4) if k else None
        out[f"{key}_ci95"] = [round(x, 4) for x in wilson_interval(hits, k)]
    return out


def _failures(rs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Exception counts, types and first message; unusable, same-as-base, HTTP and usage counts."""
    return {
        "exceptions": sum(r["error"] is not None for r in rs),
        "exception_types": dict(Counter(r["error"] for r in rs if r["error"] is not None)),
        "first_error": next((f"{r['error']}: {r.get('error_message') or ''}" for r in rs if r["error"]), None),
        "unusable": sum(int(r["unusable"]) for r in rs),
        "same_as_base": sum(bool(r["same_as_base"]) for r in rs),
        "http_errors": sum(int(r.get("http_errors", 0)) for r in rs),
        "usage_missing": sum(int(r.get("usage_missing", 0)) for r in rs),
    }


def _round_means(rs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Mean top-1 and prompt tokens after each round over the rows that have them (``{}`` if none)."""
    pr = [r["per_round"] for r in rs if r.get("per_round")]
    if not pr:
        return {}
    rt = [r["round_tokens"] for r in rs if r.get("round_tokens")]
    return {
        "per_round": [round(float(x), 4) for x in np.mean(np.asarray(pr, dtype=float), axis=0)],
        "per_round_prompt_tokens": [round(float(x), 1) for x in np.mean(np.asarray(rt, dtype=float), axis=0)],
    }


def _summarize_method(rs: Sequence[Mapping[str, Any]], method: str) -> dict[str, Any]:
    """One method's summary (see :func:`summarize`) from its rows."""
    d: dict[str, Any] = {"status": "ran", "instances": len(rs), **_accuracy(rs)}
    d["calls_per_query"] = _per_query(rs, "calls", 3)
    d["prompt_tokens_per_query"] = _per_query(rs, "prompt_tokens", 1)
    d["completion_tokens_per_query"] = _per_query(rs, "completion_tokens", 1)
    d["seconds_per_query"] = _per_query(rs, "seconds", 2)
    d.update(_failures(rs))
    tok = d["prompt_tokens_per_query"]
    d["top1_per_1k_prompt_tokens"] = round(1000 * d["top1"] / tok, 4) if rs and tok else None
    if method in PANNING:
        d.update(_round_means(rs))
    return d


def summarize(
    rows: Sequence[Mapping[str, Any]],
    methods: Sequence[str],
    *,
    rounds: int,
    skipped: Mapping[str, str] | None = None,
    instances: Sequence[CompareInstance] | None = None,
    qrels: Mapping[str, Mapping[str, int]] | None = None,
    top_n: int | None = None,
    recall_k: int = 10,
    relevance_level: int = 1,
) -> dict[str, dict[str, Any]]:
    """Per-method results from the rows of :func:`run_compare`.

    With ``instances`` and ``qrels`` every method is also scored on its full ranking
    (:func:`~._scoring.score_methods`: nDCG@10, MRR@10, Recall@``recall_k`` with 95%
    intervals, and ``vs_first_stage``, the paired differences against ``base``); when a
    query has several relevant documents, top-1/top-3 are ``None`` (they are reported
    for one relevant document per query).

    Returns:
        ``{method: {"status", "instances", "top1", "top1_ci95", "top3", "top3_ci95",
        "per_round", "per_round_prompt_tokens", "calls_per_query",
        "prompt_tokens_per_query", "completion_tokens_per_query", "seconds_per_query",
        "top1_per_1k_prompt_tokens", "exceptions", "exception_types", "first_error", "unusable",
        "same_as_base", "http_errors", "usage_missing", and the metrics above}}``; a skipped
        method has only ``status`` and ``reason``.
    """
    skipped = dict(skipped or {})
    out: dict[str, dict[str, Any]] = {}
    for m in methods:
        if m in skipped:
            out[m] = {"status": "skipped", "reason": skipped[m]}
        else:
            out[m] = _summarize_method([r for r in rows if r["method"] == m], m)
    if instances is not None and qrels is not None:
        from ..ir.metrics import single_relevant
        from ._scoring import score_methods

        ran = [m for m in methods if m not in skipped]
        n = max((len(i.documents) for i in instances), default=1)
        scores = score_methods(rows, instances, qrels, ran, top_n=n if top_n is None else top_n, recall_k=recall_k,
                               relevance_level=relevance_level)
        single = single_relevant(qrels, relevance_level=relevance_level)
        for m in ran:
            out[m].update(scores.get(m, {}))
            if not single:
                out[m].update({"top1": None, "top1_ci95": None, "top3": None, "top3_ci95": None,
                               "top1_per_1k_prompt_tokens": None})
    return out


# ================================================================================ reporting
def format_markdown(
    summary: Mapping[str, Mapping[str, Any]], *, rounds: int, notes: Sequence[str] = (), base_label: str | None = None
) -> str:
    """The report's tables (:func:`~._compare_report.format_markdown`) with this bench's
    method labels; ``base_label`` names the first stage (``"first stage: BM25"``)."""
    from ._compare_report import format_markdown as _format

    labels = {**LABELS, "base": base_label} if base_label else LABELS
    return _format(summary, rounds=rounds, labels=labels, notes=notes)


def plot_compare(summary: Mapping[str, Mapping[str, Any]], path: str | Path, *, title: str = "") -> None:
    """Top-1 accuracy (nDCG@10 when queries have several relevant documents) against
    prompt tokens per query, one marker per method (95% CI bars); panning methods also as
    a curve through their top-1 by round."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise MissingExtraError("matplotlib", "plot", "Plotting the comparison") from err
    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    ran = [d for d in summary.values() if d["status"] == "ran"]
    key = "top1" if any(d.get("top1") is not None for d in ran) else "ndcg@10"
    for m, d in summary.items():
        if d["status"] != "ran" or d.get(key) is None:
            continue
        x, y = d["prompt_tokens_per_query"], d[key]
        lo, hi = d[f"{key}_ci95"]
        line = ax.errorbar([x], [y], yerr=[[y - lo], [hi - y]], fmt="o", capsize=3, label=LABELS.get(m, m))
        if key == "top1" and d.get("per_round") and d.get("per_round_prompt_tokens"):
            ax.plot(d["per_round_prompt_tokens"], d["per_round"], "-", alpha=0.5, color=line[0].get_color())
    ax.set_xlabel("prompt tokens per query (server usage)")
    ax.set_ylabel("top-1 accuracy" if key == "top1" else "nDCG@10")
    ax.set_ylim(-0.02, 1.02)
    if title:
        ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ====================================================================================== CLI
def register(sub: Any) -> None:
    p = sub.add_parser(
        "compare",
        help="Gold Panning vs LangChain/LlamaIndex LLM rerankers on the same instances and endpoint",
        description=(
            "Base order, PSC, GP-Belief and GP with cost-saving settings against LangChain "
            "LLMListwiseRerank and LlamaIndex LLMRerank / RankGPTRerank (through their own packages), "
            "on the same instances and the same OpenAI-compatible endpoint. By default the embedded "
            "SmolLM2 model, served by the bench on loopback with llama-cpp-python's server."
        ),
    )
    g = p.add_argument_group("endpoint")
    g.add_argument("--reader", choices=("embedded", "openai"), default="embedded",
                   help="embedded: serve the embedded SmolLM2 model on loopback (default); "
                        "openai: an OpenAI-compatible endpoint (--base-url, --model)")
    g.add_argument("--base-url", default=None, help="endpoint for --reader openai, e.g. http://127.0.0.1:8000/v1")
    g.add_argument("--model", default=None, help="model name for --reader openai")
    g.add_argument("--api-key", default=None, help="API key for --reader openai (default: $OPENAI_API_KEY)")
    g.add_argument("--model-path", default=None, help="GGUF file for --reader embedded (default: SmolLM2-135M)")
    g.add_argument("--mode", choices=("answer", "cite"), default=None,
                   help="how our methods read the model: answer (default for embedded) or cite (default for openai)")
    g.add_argument("--threads", type=int, default=None, help="CPU threads of the embedded server")
    g.add_argument("--n-ctx", type=int, default=8192, help="context of the embedded server (default 8192)")
    g.add_argument("--timeout", type=float, default=300.0, help="seconds per LLM request (default 300)")
    g.add_argument("--server-timeout", type=float, default=180.0, help="seconds to wait for the embedded server")
    g.add_argument("--server-log", default=None, help="log file of the embedded server (default: a temp file)")
    g.add_argument("--peer-max-tokens", type=int, default=512,
                   help="completion cap given to the peers' LLM clients (default 512)")
    p.add_argument("--task", choices=TASKS, default="kv",
                   help="kv (synthetic, default), nq, litm-kv (UUIDs); or a test collection: beir (a BEIR folder, "
                        "the shipped NQ fixture without --data), trec (--topics/--qrels/--corpus), rag (JSONL)")
    p.add_argument("--split", default="test",
                   help="nq: questions of the shipped NQ sample, test (held out, default) or calibration (to measure "
                        "a reader with --traces without touching the test questions); beir: the qrels file "
                        "qrels/<split>.tsv (default test)")
    p.add_argument("--traces", default=None, metavar="FILE",
                   help="append a labelled trace of every gp-belief run to FILE (JSONL; the gold is known), "
                        "for gold-panning calibrate --from-traces")
    p.add_argument("--data", default=None,
                   help="nq / litm-kv: a larger file in the Lost-in-the-Middle format (default: the samples shipped "
                        "in the package); beir: a BEIR folder (default: the shipped fixture nq-test-beir); rag: a "
                        "JSONL file, one {\"question\", \"passages\", \"relevant\"} per line")
    p.add_argument("--n", "--depth", dest="n", type=int, default=20,
                   help="documents per instance; for a collection the first stage's depth, the candidates each "
                        "method reranks (default 20)")
    p.add_argument("--instances", type=int, default=None,
                   help="instances (default 30; for a collection every judged query, else that many drawn with --seed)")
    p.add_argument("--seed", type=int, default=1, help="instance seed (default 1; calibration used 0)")
    p.add_argument("--rounds", type=int, default=8, help="rounds of the panning methods (default 8)")
    p.add_argument("--profile", default=None,
                   help="detector profile (default for embedded: smollm2-135m-nq-labelled on --task nq and on a "
                        "collection, smollm2-135m-kv otherwise; for openai: the reader's, else the generic one)")
    p.add_argument(
        "--methods",
        default=",".join(DEFAULT_METHODS),
        help=f"comma-separated subset of {','.join(ALL_METHODS)} (default: all but gp-belief-flat)",
    )
    p.add_argument("--top-n", type=int, default=None,
                   help="documents each method returns; the other candidates keep their first-stage order below "
                        "them, so every method is scored on a full ranking (default 3 on the built-in tasks, for "
                        "top-3; 10 on a collection, for nDCG@10)")
    c = p.add_argument_group("collections (--task beir, trec, rag)")
    c.add_argument("--topics", default=None, help="trec: topics file (qid<TAB>text, BEIR queries.jsonl or <top> SGML)")
    c.add_argument("--qrels", default=None, help="trec: qrels file (qid iteration docid relevance)")
    c.add_argument("--corpus", default=None,
                   help="trec: corpus file (docid<TAB>text as MS MARCO collection.tsv, or BEIR corpus.jsonl)")
    c.add_argument("--run", default=None,
                   help="beir, trec: first-stage TREC run file (qid Q0 docid rank score tag); its top --depth "
                        "documents per query are the candidates (default: BM25 over the corpus, through bm25s)")
    c.add_argument("--bm25-stemmer", default=None, metavar="NAME",
                   help="PyStemmer algorithm for the BM25 first stage, e.g. english (default: no stemming, as "
                        "the shipped NQ sample was built)")
    c.add_argument("--gp-k", default="auto", type=_gp_k,
                   help="relevant documents the panning methods select: auto (default: 1 on the built-in tasks; "
                        "on a collection the median number of relevant candidates per query, reported) or N")
    c.add_argument("--relevance-level", type=int, default=1,
                   help="lowest grade the binary metrics (MRR, recall, top-1/3) count as relevant (default 1; "
                        "TREC DL papers use 2)")
    c.add_argument("--recall-k", type=int, default=10, help="cutoff of Recall@k (default 10)")
    p.add_argument("--checkpoint", default=None, help="JSONL of finished (instance, method) pairs, for resuming")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="write runs/<method>.trec (TREC run files), qrels.trec (the judgements scored), summary.json "
                        "and table.md here, each atomically")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the tables")
    p.add_argument("--plot", default=None, help="write accuracy vs prompt tokens here (PNG; needs matplotlib)")
    p.set_defaults(func=main)


def _gp_k(text: str) -> int | None:
    """``--gp-k``: ``auto`` (None) or an integer >= 1."""
    if text.strip().lower() == "auto":
        return None
    try:
        k = int(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected auto or an integer >= 1, got {text!r}") from err
    if k < 1:
        raise argparse.ArgumentTypeError(f"expected auto or an integer >= 1, got {text!r}")
    return k


def _methods(arg: str) -> list[str]:
    names = [m.strip() for m in arg.split(",") if m.strip()]
    bad = [m for m in names if m not in ALL_METHODS]
    if bad or not names:
        raise ValueError(f"unknown method(s) {', '.join(bad) or '(none)'}; choose from {', '.join(ALL_METHODS)}")
    return list(dict.fromkeys(names))


@contextlib.contextmanager
def _endpoint(args: argparse.Namespace) -> Iterator[tuple[str, str, str]]:
    """``(upstream base URL, model name, api key)``; serves the embedded model when asked
    (its port and log are written to stderr and kept in ``args.server_info``)."""
    if args.reader == "openai":
        if not args.base_url and not (args.api_key or os.environ.get("OPENAI_API_KEY")):
            raise ValueError("--reader openai needs --base-url URL (or an API key for api.openai.com)")
        if not args.model:
            raise ValueError("--reader openai needs --model NAME")
        yield (args.base_url or "https://api.openai.com/v1", args.model,
               args.api_key or os.environ.get("OPENAI_API_KEY") or "not-needed")
        return
    check_server_extra()
    from ..readers.local import default_model_path

    model_path = Path(args.model_path) if args.model_path else default_model_path()
    port = free_port()
    log = Path(args.server_log) if args.server_log else Path(
        os.environ.get("TMPDIR", "/tmp")) / f"gold-panning-compare-server-{port}.log"
    server = EmbeddedServer(
        llama_server_command(model_path, port=port, n_ctx=args.n_ctx, threads=args.threads),
        port=port, log=log, ready_timeout=args.server_timeout,
    )
    args.server_info = {"command": "python -m llama_cpp.server", "port": port, "log": str(log), "n_ctx": args.n_ctx}
    sys.stderr.write(f"bench compare: serving {model_path.name} at {server.base_url} (log: {log})\n")
    with server:
        sys.stderr.write(f"bench compare: server ready on port {port}\n")
        yield server.base_url, EMBEDDED_MODEL, "not-needed"
    sys.stderr.write(f"bench compare: server on port {port} stopped\n")


def _progress(total: int) -> tuple[Callable[[int], None], Callable[[], None]]:
    try:
        from tqdm import tqdm
    except ImportError:
        from .._console import Progress

        bar = Progress(total, label="bench compare")
        return bar.update, bar.close
    t = tqdm(total=total, desc="bench compare", file=sys.stderr, mininterval=1.0 if sys.stderr.isatty() else 30.0)

    def update(done: int) -> None:
        t.update(done - t.n)

    return update, t.close


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@dataclass(frozen=True)
class _Plan:
    """What a run ranks and how it is scored, derived from the CLI options."""

    instances: list[CompareInstance]
    qrels: dict[str, dict[str, int]]
    top_n: int
    gp: Any  # _instances.GPKChoice
    data: str | None
    first_stage: str | None
    notes: list[str]
    left_out: dict[str, str]


def _plan(args: argparse.Namespace) -> _Plan:
    """Load the task or collection, draw the instances, choose ``k`` and ``--top-n``."""
    from ._instances import choose_gp_k, collection_instances, instance_qrels

    for opt, value in (("--top-n", args.top_n), ("--recall-k", args.recall_k), ("--relevance-level", args.relevance_level)):
        if value is not None and value < 1:
            raise ValueError(f"{opt} must be >= 1, got {value!r}")  # checked before any model call
    collection = None
    if args.task in COLLECTION_TASKS:
        from ..ir.collection import load_collection

        collection = load_collection(args.task, data=args.data, split=args.split, topics=args.topics,
                                     qrels=args.qrels, corpus=args.corpus, run=args.run, depth=args.n)
        instances, without = collection_instances(
            collection, depth=args.n, instances=args.instances, seed=args.seed,
            relevance_level=args.relevance_level, stemmer=args.bm25_stemmer, task=args.task,
        )
        left_out = {**collection.left_out, **without}
        first: str | None = ("BM25 (bm25s)" if collection.first_stage == "bm25" else collection.first_stage) + (
            f", stemmer {args.bm25_stemmer}" if args.bm25_stemmer else "")
        data: str | None = (str(args.data) if args.data
                            else f"{args.topics} {args.qrels} {args.corpus}" if args.topics else "fixture")
        top_n = 10 if args.top_n is None else args.top_n
    else:
        if any(getattr(args, k) is not None for k in ("topics", "qrels", "corpus", "run", "bm25_stemmer")):
            raise ValueError("--topics/--qrels/--corpus/--run/--bm25-stemmer apply to --task beir, trec or rag")
        instances = make_instances(args.task, n=args.n, instances=30 if args.instances is None else args.instances,
                                   seed=args.seed, data=args.data, split=args.split)
        left_out, first, data = {}, None, (str(args.data) if args.data else None)
        top_n = 3 if args.top_n is None else args.top_n
    gp = choose_gp_k(args.gp_k, instances, collection=collection)
    n_max = max(len(i.documents) for i in instances)
    if args.gp_k is not None and args.gp_k >= n_max:
        raise ValueError(f"--gp-k {args.gp_k} must be below the number of candidates (at most {n_max} here)")
    qrels = instance_qrels(instances, collection)
    notes = [f"{len(instances)} queries" + (f" of {collection.name}" if collection else "")
             + (f"; {len(left_out)} left out (e.g. {next(iter(left_out))!r}: {next(iter(left_out.values()))})"
                if left_out else ""),
             f"each method's top {top_n} ranked, the other candidates in first-stage order below them",
             f"GP's k = {gp.how}"]
    if collection is not None:
        found = [len(i.gold) / max(1, sum(g >= args.relevance_level for g in qrels[i.query_id].values()))
                 for i in instances]
        notes.insert(1, f"first stage: {first}, depth {args.n}; its recall@{args.n} (every method's ceiling): "
                        f"{sum(found) / len(found):.2f}")
    notes.append("intervals: 95% percentile bootstrap over queries (top-1/top-3: Wilson); paired differences "
                 "against the first stage per query")
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


def main(args: argparse.Namespace) -> int:
    from ..profiles import load_profile, resolve_profile
    from ..readers.openai import OpenAIReader

    methods = _methods(args.methods)
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        raise MissingExtraError("matplotlib", "plot", "--plot")
    from ..ir.metrics import _ir_measures

    _ir_measures()  # the scoring's library, checked before any model call
    skipped = {m: why for m in methods if m in PEER_METHODS and (why := peer_missing(m)) is not None}
    for m, why in skipped.items():
        sys.stderr.write(f"bench compare: skipping {m}: {why}\n")
    plan = _plan(args)
    instances = plan.instances
    out_dir = _out_dir(args.out)
    traces = _trace_writer(getattr(args, "traces", None))
    embedded = args.reader == "embedded"
    mode: Literal["cite", "answer"] = args.mode or ("answer" if embedded else "cite")
    old_term = signal.signal(signal.SIGTERM, _raise_interrupt)  # SIGTERM stops the server too
    t_start = time.perf_counter()
    try:
        with _endpoint(args) as (upstream, model, key), UsageProxy(upstream, timeout=args.timeout) as proxy:
            reader = OpenAIReader(
                model=model, base_url=proxy.base_url, api_key=key, mode=mode, temperature=0.0,
                max_tokens=32 if mode == "answer" else 256, timeout=args.timeout,
            )
            if args.profile:
                profile, profile_name = load_profile(args.profile), args.profile
            elif embedded:
                profile_name = (EMBEDDED_COLLECTION_PROFILE if args.task in COLLECTION_TASKS
                                else EMBEDDED_TASK_PROFILES.get(args.task, EMBEDDED_PROFILE))
                profile = load_profile(profile_name)
            else:
                from ..profiles import GENERIC_PROFILE

                profile = resolve_profile(None, reader=reader)
                profile_name = str(getattr(reader, "recommended_profile", None) or GENERIC_PROFILE)
            ep = Endpoint(proxy.base_url, model, key, timeout=args.timeout, peer_max_tokens=args.peer_max_tokens)
            fns: dict[str, MethodFn] = {}
            for m in methods:
                if m in skipped:
                    continue
                if m == "base":
                    fns[m] = base_method
                elif m in PANNING:
                    on_result = traces if m == "gp-belief" else None
                    fns[m] = panning_method(m, reader, profile=profile, rounds=args.rounds, seed=args.seed,
                                            k=plan.gp.k, on_result=on_result)
                else:
                    fns[m] = peer_method(m, ep, top_n=plan.top_n)
            meta = {"task": args.task, "split": args.split, "n": args.n, "seed": args.seed, "rounds": args.rounds,
                    "model": model, "mode": mode, "profile": profile_name, "top_n": plan.top_n, "version": __version__,
                    "format": CHECKPOINT_FORMAT, "data": plan.data, "first_stage": plan.first_stage, "gp_k": plan.gp.k}
            update, close = _progress(len(instances) * len(fns))
            try:
                rows = run_compare(instances, fns, usage=proxy, checkpoint=args.checkpoint, meta=meta,
                                   progress=update, top_n=plan.top_n)
            finally:
                close()
    finally:
        signal.signal(signal.SIGTERM, old_term)
    summary = summarize(rows, methods, rounds=args.rounds, skipped=skipped, instances=instances, qrels=plan.qrels,
                        top_n=plan.top_n, recall_k=args.recall_k, relevance_level=args.relevance_level)
    res = {
        **meta, "instances": len(instances), "endpoint": getattr(args, "server_info", None) or upstream,
        "seconds": round(time.perf_counter() - t_start, 1), "cost_saving": COST_SAVING,
        "gp_k_how": plan.gp.how, "relevance_level": args.relevance_level, "left_out": plan.left_out,
        "notes": plan.notes, "methods": summary,
    }
    base_label = f"first stage: {plan.first_stage}" if plan.first_stage else None
    markdown = format_markdown(summary, rounds=args.rounds, notes=plan.notes, base_label=base_label)
    if out_dir is not None:
        from ._compare_report import write_outputs

        write_outputs(out_dir, rows=rows, instances=instances, qrels=plan.qrels,
                      methods=[m for m in methods if m not in skipped],
                      top_n=plan.top_n, summary=res, markdown=markdown)
        sys.stderr.write(f"bench compare: wrote runs/*.trec, qrels.trec, summary.json and table.md to {out_dir}\n")
    if args.plot:
        plot_compare(summary, args.plot, title=f"{model}, {args.task}, n={args.n}, {len(instances)} instances")
    if args.json:
        from .._console import print_json

        print_json(res)
        return 0
    print(
        f"bench compare: task {args.task}, n={args.n}, {len(instances)} instances, seed {args.seed}, model {model} "
        f"({mode} mode for ours, profile {profile_name}), {args.rounds} rounds, {res['seconds']} s"
    )
    print()
    print(markdown)
    return 0
