"""Benchmarks behind ``gold-panning bench``.

Each module is one sub-command, listed in the static table
:data:`gold_panning_integrations.commands.bench.BENCHMARKS` (name, module, help), and
exposes ``register(subparsers)`` (adds its parser and sets ``func=main``) and
``main(args) -> int``. A module is imported only when its sub-command is parsed or its
help shown, so it may import what it needs at the top; a platform-specific module
(``resource``, ``fcntl``) is still best imported inside the function that uses it.

* :mod:`.sim` - the paper's simulated comparison and ablations
  (:func:`~gold_panning_integrations.bench.sim.run_sim_bench`).
* :mod:`.engine` - engine and simulator speed and memory
  (:func:`~gold_panning_integrations.bench.engine.run_engine_bench`).
* :mod:`.efficiency` - calls, tokens and rounds to reach PSC's F1, per feature (simulated).
* :mod:`.real` - GP-Belief vs GP-Entropy vs PSC with a real model
  (:func:`~gold_panning_integrations.bench.real.run_real`).
* :mod:`.real_efficiency` - the efficiency report and posterior calibration on a real
  model (:func:`~gold_panning_integrations.bench.real_efficiency.run_real_efficiency`).

The computations are pure functions of their arguments and an explicit seed; the
numbers are returned as JSON-ready dicts. Plotting needs the ``plot`` extra.
"""
