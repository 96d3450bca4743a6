"""Hydra's own config and names past a file name's length, through the real entry point: a name or key of 300
characters (an OSError traceback from a lookup of conf/), a launcher or sweeper key the chosen one does not have
(Hydra's "Error in call to target", or taken silently), a pkg:// search path that is not there (Hydra's warning,
twice, then a run), a launcher without -m (ignored), a bad --info topic: one line naming it, exit 2, nothing
written; and hydra.sweeper.* is no longer taken for hydra.sweep.*."""

import pytest

from experiments.errors import ConfigError

LONG = "a" * 300
SHORT = "a" * 20 + "..."
PARALLEL_KEYS = (
    "backend, batch_size, max_nbytes, mmap_mode, n_jobs, pre_dispatch, prefer, require, temp_folder, timeout, verbose"
)
LAUNCHERS = "basic, joblib, parallel, slurm, submitit_local, submitit_slurm"
TOPICS = "all, config, defaults, defaults-tree, plugins, searchpath"


def _one_line(entry_point, tmp_path, args):
    code, stderr = entry_point([*args[:1], f"results_dir={tmp_path}/res", "updates=3", *args[1:]])
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1, stderr[-3000:]
    assert list(tmp_path.iterdir()) == []
    return lines[0]


@pytest.mark.parametrize(
    "args,line",
    [
        # conf/<group>/<name>.yaml looked up for the name: OSError ENAMETOOLONG, a traceback
        ([f"algorithm.name={LONG}"], f"algorithm.name={SHORT}: 300 characters, at most 100"),
        ([f"problem.name={LONG}"], f"problem.name={SHORT}: 300 characters, at most 100"),
        # the key's config folder looked up for its options: a traceback
        ([f"{LONG}=1"], f"{SHORT}=1: no such config key"),
        ([f"problem.{LONG}=1"], "problem.aaaaaaaaaaaa...=1: not a key of problem=logreg_fmnist"),
    ],
)
def test_a_name_or_key_too_long_for_a_file_name_is_one_line(tmp_path, entry_point, args, line):
    assert _one_line(entry_point, tmp_path, args) == f"error: {line}"


@pytest.mark.parametrize(
    "args,line",
    [
        # the basic launcher has no keys: Hydra's 5-line "Error in call to target ... unexpected keyword", exit 1
        (
            ["-m", "+hydra.launcher.n_jobs=4", "workers=1,2"],
            "+hydra.launcher.n_jobs=4: not a key of hydra/launcher=basic (it has none)",
        ),
        # a misspelt key of the parallel launcher: accepted and ignored, exit 0
        (
            ["-m", "hydra/launcher=parallel", "+hydra.launcher.nmjobs=4", "workers=1,2"],
            f"+hydra.launcher.nmjobs=4: not a key of hydra/launcher=parallel (its keys: {PARALLEL_KEYS})",
        ),
        (
            ["-m", "hydra/launcher=parallel", "hydra.launcher.nmjobs=4", "workers=1,2"],
            f"hydra.launcher.nmjobs=4: not a key of hydra/launcher=parallel (its keys: {PARALLEL_KEYS})",
        ),
        (
            ["-m", "hydra/launcher=parallel", "hydra.launcher={nmjobs:4}", "workers=1,2"],
            f"hydra.launcher={{nmjobs:4}}: nmjobs is not a key of hydra/launcher=parallel (its keys: {PARALLEL_KEYS})",
        ),
        (
            ["-m", "+hydra.sweeper.x=1", "workers=1,2"],
            "+hydra.sweeper.x=1: not a key of hydra/sweeper=checked (its keys: max_batch_size, params)",
        ),
        # Hydra only warned (twice) and ran without it
        (
            ["hydra.searchpath=[pkg://nosuchpkg.conf]"],
            "hydra.searchpath: pkg://nosuchpkg.conf: no such Python package",
        ),
        (["hydra.searchpath=[pkg://os]"], "hydra.searchpath: pkg://os: no such Python package"),  # a module
        # without -m the launcher was ignored: one run in this process
        (
            ["hydra/launcher=parallel"],
            "hydra/launcher=parallel: launchers and sweepers run sweeps; add -m (one run runs in this process)",
        ),
        (
            ["hydra.sweeper.max_batch_size=1"],
            "hydra.sweeper.max_batch_size=1: launchers and sweepers run sweeps; add -m (one run runs in this process)",
        ),
        # the options Hydra has besides conf/'s (basic worked, and was not listed)
        (
            ["-m", "hydra/launcher=nosuch", "workers=1,2"],
            f"hydra/launcher=nosuch: In 'hydra/config': Could not find 'hydra/launcher/nosuch' (options: {LAUNCHERS})",
        ),
        (
            ["-m", "hydra/launcher=null", "workers=1,2"],
            f"hydra/launcher=null: a config group takes one of its options ({LAUNCHERS}); leave hydra/launcher= out "
            "for its default",
        ),
    ],
)
def test_hydra_s_own_keys_and_places_are_checked(tmp_path, entry_point, args, line):
    assert _one_line(entry_point, tmp_path, args) == f"error: {line}"


@pytest.mark.parametrize(
    "argv",
    [["--info", "bogus"], ["workers=2", "--info", "bogus"], ["--info=bogus"]],
)
def test_a_bad_info_topic_is_named(tmp_path, entry_point, argv):
    """``workers=2 --info bogus`` said "--info: put it before the overrides", ``--info bogus`` "... put it last"."""
    code, stderr = entry_point(argv, cwd=tmp_path)
    assert code == 2 and stderr.strip().splitlines() == [
        f"error: --info bogus: not a topic of --info; give one of {TOPICS} (or none: all)"
    ], stderr[-3000:]
    assert list(tmp_path.iterdir()) == []


def test_the_api_refuses_a_missing_pkg_search_path(tmp_path):
    from experiments.api import run

    with pytest.raises(ConfigError) as info:
        run(["hydra.searchpath=[pkg://nosuchpkg.conf]", "updates=3"], results_dir=tmp_path / "res")
    assert str(info.value) == "hydra.searchpath: pkg://nosuchpkg.conf: no such Python package"
    assert list(tmp_path.iterdir()) == []


def test_a_sweeper_key_is_not_taken_for_hydra_s_sweep_folder(tmp_path):
    """``hydra.sweep`` (its folders) is the harness's; ``hydra.sweeper.max_batch_size`` is the sweeper's own key: it
    was refused as "set by the harness (Hydra's scratch folders ...)"."""
    from experiments.settings.compose import precheck

    jobs = precheck([f"results_dir={tmp_path}/res", "updates=3", "hydra.sweeper.max_batch_size=1", "workers=1,2"], True)
    assert [s.workers for s in jobs] == [1, 2]
    with pytest.raises(ConfigError, match=r"^hydra.sweep.dir=/tmp/x: set by the harness"):
        precheck([f"results_dir={tmp_path}/res", "hydra.sweep.dir=/tmp/x", "workers=1,2"], True)
    assert list(tmp_path.iterdir()) == []
