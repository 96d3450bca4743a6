"""Sweeps of many runs: step-size tuning across seeds and the plan of an experiment's sweeps."""

OUTCOME: dict = {}
"""How the last sweep in this process ended, written by the sweeper (hydra_plugins/apam_sweeper): ``jobs`` and
``failed`` (jobs that raised or returned ``failed``). Kept here, not in the plugin's module, because Hydra's plugin
discovery executes the plugin's module again, which would bind a new dict."""
