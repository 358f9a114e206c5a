"""Gold Panning side by side with the rerankers users would otherwise pick, on the user's
own endpoint and data: ``gold-panning evaluate`` (:mod:`.compare`; the command's options and
run). Its parts: :mod:`._instances` (what is ranked), :mod:`._methods` (ours and the peers),
:mod:`._endpoints` (the embedded server and the counting proxy), :mod:`._compare_run` (resumable
runs), :mod:`._scoring` and :mod:`._calibration` (the metrics), :mod:`._report` (tables,
plots, ``--out`` files).

Importing this package imports none of its modules; the paper's panels and the lab's
benchmarks live in the repository's ``benchmarks/`` folder (not installed).
"""
