"""Gold Panning side by side with the rerankers users would otherwise pick, on the user's
own endpoint and data: ``gold-panning evaluate`` (``gold-panning bench compare`` before 0.6).

* :mod:`.compare` - the command: its options (``register``) and its run (``main``).
* :mod:`._instances` - what is ranked: a built-in task (``kv``, ``nq``, ``litm-kv``) or a
  collection in the field's formats (BEIR, TREC, RAG; :mod:`..ir.collection`).
* :mod:`._methods` - the methods: our panning settings and the peers through their own
  packages, every call counted through one proxy (:mod:`._endpoints`).
* :mod:`._run` - every method on every instance, resumable from a checkpoint; ``--traces``.
* :mod:`._scoring` and :mod:`._calibration` - nDCG@10, MRR@10, Recall@k with intervals, the
  paired wins against the first stage, and the calibration table of the probabilities.
* :mod:`._report` - the Markdown tables and the ``--out`` files (TREC run files, qrels).

Importing this package imports none of its modules; the paper's panels, the simulations and
the latency and engine benchmarks are not here but in the repository's ``benchmarks/``
folder (not installed; see ``docs/layout.md``).
"""
