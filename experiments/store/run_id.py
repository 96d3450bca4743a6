"""A run's id: the folder name under ``<results_dir>/<experiment>/`` and the key of its summary row, made from
the job's command-line overrides and seed (:func:`make_run_id`). Keys that name no part of a run are left out."""

from __future__ import annotations

import functools
import hashlib
import math
import os
import re

from experiments.settings.grammar import read_value
from experiments.store.inputs import INPUT_KEYS

IGNORED_IN_RUN_ID = {
    "results_dir",
    "force",
    "progress",
    "experiment",
    "profile",
    "experiment_id",
    "device",
    "threads",
    "lr_tuning_seed",
    "tuning",
}
"""Top-level keys (and their sub-keys) that name no part of a run: where results go, how they are shown, how a tuning
seed searches (a run's own step factor is in its config)."""


LOOKUP_TABLES = {"profiles", "points", "compute_models", "by_kind", "real_engine", "report", "reference_sweep"}
"""Top-level tables that experiment configs index into (conf/experiment/*.yaml): what a run takes from them shows in
the keys it sets (workers, engine.compute_base_s, delay.*, epochs), so an edit elsewhere in a table is no change."""


_UNSAFE = re.compile(r"[^A-Za-z0-9.+-]+")


_KEPT_AS_HYPHEN = re.compile(r"[A-Za-z0-9.+=_-]*")
"""Characters an override may hold for its id fragment to stay as it always was: the fragment turns ``=`` and ``_``
into ``-`` (config keys and option names are written with ``_``, never with ``-`` in the same place), so nothing
that tells runs apart is lost."""


def _fragment(override: str) -> str:
    """``key=value`` as it appears in a run id: every run of characters outside ``[A-Za-z0-9.+-]`` (``=`` and ``_``
    included) becomes one ``-``, and ``-`` at either end is dropped."""
    return _UNSAFE.sub("-", override.replace("=", "-")).strip("-")


FREE_TEXT_KEYS = frozenset(
    {"problem.name", "problem.model", "problem.dataset", "algorithm.name", "algorithm.rule", "engine.calibration",
     "engine.master_addr"}
)  # fmt: skip
"""Keys whose value is text of the user's choosing (a ``str`` setting, not one of a closed set of options: the test
``test_free_text_keys_are_the_string_settings`` reads them off the schema). In such a value ``_`` and ``-`` are
different names (``problem.name=p_q`` and ``p-q``), so a ``_`` in it is information the fragment would lose."""


def _lossless(override: str) -> bool:
    """True when :func:`_fragment` keeps everything that tells ``override`` apart from another: only ``=`` and
    ``_`` are replaced (one character each by one ``-``; a ``_`` only outside the value of a :data:`FREE_TEXT_KEYS`
    key) and nothing is cut at the ends."""
    key, _, value = override.partition("=")
    if key in FREE_TEXT_KEYS and "_" in value:
        return False
    return _KEPT_AS_HYPHEN.fullmatch(override) is not None and _fragment(override) == override.replace(
        "=", "-"
    ).replace("_", "-")


@functools.lru_cache(maxsize=4096)
def _canonical(override: str) -> str:
    """``key=value`` with the value written the one way Hydra writes a sweep's job back (its override grammar's
    reading, rendered as ``-m`` renders it): ``lr=1e-3`` and ``lr=0.001`` are one run, as are ``workers=+2`` and
    ``2``, ``x= 1.0`` and ``x=1.0``, ``false``, ``False`` and ``FALSE``, ``NULL`` and ``null``, ``'abc'`` and ``abc``,
    ``[-10, 10]`` and ``[-10,10]``; a plain run names a value as a sweep's job does (``1e-5`` is ``1e-05``, ``false``
    is ``False`` there). ``-0.0`` is ``0.0``. An int and a float stay apart (``epochs=2`` and ``epochs=2.0``), as the
    committed ids hold both kinds; inf, nan, a sweep and text Hydra cannot read are kept as given. A path of a file a
    run reads is normalized (``os.path.normpath``)."""
    key, sep, text = override.partition("=")
    if sep and key in INPUT_KEYS and text and text != "null":  # a file: /d/./a.svm and /d//a.svm are /d/a.svm
        return f"{key}={os.path.normpath(text)}"
    parsed = read_value(text) if sep else None
    if parsed is None:  # text Hydra cannot read: left to the checks that name it
        return override
    value = parsed.value()
    if parsed.is_sweep_override() or (isinstance(value, float) and not math.isfinite(value)):
        return override
    if isinstance(value, float):
        return f"{key}={value + 0.0}"
    if isinstance(value, str) and _plain(value):  # 'abc' is abc; a quoted number or path stays quoted
        return f"{key}={value}"
    return f"{key}={parsed.get_value_element_as_str()}"


def _plain(text: str) -> bool:
    """Whether Hydra reads ``text`` unquoted as that very string."""
    parsed = read_value(text)
    return parsed is not None and not parsed.is_sweep_override() and parsed.value() == text


def _names_file(override: str) -> bool:
    """Whether ``override`` sets a key that names a file a run reads (experiments/store/inputs.py ``INPUT_KEYS``)."""
    return override.split("=", 1)[0] in INPUT_KEYS and not override.endswith("=null")


def _as_file(override: str) -> str:
    """``key=<absolute path>`` of an override naming a file: ``a.svm`` run from two folders is two files, and
    ``/d/./a.svm``, ``/d//a.svm`` and ``/d/a.svm`` are one."""
    key, _, value = override.partition("=")
    return f"{key}={os.path.abspath(value.strip(chr(39) + chr(34)))}"


def make_run_id(overrides: list[str], seed: int) -> str:
    """A deterministic run id from the run's command-line overrides and its seed (no timestamps).

    Overrides are sorted, keys in ``IGNORED_IN_RUN_ID`` (where results go, how they are shown) and Hydra's own
    (``hydra.*``, ``hydra/launcher=...``: a sweep's jobs never see them; the Python API passes them on) dropped, and
    ``seed=<seed>`` always included: ``['workers=4', 'algorithm=apam']`` -> ``algorithm-apam_workers-4_seed-0``.
    A number is written as Hydra reads it (:func:`_canonical`: ``lr=1e-3`` and ``lr=0.001`` give one id). A value
    equal to the default but given anyway still names the run (``algorithm=apam`` where apam is the default): the id
    is of the command line, not of the composed config.
    An override whose fragment loses information (a path's ``/``, spaces, brackets, commas, quotes, runs of replaced
    characters, a ``_`` in a name of the user's choosing: :func:`_lossless`) would let two different inputs share an
    id (``problem.path=/d/a/b`` and ``problem.path=/d/a-b``): then the id ends in ``_h-`` and 10 hex digits of the
    sha1 of those overrides' exact text, sorted; an override naming a file a run reads (``problem.path``,
    ``delay.replay``, ...) always adds the hash, of its absolute path (``a_b.svm`` and ``a-b.svm``, or ``a.svm``
    from two folders, are other files). Ids of overrides that lose nothing are as they always were (the committed
    results are keyed by them). Ids longer than 120 characters are cut and end in a hash of the whole.
    """
    kept = []
    for o in overrides:
        key = o.split("=", 1)[0].lstrip("+~")
        if key.split(".")[0] in IGNORED_IN_RUN_ID or key.startswith(("hydra.", "hydra/")) or key == "seed":
            continue
        kept.append(_canonical(o.lstrip("+~")))
    kept = sorted(kept) + [f"seed={seed}"]
    rid = "_".join(_fragment(o) for o in kept)
    lossy = [_as_file(o) if _names_file(o) else o for o in kept if _names_file(o) or not _lossless(o)]
    if lossy:
        rid += "_h-" + hashlib.sha1("\n".join(lossy).encode("utf-8", "surrogateescape")).hexdigest()[:10]
    if len(rid) > 120:
        rid = rid[:100] + "-" + hashlib.sha1(rid.encode()).hexdigest()[:12]
    return rid
