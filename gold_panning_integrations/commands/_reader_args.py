"""Reader options shared by ``run``, ``calibrate`` and ``bench real`` (cheap imports only)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["LexicalSimulatedReader", "add_reader_arguments", "make_reader"]


def add_reader_arguments(p: argparse.ArgumentParser, *, default_mode: str | None = None) -> None:
    """``--reader``, ``--model-path``, ``--base-url``, ``--model``, ``--api-key``, ``--mode``, ..."""
    g = p.add_argument_group("reader")
    g.add_argument(
        "--reader",
        choices=("local", "openai", "simulated"),
        default="local",
        help="local: embedded model in process (default); openai: an OpenAI-compatible endpoint",
    )
    g.add_argument("--model-path", default=None, help="GGUF file for --reader local (default: SmolLM2-135M)")
    g.add_argument("--base-url", default=None, help="endpoint for --reader openai (e.g. http://127.0.0.1:8080/v1)")
    g.add_argument("--model", default=None, help="model name for --reader openai")
    g.add_argument("--api-key", default=None, help="API key for --reader openai (default: $OPENAI_API_KEY)")
    g.add_argument(
        "--mode",
        choices=("answer", "cite"),
        default=default_mode,
        help="answer: the model answers, supporting documents count as cited (default for local); "
        "cite: the model returns document numbers (default for openai)",
    )
    g.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (default 0)")
    g.add_argument("--threads", type=int, default=None, help="CPU threads for --reader local")
    g.add_argument("--sim-profile", default="lost-in-the-middle", help=argparse.SUPPRESS)


def make_reader(args: argparse.Namespace, *, seed: int = 0) -> Any:
    """Build the reader the options ask for; errors say which option is missing."""
    mode = args.mode
    if args.reader == "local":
        from ..readers.local import LocalReader

        return LocalReader(
            args.model_path,
            mode=mode or "answer",
            n_threads=args.threads,
            temperature=args.temperature,
            seed=seed,
        )
    if args.reader == "openai":
        if not args.model:
            raise ValueError("--reader openai needs --model NAME (and usually --base-url URL)")
        key = args.api_key or os.environ.get("OPENAI_API_KEY")
        if not key and args.base_url is None:
            raise ValueError("--reader openai needs an API key: pass --api-key or set OPENAI_API_KEY")
        from ..readers.openai import OpenAIReader

        return OpenAIReader(
            model=args.model, base_url=args.base_url, api_key=key or "not-needed", mode=mode or "cite"
        )
    from ..profiles import load_profile

    return LexicalSimulatedReader(load_profile(args.sim_profile), rng=np.random.default_rng(seed))


class LexicalSimulatedReader:
    """Test reader: the relevant document is the one sharing most words with the
    question; citations follow a profile's TPR/FPR by position (no model)."""

    model_name = "simulated"
    mode = "answer"

    def __init__(self, profile: Any, *, rng: np.random.Generator) -> None:
        self.profile = profile
        self.rng = rng
        self.calls = 0

    def read(self, question: str, documents: Sequence[str]) -> Any:
        from ..engine.curves import resample_curve
        from ..engine.reading import Reading
        from ..readers.answer import normalize_tokens

        self.calls += 1
        m = len(documents)
        if m == 0:
            return Reading(cited=())
        q = set(normalize_tokens(question))
        overlap = np.array([len(q & set(normalize_tokens(d))) for d in documents])
        rel = overlap == overlap.max()
        tpr = resample_curve(self.profile.tpr, m)
        fpr = resample_curve(self.profile.fpr, m)
        cited = np.flatnonzero(self.rng.random(m) < np.where(rel, tpr, fpr))
        return Reading(cited=tuple(int(c) for c in cited), answer=None)

    async def aread(self, question: str, documents: Sequence[str]) -> Any:
        return self.read(question, documents)

    def answer(self, question: str, documents: Sequence[str]) -> str | None:
        return None
