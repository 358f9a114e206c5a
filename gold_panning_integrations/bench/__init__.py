"""Benchmarks behind ``gold-panning bench``.

Each module is one sub-command of ``gold-panning bench`` and exposes
``register(subparsers)`` (argparse only, cheap) and ``main(args) -> int``:

* :mod:`.sim` - the paper's simulated comparison and ablations
  (:func:`~gold_panning_integrations.bench.sim.run_sim_bench`).
* :mod:`.engine` - engine and simulator speed and memory
  (:func:`~gold_panning_integrations.bench.engine.run_engine_bench`).

The computations are pure functions of their arguments and an explicit seed; the
numbers are returned as JSON-ready dicts. Plotting needs the ``plot`` extra.
"""
