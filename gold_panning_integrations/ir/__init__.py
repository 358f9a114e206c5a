"""Reranking evaluation the field's way: test collections, first stages, metrics, run files.

* :mod:`.collection`: BEIR folders, TREC topics/qrels/corpus/run files and RAG JSONL,
  read defensively (:mod:`.files`: one error naming the file and line);
* :mod:`.bm25`: the package's one BM25 (bm25s), and :mod:`.first_stage`: a collection's
  candidates (its run file, or BM25 at a depth);
* :mod:`.metrics`: nDCG@10, MRR@10, Recall@k, top-1/top-3 through ir-measures, bootstrap
  intervals and paired differences;
* :mod:`.runfile`: TREC run and qrels files, written atomically.

``gold-panning evaluate --task beir|trec|rag`` runs on these; the imports are light
(bm25s and ir-measures load when used).
"""
