"""Reader options on the command line, shared by ``run``, ``calibrate`` and the lab's ``real``
benchmarks, and the reader they build; ``--reader simulated`` builds
:class:`~gold_panning_integrations.readers.simulated.LexicalSimulatedReader`."""

from __future__ import annotations

import argparse
import os
from typing import Any

import numpy as np

from ._options import READER_OPTIONS, options_taken
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
    for opt in READER_OPTIONS.values():
        if opt.flag is not None:
            kwargs = dict(opt.cli)
            default = default_mode if opt.name == "mode" else kwargs.pop("default_flag", None)
            g.add_argument(opt.flag, dest=opt.name, default=default, **kwargs)
    g.add_argument("--threads", type=int, default=None, help="CPU threads for --reader local")
    g.add_argument("--sim-profile", default="lost-in-the-middle", help=argparse.SUPPRESS)


def make_reader(args: argparse.Namespace, *, seed: int = 0) -> Any:
    """Build the reader the options ask for; errors say which option is missing."""
    if args.reader == "local":
        from .local import LocalReader

        return LocalReader(args.model_path, n_threads=args.threads, seed=seed, **_declared(args, LocalReader))
    if args.reader == "openai":
        if not args.model:
            raise ValueError("--reader openai needs --model NAME (and usually --base-url URL)")
        key = args.api_key or os.environ.get("OPENAI_API_KEY")
        if not key and args.base_url is None:
            raise ValueError("--reader openai needs an API key: pass --api-key or set OPENAI_API_KEY")
        from .openai import OpenAIReader

        return OpenAIReader(
            model=args.model,
            base_url=args.base_url,
            api_key=key or "not-needed",
            **_declared(args, OpenAIReader),
        )
    from ..profiles import load_profile

    return LexicalSimulatedReader(
        load_profile(args.sim_profile), rng=np.random.default_rng(seed), recommended_profile=args.sim_profile
    )


def _declared(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    """The declared reader options given on the command line (flags left unset, None, keep
    the reader's own default) that a reader of class ``cls`` takes."""
    given = {o.name: getattr(args, o.name, None) for o in options_taken(cls) if o.flag is not None}
    return {k: v for k, v in given.items() if v is not None}
