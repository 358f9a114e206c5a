"""Reranking a first stage's output in batch, without judgements: ``gold-panning rerank``.

* :mod:`._inputs`: the questions, from a JSONL file (``{"id", "question", "passages"}``,
  streamed) or a TREC run file with the queries and the corpus;
* :mod:`._run`: one question's random stream and record, and the scheduler that keeps
  questions in flight within the reader's shared limits;
* :mod:`._ledger`: what a checkpoint's records depend on (the reader, profile, engine
  options, seed and input), compared on every rerun;
* :mod:`._job`: the local job, its checkpoint (resumable after any stop) and its outputs
  (``rerank.jsonl``, ``run.trec``, ``summary.json``);
* :mod:`.ray`: the same job on a Ray cluster (``map_batches``, extra ``ray``).

Runs on the base install: nothing here imports bm25s, ir-measures, LangChain or LlamaIndex
(Ray only in :mod:`.ray`). docs/rerank.md has the recipes.
"""

from __future__ import annotations

from ._inputs import DEFAULT_DEPTH, JsonlQuestions, Question, RunQuestions, question_from_object
from ._job import (
    CHECKPOINT_NAME,
    JSONL_NAME,
    RUN_NAME,
    SUMMARY_NAME,
    JobResult,
    RerankCheckpoint,
    arerank_job,
    rerank_job,
    run_lines,
    run_scores,
    write_outputs,
)
from ._run import (
    arerank_question,
    arerank_stream,
    default_in_flight,
    question_k,
    question_record,
    question_rng,
)

__all__ = [
    "CHECKPOINT_NAME",
    "DEFAULT_DEPTH",
    "JSONL_NAME",
    "RUN_NAME",
    "SUMMARY_NAME",
    "JobResult",
    "JsonlQuestions",
    "Question",
    "RerankCheckpoint",
    "RunQuestions",
    "arerank_job",
    "arerank_question",
    "arerank_stream",
    "default_in_flight",
    "question_from_object",
    "question_k",
    "question_record",
    "question_rng",
    "rerank_job",
    "run_lines",
    "run_scores",
    "write_outputs",
]
