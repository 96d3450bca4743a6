"""Results on disk: a run's folder and the experiment's summary (one atomic writer), run ids, provenance."""
