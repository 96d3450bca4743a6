"""Numbers computed from an experiment folder's CSVs, shared by the report (experiments/report) and the figures.

- :mod:`.speedup`: speed-up and efficiency against P = 1 from summary.csv (speedup.csv, docs/INTERFACES.md).
- :mod:`.staleness`: the runs' staleness histograms and the total variation distance between a measured run's and
  its simulated twin's.
- :mod:`.compute_times`: how late emulated waits ended and how long real gradients took (compute_times.csv).
- :mod:`.configs`: what the runs' config.yaml files say (each algorithm's step sizes).
- :mod:`.costs`: the cost model's master saturation P* from the summary's ``cost_*`` columns.
- :mod:`.targets`: targets set by the serial runs (the best P = 1 method's loss at 1/2 and 9/10 of its budget) and
  every run's time to any target from its trace (the summary's rule: reached for good, interpolated).
- :mod:`.statistics`: percentile bootstrap intervals over seeds, ranks shared where intervals overlap, identical
  runs.
- :mod:`.comparisons`: methods compared per problem, P and compute model with both (async_methods).

Every function reads CSVs or frames and returns frames or plain numbers; none writes, except
:func:`.speedup.write_speedup`.
"""
