"""Engine flags generated from the one declaration of every option (cheap imports only):
:func:`add_config_arguments` adds one flag per ``PanningConfig`` option (type, choices, help
and check from the declaration); :func:`given_options` reads back the ones given."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Collection, Mapping
from typing import Any

from ...engine.config import PanningConfig, PanningOption

__all__ = ["add_config_arguments", "flag", "given_options"]


def flag(name: str) -> str:
    """The CLI flag of an option: ``max_calls`` -> ``--max-calls``."""
    return "--" + name.replace("_", "-")


def int_at_least(low: int, *, words: tuple[str, ...] = ()) -> Callable[[str], Any]:
    """argparse ``type=`` for a whole number >= ``low`` (or one of ``words``, kept as text):
    ``int_at_least(0, words=("fresh",))`` takes ``3`` and ``fresh`` and says of ``-1``
    "expected a non-negative integer or 'fresh', got '-1'"."""
    what = "a non-negative integer" if low == 0 else f"an integer >= {low}"
    what += "".join(f" or {w!r}" for w in words)

    def parse(text: str) -> Any:
        if text in words:
            return text
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if value < low:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    parse.__name__ = "int"
    return parse


def _parse(spec: PanningOption) -> Callable[[str], Any]:
    """argparse ``type=`` for ``spec``: the text as the option's type, checked by the
    option's own check (the message says what the value must be)."""

    def parse(text: str) -> Any:
        value: Any = text
        if spec.optional and text.lower() == "none":
            value = None
        elif spec.kind in (int, float):
            try:
                value = spec.kind(text)
            except ValueError as err:
                what = "a whole number" if spec.kind is int else "a number"
                raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from err
        message = spec.check(value)
        if message is not None:
            raise argparse.ArgumentTypeError(f"must be {message}, got {text!r}")
        return value

    parse.__name__ = spec.kind.__name__  # argparse names the type in its own messages
    return parse


def _help(spec: PanningOption, default: Any) -> str:
    shown: Any = default
    if default is None:
        shown = "None" if spec.profile_default is None else f"the profile's, else {spec.profile_default:g}"
    return f"{spec.summary} (default: {shown})".replace("%", "%%")


def add_config_arguments(
    p: argparse.ArgumentParser,
    *,
    only: Collection[str] | None = None,
    hidden: Collection[str] = (),
    defaults: Mapping[str, Any] | None = None,
    title: str = "panning options (PanningConfig)",
) -> None:
    """Add one flag per engine option to ``p``, in a group titled ``title``.

    Args:
        p: The (sub-)command's parser.
        only: The options to add (default: all), in declaration order.
        hidden: Options that work but are left out of ``--help``.
        defaults: Options whose value is always set, with this command's default (the
            others are set only when given, so the declaration's default or a demo's own
            setting applies; their help shows the declaration's default).
    """
    defaults = dict(defaults or {})
    group = p.add_argument_group(title)
    for spec in PanningConfig.options():
        if only is not None and spec.name not in only:
            continue
        default = defaults.get(spec.name, spec.default)
        kw: dict[str, Any] = {
            "dest": spec.name,
            "default": defaults.get(spec.name, argparse.SUPPRESS),
            "help": argparse.SUPPRESS if spec.name in hidden else _help(spec, default),
        }
        if spec.kind is bool and not spec.optional:
            kw["action"] = argparse.BooleanOptionalAction
        else:
            kw["type"] = _parse(spec)
            kw["metavar"] = "{" + ",".join(spec.choices) + "}" if spec.choices else spec.kind.__name__.upper()
        group.add_argument(flag(spec.name), **kw)


def given_options(args: argparse.Namespace) -> dict[str, Any]:
    """The engine options present in ``args`` (given on the command line, or set by a
    command's own defaults), as keyword arguments for ``PanningConfig.from_options``."""
    names = {spec.name for spec in PanningConfig.options()}
    return {name: value for name, value in vars(args).items() if name in names}
