"""Every figure of the harness, drawn from the result CSV files alone (``python -m plots PATH``).

``draw_experiment(path, fmt="png")`` redraws the figures that apply to one experiment folder; ``draw_path``
also accepts a folder of experiments (``results/``). One function per figure family, each taking an
``ExperimentData`` (or a folder path) and a format and returning the files it wrote.
"""

import sys

if sys.argv[:1] == ["-m"]:  # imported to locate ``python -m plots``: guard its loading (experiments/stops.py)
    from experiments.stops import while_loading

    while_loading()

import matplotlib  # noqa: E402

matplotlib.use("Agg")  # before pyplot is imported anywhere in this package: no display needed

from .curves import draw_algorithm_comparison, draw_curves_by_workers, draw_delay_sweep
from .data import ExperimentData, load_experiment
from .draw import FIGURES, draw_experiment, draw_path, find_experiments, trace_gaps
from .errors import FigureError, MissingColumnError, PlotError
from .speedup import draw_speedup, draw_time_per_epoch
from .staleness import draw_staleness
from .stragglers import draw_stragglers
from .tau import draw_tau_threshold
from .validation import draw_model_validation, pair_clocks

__all__ = [
    "FIGURES",
    "ExperimentData",
    "FigureError",
    "MissingColumnError",
    "PlotError",
    "draw_algorithm_comparison",
    "draw_curves_by_workers",
    "draw_delay_sweep",
    "draw_experiment",
    "draw_model_validation",
    "draw_path",
    "draw_speedup",
    "draw_staleness",
    "draw_stragglers",
    "draw_tau_threshold",
    "draw_time_per_epoch",
    "find_experiments",
    "load_experiment",
    "pair_clocks",
    "trace_gaps",
]
