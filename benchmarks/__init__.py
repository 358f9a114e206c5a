"""Gold Panning's lab: what we run to study the reranker, kept in the repository and out of
the wheel (``docs/layout.md`` says what lives here and why). Run from a clone's root:

* ``python -m benchmarks NAME [options]`` (0.5's ``python -m benchmarks NAME``, same options;
  the table is :data:`benchmarks._cli.BENCHMARKS`):

  * :mod:`.sim` - the paper's simulated comparison and ablations
    (:func:`~benchmarks.sim.run_sim_bench`).
  * :mod:`.engine` - engine and simulator speed and memory
    (:func:`~benchmarks.engine.run_engine_bench`).
  * :mod:`.efficiency` - calls, tokens and rounds to reach PSC's F1, per feature (simulated).
  * :mod:`.real` - GP-Belief vs GP-Entropy vs PSC with a real model
    (:func:`~benchmarks.real.run_real`).
  * :mod:`.real_efficiency` - the efficiency report and posterior calibration on a real
    model (:func:`~benchmarks.real_efficiency.run_real_efficiency`).
  * :mod:`.latency` - seconds per query beside the peers on a loopback server.

* ``python -m benchmarks.calibration_sim budget|learn`` - the calibration studies.
* ``python -m benchmarks.build_samples`` - builds the NQ and key-value samples and the
  BEIR fixture that ship in the package's ``_data/``.

The lab imports the package (``gold_panning_integrations``); the package never imports the
lab. The computations are pure functions of their arguments and an explicit seed; the
numbers are returned as JSON-ready dicts. Plotting needs the ``plot`` extra.
"""
