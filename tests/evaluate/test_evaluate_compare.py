"""`gold-panning bench compare`: statistics, the counting proxy, the runner and its
checkpoint, tasks, the embedded-server lifecycle, and the CLI end to end against the
loopback fake OpenAI server (the real peers when installed)."""

from __future__ import annotations

import argparse
import gzip
import importlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import openai
import pytest
from compare_fakes import COMPLETION_TOKENS, PROMPT_TOKENS, kv_model
from openai_server import FakeOpenAIServer, RecordedRequest, dynamic, ok, status

from gold_panning_integrations.errors import CheckpointError, NativeCrashError
from gold_panning_integrations.evaluate import _methods
from gold_panning_integrations.evaluate import compare as C

# ----------------------------------------------------------------------------- Wilson CIs
# Hand computation, z = 1.96, z^2 = 3.8416, n = 30: denominator 1 + z^2/n = 1.1280533.
# 0/30: centre = (z^2/60)/1.1280533 = 0.0567590, half = z*sqrt(z^2/3600)/1.1280533 = 0.0567590.
# 15/30: centre 0.5, half = 1.96*sqrt(0.25/30 + 3.8416/3600)/1.1280533 = 0.1684609.


def test_wilson_zero_of_thirty_has_a_nonempty_upper_bound() -> None:
    assert C.wilson_interval(0, 30) == pytest.approx((0.0, 0.1135180), abs=1e-6)


def test_wilson_half_of_thirty() -> None:
    assert C.wilson_interval(15, 30) == pytest.approx((0.3315391, 0.6684609), abs=1e-6)


def test_wilson_all_of_thirty_mirrors_zero() -> None:
    assert C.wilson_interval(30, 30) == pytest.approx((0.8864820, 1.0), abs=1e-6)


def test_wilson_no_trials_is_the_whole_interval() -> None:
    assert C.wilson_interval(0, 0) == (0.0, 1.0)


def test_wilson_rejects_more_successes_than_trials() -> None:
    with pytest.raises(ValueError, match="successes <= trials"):
        C.wilson_interval(4, 3)


# ----------------------------------------------------------------------------- proxy
def _client(proxy: C.UsageProxy) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0, timeout=10)


def _chat(client: openai.OpenAI, text: str = "hi") -> Any:
    return client.chat.completions.create(model="m", messages=[{"role": "user", "content": text}])


def test_proxy_counts_calls_and_the_servers_token_usage() -> None:
    with FakeOpenAIServer() as srv, C.UsageProxy(srv.base_url) as proxy:
        srv.script(
            ok("a", prompt_tokens=120, completion_tokens=7), ok("b", prompt_tokens=30, completion_tokens=3)
        )
        client = _client(proxy)
        _chat(client)
        _chat(client)
        stats = proxy.stats()
    assert (stats["calls"], stats["prompt_tokens"], stats["completion_tokens"]) == (2, 150, 10)


def test_proxy_forwards_the_request_body_unchanged() -> None:
    with FakeOpenAIServer() as srv, C.UsageProxy(srv.base_url) as proxy:
        _chat(_client(proxy), "which document?")
        [req] = srv.requests
    assert req.messages == [{"role": "user", "content": "which document?"}]


def test_proxy_forwards_the_api_key() -> None:
    with FakeOpenAIServer(api_key="sk-test") as srv, C.UsageProxy(srv.base_url) as proxy:
        reply = _chat(_client(proxy))
    assert reply.choices[0].message.content is not None


def test_proxy_returns_the_upstream_response_body() -> None:
    with FakeOpenAIServer(default=ok("the answer")) as srv, C.UsageProxy(srv.base_url) as proxy:
        reply = _chat(_client(proxy))
    assert reply.choices[0].message.content == "the answer"


def test_proxy_counts_an_http_error_as_a_call_without_tokens() -> None:
    with FakeOpenAIServer() as srv, C.UsageProxy(srv.base_url) as proxy:
        srv.script(status(400, message="bad response_format"))
        with pytest.raises(openai.BadRequestError):
            _chat(_client(proxy))
        stats = proxy.stats()
    assert (stats["calls"], stats["http_errors"], stats["prompt_tokens"]) == (1, 1, 0)


def test_proxy_counts_a_reply_without_usage() -> None:
    with (
        FakeOpenAIServer(default=ok("x", prompt_tokens=None, completion_tokens=None)) as srv,
        C.UsageProxy(srv.base_url) as proxy,
    ):
        _chat(_client(proxy))
        stats = proxy.stats()
    assert stats["usage_missing"] == 1


def test_proxy_answers_502_when_the_upstream_is_unreachable() -> None:
    port = C.free_port()  # nothing listens there
    with (
        C.UsageProxy(f"http://127.0.0.1:{port}/v1", timeout=2) as proxy,
        pytest.raises(openai.InternalServerError, match="upstream unreachable"),
    ):
        _chat(_client(proxy))


def test_proxy_rejects_a_url_without_scheme() -> None:
    with pytest.raises(ValueError, match="base URL must be http"):
        C.UsageProxy("localhost:8000/v1")


# ----------------------------------------------------------------------------- runner
def _instances(k: int = 3, n: int = 5, gold: int = 2) -> list[C.CompareInstance]:
    return [
        C.CompareInstance(f"q{i}", [f"d{j}" for j in range(n)], (gold,), task="kv", index=i) for i in range(k)
    ]


def _fixed(ranking: list[int], log: list[str] | None = None, name: str = "") -> C.MethodFn:
    def fn(inst: C.CompareInstance) -> C.MethodOutcome:
        if log is not None:
            log.append(f"{name}:{inst.index}")
        return C.MethodOutcome(ranking=list(ranking))

    return fn


def _raises(exc: BaseException) -> C.MethodFn:
    def fn(inst: C.CompareInstance) -> C.MethodOutcome:
        raise exc

    return fn


def test_gold_first_is_a_top1_hit() -> None:
    rows = C.run_compare(_instances(1), {"a": _fixed([2, 0, 1])})
    assert rows[0]["top1"] is True


def test_gold_third_is_a_top3_hit_but_not_top1() -> None:
    rows = C.run_compare(_instances(1), {"b": _fixed([0, 1, 2])})
    assert (rows[0]["top1"], rows[0]["top3"], rows[0]["gold_rank"]) == (False, True, 2)


def test_gold_fourth_misses_top3() -> None:
    rows = C.run_compare(_instances(1), {"b": _fixed([0, 1, 3, 2])})
    assert rows[0]["top3"] is False


def test_an_exception_is_recorded_with_its_type_and_returns_nothing() -> None:
    rows = C.run_compare(_instances(1), {"c": _raises(TimeoutError("slow server"))})
    assert (rows[0]["ranking"], rows[0]["error"], rows[0]["error_message"]) == (
        [],
        "TimeoutError",
        "slow server",
    )


def test_an_empty_ranking_keeps_the_base_order() -> None:
    # nothing returned: every candidate keeps its base position (gold 2 -> rank 2)
    rows = C.run_compare(_instances(1), {"e": _fixed([])})
    assert (rows[0]["top1"], rows[0]["top3"], rows[0]["gold_rank"], rows[0]["same_as_base"]) == (
        False,
        True,
        2,
        False,
    )


def test_only_the_top_n_returned_count() -> None:
    # top_n=1: the method's first document (4), then the base order 0, 1, 2, 3: the gold (2) it ranked second is 4th
    rows = C.run_compare(_instances(1), {"m": _fixed([4, 2])}, top_n=1)
    assert (rows[0]["gold_rank"], rows[0]["ranking"]) == (3, [4, 2])


def test_same_top3_as_the_base_order_is_flagged() -> None:
    rows = C.run_compare(_instances(1), {"fallback": _fixed([0, 1, 2, 3])})
    assert rows[0]["same_as_base"] is True


class _Usage:
    """Counters a method advances, as the proxy would."""

    def __init__(self) -> None:
        self.s = {
            "calls": 0,
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "http_errors": 0,
            "usage_missing": 0,
        }

    def stats(self) -> dict[str, int]:
        return dict(self.s)


def test_usage_is_the_difference_around_each_call() -> None:
    usage = _Usage()

    def spend(inst: C.CompareInstance) -> C.MethodOutcome:
        usage.s["calls"] += 2
        usage.s["prompt_tokens"] += 300
        return C.MethodOutcome(ranking=[2])

    rows = C.run_compare(_instances(2), {"base": _fixed([0]), "spend": spend}, usage=usage)
    assert [(r["method"], r["calls"], r["prompt_tokens"]) for r in rows] == [
        ("base", 0, 0),
        ("spend", 2, 300),
        ("base", 0, 0),
        ("spend", 2, 300),
    ]


# ----------------------------------------------------------------------------- checkpoint
META = {
    "task": "kv",
    "n": 5,
    "seed": 1,
    "rounds": 3,
    "model": "m",
    "mode": "answer",
    "profile": "p",
    "top_n": 3,
}


def _strip(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


def test_resume_runs_only_the_unfinished_pairs(tmp_path: Path) -> None:
    ck = tmp_path / "ck.jsonl"
    insts = _instances(3)
    interrupted: dict[str, C.MethodFn] = {"a": _fixed([2]), "b": _fixed([0, 2])}

    def b_then_stop(inst: C.CompareInstance) -> C.MethodOutcome:
        if inst.index == 1:
            raise KeyboardInterrupt
        return C.MethodOutcome(ranking=[0, 2])

    interrupted["b"] = b_then_stop
    with pytest.raises(KeyboardInterrupt):
        C.run_compare(insts, interrupted, checkpoint=ck, meta=META)
    log: list[str] = []
    C.run_compare(
        insts, {"a": _fixed([2], log, "a"), "b": _fixed([0, 2], log, "b")}, checkpoint=ck, meta=META
    )
    assert log == ["b:1", "a:2", "b:2"]


def test_a_resumed_run_equals_an_uninterrupted_one(tmp_path: Path) -> None:
    insts = _instances(3)
    full = C.run_compare(
        insts, {"a": _fixed([2]), "b": _fixed([0, 2])}, checkpoint=tmp_path / "full.jsonl", meta=META
    )
    ck = tmp_path / "ck.jsonl"
    C.run_compare(insts[:1], {"a": _fixed([2]), "b": _fixed([0, 2])}, checkpoint=ck, meta=META)
    resumed = C.run_compare(insts, {"a": _fixed([2]), "b": _fixed([0, 2])}, checkpoint=ck, meta=META)
    assert _strip(resumed) == _strip(full)


def test_a_checkpoint_of_other_settings_is_refused(tmp_path: Path) -> None:
    ck = tmp_path / "ck.jsonl"
    C.run_compare(_instances(1), {"a": _fixed([2])}, checkpoint=ck, meta=META)
    with pytest.raises(CheckpointError, match="n: 5 in the file vs 10 now"):
        C.run_compare(_instances(1), {"a": _fixed([2])}, checkpoint=ck, meta={**META, "n": 10})


def test_a_checkpoint_of_another_package_version_is_refused(tmp_path: Path) -> None:
    # "gp-belief" meant no prior in 0.2 and the rank prior in 0.3: rows must not mix.
    ck = tmp_path / "ck.jsonl"
    C.run_compare(_instances(1), {"a": _fixed([2])}, checkpoint=ck, meta={**META, "version": "0.2.0"})
    with pytest.raises(CheckpointError, match="version: '0.2.0' in the file vs '0.3.0' now"):
        C.run_compare(_instances(1), {"a": _fixed([2])}, checkpoint=ck, meta={**META, "version": "0.3.0"})


def test_a_cut_last_line_is_dropped_and_that_pair_reruns(tmp_path: Path) -> None:
    ck = tmp_path / "ck.jsonl"
    C.run_compare(_instances(2), {"a": _fixed([2])}, checkpoint=ck, meta=META)
    text = ck.read_text()
    ck.write_text(text[: len(text) - 20])  # a kill in the middle of the last write
    log: list[str] = []
    C.run_compare(_instances(2), {"a": _fixed([2], log, "a")}, checkpoint=ck, meta=META)
    assert log == ["a:1"]


def test_a_corrupt_line_before_the_end_is_an_error(tmp_path: Path) -> None:
    ck = tmp_path / "ck.jsonl"
    C.run_compare(_instances(2), {"a": _fixed([2])}, checkpoint=ck, meta=META)
    lines = ck.read_text().splitlines()
    lines[1] = "{not json"
    ck.write_text("\n".join(lines) + "\n")
    with pytest.raises(CheckpointError, match="line 2 is corrupt"):
        C.run_compare(_instances(2), {"a": _fixed([2])}, checkpoint=ck, meta=META)


# ----------------------------------------------------------------------------- summary
def _row(method: str, top1: bool, top3: bool, **kw: Any) -> dict[str, Any]:
    base = {
        "method": method,
        "top1": top1,
        "top3": top3,
        "calls": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "seconds": 0.0,
        "error": None,
        "unusable": 0,
        "same_as_base": False,
        "per_round": None,
        "round_tokens": None,
    }
    return {**base, **kw}


def test_summary_accuracy_and_wilson_interval() -> None:
    rows = [_row("m", True, True), _row("m", False, True), _row("m", False, False)]
    s = C.summarize(rows, ["m"], rounds=1)["m"]
    assert (s["top1"], s["top1_ci95"]) == (0.3333, [round(x, 4) for x in C.wilson_interval(1, 3)])


def test_summary_means_per_query() -> None:
    rows = [
        _row("m", True, True, calls=8, prompt_tokens=400),
        _row("m", True, True, calls=2, prompt_tokens=100),
    ]
    s = C.summarize(rows, ["m"], rounds=1)["m"]
    assert (s["calls_per_query"], s["prompt_tokens_per_query"]) == (5.0, 250.0)


def test_summary_counts_exception_types() -> None:
    rows = [
        _row("m", False, False, error="OpenAIAPIError"),
        _row("m", False, False, error="OpenAIAPIError"),
        _row("m", False, False, error="ValueError"),
    ]
    s = C.summarize(rows, ["m"], rounds=1)["m"]
    assert s["exception_types"] == {"OpenAIAPIError": 2, "ValueError": 1}


def test_summary_averages_accuracy_per_round() -> None:
    rows = [
        _row("gp-belief", True, True, per_round=[0.0, 1.0], round_tokens=[100, 200]),
        _row("gp-belief", True, True, per_round=[1.0, 1.0], round_tokens=[100, 150]),
    ]
    s = C.summarize(rows, ["gp-belief"], rounds=2)["gp-belief"]
    assert (s["per_round"], s["per_round_prompt_tokens"]) == ([0.5, 1.0], [100.0, 175.0])


def test_a_skipped_peer_is_reported_as_skipped_not_failed() -> None:
    s = C.summarize([], ["llamaindex-rankgpt"], rounds=1, skipped={"llamaindex-rankgpt": "not installed"})
    assert s["llamaindex-rankgpt"] == {"status": "skipped", "reason": "not installed"}


def test_markdown_shows_a_skipped_peer() -> None:
    s = C.summarize([], ["llamaindex-rankgpt"], rounds=1, skipped={"llamaindex-rankgpt": "pip install x"})
    assert "| LlamaIndex RankGPTRerank + OpenAILike | skipped: pip install x |" in C.format_markdown(s)


def test_markdown_has_a_per_round_table_for_panning_methods() -> None:
    rows = [_row("gp-belief", True, True, per_round=[0.0, 1.0], round_tokens=[1, 2])]
    md = C.format_markdown(C.summarize(rows, ["gp-belief"], rounds=2))
    assert "| GP-Belief, one prompt per round (base order as rank prior) | 0.00 | 1.00 |" in md


def test_per_round_table_is_as_wide_as_the_longest_method() -> None:
    """gp-defaults runs 2 rounds, gp-belief 3: gp-belief's rows (0, 1, 1) and a resumed
    row of 2 rounds (1, 0), carried to (1, 0, 0), average to (0.5, 0.5, 0.5)."""
    rows = [
        _row("gp-belief", True, True, per_round=[0.0, 1.0, 1.0], round_tokens=[1, 2, 3]),
        _row("gp-belief", False, True, per_round=[1.0, 0.0], round_tokens=[5, 7]),
        _row("gp-defaults", True, True, per_round=[1.0, 1.0], round_tokens=[4, 8]),
    ]
    s = C.summarize(rows, ["gp-belief", "gp-defaults"], rounds=3)
    assert s["gp-belief"]["per_round"] == [0.5, 0.5, 0.5]
    assert s["gp-belief"]["per_round_prompt_tokens"] == [3.0, 4.5, 5.0]
    md = C.format_markdown(s)
    assert "| method | 1 | 2 | 3 |" in md
    assert "| GP defaults (2 rounds x 3 prompts) | 1.00 | 1.00 | - |" in md


def test_peer_missing_names_the_install_line(monkeypatch: pytest.MonkeyPatch) -> None:
    real = C.importlib.util.find_spec

    def find_spec(name: str, *a: Any) -> Any:
        return None if name == "llama_index.postprocessor.rankgpt_rerank" else real(name, *a)

    monkeypatch.setattr(C.importlib.util, "find_spec", find_spec)
    assert "pip install llama-index-llms-openai-like llama-index-postprocessor-rankgpt-rerank" in str(
        C.peer_missing("llamaindex-rankgpt")
    )


def test_unknown_method_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown method"):
        C._methods("base,bm42")


# ----------------------------------------------------------------------------- tasks
def test_kv_instances_are_a_function_of_the_seed() -> None:
    a = C.make_instances("kv", n=6, instances=3, seed=4)
    b = C.make_instances("kv", n=6, instances=3, seed=4)
    assert a == b


def test_kv_gold_document_is_the_questions_fact() -> None:
    inst = C.make_instances("kv", n=6, instances=1, seed=4)[0]
    name = inst.question.removeprefix("What is ").split("'s ")[0]
    assert inst.documents[inst.gold[0]].startswith(f"{name}'s ")


def _nq_file(path: Path) -> Path:
    items = [
        ("who wrote moby dick novel", ["Herman Melville"], "Herman Melville: He wrote Moby Dick."),
        ("capital of france", ["Paris"], "France: The capital is Paris."),
        ("largest planet", ["Jupiter"], "Jupiter: Jupiter is the largest planet."),
        ("what is a whale", ["mammal"], "Moby Dick novel: The novel Moby Dick tells of a whale."),
        ("who is herman melville", ["writer"], "Melville: Herman Melville wrote the novel Moby Dick."),
    ]
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for q, a, passage in items:
            title, text = passage.split(": ", 1)
            fh.write(
                json.dumps(
                    {"question": q, "answers": a, "ctxs": [{"title": title, "text": text, "isgold": True}]}
                )
            )
            fh.write("\n")
    return path


def test_nq_documents_follow_bm25_and_skip_passages_with_the_answer(tmp_path: Path) -> None:
    # For "who wrote moby dick novel": "Moby Dick novel ..." matches moby, dick, novel twice
    # each and outranks the gold passage (moby, dick, wrote once); the Melville passage
    # contains the answer and is skipped; France and Jupiter score 0 (input order breaks the tie).
    data = _nq_file(tmp_path / "nq.jsonl.gz")
    insts = C.make_instances("nq", n=3, instances=5, seed=0, data=data)
    inst = next(i for i in insts if i.question.startswith("who wrote"))
    assert inst.documents == [
        "Moby Dick novel: The novel Moby Dick tells of a whale.",
        "Herman Melville: He wrote Moby Dick.",
        "France: The capital is Paris.",
    ]


def test_nq_gold_index_points_at_the_gold_passage(tmp_path: Path) -> None:
    data = _nq_file(tmp_path / "nq.jsonl.gz")
    inst = next(
        i
        for i in C.make_instances("nq", n=3, instances=5, seed=0, data=data)
        if i.question.startswith("who wrote")
    )
    assert inst.gold == (1,)


def test_litm_kv_instances_show_pairs_and_ask_for_the_key(tmp_path: Path) -> None:
    path = tmp_path / "kv.jsonl.gz"
    pairs = [[f"k{i}", f"v{i}"] for i in range(6)]
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write(json.dumps({"ordered_kv_records": pairs, "key": "k3", "value": "v3"}) + "\n")
    inst = C.make_instances("litm-kv", n=4, instances=1, seed=0, data=path)[0]
    assert (inst.documents[inst.gold[0]], inst.answers, inst.question) == (
        '"k3": "v3"',
        ("v3",),
        'What is the value associated with the key "k3"?',
    )


def test_unknown_task_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown task 'mmlu'"):
        C.make_instances("mmlu", n=3, instances=1, seed=0)


# ----------------------------------------------------------------------------- server lifecycle
_MINI_SERVER = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/v1/models" else 404)
        self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"{}")
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def test_llama_server_command_listens_on_loopback() -> None:
    cmd = C.llama_server_command("/m.gguf", port=8123, n_ctx=8192, threads=2)
    assert cmd[1:] == [
        "-m",
        "llama_cpp.server",
        "--model",
        "/m.gguf",
        "--host",
        "127.0.0.1",
        "--port",
        "8123",
        "--n_ctx",
        "8192",
        "--n_threads",
        "2",
    ]


def test_embedded_server_is_ready_inside_and_stopped_after(tmp_path: Path) -> None:
    port = C.free_port()
    srv = C.EmbeddedServer(
        [sys.executable, "-c", _MINI_SERVER, str(port)],
        port=port,
        log=tmp_path / "s.log",
        ready_timeout=30,
        poll=0.05,
    )
    with srv:
        proc = srv.proc
        assert srv._ready() is True
    assert proc is not None and proc.poll() is not None


def test_embedded_server_is_stopped_when_the_run_fails(tmp_path: Path) -> None:
    port = C.free_port()
    srv = C.EmbeddedServer(
        [sys.executable, "-c", _MINI_SERVER, str(port)],
        port=port,
        log=tmp_path / "s.log",
        ready_timeout=30,
        poll=0.05,
    )
    with pytest.raises(KeyboardInterrupt), srv:
        proc = srv.proc
        raise KeyboardInterrupt
    assert proc is not None and proc.poll() is not None


def test_a_server_that_exits_reports_its_log(tmp_path: Path) -> None:
    cmd = [sys.executable, "-c", "import sys; print('no such model file'); sys.exit(3)"]
    srv = C.EmbeddedServer(cmd, port=C.free_port(), log=tmp_path / "s.log", ready_timeout=30, poll=0.05)
    with pytest.raises(RuntimeError, match="exited with code 3(.|\n)*no such model file"):
        srv.start()


def test_a_server_that_never_listens_hits_the_deadline(tmp_path: Path) -> None:
    cmd = [sys.executable, "-c", "import time; time.sleep(60)"]
    srv = C.EmbeddedServer(cmd, port=C.free_port(), log=tmp_path / "s.log", ready_timeout=0.3, poll=0.05)
    with pytest.raises(RuntimeError, match="not ready within"):
        srv.start()
    assert srv.proc is None


_NO_CORE = "import resource\nresource.setrlimit(resource.RLIMIT_CORE, (0, 0))\n"
posix_signals = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


@posix_signals
def test_a_server_killed_by_sigill_says_so_at_once(tmp_path: Path) -> None:
    """llama-cpp-python built for another CPU: the server dies of SIGILL. Reported at
    once, not after the 120 s readiness deadline, with the signal and what to run."""
    script = (
        _NO_CORE
        + "import os, signal\nprint('loading the model', flush=True)\nos.kill(os.getpid(), signal.SIGILL)\n"
    )
    srv = C.EmbeddedServer(
        [sys.executable, "-c", script],
        port=C.free_port(),
        log=tmp_path / "s.log",
        ready_timeout=120,
        poll=0.05,
    )
    t0 = time.monotonic()
    with pytest.raises(NativeCrashError) as info:
        srv.start()
    assert time.monotonic() - t0 < 10
    text = str(info.value)
    assert text.startswith(
        f"before it was ready, the model server (`python -m llama_cpp.server`, log {str(tmp_path / 's.log')!r}) "
        "was killed by SIGILL (illegal instruction): this llama-cpp-python build uses CPU instructions this "
        "machine cannot run"
    )
    assert "-m pip cache remove llama_cpp_python`, then `" in text
    assert 'CMAKE_ARGS="-DGGML_NATIVE=OFF" ' in text and "--no-cache-dir --force-reinstall" in text
    assert "GOLD_PANNING_SKIP_CPU_CHECK" not in text  # no check to skip on this path
    assert info.value.output.strip().endswith("loading the model")  # the log's tail
    assert srv.proc is None


@posix_signals
def test_a_server_that_dies_during_the_run_ends_it_and_keeps_no_row_of_it(tmp_path: Path) -> None:
    """The server answers, then dies of SIGILL in its first completion: the run ends with
    the same error before the next pair, and the pair it spoiled is not checkpointed."""
    port = C.free_port()
    srv = C.EmbeddedServer(
        [sys.executable, "-c", _NO_CORE + _MINI_SERVER, str(port)],
        port=port,
        log=tmp_path / "s.log",
        ready_timeout=30,
        poll=0.05,
    )
    ck = tmp_path / "ck.jsonl"

    def first_completion(inst: C.CompareInstance) -> C.MethodOutcome:
        assert srv.proc is not None
        os.kill(srv.proc.pid, signal.SIGILL)
        srv.proc.wait(timeout=10)
        return C.MethodOutcome(ranking=[])

    methods = {"a": _fixed([2]), "b": first_completion, "c": _fixed([2])}
    with srv, pytest.raises(NativeCrashError, match="^during the run, the model server .* killed by SIGILL"):
        C.run_compare(_instances(2), methods, checkpoint=ck, meta=META, alive=srv.check)
    kept = [json.loads(line) for line in ck.read_text().splitlines()]
    assert [r.get("method") for r in kept if "method" in r] == ["a"]


# ----------------------------------------------------------------------------- CLI end to end
def _args(base_url: str, *extra: str) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    C.register(ap.add_subparsers())
    return ap.parse_args(
        [
            "evaluate",
            "--reader",
            "openai",
            "--base-url",
            base_url,
            "--model",
            "m",
            "--mode",
            "answer",
            "--profile",
            "smollm2-135m-kv",
            "--n",
            "6",
            "--instances",
            "3",
            "--rounds",
            "3",
            "--json",
            *extra,
        ]
    )


def _run(capsys: pytest.CaptureFixture[str], args: argparse.Namespace) -> dict[str, Any]:
    assert C.main(args) == 0
    return json.loads(capsys.readouterr().out)


OURS = "base,psc,gp-belief,gp-cost"


def test_cli_gp_belief_finds_every_gold_with_a_correct_model(capsys: pytest.CaptureFixture[str]) -> None:
    with FakeOpenAIServer(default=kv_model()) as srv:
        res = _run(capsys, _args(srv.base_url, "--methods", OURS))
    assert res["methods"]["gp-belief"]["top1"] == 1.0


def test_cli_counts_the_panners_calls_and_server_tokens(capsys: pytest.CaptureFixture[str]) -> None:
    with FakeOpenAIServer(default=kv_model()) as srv:
        res = _run(capsys, _args(srv.base_url, "--methods", "gp-belief"))
    d = res["methods"]["gp-belief"]
    assert (d["calls_per_query"], d["prompt_tokens_per_query"], d["completion_tokens_per_query"]) == (
        3.0,
        3.0 * PROMPT_TOKENS,
        3.0 * COMPLETION_TOKENS,
    )


def test_cli_cost_saving_settings_stop_early_and_keep_the_answer(capsys: pytest.CaptureFixture[str]) -> None:
    # stop_at=0.6: a correct model's citations push the gold past 0.6 within the 3 rounds
    # gp-belief always spends, so gp-cost makes fewer calls and still finds every gold.
    with FakeOpenAIServer(default=kv_model()) as srv:
        res = _run(capsys, _args(srv.base_url, "--methods", "gp-belief,gp-cost"))
    cost, full = res["methods"]["gp-cost"], res["methods"]["gp-belief"]
    assert full["calls_per_query"] == 3.0
    assert 1.0 <= cost["calls_per_query"] < 3.0
    assert cost["top1"] == 1.0


def test_cli_base_order_makes_no_call(capsys: pytest.CaptureFixture[str]) -> None:
    with FakeOpenAIServer(default=kv_model()) as srv:
        _run(capsys, _args(srv.base_url, "--methods", "base"))
        assert srv.requests == []


def test_cli_resumes_from_its_checkpoint_without_calls(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    ck = str(tmp_path / "ck.jsonl")
    with FakeOpenAIServer(default=kv_model()) as srv:
        first = _run(capsys, _args(srv.base_url, "--methods", "gp-belief", "--checkpoint", ck))
        srv.clear()
        again = _run(capsys, _args(srv.base_url, "--methods", "gp-belief", "--checkpoint", ck))
        assert srv.requests == []
    assert again["methods"] == first["methods"]


def test_cli_reports_a_missing_peer_as_skipped(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        C, "peer_missing", lambda name: "llama_index.postprocessor.rankgpt_rerank not installed"
    )
    with FakeOpenAIServer(default=kv_model()) as srv:
        res = _run(capsys, _args(srv.base_url, "--methods", "base,llamaindex-rankgpt"))
    assert res["methods"]["llamaindex-rankgpt"]["status"] == "skipped"


def test_cli_writes_the_plot(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    importlib.import_module("matplotlib")
    png = tmp_path / "acc.png"
    with FakeOpenAIServer(default=kv_model()) as srv:
        _run(capsys, _args(srv.base_url, "--methods", "base,gp-belief", "--plot", str(png)))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_markdown_output(capsys: pytest.CaptureFixture[str]) -> None:
    with FakeOpenAIServer(default=kv_model()) as srv:
        args = _args(srv.base_url, "--methods", "base,gp-belief")
        args.json = False
        assert C.main(args) == 0
    out = capsys.readouterr().out
    # nDCG@10, MRR@10, R@10 (one relevant document found first: 1.00 each), then top-1 with its Wilson interval
    assert (
        "| GP-Belief, one prompt per round (base order as rank prior) | 1.00 [1.00, 1.00] | 1.00 [1.00, 1.00] "
        "| 1.00 [1.00, 1.00] | 1.00 [0.44, 1.00] |"
    ) in out


# The real peers (installed by the `compare` extra) against the scripted model.
PEER_MODULES = {
    "langchain-listwise": "langchain_classic",
    "llamaindex-llmrerank": "llama_index.llms.openai_like",
    "llamaindex-rankgpt": "llama_index.postprocessor.rankgpt_rerank",
}


def _run_peer(peer: str, capsys: pytest.CaptureFixture[str], *, wrong: bool = False) -> dict[str, Any]:
    """``bench compare --methods peer`` against a fake server whose model is right (or ``wrong``)."""
    importlib.import_module(PEER_MODULES[peer])
    with FakeOpenAIServer(default=kv_model(wrong=wrong)) as srv:
        return _run(capsys, _args(srv.base_url, "--methods", peer))


@pytest.mark.parametrize("peer", C.PEER_METHODS)
def test_real_peer_finds_the_gold_with_a_correct_model(peer: str, capsys: pytest.CaptureFixture[str]) -> None:
    res = _run_peer(peer, capsys)
    assert res["methods"][peer]["top1"] == 1.0


@pytest.mark.parametrize("peer", C.PEER_METHODS)
def test_real_peer_misses_with_a_wrong_model(peer: str, capsys: pytest.CaptureFixture[str]) -> None:
    res = _run_peer(peer, capsys, wrong=True)
    assert res["methods"][peer]["top1"] == 0.0


@pytest.mark.parametrize("peer", C.PEER_METHODS)
def test_real_peer_makes_one_call_per_query(peer: str, capsys: pytest.CaptureFixture[str]) -> None:
    res = _run_peer(peer, capsys)
    assert res["methods"][peer]["calls_per_query"] == 1.0


# llama-cpp-python 0.3's server refuses json_schema with this HTTP 500 (measured 2026-11-28).
LLAMA_CPP_FORMAT_500 = (
    "1 validation error: {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
    "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}"
)


def _refuses_json_schema(req: RecordedRequest) -> Any:
    if req.response_format_type == "json_schema":
        return status(500, message=LLAMA_CPP_FORMAT_500)
    return kv_model()


def test_listwise_peer_falls_back_to_a_tool_call_where_json_schema_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    importlib.import_module(PEER_MODULES["langchain-listwise"])
    ck = tmp_path / "ck.jsonl"
    with FakeOpenAIServer(default=dynamic(_refuses_json_schema)) as srv:
        res = _run(capsys, _args(srv.base_url, "--methods", "langchain-listwise", "--checkpoint", str(ck)))
        sent = [(r.response_format_type, bool((r.body or {}).get("tools"))) for r in srv.requests]
    d = res["methods"]["langchain-listwise"]
    assert d["top1"] == 1.0
    # the first query: json_schema (the client's 2 retries of a 500 included), then the tool
    # call; the next two queries go straight to the tool call
    assert sent == [("json_schema", False)] * 3 + [(None, True)] * 3
    rows = [json.loads(line) for line in ck.read_text().splitlines()]
    notes = [r["note"] for r in rows if r.get("method") == "langchain-listwise"]
    assert notes == ["structured output by function calling (the server refused json_schema)"] * 3
    assert (
        "LangChain LLMListwiseRerank + ChatOpenAI: structured output by function calling "
        "(the server refused json_schema) on 3 of 3 queries"
    ) in res["notes"]


def test_listwise_peer_keeps_an_error_that_is_not_about_the_format(
    capsys: pytest.CaptureFixture[str],
) -> None:
    importlib.import_module(PEER_MODULES["langchain-listwise"])
    with FakeOpenAIServer(default=status(500, message="out of memory")) as srv:
        res = _run(capsys, _args(srv.base_url, "--methods", "langchain-listwise", "--instances", "1"))
        assert all((r.body or {}).get("tools") is None for r in srv.requests)
    assert res["methods"]["langchain-listwise"]["exceptions"] == 1


def test_rankgpt_rows_come_from_the_peers_own_prompt(capsys: pytest.CaptureFixture[str]) -> None:
    importlib.import_module(PEER_MODULES["llamaindex-rankgpt"])
    with FakeOpenAIServer(default=kv_model()) as srv:
        _run(capsys, _args(srv.base_url, "--methods", "llamaindex-rankgpt", "--instances", "1"))
        [req] = srv.requests
    assert req.messages[0]["content"].startswith("You are RankGPT")


def test_peer_shows_the_model_only_the_document_text(capsys: pytest.CaptureFixture[str]) -> None:
    importlib.import_module(PEER_MODULES["llamaindex-llmrerank"])
    with FakeOpenAIServer(default=kv_model()) as srv:
        _run(capsys, _args(srv.base_url, "--methods", "llamaindex-llmrerank", "--instances", "1"))
        [req] = srv.requests
    assert "gp" not in req.user_text.lower().replace("gp-belief", "")


def test_an_unparsable_peer_output_counts_as_unusable(capsys: pytest.CaptureFixture[str]) -> None:
    importlib.import_module(PEER_MODULES["llamaindex-llmrerank"])
    with FakeOpenAIServer(default=ok("I think document one is nice.")) as srv:
        res = _run(capsys, _args(srv.base_url, "--methods", "llamaindex-llmrerank"))
    assert res["methods"]["llamaindex-llmrerank"]["unusable"] == 3


def test_instances_equal_across_methods_in_one_run() -> None:
    a = C.make_instances("kv", n=6, instances=2, seed=1)
    assert [i.index for i in a] == [0, 1]


def test_per_round_tokens_carry_forward_after_an_early_stop() -> None:
    from types import SimpleNamespace

    res = SimpleNamespace(
        rounds=(
            SimpleNamespace(prompt_tokens=10, posteriors=np.array([0.9, 0.1]), cited=(0,), failed=False),
        ),
        posteriors=np.array([0.9, 0.1]),
        policy="belief",
    )
    hits, toks = _methods._per_round(res, (0,), 3, np.random.default_rng(0))
    assert (hits, toks) == ([1.0, 1.0, 1.0], [10, 10, 10])


def test_markdown_names_the_first_exception() -> None:
    rows = [_row("langchain-listwise", False, False, error="OpenAIAPIError", error_message="HTTP 500")]
    md = C.format_markdown(C.summarize(rows, ["langchain-listwise"], rounds=1))
    assert "1 exceptions; first: OpenAIAPIError: HTTP 500" in md


def test_cli_without_profile_uses_the_generic_one_for_an_endpoint(capsys: pytest.CaptureFixture[str]) -> None:
    with FakeOpenAIServer(default=kv_model()) as srv:
        args = _args(srv.base_url, "--methods", "base")
        args.profile = None
        res = _run(capsys, args)
    assert res["profile"] == "lost-in-the-middle"


def test_cli_cite_mode_is_the_default_for_an_endpoint(capsys: pytest.CaptureFixture[str]) -> None:
    with FakeOpenAIServer(default=kv_model()) as srv:
        args = _args(srv.base_url, "--methods", "gp-belief")
        args.mode = None
        res = _run(capsys, args)
    assert (res["mode"], res["methods"]["gp-belief"]["top1"]) == ("cite", 1.0)


def test_summary_accuracy_per_prompt_token() -> None:
    rows = [_row("m", True, True, prompt_tokens=500), _row("m", False, True, prompt_tokens=500)]
    assert C.summarize(rows, ["m"], rounds=1)["m"]["top1_per_1k_prompt_tokens"] == 1.0


class _FailingReader:
    """Every reading fails: the panner gathers no evidence."""

    def read(self, question: str, documents: Any, **kw: Any) -> Any:
        from gold_panning_integrations.engine.records import Reading

        return Reading.failure("no model")


@pytest.mark.parametrize("method", ["gp-belief", "gp-cost"])
def test_without_evidence_the_rank_prior_returns_the_base_order(method: str) -> None:
    fn = C.panning_method(method, _FailingReader(), profile="smollm2-135m-kv", rounds=2, seed=0)
    out = fn(C.make_instances("kv", n=6, instances=1, seed=0)[0])
    assert out.ranking == [0, 1, 2, 3, 4, 5]


@pytest.mark.parametrize(
    ("method", "ranked"), [("gp-belief", True), ("gp-belief-flat", False), ("gp-cost", True)]
)
def test_rank_prior_is_given_to_the_panner_only_where_promised(
    method: str, ranked: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gold_panning_integrations import panning as P

    seen: list[Any] = []
    real_run = P.GoldPanner.run

    def run(self: Any, question: str, documents: Any, **kw: Any) -> Any:
        res = real_run(self, question, documents, **kw)
        seen.append(res.prior_log_odds)
        return res

    monkeypatch.setattr(P.GoldPanner, "run", run)
    fn = C.panning_method(method, _FailingReader(), profile="smollm2-135m-kv", rounds=1, seed=0)
    fn(C.make_instances("kv", n=20, instances=1, seed=0)[0])
    # the rank prior decreases over the top 10 (the default rank map): first > tenth
    assert bool(seen[0] is not None and seen[0][0] > seen[0][9]) is ranked


def test_the_first_stages_scores_reach_the_default_prior(monkeypatch: pytest.MonkeyPatch) -> None:
    # An instance with scores (a run file's, BM25's): with a temperature fitted for the
    # retriever (the profile's prior_temperature, 0.5 here) the default prior ("auto") is
    # the softmax over the scores at that temperature, not the rank prior, sharing out the
    # default rank map's expected count over the 6 documents (the profile has no rank map).
    from gold_panning_integrations import panning as P
    from gold_panning_integrations.engine.priors import DEFAULT_RANK_MAP, score_prior_probs

    seen: list[Any] = []
    real_run = P.GoldPanner.run

    def run(self: Any, question: str, documents: Any, **kw: Any) -> Any:
        seen.append(kw.get("scores"))
        res = real_run(self, question, documents, **kw)
        seen.append(res.prior_log_odds)
        return res

    monkeypatch.setattr(P.GoldPanner, "run", run)
    inst = C.make_instances("kv", n=6, instances=1, seed=0)[0]
    scores = (9.0, 2.0, 2.0, 1.0, 1.0, 0.5)  # the first document far ahead
    inst = C.CompareInstance(inst.question, inst.documents, inst.gold, scores=scores)
    from gold_panning_integrations import DetectorProfile

    fitted = DetectorProfile.bundled("smollm2-135m-kv").model_copy(update={"prior_temperature": 0.5})
    C.panning_method("gp-defaults", _FailingReader(), profile=fitted, rounds=1, seed=0)(inst)
    assert seen[0] == list(scores)
    s = np.asarray(scores)
    mass = DEFAULT_RANK_MAP.mass(6)
    # the harmonic map's odds e^-1.3802 / (1 + r) = 0.251528 / (1 + r) for r < 6:
    # 0.20098 + 0.11171 + 0.07736 + 0.05916 + 0.04790 + 0.04023
    assert mass == pytest.approx(0.53734, abs=1e-4)
    expected = score_prior_probs(s / s.std(), k=mass, temperature=0.5)
    np.testing.assert_allclose(seen[1], np.log(expected / (1 - expected)), atol=1e-9)
    # much more than the rank map's gap between the first two, log 2 = 0.69 nats
    assert seen[1][0] - seen[1][1] > 2.0


def test_without_evidence_failed_rounds_count_as_unusable() -> None:
    fn = C.panning_method("gp-belief", _FailingReader(), profile="smollm2-135m-kv", rounds=2, seed=0)
    assert fn(C.make_instances("kv", n=6, instances=1, seed=0)[0]).unusable == 2


def test_nq_calibration_split_is_disjoint_from_the_test_questions() -> None:
    test = {i.question for i in C.make_instances("nq", n=5, instances=40, seed=1)}
    cal = C.make_instances("nq", n=5, instances=40, seed=1, split="calibration")
    assert len(cal) == 40 and not test & {i.question for i in cal}
    assert C.make_instances("nq", n=5, instances=3, seed=1) == C.make_instances(
        "nq", n=5, instances=3, seed=1, split="test"
    )


@pytest.mark.parametrize(
    ("task", "split", "message"),
    [
        ("kv", "calibration", "applies to the shipped NQ sample only"),
        ("nq", "train", "--split must be one of test, calibration"),
    ],
)
def test_bad_split_is_refused(task: str, split: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        C.make_instances(task, n=5, instances=1, seed=0, split=split)


def test_traces_option_writes_labelled_gp_belief_traces(tmp_path: Path) -> None:
    from gold_panning_integrations.calibration.traces import read_traces

    path = tmp_path / "t.jsonl"
    on_result = C._trace_writer(str(path))
    assert C._trace_writer(None) is None
    fn = C.panning_method(
        "gp-belief", _FailingReader(), profile="smollm2-135m-kv", rounds=2, seed=0, on_result=on_result
    )
    insts = C.make_instances("kv", n=6, instances=2, seed=0)
    for inst in insts:
        fn(inst)
    traces = read_traces(path)
    assert [t["relevant"] for t in traces] == [list(i.gold) for i in insts]
    assert all(p["failed"] for t in traces for r in t["rounds"] for p in r["prompts"])


def test_embedded_task_profiles_ship_and_carry_valid_measurements() -> None:
    from gold_panning_integrations.engine.config import PanningConfig
    from gold_panning_integrations.profiles import bundled_profiles, load_profile

    for task, name in {"nq": "smollm2-135m-nq-labelled"}.items():
        assert task in C.TASKS and name in bundled_profiles()
        prof = load_profile(name)
        assert prof.task == task and prof.model == C.EMBEDDED_MODEL
        cfg = PanningConfig().with_profile(prof)
        assert (cfg.blind_rate, cfg.false_leads) == (prof.blind_rate, prof.false_leads)
        assert prof.blind_rate is not None and prof.false_leads is not None
        assert cfg.prior_head_decay == prof.prior_head_decay is not None
        assert prof.extra["mixture_fit"]["queries"] == 20


def test_unwritable_traces_fail_before_any_call_and_stop_the_run(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(C.TracesNotWritten, match="cannot write --traces"):
        C._trace_writer(str(tmp_path / "file" / "t.jsonl"))  # a folder that is a file
    with pytest.raises(C.TracesNotWritten, match="is a directory"):
        C._trace_writer(str(tmp_path))
    # a write failing mid-run stops the run instead of counting as the method's miss
    path = tmp_path / "t.jsonl"
    on_result = C._trace_writer(str(path))
    path.unlink()
    path.mkdir()
    fn = C.panning_method(
        "gp-belief", _FailingReader(), profile="smollm2-135m-kv", rounds=1, seed=0, on_result=on_result
    )
    with pytest.raises(C.TracesNotWritten, match="cannot append to --traces"):
        C.run_compare(C.make_instances("kv", n=4, instances=1, seed=0), {"gp-belief": fn})
