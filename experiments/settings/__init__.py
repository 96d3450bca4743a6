"""Typed settings: the command line and Hydra composed into one frozen, validated settings object, built once.

Every entry path (a run, a sweep, the Python API) goes through this room; nothing below it reads a raw config."""
