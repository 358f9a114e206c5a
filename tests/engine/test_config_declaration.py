"""Every engine option is declared once, in PanningConfig; its docstring, the adapters'
fields and the CLI's flags are derived from that declaration."""

from __future__ import annotations

import argparse
import dataclasses
import re
import typing

import pytest

from gold_panning_integrations import PanningConfig
from gold_panning_integrations.engine.config import PanningOption


def _names() -> list[str]:
    return [f.name for f in dataclasses.fields(PanningConfig)]


def test_options_list_every_field_in_order_with_its_default() -> None:
    specs = PanningConfig.options()
    assert [s.name for s in specs] == _names()
    defaults = PanningConfig()
    for s in specs:
        assert getattr(defaults, s.name) == s.default
        assert s.check(s.default) is None, s.name  # PanningConfig skips checking a default
        if s.profile_default is not None:  # with_profile fills it without a second check
            assert s.check(s.profile_default) is None, s.name
        assert s.doc and s.summary, s.name


def test_the_options_include_the_retriever_prior() -> None:
    specs = {s.name: s for s in PanningConfig.options()}
    assert specs["retriever_prior"].default == "auto"
    assert specs["retriever_prior"].choices == ("auto", "rank", "score", "none")
    # prior_temperature belongs to the retriever: None leaves it to the profile (issue 42)
    # the rank prior's older shape is set, or the rank map's (issue 48)
    assert (specs["prior_top10_recall"].default, specs["prior_temperature"].default) == (None, None)
    assert (specs["prior_head_decay"].default, specs["expected_relevant"].default) == (None, None)
    # the prior's mass and the silent rate come from the profile, else 1 and 0.1 (never k)
    assert (specs["expected_relevant"].profile_default, specs["silent_rate"].profile_default) == (1.0, 0.1)
    # a reader the profile does not describe: a uniform prior on the share of positional replies
    assert specs["content_free"].profile_default == 0.5
    assert specs["k"].default == 4


def test_types_and_choices_come_from_the_annotations() -> None:
    specs = {s.name: s for s in PanningConfig.options()}
    assert (specs["rounds"].kind, specs["rounds"].optional) == (int, False)
    assert (specs["max_calls"].kind, specs["max_calls"].optional) == (int, True)
    assert (specs["stop_at"].kind, specs["stop_at"].optional) == (float, True)
    assert specs["robust"].kind is bool
    assert specs["spread"].choices == typing.get_args(typing.Literal["draw", "stride", "copies"])
    assert specs["policy"].choices == ("belief", "entropy", "random", "oracle")


def test_the_class_docstring_is_generated_from_the_declarations() -> None:
    doc = " ".join((PanningConfig.__doc__ or "").split())
    for s in PanningConfig.options():
        assert f"{s.name}: {s.doc}" in doc, s.name


def test_declared_docs_say_what_an_option_does_not_what_was_measured() -> None:
    for s in PanningConfig.options():
        assert not re.search(r"\d%|measured on|in our simulations", s.doc), s.name


def test_prune_below_is_not_a_posterior_floor() -> None:
    spec = next(s for s in PanningConfig.options() if s.name == "prune_below")
    assert "not a posterior floor" in spec.doc


def test_option_spec_validate_names_the_option() -> None:
    spec = next(s for s in PanningConfig.options() if s.name == "rounds")
    assert isinstance(spec, PanningOption)
    with pytest.raises(ValueError, match=r"rounds must be an int >= 1, got 0"):
        spec.validate(0)


def test_config_is_keyword_only() -> None:
    with pytest.raises(TypeError):
        PanningConfig(4)  # type: ignore[misc]


# ------------------------------------------------------------------- the adapters
def test_adapter_fields_are_generated_from_the_declaration() -> None:
    from gold_panning_integrations.integrations._framework_base import (
        ADAPTER_OWN_OPTIONS,
        ENGINE_OPTIONS,
        PanningFields,
    )

    assert set(ENGINE_OPTIONS) == set(_names()) - ADAPTER_OWN_OPTIONS == set(_names()) - {"k"}
    for s in PanningConfig.options():
        if s.name in ADAPTER_OWN_OPTIONS:
            continue
        field = PanningFields.model_fields[s.name]
        assert field.default == s.default, s.name
        assert field.description == s.doc, s.name


def test_adapter_options_override_a_config_only_when_set() -> None:
    from doubles import ScriptedReader

    from gold_panning_integrations import GoldPanningCompressor

    c = GoldPanningCompressor(
        reader=ScriptedReader(), config=PanningConfig.paper(rounds=7, policy="entropy"), rounds=2
    )
    cfg = c.panning_config(3)
    assert (cfg.rounds, cfg.policy, cfg.k, cfg.robust) == (2, "entropy", 3, False)
    # an option set to its default value explicitly still overrides the config's
    c = GoldPanningCompressor(reader=ScriptedReader(), config=PanningConfig(rounds=7), rounds=4)
    assert c.panning_config().rounds == 4
    assert (
        GoldPanningCompressor(reader=ScriptedReader(), config=PanningConfig(rounds=7)).panning_config().rounds
        == 7
    )


@pytest.mark.parametrize(
    ("options", "pattern"),
    [
        ({"rounds": 0}, r"rounds must be an int >= 1, got 0"),
        ({"rounds": "4"}, r"rounds must be an int >= 1, got '4'"),
        ({"spread": "zigzag"}, r"spread must be 'draw', 'stride' or 'copies', got 'zigzag'"),
        ({"retriever_prior": "bm25"}, r"retriever_prior must be 'auto', 'rank', 'score' or 'none'"),
        ({"policy": "oracle"}, r"policy 'oracle' is for simulation only"),
    ],
)
def test_adapter_options_are_checked_by_the_config(options: dict[str, object], pattern: str) -> None:
    from doubles import ScriptedReader

    from gold_panning_integrations import GoldPanningPostprocessor

    with pytest.raises(ValueError, match=pattern):
        GoldPanningPostprocessor(reader=ScriptedReader(), **options)


# ------------------------------------------------ one default per option, every entry point
def _shared_defaults(name: str) -> dict[str, object]:
    """The default of option ``name`` on each entry point, read from what each declares:
    ``PanningConfig.options()`` (GoldPanner's options), ``GoldPanner``'s signature
    (``seed``), the adapters' pydantic fields (their own ``k`` / ``top_n`` too) and
    ``gold-panning run``'s parser (a suppressed default means the declaration's)."""
    import inspect

    from gold_panning_integrations import (
        GoldPanner,
        GoldPanningCompressor,
        GoldPanningPostprocessor,
        GoldPanningRetriever,
    )

    declared = {s.name: s.default for s in PanningConfig.options()}
    own = {GoldPanningRetriever: "k", GoldPanningCompressor: "top_n", GoldPanningPostprocessor: "top_n"}
    engine = declared[name] if name in declared else inspect.signature(GoldPanner).parameters[name].default
    out: dict[str, object] = {"GoldPanner": engine}
    for adapter, k_name in own.items():
        out[adapter.__name__] = adapter.model_fields[k_name if name == "k" else name].default
    action = _run_parser()._option_string_actions["--" + name.replace("_", "-")]
    out["gold-panning run"] = declared[name] if action.default is argparse.SUPPRESS else action.default
    return out


def _shared_cases() -> list[str]:
    return [s.name for s in PanningConfig.options()] + ["seed"]


@pytest.mark.parametrize("name", _shared_cases())
def test_every_shared_option_has_one_default_on_every_entry_point(name: str) -> None:
    defaults = _shared_defaults(name)
    assert len({repr(v) for v in defaults.values()}) == 1, defaults


def test_the_shared_defaults_read_what_each_entry_point_declares() -> None:
    """The comparison above reads real declarations: ``k`` is 4 on the adapters
    (``top_n`` on two of them) and the declaration's on GoldPanner and the CLI."""
    k = _shared_defaults("k")
    assert k["GoldPanningRetriever"] == k["GoldPanningCompressor"] == k["GoldPanningPostprocessor"] == 4
    assert k["GoldPanner"] == k["gold-panning run"] == PanningConfig().k
    assert _shared_defaults("seed") == dict.fromkeys(k, None)
    assert _shared_defaults("rounds") == dict.fromkeys(k, 2)


# ----------------------------------------------------------------------- the CLI
def _run_parser() -> argparse.ArgumentParser:
    from gold_panning_integrations.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["run"]


def test_run_has_a_flag_for_every_option() -> None:
    flags = set(_run_parser()._option_string_actions)
    for name in _names():
        assert "--" + name.replace("_", "-") in flags, name
    assert "--no-robust" in flags and "--windows" in flags


def test_run_flags_parse_to_the_option_types_and_only_given_ones_are_set() -> None:
    from gold_panning_integrations.cli.commands._config_args import given_options

    args = _run_parser().parse_args(
        [
            "--demo",
            "--rounds",
            "2",
            "--prompts-per-round",
            "3",
            "--stop-at",
            "0.6",
            "--retriever-prior",
            "score",
            "--no-robust",
            "--max-calls",
            "none",
        ]
    )
    assert given_options(args) == {
        "rounds": 2,
        "prompts_per_round": 3,
        "stop_at": 0.6,
        "retriever_prior": "score",
        "robust": False,
        "max_calls": None,
    }
    assert given_options(_run_parser().parse_args(["--demo"])) == {}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--rounds", "0"], "argument --rounds: must be an int >= 1, got '0'"),
        (["--rounds", "two"], "argument --rounds: expected a whole number, got 'two'"),
        (["--stop-at", "1.5"], r"argument --stop-at: must be a number in (0, 1) or None, got '1.5'"),
        (["--spread", "zigzag"], "argument --spread: must be 'draw', 'stride' or 'copies', got 'zigzag'"),
    ],
)
def test_run_flags_are_checked_by_the_declaration(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from gold_panning_integrations.cli import EXIT_ERROR, main

    with pytest.raises(SystemExit) as exit_info:  # argparse's usage error
        main(["run", "--demo", "--reader", "simulated", *argv])
    assert exit_info.value.code == EXIT_ERROR
    assert message in capsys.readouterr().err


def test_run_help_takes_each_flags_help_from_the_doc() -> None:
    text = " ".join(_run_parser().format_help().split())
    assert "Hard budget of model calls (prompts) per question (>= 1) (default: None)" in text
    assert "--blind-rate FLOAT Probability, in [0, 1)" in text
    assert "(default: the profile's, else 0.1)" in text
    assert "--policy" not in text  # hidden, still accepted


def test_named_settings_are_options_laid_over_the_defaults() -> None:
    from gold_panning_integrations.engine.config import SETTINGS

    assert set(SETTINGS) == {"lowest-latency", "lowest-cost", "highest-accuracy"}
    # every setting is a set of declared, valid options
    for name, options in SETTINGS.items():
        config = PanningConfig.setting(name)
        assert {k: getattr(config, k) for k in options} == dict(options)
    assert (PanningConfig.setting("lowest-cost").rounds, PanningConfig.setting("lowest-cost").stop_at) == (
        4,
        0.6,
    )
    # options given beside a setting win
    assert PanningConfig.setting("lowest-latency", prompts_per_round=6).prompts_per_round == 6
    with pytest.raises(ValueError, match="unknown setting 'fast'; choose one of lowest-latency, lowest-cost"):
        PanningConfig.setting("fast")
    with pytest.raises(TypeError, match="unknown panning option"):
        PanningConfig.setting("lowest-cost", roundz=2)


def test_the_defaults_send_two_rounds_of_three_prompts() -> None:
    config = PanningConfig()
    assert (config.rounds, config.prompts_per_round, config.spread) == (2, 3, "draw")


# ------------------------------------------------------------------- the panner's signature
def test_the_panner_names_every_option_in_its_signature() -> None:
    """``GoldPanner`` takes each ``PanningConfig`` option as a keyword-only parameter of the
    same name, in declaration order, so an IDE and ``help()`` show them: an option added
    to ``PanningConfig`` fails here until it is listed. Each defaults to ``config``'s value
    (the defaults are declared once, in ``PanningConfig``)."""
    import inspect
    import pydoc

    from gold_panning_integrations import GoldPanner
    from gold_panning_integrations.panning import FROM_CONFIG

    params = inspect.signature(GoldPanner).parameters
    own = ("reader", "profile", "config", "seed", "rng", "task")
    assert [n for n in params if n not in own] == _names()
    assert all(params[n].kind is inspect.Parameter.KEYWORD_ONLY for n in _names())
    assert all(params[n].default is FROM_CONFIG for n in _names())
    assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    shown = pydoc.render_doc(GoldPanner, renderer=pydoc.plaintext)
    assert [n for n in _names() if f"{n}: " not in shown] == []
    panner = GoldPanner(None, "lost-in-the-middle", PanningConfig(rounds=5, k=2), k=None)
    assert (panner.config.rounds, panner.config.k, panner.config.spread) == (5, None, "draw")
