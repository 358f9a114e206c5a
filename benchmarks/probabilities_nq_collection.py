"""Write the held-out NQ collection of docs/probabilities.md's real-model runs (BEIR format).

The corpus is every distinct gold passage of the 2,655 NQ-Open questions of the "Lost in
the Middle" file (``nq-open-oracle.jsonl.gz``, e.g. ``../shared/data``); the queries are
the 400 questions of the package's NQ sample, under two qrels files: ``calibration`` (200
questions: fit a recalibration map on these) and ``test`` (200 held out: never used to fit
a profile or a map). Each question's own gold passage is judged 2 and every other corpus
passage holding one of its answers 1, so ``gold-panning evaluate --relevance-level 2`` scores the
gold alone and level 1 the answer-bearing passages. ``gold-panning evaluate --task beir`` then
ranks the whole corpus with BM25 and reranks its top ``--n``: a question whose gold BM25
misses stays in, with no relevant candidate (6% of NQ questions at depth 10).

    python -m benchmarks.probabilities_nq_collection ../shared/data/nq-open-oracle.jsonl.gz nq-heldout
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

from benchmarks.build_samples import _mentions_any
from gold_panning_integrations.tasks import load_sample


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", help="nq-open-oracle.jsonl.gz (the Lost in the Middle format)")
    ap.add_argument("out", help="folder to write (corpus.jsonl, queries.jsonl, qrels/*.tsv)")
    args = ap.parse_args()
    with gzip.open(args.source, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    passages: dict[tuple[str, str], str] = {}
    for row in rows:
        gold = next(c for c in row["ctxs"] if c.get("isgold", True))
        passages.setdefault((gold["title"], gold["text"]), f"p{len(passages)}")
    sample = load_sample("nq")
    out = Path(args.out)
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    with (out / "corpus.jsonl").open("w", encoding="utf-8") as f:
        for (title, text), pid in passages.items():
            f.write(json.dumps({"_id": pid, "title": title, "text": text}, ensure_ascii=False) + "\n")
    with (out / "queries.jsonl").open("w", encoding="utf-8") as f:
        for q in sample.questions:
            f.write(
                json.dumps({"_id": q.id, "text": q.question, "metadata": {"answers": list(q.answers)}}) + "\n"
            )
    for split in ("calibration", "test"):
        lines = ["query-id\tcorpus-id\tscore\n"]
        answer_bearing = 0
        for q in sample.split(split):
            row = rows[int(q.id.split("-")[1])]  # the sample's ids are the file's line numbers
            assert row["question"] == q.question, q.id
            gold = next(c for c in row["ctxs"] if c.get("isgold", True))
            gold_id = passages[(gold["title"], gold["text"])]
            lines.append(f"{q.id}\t{gold_id}\t2\n")
            for passage, pid in passages.items():
                if pid != gold_id and _mentions_any(passage, q.answers):
                    lines.append(f"{q.id}\t{pid}\t1\n")
                    answer_bearing += 1
        (out / "qrels" / f"{split}.tsv").write_text("".join(lines), encoding="utf-8")
        print(
            f"{split}: {len(lines) - 1 - answer_bearing} questions, {answer_bearing} other answer-bearing passages"
        )
    print(f"wrote {out} ({len(passages)} passages)")


if __name__ == "__main__":
    main()
