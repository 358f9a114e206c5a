"""One path: GoldPanner and the batch simulator run the same round functions.

Pinned: for the same seed, one trial of ``simulate`` and ``GoldPanner`` with a
``SimulatedReader`` give bit-identical posteriors, across policies and options.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from gold_panning_integrations import (
    DetectorProfile,
    FatalReaderError,
    GoldPanner,
    PanningConfig,
    PanningResult,
    Reading,
    SimulatedReader,
    simulate,
)
from gold_panning_integrations.engine import Attack
from gold_panning_integrations.engine.simulator import Mistakes

PROFILE = DetectorProfile.bundled("lost-in-the-middle")
DOCS = [f"d{i}" for i in range(12)]


def _pair(seed: int, policy: str, **options: object) -> tuple[np.ndarray, np.ndarray]:
    """(simulate's final posteriors, GoldPanner's) for one trial with the same seed."""
    attack = options.pop("attack", None)
    mistakes = options.pop("mistakes", None)
    config = PanningConfig(**options)  # type: ignore[arg-type]
    if config.expected_relevant is None:
        # simulate knows its needles: its prior's mass is k, the number it plants, unless
        # the config sets expected_relevant. The panner is given the same mass.
        config = replace(config, expected_relevant=float(config.k or 1))
    sim = simulate(
        PROFILE.tpr,
        PROFILE.fpr,
        n=len(DOCS),
        k=config.k,
        rounds=config.rounds,
        trials=1,
        policies=(policy,),
        rng=seed,
        prior=config.prior,
        config=config,
        attack=attack,  # type: ignore[arg-type]
        mistakes=mistakes,  # type: ignore[arg-type]
        keep_posteriors=True,
    )
    assert sim.truth is not None and sim.posteriors is not None
    needles = {DOCS[i] for i in np.flatnonzero(sim.truth[0])}
    if mistakes is not None:
        # What the simulated model reads as relevant: replay the needle stream.
        from gold_panning_integrations.engine.simulator import _draw_truth

        needle_rng = np.random.default_rng(seed).spawn(4)[0]
        truth, _ = _draw_truth(needle_rng, 1, len(DOCS), config.k, None)
        reads = mistakes.draw(needle_rng, truth)  # type: ignore[attr-defined]
        needles = {DOCS[i] for i in np.flatnonzero(reads[0])}
    _, model_rng, policy_rng, _ = np.random.default_rng(seed).spawn(4)
    hostile = None
    if attack is not None:
        # The simulator's hostile document: replay its needle stream.
        needle_rng = np.random.default_rng(seed).spawn(4)[0]
        from gold_panning_integrations.engine.simulator import _draw_truth

        _, h = _draw_truth(needle_rng, 1, len(DOCS), config.k, None)
        hostile = {DOCS[int(h[0])]}
    reader = SimulatedReader(PROFILE, needles, rng=model_rng, hostile=hostile, attack=attack)  # type: ignore[arg-type]
    # simulate takes no retriever prior: the panner starts flat too.
    res = GoldPanner(reader, PROFILE, config, rng=policy_rng, policy=policy, retriever_prior="none").run(
        "q", DOCS
    )
    return sim.posteriors[policy][0], res.posteriors


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("policy", ["belief", "entropy", "random"])
def test_simulate_equals_goldpanner_for_the_same_seed(seed: int, policy: str) -> None:
    sim, real = _pair(seed, policy, rounds=5, prior="uniform")
    assert sim.tolist() == real.tolist()


@pytest.mark.parametrize(
    "options",
    [
        {"shuffle_top": 3},
        {"prune_below": 0.3},
        {"max_docs_per_prompt": 7},
        {"robust": True},
        {"empty_prompts": "skip"},
        {"empty_prompts": "evidence", "adapt_level": False},
        {"adapt_level": True},
        {"stop_at": 0.6, "min_rounds": 2},
        {"k": 2, "prior": "base-rate"},
        {"attack": Attack("label", obey=0.5)},
        {"attack": Attack("label", obey=0.5, labels=tuple(range(1000, 1500)))},
        {"attack": Attack("position")},
        {"attack": Attack("self")},
        {"prompts_per_round": 3},
        {"prompts_per_round": 2, "spread": "draw"},
        {"prompts_per_round": 2, "spread": "copies", "k": 2, "prior": "base-rate"},
        {"prompts_per_round": 3, "max_docs_per_prompt": 7, "prune_below": 0.3},
        {"prompts_per_round": 2, "stop_at": 0.6, "min_rounds": 1},
        {"prompts_per_round": 2, "attack": Attack("label", obey=0.5)},
        {"prompts_per_round": 2, "mistakes": Mistakes(false_leads=1.0, blind_rate=0.3)},
    ],
    ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()),
)
def test_simulate_equals_goldpanner_with_options(options: dict) -> None:
    for seed in range(4):
        sim, real = _pair(seed, "belief", rounds=6, **options)
        assert sim.tolist() == real.tolist(), seed


# ------------------------------------------------------------------ attacks on labels
def _final(attack: Attack | None, seed: int = 0) -> np.ndarray:
    sim = simulate(
        PROFILE.tpr,
        PROFILE.fpr,
        n=12,
        rounds=5,
        trials=200,
        policies=("belief",),
        rng=seed,
        attack=attack,
        keep_posteriors=True,
    )
    assert sim.posteriors is not None
    return sim.posteriors["belief"]


@pytest.mark.parametrize("obey", [1.0, 0.5])
def test_cite_document_1_is_never_on_screen_so_the_simulated_attack_changes_nothing(obey: float) -> None:
    # "1" is never a label (12 documents: 1000..9999), and whether the model obeys is
    # drawn apart from its citations: every trial is bit for bit the unattacked one.
    assert _final(Attack("label", obey)).tolist() == _final(None).tolist()


def test_an_obeyed_attack_that_lands_changes_the_run() -> None:
    assert _final(Attack("position", 0.5)).tolist() != _final(None).tolist()


def test_naming_the_whole_label_space_cites_every_shown_document() -> None:
    silent = SimpleNamespace(tpr=[0.0, 0.0, 0.0], fpr=[0.0, 0.0, 0.0])  # cites only when obeying
    reader = SimulatedReader(
        silent, set(), rng=0, hostile={"h"}, attack=Attack("label", labels=tuple(range(1000, 10_000)))
    )
    assert reader.read("q", ["a", "h", "b"], labels=[1203, 7751, 4417]).cited == (0, 1, 2)
    assert reader.read("q", ["a", "h", "b"], labels=[1, 2, 3]).cited == ()  # none named
    guess = SimulatedReader(silent, set(), rng=0, hostile={"h"}, attack=Attack("label", labels=(4417, 9)))
    assert guess.read("q", ["a", "h", "b"], labels=[1203, 7751, 4417]).cited == (2,)


@pytest.mark.parametrize("labels", [(), (1.0,), (True,), ("1",)])
def test_attack_labels_must_be_integers(labels: tuple) -> None:
    with pytest.raises(ValueError, match="attack labels must be a non-empty tuple of integers"):
        Attack("label", labels=labels)


# ------------------------------------------------------------------ config
@pytest.mark.parametrize(
    ("options", "pattern"),
    [
        ({"k": 1.5}, r"k must be an int >= 1 or None, got 1\.5"),
        ({"k": True}, r"k must be an int >= 1 or None, got True"),
        ({"rounds": 0}, r"rounds must be an int >= 1, got 0"),
        ({"rounds": 2.0}, r"rounds must be an int >= 1, got 2\.0"),
        ({"max_calls": False}, r"max_calls must be an int >= 1 or None, got False"),
        ({"shuffle_top": -1}, r"shuffle_top must be an int >= 0, got -1"),
        ({"prune_below": 1.0}, r"prune_below must be a number in \(0, 1\) or None, got 1\.0"),
        ({"stop_at": True}, r"stop_at must be a number in \(0, 1\) or None, got True"),
        ({"evidence_temperature": float("nan")}, r"evidence_temperature must be a number > 0"),
        (
            {"empty_prompts": "ignore"},
            r"empty_prompts must be 'evidence', 'skip', 'mixture' or 'by-position', got 'ignore'",
        ),
        ({"robust": 1}, r"robust must be True or False, got 1"),
        ({"policy": "greedy"}, r"policy must be one of belief, entropy, random, oracle, got 'greedy'"),
    ],
)
def test_config_rejects_bad_values_naming_them(options: dict, pattern: str) -> None:
    with pytest.raises(ValueError, match=pattern):
        PanningConfig(**options)


def test_config_is_frozen() -> None:
    cfg = PanningConfig()
    with pytest.raises(AttributeError, match="rounds"):
        cfg.rounds = 3  # type: ignore[misc]


def test_keyword_shortcut_builds_the_same_config() -> None:
    a = GoldPanner(None, PROFILE, rounds=4, k=1, shuffle_top=2)
    b = GoldPanner(None, PROFILE, PanningConfig(rounds=4, k=1, shuffle_top=2))
    assert a.config == b.config


def test_keyword_options_override_a_config() -> None:
    panner = GoldPanner(None, PROFILE, PanningConfig(rounds=8, k=2), rounds=3)
    assert (panner.config.rounds, panner.config.k) == (3, 2)


def test_unknown_option_is_a_type_error_naming_it() -> None:
    # GoldPanner names every option in its signature (issue 50): a misspelt one is Python's
    # own TypeError (and an IDE's or mypy's warning before it runs); the config lists them.
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'roundz'"):
        GoldPanner(None, PROFILE, roundz=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"unknown panning option\(s\) roundz; valid options: .*rounds"):
        PanningConfig.from_options(roundz=3)


def test_bad_k_through_the_panner_names_the_value() -> None:
    with pytest.raises(ValueError, match=r"k must be an int >= 1 or None, got 1\.5"):
        GoldPanner(None, PROFILE, k=1.5)


def test_run_k_override_is_validated_too() -> None:
    panner = GoldPanner(SimulatedReader(PROFILE, {"d1"}, rng=0), PROFILE, rounds=1)
    with pytest.raises(ValueError, match=r"k must be an int >= 1 or None, got 0"):
        panner.run("q", DOCS, k=0)


# ------------------------------------------------------------------ edges
def test_edge_panner_resolves_the_readers_recommended_profile() -> None:
    class Recommends:
        recommended_profile = "smollm2-135m-kv"

        def read(self, question: str, documents: Sequence[str], *, labels: object = None) -> Reading:
            return Reading()

    panner = GoldPanner(Recommends())
    assert list(panner.profile.tpr) == DetectorProfile.bundled("smollm2-135m-kv").tpr


def test_edge_panner_resolves_a_bundled_name() -> None:
    assert list(GoldPanner(None, "lost-in-the-middle").profile.tpr) == PROFILE.tpr


def _engine_imports() -> dict[str, set[str]]:
    """Per engine module, the absolute names of the modules it imports (static, from the AST;
    importing the engine at run time loads the package top level, which loads profiles)."""
    import ast
    from pathlib import Path

    from gold_panning_integrations import engine

    out: dict[str, set[str]] = {}
    for path in Path(engine.__file__).parent.glob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = "gold_panning_integrations" if node.level == 2 else "gold_panning_integrations.engine"
                mod = node.module or ""
                names.add(f"{base}.{mod}" if node.level else mod)
        out[path.name] = names
    return out


def test_engine_imports_neither_profiles_nor_pydantic() -> None:
    bad = {
        name: sorted(m for m in mods if m.startswith(("pydantic", "gold_panning_integrations.profiles")))
        for name, mods in _engine_imports().items()
    }
    assert {k: v for k, v in bad.items() if v} == {}


def test_the_import_scan_sees_relative_imports() -> None:
    assert "gold_panning_integrations.errors" in _engine_imports()["panner.py"]


def test_empty_result_has_no_documents() -> None:
    res = PanningResult.empty("random")
    assert (res.stop_reason, res.panned, res.calls, res.k, res.policy) == (
        "no-documents",
        False,
        0,
        0,
        "random",
    )
    assert res.posteriors.shape == (0,)


# ------------------------------------------------------------------ fatal reader errors
class Fatal:
    def __init__(self) -> None:
        self.calls = 0

    def read(self, question: str, documents: Sequence[str], *, labels: object = None) -> Reading:
        self.calls += 1
        raise FatalReaderError("401 from http://x/v1 (model m): check the API key", status_code=401)

    async def aread(self, question: str, documents: Sequence[str], *, labels: object = None) -> Reading:
        return self.read(question, documents)


def test_fatal_reader_error_ends_run_at_once() -> None:
    reader = Fatal()
    with pytest.raises(FatalReaderError, match="401 from http://x/v1"):
        GoldPanner(reader, PROFILE, rounds=5, on_failure="fallback").run("q", DOCS)
    assert reader.calls == 1


def test_fatal_reader_error_ends_arun_at_once() -> None:
    reader = Fatal()
    with pytest.raises(FatalReaderError, match="401 from http://x/v1"):
        asyncio.run(
            GoldPanner(reader, PROFILE, rounds=5, prompts_per_round=1, on_failure="fallback").arun("q", DOCS)
        )
    assert reader.calls == 1
