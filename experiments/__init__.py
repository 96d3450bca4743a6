"""The runner: entry point, validation, master logic, engines, results sink, sweeps and report (see docs/INTERFACES.md)."""
