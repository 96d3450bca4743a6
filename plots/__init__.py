"""Every figure of the harness, drawn from the result CSV files alone (``python -m plots PATH``).

``draw_experiment(path, fmt="png")`` redraws the figures that apply to one experiment folder; ``draw_path``
also accepts a folder of experiments (``results/``). One function per figure family, each taking an
``ExperimentData`` (or a folder path) and a format and returning the files it wrote.
"""

import matplotlib

matplotlib.use("Agg")  # before pyplot is imported anywhere in this package: no display needed

from .curves import draw_algorithm_comparison, draw_curves_by_workers, draw_delay_sweep  # noqa: E402
from .data import ExperimentData, load_experiment  # noqa: E402
from .draw import FIGURES, draw_experiment, draw_path, find_experiments  # noqa: E402
from .errors import FigureError, MissingColumnError, PlotError  # noqa: E402
from .speedup import draw_speedup, draw_time_per_epoch  # noqa: E402
from .staleness import draw_staleness  # noqa: E402
from .stragglers import draw_stragglers  # noqa: E402
from .tau import draw_tau_threshold  # noqa: E402
from .validation import draw_model_validation, pair_clocks  # noqa: E402

__all__ = [
    "ExperimentData", "FIGURES", "FigureError", "MissingColumnError", "PlotError", "draw_algorithm_comparison",
    "draw_curves_by_workers", "draw_delay_sweep", "draw_experiment", "draw_model_validation", "draw_path",
    "draw_speedup", "draw_staleness", "draw_stragglers", "draw_tau_threshold", "draw_time_per_epoch",
    "find_experiments", "load_experiment", "pair_clocks",
]
