"""Bad input: through the real entry point (``python -m experiments.run``), a one-line error naming the key and the
value, exit code 2, nothing written under results_dir. One table for every
kind of bad input: a bad value or type, an unknown option or key, a rule between keys, a folder that cannot be
written, a bad sweep or launcher; each job of a sweep is checked before any runs."""

import os
import re
from pathlib import Path

import pytest

from conftest import REPO

REPLAY = REPO / "tests" / "fixtures" / "replay"  # files that are no compute_times.csv a run wrote
TIMELINE = REPO / "tests" / "fixtures" / "timeline"  # files that are no timeline.csv a run wrote

# (command line, what the one-line error must name: a string or a tuple of strings, all in the line)
CASES = [
    # --------------------------------------------------------------- options and keys
    (["algorithm=nope"], "algorithm=nope"),
    (["problem=nope"], "problem=nope"),
    (["wokers=2"], "wokers=2"),
    (["+foo=1"], "+foo=1"),
    (["++bar=1"], "++bar=1"),
    (["--config-dir", "conf", "+foo=1"], "+foo=1"),
    (["-cn", "config", "+foo=1"], "+foo=1"),
    (["engine.handoff=foo"], "engine.handoff=foo"),
    # an option's label, not a choice of option: "engine.clock=wall: must be simulated", a key the user never set
    (["engine=shared_memory", "engine.name=simulated"], "engine.name=simulated: set by the engine option; choose"),
    (["delay.model=fixed"], "delay.model=fixed: set by the delay option; choose it with delay=<option>"),
    # a name of the user's choosing that is another option's: a logistic regression recorded (and judged) as LeNet5
    (["problem.name=lenet5_fmnist"], "problem.name=lenet5_fmnist: the name of another problem option"),
    (["algorithm.name=async_sgd"], "algorithm.name=async_sgd: the name of another algorithm option"),
    # past what epoll and time_t take: an OverflowError traceback from the first wait, and a failed row
    (["engine=shared_memory", "engine.timeout_s=1e10"], "engine.timeout_s=1e10: must be a number <= 1e+06"),
    # the flags that show a config check the overrides as a run does (Hydra printed them unchecked, or a traceback)
    (["--cfg", "job", "foo=1"], "foo=1: no such config key"),
    (["--cfg", "job", "epochs=-1"], "epochs=-1"),
    (["--info", "defaults-tree", "problem=nope"], "problem=nope"),
    (
        ["--info", "workers=2"],
        ("--info results_dir=", "--info takes one of all, config"),
    ),  # its value: the next word  # a shared_memory key, not the default engine's
    # Hydra's completion never completes `python -m`: each form was a traceback or a script completing nothing
    (["--shell-completion"], "--shell-completion: Hydra completes scripts run as `python app.py`"),
    (["-sc", "query=bash"], "--shell-completion: Hydra completes scripts"),  # KeyError: 'COMP_LINE'
    (["-sc", "query=wor"], "--shell-completion: Hydra completes scripts"),  # No completion plugin for 'wor'
    (["-sc", "install=bash"], "--shell-completion: Hydra completes scripts"),
    # Hydra's rerun of a pickled config skipped every check: a missing or foreign file was a traceback
    (["--experimental-rerun=/tmp/apam-test-no-such.pickle"], "--experimental-rerun: not supported"),
    (["--experimental-rerun", "/tmp/apam-test-no-such.pickle"], "--experimental-rerun: not supported"),
    (["--hydra-help", "updates=5"], "--hydra-help: shows Hydra's own help and takes no overrides"),  # a traceback
    (["--cfg", "bogus"], "--cfg bogus: --cfg takes one of job, hydra, all"),  # argparse's usage block
    (["--package", "foo"], "--package: picks the part of the config --cfg shows; add --cfg job"),  # it ran the job
    # a package the shown config lacks: Hydra's "package 'nonexist' not found in config", exit 1
    (["--package", "nonexist", "--cfg", "job"], "--package nonexist: no such key in the job's config"),
    (["--cfg", "job", "-p", "hydra.job"], "--package hydra.job: no such key in the job's config"),
    (["--cfg", "hydra", "-p", "problem"], "--package problem: --cfg hydra shows Hydra's own config, under hydra"),
    (["-"], "-: not an option of python -m experiments.run"),  # Hydra's LexerNoViableAltException
    # an address that does not resolve, or is another machine's: refused before the store retries for minutes
    (["engine=distributed", "engine.master_addr=256.1.1.1"], ("engine.master_addr=256.1.1.1", "does not resolve")),
    (["engine=distributed", "engine.master_addr=203.0.113.77"], ("engine.master_addr=203.0.113.77", "this machine")),
    # --------------------------------------------------------------- top-level values
    (["workers=0"], "workers=0"),
    (["workers='4'"], "workers='4': must be an integer, not a quoted string"),
    (["force='true'"], "force='true': must be true or false, not a quoted string"),
    # a leading zero is text in Hydra's grammar: it was "workers='02': ... not a quoted string"
    (["workers=02"], "workers=02: must be an integer (Hydra reads a number with a leading zero as text: write 2)"),
    # a byte the locale cannot decode (0xff in a file name): a UnicodeEncodeError traceback in the run id
    (["problem=logreg_libsvm", "problem.path=/tmp/bad\udcff.svm"], "problem.path=/tmp/bad\ufffd.svm: not UTF-8 text"),
    (["experiment_id=x\udcff"], "experiment_id=x\ufffd: not UTF-8 text"),
    # a newline typed in a value: shown as \n, the error stays one line (it was two)
    (["experiment_id=a\nb"], "experiment_id=a\\nb: not an override Hydra can read"),
    (["problem=logreg_libsvm", "problem.path='/tmp/a\nb'"], "problem.path=/tmp/a\\nb: no such file"),
    # past what a process can hold: an OverflowError, a MemoryError or torch's overflow traceback at run time
    (["workers=99999999999999999999"], "workers=99999999999999999999: must be an integer <= 4096"),
    (["threads=100000"], "threads=100000: must be an integer <= 1024"),
    (["algorithm.bounds=[-1e39,1e39]"], "bounds[0]=-1e+39: beyond float32's range"),
    # Hydra's own errors, exit 1 or a traceback: now one line each
    (["--resolve", "updates=5"], "--resolve: resolves the interpolations of the config --cfg shows; add --cfg job"),
    (["~algorithm.bounds"], "~algorithm.bounds: every key of a run is read; set it (null where it may be) instead"),
    (["-m", "hydra/launcher=parallel,basic", "workers=1"], "hydra/launcher: Hydra's own config takes one value"),
    (["-m", "hydra/launcher=parallel", "hydra.launcher.require=sharedmem", "workers=1,2"], "require=sharedmem: must"),
    (["hydra.mode=MULTIRUN"], "hydra.mode=MULTIRUN: set by the command line's -m"),  # a 1-job sweep without -m
    (["experiment=null"], ("experiment=null: a config group takes one of its options (", "leave experiment= out")),
    # the advice is one that works: ~delay failed with "delay: is required"
    (["delay=null"], ("delay=null: a config group takes one of its options (fixed, none,", "leave delay= out for")),
    (["workers=${epochs}", "epochs=0.5"], "workers=${epochs} (= 0.5): must be an integer"),  # was "workers=0.5"
    (["delay.sigma=00.5"], "delay.sigma=00.5: must be a number (Hydra reads a number with a leading zero as text"),
    (["workers=-3"], "workers=-3"),
    # named as typed, not as Hydra read it (workers=2.0, problem.path=0.001)
    (["workers=2."], "workers=2.: must be an integer"),
    (
        ["problem=logreg_libsvm", "problem.path=1e-3"],
        "problem.path=1e-3: must be a string (Hydra reads 1e-3 as another type: quote it, problem.path='1e-3')",
    ),
    # another experiment's folder: its report counted these runs as its own (3 tau_threshold runs as lr_speedup's)
    (["experiment_id=lr_speedup"], "experiment_id=lr_speedup: the folder of experiment lr_speedup"),
    (
        ["-m", "experiment=tau_threshold", "profile=smoke", "experiment_id=lr_speedup"],
        "experiment_id=lr_speedup: the folder of experiment lr_speedup",
    ),
    (["experiment_id=12"], "experiment_id=12: must be a string (Hydra reads 12 as another type: quote it"),
    # a name is one line (a newline split a line of REPORT.md)
    (["problem.name='a\nb'"], "problem.name=a\\nb: must be one line of printable text"),
    (["algorithm.name='x\ty'"], "algorithm.name=x\ty: must be one line of printable text"),
    ([f"seed={2**64}"], f"seed={2**64}"),
    (["divergence_factor=-1"], "divergence_factor=-1"),
    (["divergence_factor=0"], "divergence_factor=0"),
    # named by the value given, not by one derived from it ("algorithm.lr_factor=0.0", "algorithm: lr ... inf")
    (["lr_tuning_seed=0", "tuning.ratio=1e308"], "tuning.ratio=1e308: its widest factors ratio^+-5"),
    (["algorithm.lr_factor=1e308"], "algorithm.lr_factor=1e308: lr x lr_factor is not a finite number"),
    (["-m", "experiment=large_time_per_epoch", "profile=smoke", "point=p99"], "point=p99: not a key of the"),
    (["-m", "experiment=async_methods", "profile=smoke", "compute_model=nope"], "compute_model=nope: not a key"),
    # a key the experiment sets that the user's choice lacks: named with where it comes from
    (
        ["-m", "experiment=model_validation", "profile=smoke", "engine=simulated"],
        "engine.predict=true: no such config key (set by experiment=model_validation; with profile=smoke engine=simu",
    ),
    # runs that ask for no update or for workers that never deliver: 1 update (10^317 x epochs=1e-320); 1000 workers
    # on 375 updates ([ok], mean staleness 187)
    (["epochs=1e-320"], "epochs=1e-320: less than one update of 64 of the 12000 training examples"),
    (["workers=1000", "updates=375"], "workers=1000: more workers than the run's 375 updates; at least 625 would"),
    # at or below 1 the initial loss is a divergence: "[diverged] 0 updates" before any update
    (["divergence_factor=0.5"], "divergence_factor=0.5: must be a number > 1"),
    (["divergence_factor=1"], "divergence_factor=1: must be a number > 1"),
    (["epochs=inf"], "epochs=inf"),
    (["engine=shared_memory", "engine.compute=emulated", "engine.compute_base_s=1e308"], "must be a number <= 86400"),
    (["epochs=1e308"], "epochs=1e308: more updates of 64 samples than the engines' counters hold (below 2^62)"),
    (["workers=1e400"], "workers=1e400: a number beyond a float's range"),  # was "workers=inf: must be an integer"
    (
        ["engine.costs.grad_s=1e308"],
        "engine.costs.grad_s=1e308: must be a number <= 86400",
    ),  # an inf clock, ok; as typed (not 1e+308)
    (["engine.costs.grad_s=0"], "engine.costs.grad_s=0: must be a number > 0"),  # every time 0, no speed-up
    (["delay.slow_workers=1", "delay.slowdown=1e308"], "delay.slowdown=1e308: must be a number <= 1e+06"),
    (["-m", "delay.sigma=0.5,-1e999"], "delay.sigma=0.5,-1e999: a number beyond a float's range"),
    # a list for a config group: Hydra merged the options (two algorithms ran as one, exit 0)
    (
        ["algorithm=[async_sgd,apam]"],
        ("error: algorithm=[async_sgd,apam]: choose one option of the config group", "-m algorithm=async_sgd,apam)"),
    ),
    (["problem=[logreg_fmnist,lenet5_fmnist]"], "problem=[logreg_fmnist,lenet5_fmnist]: choose one option"),
    (["-m", "delay=[none,fixed],none"], "delay=[none,fixed],none: choose one option"),
    (["force=maybe"], "force=maybe"),
    (["progress=maybe"], "progress=maybe"),
    (["device=tpu"], "device=tpu"),
    (["batch_size=100000"], "batch_size=100000"),  # larger than the data set: found when the problem is built
    (["experiment_id=/some/dir"], "experiment_id=/some/dir"),
    (["experiment_id=../x"], "experiment_id=../x"),
    (["experiment_id=/"], "experiment_id=/"),
    ([f"experiment_id={'x' * 300}"], "300 characters, at most 100"),  # was "cannot read this summary"
    (["experiment_id=é更"], ("experiment_id=é更: not an override Hydra can read", "'é' cannot stand unquoted")),
    (["experiment_id='é更'"], "experiment_id=é更: must be a plain folder name"),
    (["workers=[1,2"], "workers=[1,2: not an override Hydra can read"),
    (["results_dir="], "results_dir="),
    (["results_dir=null"], "results_dir=null"),
    (["results_dir=/proc/forbidden"], "results_dir=/proc/forbidden"),
    (["results_dir=/etc/hostname/x"], "results_dir=/etc/hostname/x"),
    (["results_dir=/etc/hostname"], "results_dir=/etc/hostname"),
    # --------------------------------------------------------------- problem
    (["problem.classes=[0,10]"], "problem.classes=[0,10]: must be two different class indices"),
    (["problem.classes=[3,3]"], "problem.classes=[3,3]: must be two different class indices"),
    (["problem.l2=-1"], "problem.l2=-1"),
    (["problem.row_norm=foo"], "problem.row_norm=foo"),
    (  # the problem's own check shows the value as typed, not as the float it read (500.0)
        ["problem=logreg_rcv1like", "problem.nnz_per_row=500", "problem.n_features=100"],
        ("problem=logreg_rcv1like: problem.nnz_per_row=500: must be in (0, n_features)",),
    ),
    (["problem=logreg_libsvm", "problem.path=/no/such/file.svm"], "problem.path=/no/such/file.svm"),
    (["problem=logreg_libsvm"], "problem.path=null"),
    (["problem=logreg_libsvm", f"problem.path={REPLAY}"], (f"problem.path={REPLAY}: a folder, not a regular file",)),
    (["delay.law=replay", f"delay.replay={REPLAY}"], (f"delay.replay={REPLAY}: a folder, not a regular file",)),
    (["delay.law=replay", "delay.replay=/no/such.csv"], ("delay.replay=/no/such.csv: no such file",)),
    (["delay.law=replay"], ("delay.replay=null: law=replay needs one",)),
    (["+problem.eval_batch_size=0"], "problem.eval_batch_size=0"),
    (["+problem.init_std=-1"], "problem.init_std=-1"),
    (["+problem.init_std=1e30"], "problem.init_std=1e30: must be a number <= 10"),  # a loss of 1e29, recorded ok
    (["problem=lenet5_fmnist", "problem.standardize=maybe"], "problem.standardize=maybe"),
    (["problem=resnet18_cinic10_timing", "engine=shared_memory"], "engine=shared_memory"),  # free gradients
    (["problem=resnet18_cinic10_timing", "problem.target_loss=0.5"], "problem.target_loss=0.5"),
    # --------------------------------------------------------------- algorithm (the rule checks its own)
    # a rule's own check names the block, then the key and the value: "algorithm: lr must be ..., got lr=0"
    (["algorithm.lr=0"], ("algorithm: ", "lr=0")),
    (["algorithm.lr=-0.1"], ("algorithm: ", "lr=-0.1")),
    (["algorithm.beta1=1.0"], ("algorithm: ", "beta1=1.0")),
    (["algorithm.beta2=-0.1"], ("algorithm: ", "beta2=-0.1")),
    (["problem=lenet5_fmnist", "algorithm.eps=0"], ("algorithm: ", "got eps=0")),  # torch variant: 0/0 at once
    (["algorithm.lr_schedule=constant", "algorithm.lr=0.1"], ("algorithm: ", "alpha_max=0.01")),  # no silent cap
    (["algorithm.alpha_max=null"], "alpha_max=null"),  # logreg's inv_sqrt from lr = 10 needs its cap
    (["problem=logreg_fmnist", "algorithm.impl=fused"], "impl='fused'"),  # the torch variant's, not the paper's
    (["problem=lenet5_fmnist", "algorithm.impl=compiled"], "impl='compiled'"),
    (["algorithm.impl=bogus"], "impl='bogus'"),
    (["algorithm.variant=adam"], "variant='adam'"),
    (["algorithm.bounds=[1,0]"], "bounds=(1, 0)"),
    # --------------------------------------------------------------- delay
    (["delay=fixed", "delay.tau=-1"], "delay.tau=-1"),
    (["delay=uniform", "delay.max_delay=-2"], "delay.max_delay=-2"),
    # keys that were read by nothing (a run went on without them) or a delay the run never reaches
    (["delay=fixed", "delay.tau=20", "updates=20"], ("delay.tau=20", "below the run's 20 updates")),
    (["delay.law=exponential", "delay.replay=/tmp/x.csv"], ("delay.replay=/tmp/x.csv", "not law=exponential")),
    (["engine.compute_base_s=0.01"], ("engine.compute_base_s=0.01", "only engine.compute=emulated")),
    (["engine=shared_memory", "workers=2", "engine.fault.at_update=5"], ("engine.fault.at_update=5", "null")),
    (
        ["engine=shared_memory", "workers=2", "engine.fault.kill_worker=0", "engine.fault.at_update=20", "updates=20"],
        ("engine.fault.at_update=20", "never fires"),
    ),
    # the same when the length is in epochs: checked once the data set's size turns it into updates (188 here)
    (["delay=fixed", "delay.tau=100000", "epochs=1"], ("delay.tau=100000", "below the run's 188 updates")),
    (
        ["engine=shared_memory", "workers=2", "engine.fault.kill_worker=0", "engine.fault.at_update=10000000"],
        ("engine.fault.at_update=10000000", "never fires"),
    ),
    (["-m", "delay=fixed", "delay.tau=1,100000", "epochs=1"], "delay.tau=100000"),  # before job 0 runs
    # Rennala's round is longer than the run: 0 updates, reported ok
    (["algorithm=rennala_sgd", "algorithm.policy.S=100000", "epochs=1"], ("policy.S=100000", "make no update")),
    (["-m", "algorithm=rennala_sgd", "algorithm.policy.S=2,100000", "epochs=1"], "algorithm.policy.S=100000"),
    (["delay=timing", "workers=2", "delay.slow_workers=3"], "delay.slow_workers=3"),
    (["delay.law=lognormal", "delay.sigma=inf"], "delay.sigma=inf"),
    (["delay.law=lognormal", "delay.sigma=1e10"], "must be a number <= 5"),  # every draw ~0: a degenerate run
    (["delay.law=pareto", "delay.shape=1.0"], "delay.shape=1.0"),
    (
        ["delay.law=replay", f"delay.replay={REPLAY}/one_worker.csv", "workers=2"],
        (f"delay.replay={REPLAY}/one_worker.csv", "worker 1"),
    ),
    (["delay.law=replay", f"delay.replay={REPLAY}/no_index.csv"], (f"delay.replay={REPLAY}/no_index.csv", "index")),
    # replay files that read as something else: the clock overflowed ("ok", inf s), or rows were dropped or misordered
    (["delay.law=replay", f"delay.replay={REPLAY}/huge.csv", "workers=1"], "compute_s must be seconds from 0 to"),
    (["delay.law=replay", f"delay.replay={REPLAY}/text_index.csv", "workers=1"], "index must be whole numbers"),
    (["delay.law=replay", f"delay.replay={REPLAY}/fractional_worker.csv", "workers=1"], "worker must be whole"),
    (["delay.law=replay", f"delay.replay={REPLAY}/twice.csv", "workers=1"], "column compute_s given twice"),
    (
        ["delay.law=replay", f"delay.replay={REPLAY}/negative_worker.csv", "workers=1"],
        "worker must be whole numbers >= 0",
    ),
    (
        ["delay.law=replay", f"delay.replay={REPLAY}/gradient_twice.csv", "workers=1"],
        "worker 0's gradient 1 is recorded twice",
    ),
    (["algorithm=sync_amsgrad", "delay=fixed"], "delay=fixed"),
    (["algorithm=sync_amsgrad", "delay=uniform"], "delay=uniform"),
    # --------------------------------------------------------------- engine
    (["engine.warmup_updates=abc"], "engine.warmup_updates=abc"),
    (["engine.warmup_updates=-1"], "engine.warmup_updates=-1"),
    (["engine=shared_memory", "engine.handoff=foo"], "engine.handoff=foo"),
    (["engine.calibration=''"], "engine.calibration='': must name a file"),  # not silently this machine's file
    (["engine=shared_memory", "engine.pin_workers=maybe"], "engine.pin_workers=maybe"),
    (["engine=shared_memory", "engine.evaluation=sometimes"], "engine.evaluation=sometimes"),
    (["engine=shared_memory", "engine.fault.mode=explode"], "engine.fault.mode=explode"),
    (["engine=distributed", "engine.backend=foo"], "engine.backend=foo"),
    (["engine=distributed", "engine.master_port=99999"], "engine.master_port=99999"),
    # a timeline the twin cannot replay: refused before the run (a traceback, after a failed row was written)
    (["workers=2", f"engine.trace={TIMELINE}/empty.csv"], (f"engine.trace={TIMELINE}/empty.csv", "no rows for")),
    (["workers=2", f"engine.trace={TIMELINE}/header_only.csv"], "no rows for worker(s) [0, 1] of the run's 2"),
    (["workers=2", f"engine.trace={TIMELINE}/not_numbers.csv"], ("cannot read a timeline", "'a'")),
    (["workers=2", f"engine.trace={REPLAY}/one_worker.csv"], "not a timeline.csv"),
    ([f"engine.trace={TIMELINE}/nan_worker.csv"], (f"{TIMELINE}/nan_worker.csv: line 2", "not a finite number")),
    ([f"engine.trace={TIMELINE}/negative.csv"], "line 2 has arrived_s before issued_s"),  # ran: a time of -3 s
    (["-m", "workers=1,3", f"engine.trace={TIMELINE}/not_numbers.csv"], "cannot read a timeline"),
    # --------------------------------------------------------------- sweeps and launchers
    (["workers=1,2"], "workers=1,2"),  # a sweep without -m
    # an experiment without -m ran the defaults, ignored the profile and wrote a row into the experiment's summary
    (["experiment=tau_threshold", "profile=smoke"], "error: experiment=tau_threshold: an experiment is a sweep"),
    (["-m", "workers=1,0"], "workers=0"),
    (["-m", "algorithm=apam,sync_amsgrad", "delay=none,fixed"], "delay=fixed"),
    (["-m", "workers=1,2", "engine.warmup_updates=abc"], "engine.warmup_updates=abc"),
    # counted before any job is composed: a million values hung, hundreds were composed before the first was named
    (["-m", "workers=range(1,1000000)"], "workers=range(1,1000000): a sweep of 999999 jobs, more than the 10000"),
    (["-m", "seed=range(0,200)", "workers=range(1,100)"], "seed=range(0,200) workers=range(1,100): a sweep of 19800"),
    # job by job: the first job's bad value is named before a later job (algorithm=nope) is composed
    (["-m", "workers=0", "algorithm=apam,nope"], "workers=0: needs algorithm.master_computes=true"),
    # a later job's data refuses it (here, too few examples for a batch): found before job 0 runs
    (["-m", "problem.max_train=500,10"], "batch_size=64: larger than the 10 training examples"),
    (["-m", "batch_size=64,100000"], "batch_size=100000: larger than the"),  # one problem, a later batch too large
    # 2 x 7 x 3 x 2 = 84 jobs; only sync + P = 64 + batch 32 is invalid (a split sync batch needs batch >= P), which
    # no pair of keys shows with the third at its first value: every job is checked, before any runs
    (
        ["-m", "algorithm=apam,sync_amsgrad", "workers=1,2,4,8,16,32,64", "batch_size=128,64,32", "seed=0,1"],
        "batch_size=32",
    ),
    (
        ["-m", "hydra/launcher=parallel", "engine=shared_memory", "workers=1,2"],
        ("hydra/launcher=parallel", "engine=shared_memory"),
    ),  # wall-clock runs must run alone
    (["-m", "hydra.launcher.n_jobs=0", "hydra/launcher=parallel", "workers=1,2"], "hydra.launcher.n_jobs=0"),
    (["-m", "hydra.launcher.n_jobs=1000", "hydra/launcher=parallel", "workers=1,2"], "per core of this machine"),
    (
        ["-m", "hydra.launcher.n_jobs=abc", "hydra/launcher=parallel", "workers=1,2"],
        "hydra.launcher.n_jobs=abc: must be an integer from 1",  # it said "no such config key"
    ),
    (["-m", "hydra.launcher.n_jobs=1000000", "hydra/launcher=parallel", "workers=1,2"], "n_jobs=1000000"),  # joblib
    (
        ["-m", "hydra.launcher.prefer=nope", "hydra/launcher=parallel", "workers=1,2"],
        "hydra.launcher.prefer=nope: must be processes or threads",
    ),
    # joblib's own values: a timeout ended the sweep with a traceback (the job unrecorded), pre_dispatch and
    # batch_size were tracebacks, backend and mmap_mode were accepted and ignored or failed later
    (
        ["-m", "hydra/launcher=parallel", "hydra.launcher.timeout=0.001", "workers=1,2"],
        ("hydra.launcher.timeout=0.001: must be null", "not recorded"),
    ),
    (["-m", "hydra/launcher=parallel", "hydra.launcher.pre_dispatch=abc", "workers=1,2"], "pre_dispatch=abc: must be"),
    (["-m", "hydra/launcher=parallel", "hydra.launcher.batch_size=0", "workers=1,2"], "batch_size=0: must be auto"),
    (["-m", "hydra/launcher=parallel", "hydra.launcher.backend=nope", "workers=1,2"], "backend=nope: must be null"),
    (["-m", "hydra/launcher=parallel", "hydra.launcher.mmap_mode=zz", "workers=1,2"], "mmap_mode=zz: must be one of"),
    (["-m", "hydra/launcher=parallel", "hydra.launcher.mmap_mode=null", "workers=1,2"], "mmap_mode=null: must be one"),
    # the key as on the command line: no member type of a union in it, no mapping shown as a missing key's value
    (["engine=simulated", "engine.cores=0", "workers=2"], "engine.cores=0: must be an integer >= 1 or must be"),
    (["~problem.target_loss"], "error: ~problem.target_loss: every key of a run is read"),
    (["problem.target_loss=-1"], "problem.target_loss=-1: must be a number >= 0"),  # a loss here is never below 0
    # Hydra keys that would put files outside results_dir or change the working folder
    (["hydra.run.dir=/tmp/apam-test-hydra-run"], "hydra.run.dir=/tmp/apam-test-hydra-run"),
    (["-m", "hydra.sweep.dir=/tmp/apam-test-hydra-sweep", "workers=1,2"], "hydra.sweep.dir"),
    (["hydra.output_subdir=.hcfg"], "hydra.output_subdir=.hcfg"),
    (["hydra.job.chdir=true"], "hydra.job.chdir"),
    # Hydra's job, logging and callback settings: a log file outside results_dir (job.name, a handler's filename), the
    # harness's own variables set after they were checked (env_set: a named pipe hung the run), tracebacks
    (["hydra/job_logging=default", "hydra.job.name=../../escape"], "hydra.job.name=../../escape: Hydra's job"),
    (["hydra.job_logging.handlers.file.filename=/tmp/apam-test-escape.log"], "hydra.job_logging.handlers.file"),
    (["+hydra.job.env_set.APAM_JOB_EVENTS=/tmp"], "+hydra.job.env_set.APAM_JOB_EVENTS=/tmp: Hydra's job, logging"),
    (["hydra.job_logging.root.level=BOGUS"], "hydra.job_logging.root.level=BOGUS: Hydra's job, logging"),
    (["+hydra.callbacks.x._target_=nosuch.Callback"], "+hydra.callbacks.x._target_=nosuch.Callback: Hydra's job"),
    (["--config-dir", "/tmp/apam-test-no-such-folder", "updates=20"], "--config-dir /tmp/apam-test-no-such-folder"),
    # a primary config that is not there: Hydra's message was put on the first override ("engine=simulated: ...")
    (["-cn", "nonexist", "engine=simulated"], "error: -cn nonexist: no such primary config (options: config)"),
    (["-cn", "", "updates=5"], "error: -cn '': no such primary config"),
]


def _row(args, named):
    key = " ".join(args)
    return pytest.param(args, (named,) if isinstance(named, str) else named, id=key)


def _argv(args, first):
    """``args`` with ``first`` put before its overrides: flags (and the values of flags that take one) first."""
    flags, overrides, i = [], [], 0
    while i < len(args):
        n = 1 + (
            args[i] in ("--config-dir", "-cd", "--config-name", "-cn", "--config-path", "-cp", "--cfg", "-c", "-p")
        )
        n += args[i] == "--package"
        n += args[i] == "--info" and i + 1 < len(args) and args[i + 1] == "defaults-tree"
        (flags if args[i].startswith("-") else overrides).extend(args[i : i + n])
        i += n
    return [*flags, first, *overrides]


@pytest.mark.parametrize("args,named", [_row(a, n) for a, n in CASES])
def test_bad_input_exits_2_with_one_line_naming_it(tmp_path, entry_point, args, named):
    code, stderr = entry_point(_argv(args, f"results_dir={tmp_path}/res"))
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert code == 2, stderr[-3000:]
    assert len(lines) == 1, stderr[-3000:]
    assert lines[0].startswith("error: ") and all(n in lines[0] for n in named), lines[0]
    assert list(tmp_path.iterdir()) == []  # nothing under results_dir, nor beside it (experiment_id=../x)
    for path in (a.split("=", 1)[1] for a in args if a.startswith("experiment_id=/") and a != "experiment_id=/"):
        assert not Path(path).exists()  # an absolute experiment_id would have put the results there


@pytest.mark.parametrize(
    "problem,variant,eps",
    [("logreg_fmnist", "paper", 0.0), ("logreg_fmnist", "torch", 1e-8), ("lenet5_fmnist", "torch", 1e-8)],
)
def test_a_problem_leaves_eps_to_the_variant_it_runs(problem, variant, eps):
    # logistic regression's paper rule has no eps; switched to the torch variant it must get torch's, not 0
    # (never-touched pixels would give 0/0 on the first step)
    from conftest import settings_for
    from experiments.settings.build import make_rule

    assert make_rule(settings_for([f"problem={problem}", f"algorithm.variant={variant}"])).eps == eps


def test_a_results_dir_that_climbs_after_a_folder_name_is_refused_before_hydra_creates_it(tmp_path, entry_point):
    """``results_dir=<tmp>/a/x/../y``: refused with the folder it means (``<tmp>/a/y``), exit 2, and no ``a/x`` left
    behind (Hydra would create ``<results_dir>/.hydra``, and with it ``a/x``, before the run's own checks)."""
    code, stderr = entry_point([f"results_dir={tmp_path}/a/x/../y", "workers=1"])
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1, stderr[-3000:]
    assert f"results_dir={tmp_path}/a/x/../y" in lines[0] and f"{tmp_path}/a/y" in lines[0]
    assert list(tmp_path.iterdir()) == []


def test_a_results_dir_that_is_a_link_to_nothing_is_one_line(tmp_path, entry_point):
    """A dangling link as results_dir: one line naming it and its target, exit 2 (a traceback: 'File exists')."""
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    code, stderr = entry_point([f"results_dir={tmp_path / 'dangling'}", "updates=5"])
    assert code == 2 and stderr.strip().splitlines() == [
        f"error: results_dir={tmp_path / 'dangling'}: a link to nothing ({tmp_path / 'gone'}); remove it or make its "
        "target"
    ], stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling"]


@pytest.mark.parametrize("home", ["~", "~nobody"])
def test_a_results_dir_under_an_unexpanded_home_is_refused(tmp_path, entry_point, home):
    """Quoted (``"results_dir='~/r'"``), the shell leaves ``~`` as it is: a folder literally named ``~`` was made in
    the current folder. (Not a CASES row: those give results_dir= themselves.)"""
    code, stderr = entry_point([f"results_dir='{home}/r-q9'", "updates=5"], cwd=tmp_path)
    assert code == 2 and stderr.strip().splitlines() == [
        f"error: results_dir={home}/r-q9: '{home}' is not expanded here (write the path out, or let the shell expand "
        "it unquoted)"
    ], stderr[-2000:]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("folder", ["/", "//", "/tmp/../"])
def test_the_file_system_root_is_refused_as_a_results_dir(folder):
    """``make reproduce RESULTS=/`` (and ``results_dir=/``) was accepted: every experiment's folder made in /."""
    from experiments.errors import ConfigError
    from experiments.settings.preflight import check_writable

    with pytest.raises(ConfigError, match=rf"^results_dir={re.escape(folder)}: the file system's root; give a folder"):
        check_writable(folder)


def test_a_results_dir_name_too_long_is_one_line():
    """A name longer than the file system takes (255 bytes on Linux): lookup fails with ENAMETOOLONG, which the
    check says in one line rather than a traceback."""
    from experiments.errors import ConfigError
    from experiments.settings.preflight import check_writable

    with pytest.raises(ConfigError, match=r"not a usable path \(File name too long\)"):
        check_writable(f"/tmp/{'x' * 300}/res")
    # below a folder still to be made the lookup stops at that folder (no such file): the name is measured itself
    with pytest.raises(ConfigError, match=r"not a usable path \(a folder name of 300 bytes; .* limit is 255\)"):
        check_writable(f"/tmp/no-such-folder-here/{'x' * 300}")
    assert not Path("/tmp/no-such-folder-here").exists()


@pytest.mark.parametrize(
    "args,named",
    [
        (["workers=1,2", "-m", "updates=5"], "-m: put it before the overrides"),  # argparse's 8-line usage block
        (["updates=5", "--bogus"], "--bogus: not an option of python -m experiments.run"),
        (["--nope=3", "updates=5"], "--nope=3: not an option"),
    ],
)
def test_a_flag_hydra_would_not_read_is_one_line(tmp_path, entry_point, args, named):
    code, stderr = entry_point([f"results_dir={tmp_path}/res", *args])
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert code == 2 and lines == [f"error: {named}" + lines[0].split(named, 1)[1]], stderr[-3000:]
    assert list(tmp_path.iterdir()) == []


def test_a_flag_after_every_override_is_read_as_hydra_reads_it(tmp_path, entry_point):
    code, stderr = entry_point([f"results_dir={tmp_path}/res", "updates=5", "--cfg", "job"])
    assert code == 0, stderr[-3000:]


def test_only_choosing_an_experiment_needs_multirun():
    """``experiment=<id>`` without -m is refused (a CASES row); ``experiment=null`` and ``~experiment`` choose none."""
    from experiments.command_line import experiment_multirun
    from experiments.errors import ConfigError

    experiment_multirun(["experiment=null", "updates=5"], multirun=False)
    experiment_multirun(["~experiment"], multirun=False)
    experiment_multirun(["experiment=tau_threshold"], multirun=True)
    with pytest.raises(ConfigError, match=r"^experiment=tau_threshold: an experiment is a sweep"):
        experiment_multirun(["experiment=tau_threshold"], multirun=False)
    # a sweep over the experiment or its profile ran every job with the first one's sweep (quick jobs at smoke's
    # values, then skipped as finished)
    experiment_multirun(["experiment=tau_threshold", "profile=smoke", "seed=0,1"], multirun=True)
    for swept in (["experiment=tau_threshold,stragglers"], ["experiment=tau_threshold", "profile=smoke,quick"]):
        with pytest.raises(ConfigError, match=rf"^{swept[-1]}: an experiment's sweep is set by the experiment and"):
            experiment_multirun([*swept, "seed=0"], multirun=True)
    with pytest.raises(ConfigError, match=r"^profile=choice\(smoke,long\): "):
        experiment_multirun(["experiment=tau_threshold", "profile=choice(smoke,long)"], multirun=True)


@pytest.mark.parametrize("variable", ["APAM_ERROR_FILE", "APAM_JOB_EVENTS"])
@pytest.mark.parametrize("where", ["folder", "missing folder", "fifo", "device"])
def test_a_file_variable_that_names_no_writable_file_is_one_line(tmp_path, entry_point, variable, where):
    """The variables that name a file a run writes: a folder (IsADirectoryError after the results folder was made),
    a file in a folder that is not there (a traceback after the error line), a named pipe (a hang) or a device
    (``/dev/full``: an unnamed error) is named in one line, exit 2."""
    import os

    value = {"folder": tmp_path, "missing folder": tmp_path / "nowhere" / "file", "device": "/dev/full"}.get(
        where, tmp_path / "pipe"
    )
    if where == "fifo":
        os.mkfifo(value)
    code, stderr = entry_point([f"results_dir={tmp_path}/res", "workers=0"], env={variable: str(value)})
    why = {
        "folder": "a folder",
        "missing folder": f"its folder {tmp_path / 'nowhere'} does not exist",
        "fifo": "a named pipe, not a regular file",
        "device": "a device, not a regular file",
    }[where]
    assert code == 2 and stderr.strip().splitlines() == [
        f"error: {variable}={value}: {why} (it names a file the harness writes)"
    ]
    assert not (tmp_path / "res").exists()


def test_utf8_read_by_an_ascii_locale_says_how_to_run_it(tmp_path):
    """LC_ALL=C with PYTHONUTF8=0 reads a valid UTF-8 argument as undecodable bytes: it was called "not UTF-8 text"."""
    import subprocess
    import sys

    env = {**os.environ, "LC_ALL": "C", "PYTHONUTF8": "0"}
    proc = subprocess.run(
        [sys.executable, "-m", "experiments.run", "updates=5", f"results_dir={tmp_path}/r\u00fc"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.endswith(": this process's locale reads arguments as ASCII; run it with PYTHONUTF8=1\n")
    assert list(tmp_path.iterdir()) == []
