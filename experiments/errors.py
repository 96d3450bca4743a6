"""Errors the runner reports to users as one line and exit code 2."""


class ConfigError(ValueError):
    """A bad configuration value: the message names the key and the value (e.g. ``workers=0: must be >= 1``)."""


class WorkerLost(RuntimeError):
    """A worker process or rank stopped answering or died during a run (real engines)."""
