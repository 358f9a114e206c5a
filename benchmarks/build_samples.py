"""Build the real data samples that ship inside the package (``gold_panning_integrations/_data``).

Sources (see ``_data/NOTICE.md`` for licences): the "Lost in the Middle" repository
(nelson-liu/lost-in-the-middle, MIT, Copyright (c) 2023 Nelson Liu):

* ``qa_data/nq-open-oracle.jsonl.gz``: NQ-Open questions with their gold Wikipedia passage
  (CC BY-SA 3.0 text);
* ``kv_retrieval_data/kv-retrieval-75_keys.jsonl.gz``: synthetic key-value retrieval.

What is built (deterministic: same inputs and seed, byte-identical outputs):

``nq_sample.json.gz``
    Every distinct gold passage becomes one BM25 document (``title`` + ``text``, Okapi BM25,
    ``k1=1.5``, ``b=0.75``, lower-cased word tokens, English stop words removed, ties broken
    by passage id). ``--questions`` questions are drawn with ``numpy.random.default_rng(seed)``
    among those whose gold passage contains one of their answers; for each, the passages
    BM25 ranks highest for the question text become its ``--distractors`` distractors,
    skipping its own gold passage and every passage that contains one of its answers (as
    a normalised token sequence), so answer attribution stays unambiguous. This is the
    Lost-in-the-Middle multi-document QA construction with the gold passages of other
    questions as the retrieval corpus. Passages are stored once and referenced by id; only
    the passages some question uses are kept. The first half of the drawn questions is
    split ``calibration``, the second half ``test`` (held out).
``kv_sample.json.gz``
    ``--kv`` examples of kv-retrieval-75 drawn with the same seed, unchanged.
``nq-test-beir/``
    The BEIR-format fixture (:func:`build_nq_beir`), built from the NQ sample just written:
    ``--fixture-questions`` held-out (``test``) questions in sample order, each with its gold
    passage (qrels grade 1) and its first ``--fixture-distractors`` distractors in the
    corpus; a question is skipped when a passage of the corpus other than its gold holds
    one of its answers, so the qrels are complete for answer attribution.

Run from the repository root (the default source is ``../shared/data``)::

    python -m benchmarks.build_samples --source ../shared/data

``--fixture-only`` rebuilds just the fixture from the shipped NQ sample (no source needed).

BM25 is :class:`gold_panning_integrations.ir.bm25.BM25` (bm25s with the tokenizer above; it
reproduces the sample built with the package's earlier pure-Python BM25 byte for byte).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import logging
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gold_panning_integrations.ir.bm25 import BM25, tokenize
from gold_panning_integrations.ir.bm25 import strip_accents as _strip_accents
from gold_panning_integrations.ir.collection import FIXTURE
from gold_panning_integrations.tasks.samples import NQSample, load_sample

__all__ = [
    "BM25",
    "FORMAT_VERSION",
    "answer_in_text",
    "build_kv_sample",
    "build_nq_beir",
    "build_nq_sample",
    "main",
    "tokenize",
    "write_json_gz",
]

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
NQ_FILE = "nq-open-oracle.jsonl.gz"
KV_FILE = "kv-retrieval-75_keys.jsonl.gz"
_DEFAULT_OUT = Path(__file__).resolve().parents[1] / "gold_panning_integrations" / "_data"

_NON_WORD = re.compile(r"[^\w\s]|_", re.UNICODE)
_ARTICLES = frozenset({"a", "an", "the"})


# --------------------------------------------------------------------------- text
def _answer_tokens(text: str) -> list[str]:
    s = _NON_WORD.sub(" ", _strip_accents(text).lower())
    return [t for t in s.split() if t not in _ARTICLES]


def answer_in_text(answer: str, text: str) -> bool:
    """True when the normalised answer (lower case, no accents, punctuation or articles)
    occurs as a contiguous token sequence in ``text``; an empty answer matches nothing."""
    a = _answer_tokens(answer)
    if not a:
        return False
    t = _answer_tokens(text)
    m = len(a)
    return any(t[i : i + m] == a for i in range(len(t) - m + 1))


# --------------------------------------------------------------------------- io
def _read_jsonl_gz(path: Path) -> Iterator[dict[str, Any]]:
    if not path.is_file():
        raise FileNotFoundError(
            f"source file not found: {str(path)!r}; pass --source with the folder holding {NQ_FILE} and "
            f"{KV_FILE} (from nelson-liu/lost-in-the-middle)"
        )
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def write_json_gz(obj: Any, path: Path) -> int:
    """Write ``obj`` as compact JSON in a reproducible gzip file (mtime 0); returns bytes written."""
    raw = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), sort_keys=False).encode("utf-8")
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=9, mtime=0) as gz:
        gz.write(raw)
    data = buf.getvalue()
    path.write_bytes(data)
    return len(data)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------- builders
def _gold_corpus(rows: Sequence[dict[str, Any]]) -> tuple[list[tuple[str, str]], list[int]]:
    """Distinct gold passages, in order of first appearance in the source file.

    Returns:
        ``(corpus, gold_of)``: the ``(title, text)`` of each passage (whitespace collapsed), and
        the passage id of each row's gold passage, length ``len(rows)``.
    """
    key_to_pid: dict[tuple[str, str], int] = {}
    corpus: list[tuple[str, str]] = []
    gold_of: list[int] = []
    for line_no, row in enumerate(rows):
        ctxs = row.get("ctxs") or []
        gold = next((c for c in ctxs if c.get("isgold")), ctxs[0] if ctxs else None)
        if gold is None:
            raise ValueError(f"source record {line_no} has no passage")
        key = (" ".join(str(gold.get("title") or "").split()), " ".join(str(gold.get("text") or "").split()))
        if key not in key_to_pid:
            key_to_pid[key] = len(corpus)
            corpus.append(key)
        gold_of.append(key_to_pid[key])
    return corpus, gold_of


def _answers(row: dict[str, Any]) -> list[str]:
    """A source row's non-blank answers, as strings."""
    return [str(a) for a in row["answers"] if str(a).strip()]


def _mentions_any(passage: tuple[str, str], answers: Sequence[str]) -> bool:
    """True when the passage (``"title: text"``) contains one of ``answers``."""
    title, text = passage
    return any(answer_in_text(a, f"{title}: {text}") for a in answers)


def _usable(row: dict[str, Any], gold: tuple[str, str]) -> bool:
    """True when the row has an answer and its gold passage contains one."""
    answers = _answers(row)
    return bool(answers) and _mentions_any(gold, answers)


def _pick_distractors(
    bm25: BM25, question: str, *, gold: int, corpus: list[tuple[str, str]], answers: list[str], count: int
) -> list[int]:
    """The ``count`` passages BM25 ranks highest for ``question``, skipping the gold passage
    and every passage that contains one of ``answers``."""
    picked: list[int] = []
    for pid in bm25.rank(question):
        if pid == gold or _mentions_any(corpus[pid], answers):
            continue
        picked.append(pid)
        if len(picked) == count:
            break
    return picked


def _renumber(chosen: list[dict[str, Any]]) -> list[int]:
    """Keep only the passages some question uses, renumbered in source order (``chosen`` is
    updated in place); returns the old ids of the kept passages, in their new order."""
    used = sorted({q["gold"] for q in chosen} | {p for q in chosen for p in q["distractors"]})
    new_id = {old: new for new, old in enumerate(used)}
    for q in chosen:
        q["gold"] = new_id[q["gold"]]
        q["distractors"] = [new_id[p] for p in q["distractors"]]
    return used


def build_nq_sample(
    rows: Sequence[dict[str, Any]],
    *,
    questions: int,
    distractors: int,
    rng: np.random.Generator,
    source: str = NQ_FILE,
) -> dict[str, Any]:
    """The NQ sample as a JSON-ready dict (see the module docstring for the construction).

    Args:
        rows: Source records ``{"question", "answers", "ctxs": [{"title", "text", "isgold"}]}``.
        questions: Questions to draw (first half ``calibration``, second half ``test``).
        distractors: Retrieved distractor passages per question.
        rng: Draws the questions.
        source: Name recorded in the sample's metadata.
    """
    if questions < 2:
        raise ValueError(f"questions must be >= 2 (one per split), got {questions}")
    if distractors < 1:
        raise ValueError(f"distractors must be >= 1, got {distractors}")
    corpus, gold_of = _gold_corpus(rows)
    bm25 = BM25([f"{t} {x}" for t, x in corpus])
    candidates = [i for i in range(len(rows)) if _usable(rows[i], corpus[gold_of[i]])]
    if len(candidates) < questions:
        raise ValueError(f"only {len(candidates)} usable questions, asked for {questions}")
    order = rng.permutation(len(candidates))
    chosen: list[dict[str, Any]] = []
    for rank_in_draw, j in enumerate(order[:questions]):
        i = candidates[int(j)]
        row = rows[i]
        answers = _answers(row)
        picked = _pick_distractors(
            bm25, str(row["question"]), gold=gold_of[i], corpus=corpus, answers=answers, count=distractors
        )
        chosen.append(
            {
                "id": f"nq-{i}",
                "question": str(row["question"]),
                "answers": answers,
                "gold": gold_of[i],
                "distractors": picked,
                "split": "calibration" if rank_in_draw < questions // 2 else "test",
            }
        )
    used = _renumber(chosen)
    return {
        "format": FORMAT_VERSION,
        "name": "nq",
        "source": source,
        "retrieval_corpus_passages": len(corpus),
        "distractors_per_question": distractors,
        "passages": [[corpus[old][0], corpus[old][1]] for old in used],
        "questions": chosen,
    }


def build_kv_sample(
    rows: Sequence[dict[str, Any]], *, examples: int, rng: np.random.Generator, source: str = KV_FILE
) -> dict[str, Any]:
    """``examples`` kv-retrieval records drawn with ``rng`` (kept in draw order, unchanged)."""
    if not 1 <= examples <= len(rows):
        raise ValueError(f"examples must be in 1..{len(rows)}, got {examples}")
    idx = rng.choice(len(rows), size=examples, replace=False)
    out = []
    for i in idx:
        r = rows[int(i)]
        out.append(
            {
                "id": f"kv-{int(i)}",
                "key": r["key"],
                "value": r["value"],
                "records": [[str(k), str(v)] for k, v in r["ordered_kv_records"]],
            }
        )
    return {"format": FORMAT_VERSION, "name": "kv", "source": source, "examples": out}


FIXTURE_NOTICE = """# nq-test-beir: a BEIR-format fixture of held-out NQ questions

Built by `python -m benchmarks.build_samples` (`build_nq_beir`) from
the shipped `nq_sample.json.gz` (see `../NOTICE.md`): {questions} questions of the sample's
held-out `test` split (the labelled profile `smollm2-135m-nq-labelled` was fitted on the
other split, `calibration`), taken in sample order; each brings its gold passage (qrels
grade 1) and its first {distractors} BM25-retrieved distractors into the corpus
({passages} passages). A question is skipped when a passage of the corpus other than its
gold holds one of its answers, so every answer-bearing passage is judged.

Files: `corpus.jsonl` (`{{"_id", "title", "text"}}`, ids `p<sample passage id>`),
`queries.jsonl` (`{{"_id", "text", "metadata": {{"answers"}}}}`, ids of the sample),
`qrels/test.tsv` (`query-id, corpus-id, score`).

Licences: the questions and answers come from NQ-Open (Natural Questions) through the
"Lost in the Middle" repository (MIT License, Copyright (c) 2023 Nelson Liu; full text in
`../NOTICE.md`). The passages are text from **Wikipedia, the free encyclopedia**
(https://en.wikipedia.org), by Wikipedia contributors, under the **Creative Commons
Attribution-ShareAlike 3.0 Unported licence (CC BY-SA 3.0)**,
https://creativecommons.org/licenses/by-sa/3.0/; redistributed unchanged apart from
whitespace being collapsed. If you redistribute them, credit Wikipedia and keep them under
CC BY-SA 3.0.
"""


def build_nq_beir(sample: NQSample, *, questions: int = 50, distractors: int = 5) -> dict[str, str]:
    """The BEIR-format fixture (see the module docstring) as file name -> UTF-8 text.

    Args:
        sample: The NQ sample (its ``test`` split is used).
        questions: Questions to keep, ``>= 1``.
        distractors: Distractors per question brought into the corpus, ``>= 0``.

    Returns:
        ``{"corpus.jsonl", "queries.jsonl", "qrels/test.tsv", "NOTICE.md"}`` -> text.
    """
    if questions < 1 or distractors < 0:
        raise ValueError(f"need questions >= 1 and distractors >= 0, got {questions!r}, {distractors!r}")
    texts = {p.id: (p.title, p.text) for p in sample.passages}
    corpus: set[int] = set()
    kept: list[Any] = []
    for q in sample.split("test"):
        new = {q.gold, *q.distractors[:distractors]}
        pool = corpus | new
        own = any(_mentions_any(texts[pid], q.answers) for pid in pool - {q.gold})
        others = any(_mentions_any(texts[pid], k.answers) for k in kept for pid in new - {k.gold})
        if own or others:
            continue
        kept.append(q)
        corpus = pool
        if len(kept) == questions:
            break
    if len(kept) < questions:
        raise ValueError(f"only {len(kept)} test questions fit, asked for {questions}")

    def line(obj: dict[str, Any]) -> str:
        return json.dumps(obj, ensure_ascii=False) + "\n"

    return {
        "corpus.jsonl": "".join(
            line({"_id": f"p{pid}", "title": texts[pid][0], "text": texts[pid][1]}) for pid in sorted(corpus)
        ),
        "queries.jsonl": "".join(
            line({"_id": q.id, "text": q.question, "metadata": {"answers": list(q.answers)}}) for q in kept
        ),
        "qrels/test.tsv": "query-id\tcorpus-id\tscore\n" + "".join(f"{q.id}\tp{q.gold}\t1\n" for q in kept),
        "NOTICE.md": FIXTURE_NOTICE.format(
            questions=len(kept), distractors=distractors, passages=len(corpus)
        ),
    }


def write_fixture(files: dict[str, str], out: Path) -> None:
    """Write the fixture's files under ``out`` (folders created)."""
    for name, text in files.items():
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))
        logger.info("%s: %d bytes, sha256 %s", path, path.stat().st_size, _sha256(path))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description="Build the data samples shipped in gold_panning_integrations/_data."
    )
    p.add_argument("--source", type=Path, default=Path("../shared/data"), help="folder with the source files")
    p.add_argument(
        "--out", type=Path, default=_DEFAULT_OUT, help="output folder (default: the package's _data)"
    )
    p.add_argument(
        "--questions", type=int, default=400, help="NQ questions (default 400: 200 + 200 held out)"
    )
    p.add_argument(
        "--distractors", type=int, default=20, help="retrieved distractors per question (default 20)"
    )
    p.add_argument("--kv", type=int, default=100, help="kv-retrieval-75 examples (default 100)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument(
        "--fixture-questions", type=int, default=50, help="questions of the BEIR fixture (default 50)"
    )
    p.add_argument(
        "--fixture-distractors",
        type=int,
        default=5,
        help="distractors per fixture question in its corpus (default 5)",
    )
    p.add_argument(
        "--fixture-only",
        action="store_true",
        help="rebuild only the BEIR fixture, from the shipped NQ sample (no --source needed)",
    )
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.fixture_only:
        fixture = build_nq_beir(
            load_sample("nq"), questions=args.fixture_questions, distractors=args.fixture_distractors
        )
        write_fixture(fixture, args.out / FIXTURE)
        return 0

    nq_rows = list(_read_jsonl_gz(args.source / NQ_FILE))
    kv_rows = list(_read_jsonl_gz(args.source / KV_FILE))
    rng = np.random.default_rng(args.seed)
    nq = build_nq_sample(nq_rows, questions=args.questions, distractors=args.distractors, rng=rng)
    kv = build_kv_sample(kv_rows, examples=args.kv, rng=rng)
    args.out.mkdir(parents=True, exist_ok=True)
    for obj, name in ((nq, "nq_sample.json.gz"), (kv, "kv_sample.json.gz")):
        path = args.out / name
        size = write_json_gz(obj, path)
        logger.info("%s: %d bytes, sha256 %s", path, size, _sha256(path))
    logger.info(
        "nq: %d questions, %d passages (of %d in the retrieval corpus); kv: %d examples",
        len(nq["questions"]),
        len(nq["passages"]),
        nq["retrieval_corpus_passages"],
        len(kv["examples"]),
    )
    fixture = build_nq_beir(
        load_sample("nq", path=args.out / "nq_sample.json.gz"),
        questions=args.fixture_questions,
        distractors=args.fixture_distractors,
    )
    write_fixture(fixture, args.out / FIXTURE)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
