"""Sweeps of many runs: step-size tuning across seeds and the plan of an experiment's sweeps."""
