"""The APAM harness: run experiments, load their results (docs/api.md).

    from experiments import load, run
    result = run(["workers=4", "epochs=1"], results_dir="scratch")
    df = load("scratch")

Rooms: ``settings`` (typed settings, built once from the command line), ``training`` (the master, staleness
policies, delays, sampling, the recorder), ``engines`` (simulated, shared_memory, distributed), ``clock`` (the
simulated clock's cost model, stored costs, measurement, predictions), ``store`` (results on disk), ``sweeps``,
``analysis`` (numbers from CSVs), ``report``; entry points ``run``, ``reproduce``, ``calibrate``, ``aggregate``.
"""

import sys

if sys.argv[:1] == ["-m"]:  # imported to locate ``python -m experiments.<command>``: guard its loading (stops.py)
    from experiments.stops import while_loading

    while_loading()

__all__ = ["RunResult", "load", "run"]


def __getattr__(name: str):
    # The API imports torch and the engines: loaded on first use, so that ``import experiments.errors`` (the sweeper
    # plugin, the settings) stays light.
    if name in __all__:
        from experiments import api

        return getattr(api, name)
    raise AttributeError(f"module 'experiments' has no attribute {name!r}")
