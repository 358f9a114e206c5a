"""Reader options on the command line, shared by ``run``, ``calibrate`` and the ``bench real``
benchmarks, and the reader they build; ``--reader simulated`` builds
:class:`~gold_panning_integrations.readers.simulated.LexicalSimulatedReader`."""

from __future__ import annotations

import argparse
import os
from typing import Any

import numpy as np

from .simulated import LexicalSimulatedReader

__all__ = ["LexicalSimulatedReader", "add_reader_arguments", "make_reader"]


def add_reader_arguments(p: argparse.ArgumentParser, *, default_mode: str | None = None) -> None:
    """``--reader``, ``--model-path``, ``--base-url``, ``--model``, ``--api-key``, ``--mode``,
    ``--response-format``, ``--cache``, ``--requests-per-minute``, ..."""
    g = p.add_argument_group("reader")
    g.add_argument(
        "--reader",
        choices=("local", "openai", "simulated"),
        default="local",
        help="local: embedded model in process (default); openai: an OpenAI-compatible endpoint",
    )
    g.add_argument("--model-path", default=None, help="GGUF file for --reader local (default: SmolLM2-135M)")
    g.add_argument(
        "--base-url", default=None, help="endpoint for --reader openai (e.g. http://127.0.0.1:8080/v1)"
    )
    g.add_argument("--model", default=None, help="model name for --reader openai")
    g.add_argument("--api-key", default=None, help="API key for --reader openai (default: $OPENAI_API_KEY)")
    g.add_argument(
        "--mode",
        choices=("answer", "cite"),
        default=default_mode,
        help="answer: the model answers, supporting documents count as cited (default for local); "
        "cite: the model returns document numbers (default for openai)",
    )
    g.add_argument(
        "--response-format",
        choices=("auto", "json_schema", "json_object", "text"),
        default="auto",
        help="output format asked of --reader openai in cite mode; auto (default): json_schema, falling "
        "back to json_object, then text, when the server rejects one (remembered per endpoint)",
    )
    g.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (default 0)")
    g.add_argument("--threads", type=int, default=None, help="CPU threads for --reader local")
    g.add_argument(
        "--timeout",
        type=_positive_float,
        default=60.0,
        help="deadline in seconds for each whole request to --reader openai (default 60)",
    )
    g.add_argument(
        "--max-attempts",
        type=_positive_int,
        default=None,
        help="attempts per reading, retries included (default 3; 1 for --reader local at temperature 0)",
    )
    g.add_argument(
        "--cache",
        default=None,
        metavar="FILE",
        help="reply cache file (SQLite, created when absent): a prompt asked again with the same model "
        "and options is answered from it without a model call (default: no cache)",
    )
    g.add_argument(
        "--requests-per-minute",
        type=_positive_int,
        default=None,
        help="most requests to --reader openai in any 60-second window (default: no limit)",
    )
    g.add_argument(
        "--tokens-per-minute",
        type=_positive_int,
        default=None,
        help="most tokens (estimated, then as reported) to --reader openai in any 60-second window",
    )
    g.add_argument("--sim-profile", default="lost-in-the-middle", help=argparse.SUPPRESS)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from err
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from err
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def make_reader(args: argparse.Namespace, *, seed: int = 0) -> Any:
    """Build the reader the options ask for; errors say which option is missing."""
    mode = args.mode
    if args.reader == "local":
        from .local import LocalReader

        return LocalReader(
            args.model_path,
            mode=mode or "answer",
            n_threads=args.threads,
            temperature=args.temperature,
            seed=seed,
            max_attempts=getattr(args, "max_attempts", None),
            cache=getattr(args, "cache", None),
        )
    if args.reader == "openai":
        if not args.model:
            raise ValueError("--reader openai needs --model NAME (and usually --base-url URL)")
        key = args.api_key or os.environ.get("OPENAI_API_KEY")
        if not key and args.base_url is None:
            raise ValueError("--reader openai needs an API key: pass --api-key or set OPENAI_API_KEY")
        from .openai import OpenAIReader

        attempts = getattr(args, "max_attempts", None)
        return OpenAIReader(
            model=args.model,
            base_url=args.base_url,
            api_key=key or "not-needed",
            mode=mode or "cite",
            temperature=args.temperature,
            timeout=getattr(args, "timeout", 60.0),
            max_attempts=attempts if attempts is not None else 3,
            response_format=getattr(args, "response_format", "auto"),
            cache=getattr(args, "cache", None),
            requests_per_minute=getattr(args, "requests_per_minute", None),
            tokens_per_minute=getattr(args, "tokens_per_minute", None),
        )
    from ..profiles import load_profile

    return LexicalSimulatedReader(
        load_profile(args.sim_profile), rng=np.random.default_rng(seed), recommended_profile=args.sim_profile
    )
