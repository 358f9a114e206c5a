"""Reranking evaluation the field's way, under ``gold-panning evaluate --task beir|trec|rag``:
test collections read defensively (:mod:`.collection`, :mod:`.files`), the first stage
(:mod:`.bm25`, :mod:`.first_stage`), metrics with intervals (:mod:`.ranking_metrics`, ir-measures)
and TREC run files (:mod:`.runfile`). Light to import: bm25s and ir-measures load when used.
"""
