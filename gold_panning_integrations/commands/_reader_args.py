"""Reader options shared by ``run``, ``calibrate`` and ``bench real`` (cheap imports only)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..engine.simulate import SimulatedReader

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
        from ..readers.local import LocalReader

        return LocalReader(
            args.model_path,
            mode=mode or "answer",
            n_threads=args.threads,
            temperature=args.temperature,
            seed=seed,
            max_attempts=getattr(args, "max_attempts", None),
        )
    if args.reader == "openai":
        if not args.model:
            raise ValueError("--reader openai needs --model NAME (and usually --base-url URL)")
        key = args.api_key or os.environ.get("OPENAI_API_KEY")
        if not key and args.base_url is None:
            raise ValueError("--reader openai needs an API key: pass --api-key or set OPENAI_API_KEY")
        from ..readers.openai import OpenAIReader

        attempts = getattr(args, "max_attempts", None)
        return OpenAIReader(
            model=args.model,
            base_url=args.base_url,
            api_key=key or "not-needed",
            mode=mode or "cite",
            temperature=args.temperature,
            timeout=getattr(args, "timeout", 60.0),
            max_attempts=attempts if attempts is not None else 3,
        )
    from ..profiles import load_profile

    return LexicalSimulatedReader(load_profile(args.sim_profile), rng=np.random.default_rng(seed))


class LexicalSimulatedReader(SimulatedReader):
    """The engine's :class:`~gold_panning_integrations.engine.simulate.SimulatedReader`
    (citations at a profile's TPR/FPR by position) for prompts whose relevant document
    is unknown: each round, the documents sharing most words with the question are
    taken as the relevant ones. What ``--reader simulated`` builds (no model)."""

    model_name = "simulated"
    mode = "answer"

    def __init__(self, profile: Any, *, rng: np.random.Generator) -> None:
        super().__init__(profile, self._is_best, rng=rng)
        self.profile = profile
        self._best: set[str] = set()

    def _is_best(self, document: Any) -> bool:
        return str(document) in self._best

    def read(self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None) -> Any:
        """Cite by position at the profile's rates; ``labels`` change nothing here
        (a simulated model reads positions, and cited positions are returned)."""
        from ..readers.answer import normalize_tokens

        q = set(normalize_tokens(question))
        overlap = [len(q & set(normalize_tokens(d))) for d in documents]
        top = max(overlap, default=0)
        self._best = {str(d) for d, o in zip(documents, overlap) if o == top}
        return super().read(question, documents)

    async def aread(
        self, question: str, documents: Sequence[str], *, labels: Sequence[int] | None = None
    ) -> Any:
        return self.read(question, documents, labels=labels)

    def answer(self, question: str, documents: Sequence[str]) -> str | None:
        return None
