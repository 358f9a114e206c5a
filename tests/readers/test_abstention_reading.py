"""The way out's first-token probability (``Reading.abstain_p``): read from an endpoint's
``top_logprobs`` and from llama.cpp's logits, recorded in traces, and fitted into the
profile's ``abstention_map`` by ``calibrate --from-traces``."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from openai_server import FakeOpenAIServer, completion_body, raw_body

from gold_panning_integrations.calibration._trace_io import _prompt_problem
from gold_panning_integrations.calibration.traces import (
    MIN_ABSTENTION_QUERIES,
    fit_abstention_map,
    learn_profile,
)
from gold_panning_integrations.profiles import DetectorProfile, load_profile
from gold_panning_integrations.readers import OpenAIReader
from gold_panning_integrations.readers.answer import abstain_probability
from gold_panning_integrations.readers.local import LocalReader

DOCS = ["Lyon is in France.", "The capital of France is Paris.", "Berlin is in Germany."]


def test_abstain_probability_sums_the_tokens_that_begin_the_way_out() -> None:
    # "unknown" 0.11 + "Unknown" 0.01 (case aside); "[" and "Paris" are not the way out.
    assert abstain_probability({"[": 0.68, "unknown": 0.11, "Unknown": 0.01, "Paris": 0.04}) == pytest.approx(
        0.12
    )
    # a leading space and a 3-letter prefix count; "un" (2 letters) and "unite" do not
    assert abstain_probability({" unk": 0.2, "un": 0.3, "unite": 0.1}) == pytest.approx(0.2)
    assert abstain_probability({"Paris": 0.9}) == 0.0
    assert abstain_probability({}) is None


def _with_logprobs(content: str, top: list[tuple[str, float]]) -> dict[str, Any]:
    body = completion_body(content)
    body["choices"][0]["logprobs"] = {
        "content": [
            {
                "token": top[0][0],
                "logprob": top[0][1],
                "bytes": None,
                "top_logprobs": [{"token": t, "logprob": lp, "bytes": None} for t, lp in top],
            }
        ]
    }
    return body


def test_openai_reader_asks_for_and_reads_first_token_logprobs() -> None:
    top = [("Paris", math.log(0.7)), ("unknown", math.log(0.2)), (" Unknown", math.log(0.05))]
    with FakeOpenAIServer() as server:
        server.script(raw_body(json.dumps(_with_logprobs("Paris", top))))
        reader = OpenAIReader(model="m", base_url=server.base_url, mode="answer", logprobs=True, wait=0)
        reading = reader.read("What is the capital of France?", DOCS)
        sent = server.requests[0].body
    assert sent["logprobs"] is True and sent["top_logprobs"] == 20
    assert reading.abstain_p == pytest.approx(0.25)
    assert reading.cited == (1,)


def test_openai_reader_without_logprobs_asks_for_none_and_reads_none() -> None:
    top = [("unknown", math.log(0.9))]
    with FakeOpenAIServer() as server:
        server.script(
            raw_body(json.dumps(_with_logprobs("Paris", top))), raw_body(json.dumps(completion_body("Paris")))
        )
        off = OpenAIReader(model="m", base_url=server.base_url, mode="answer", wait=0)
        on = OpenAIReader(model="m", base_url=server.base_url, mode="answer", logprobs=True, wait=0)
        first, second = off.read("q?", DOCS), on.read("q?", DOCS)
        assert "logprobs" not in server.requests[0].body
    assert first.abstain_p is None  # not asked for: ignored even when the server sends it
    assert second.abstain_p is None  # asked for, none returned: no reading, not 0


def test_openai_reader_logprobs_in_cite_mode_are_not_asked_for() -> None:
    reader = OpenAIReader(model="m", base_url="http://127.0.0.1:9/v1", mode="cite", logprobs=True)
    assert "logprobs" not in reader._kwargs([{"role": "user", "content": "x"}], None, 5.0)
    with pytest.raises(TypeError, match="logprobs must be True or False"):
        OpenAIReader(model="m", base_url="http://127.0.0.1:9/v1", logprobs="yes")  # type: ignore[arg-type]


class _Vocab:
    """A llama.cpp stand-in for the logits processor: four tokens."""

    words = ("[", "unknown", "Paris", " Unknown")

    def detokenize(self, ids: list[int]) -> bytes:
        return self.words[ids[0]].encode()


def test_local_reader_first_token_processor_reads_the_first_token_only() -> None:
    reader = object.__new__(LocalReader)
    reader._llm = _Vocab()
    out: dict[str, float] = {}
    logits = np.log(np.array([0.5, 0.3, 0.1, 0.1]))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("gold_panning_integrations.readers.local._FIRST_TOKEN_TOP", 3)
        assert reader._first_token(out, [], logits) is logits  # changes nothing
        reader._first_token(out, [], np.log(np.array([0.0001, 0.9997, 0.0001, 0.0001])))  # 2nd token: ignored
    # the 3 likeliest: "[" 0.5, "unknown" 0.3, and one of the 0.1s
    assert abstain_probability(out) in (pytest.approx(0.3), pytest.approx(0.4))
    assert out["["] == pytest.approx(0.5)


@pytest.mark.parametrize("bad", [-0.1, 1.5, "0.5", True])
def test_a_trace_prompt_with_a_bad_abstain_p_is_named(bad: Any) -> None:
    prompt = {"docs": [0, 1], "positions": [0, 1], "span": 2, "cited": [], "failed": False, "abstain_p": bad}
    assert "abstain_p" in (_prompt_problem(prompt, 2) or "")
    prompt["abstain_p"] = 0.25
    assert _prompt_problem(prompt, 2) is None


def _trace(relevant: list[int], abstain: list[float]) -> dict[str, Any]:
    prompts = [
        {"docs": [0, 1], "positions": [0, 1], "span": 2, "cited": [], "failed": False, "abstain_p": a}
        for a in abstain
    ]
    return {
        "type": "trace",
        "version": 1,
        "n": 2,
        "k": 1,
        "policy": "belief",
        "prior_log_odds": [0.0, -1.0],
        "posteriors": [0.5, 0.3],
        "rounds": [{"round": 1, "prompts": prompts}],
        "relevant": relevant,
    }


def test_fit_abstention_map_reads_abstaining_as_evidence_of_nothing_relevant() -> None:
    # 12 questions: 6 with a relevant document, whose prompts rarely start "unknown"
    # (p = 0.1, 0.2), and 6 without, whose prompts mostly do (p = 0.7, 0.9).
    traces = [_trace([0], [0.1, 0.2]) for _ in range(6)] + [_trace([], [0.7, 0.9]) for _ in range(6)]
    fitted = fit_abstention_map(traces)
    assert fitted is not None
    (slope, offset), how = fitted
    assert slope < 0  # likelier abstention, less evidence of relevance
    assert how["queries"] == 12 and how["with_relevant"] == 6 and how["prompts"] == 24
    # The prompt where nothing is told (z0) lies between the two groups' readings.
    assert math.log(0.2 / 0.8) < how["z0"] < math.log(0.7 / 0.3)
    assert offset == pytest.approx(-slope * how["z0"], abs=1e-5)


def test_fit_abstention_map_needs_enough_questions_of_both_kinds() -> None:
    few = [_trace([0], [0.1]) for _ in range(MIN_ABSTENTION_QUERIES - 3)] + [_trace([], [0.9])] * 2
    assert fit_abstention_map(few) is None
    one_kind = [_trace([0], [0.1]) for _ in range(20)] + [_trace([], [0.9])]
    assert fit_abstention_map(one_kind) is None
    unlabelled = [{**_trace([0], [0.1]), "relevant": None} for _ in range(20)]
    assert fit_abstention_map(unlabelled) is None


def test_learn_profile_stores_the_map_and_the_profile_round_trips(tmp_path: Any) -> None:
    traces = [_trace([0], [0.1, 0.2]) for _ in range(6)] + [_trace([], [0.7, 0.9]) for _ in range(6)]
    prior = load_profile("lost-in-the-middle")
    learned = learn_profile(traces, prior).profile
    assert learned.abstention_map is not None and learned.abstention_map[0] < 0
    assert learned.extra["abstention_fit"]["queries"] == 12
    path = tmp_path / "p.json"
    path.write_text(learned.model_dump_json())
    assert DetectorProfile.model_validate_json(path.read_text()).abstention_map == learned.abstention_map
    with pytest.raises(ValueError, match="abstention_map"):
        DetectorProfile(n_positions=1, tpr=[0.5], fpr=[0.1], abstention_map=(float("nan"), 0.0))
