"""The cost model's layers: the machine's calibration file (reuse, keys, spread; clock/calibration.py), the
measurements (clock/measure.py), the run's cost model from its settings and the file (clock/resolve.py) and the
closed form (clock/costmodel.py)."""

import json
import math

import pytest

from algorithms import build_rule
from conftest import QuadraticProblem, pinned, recorder_for, run_engine, settings_for
from experiments.clock import calibration as cal_mod
from experiments.clock import measure
from experiments.clock import resolve as resolve_mod
from experiments.clock.calibration import Calibration, grad_key, message_keys, update_key
from experiments.clock.costmodel import CostModel, predicted_time_per_epoch, saturation_workers
from experiments.clock.resolve import cost_model
from experiments.errors import ConfigError


def test_an_entry_is_measured_once_then_reused_with_its_spread(tmp_path):
    cal = Calibration(tmp_path / "cal.json")
    calls = []

    def measure():
        calls.append(1)
        return [3.0, 1.0, 2.0]

    e = cal.entry("k", measure)
    assert (e["value"], e["samples"], e["spread"]) == (2.0, [3.0, 1.0, 2.0], 1.0)
    assert Calibration(tmp_path / "cal.json").entry("k", measure)["value"] == 2.0  # another reader: no new measure
    assert len(calls) == 1
    cal.drop()
    cal.entry("k", measure)
    assert len(calls) == 2


def test_the_machine_file_does_not_depend_on_the_results_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("APAM_CALIBRATION", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    p = cal_mod.machine_path()
    assert p.parent == tmp_path / "apam-harness" and p.name.startswith("calibration-")
    assert Calibration().path == p
    monkeypatch.setenv("APAM_CALIBRATION", str(tmp_path / "x.json"))
    assert Calibration().path == tmp_path / "x.json"


def _costs(*fixed, batch_size=8, extra=()):
    """Settings of a simulated run with ``engine.costs.<k>=<v>`` for each ``(k, v)`` of ``fixed``."""
    return settings_for(pinned([f"batch_size={batch_size}", *(f"engine.costs.{k}={v}" for k, v in fixed), *extra]))


def test_message_terms_are_keyed_by_engine_hand_off_and_dimension_not_by_rule(tmp_path, monkeypatch):
    problem = QuadraticProblem()
    path = tmp_path / "cal.json"
    # (transport, modelled hand-off) -> (latency, overhead, idle overhead); shared_memory's hand-offs calibrated apart
    terms = {
        ("shared_memory", "block"): (1e-5, 2e-5, 3e-5),
        ("shared_memory", "spin"): (5e-6, 6e-6, 7e-6),
        ("distributed", None): (4e-5, 8e-5, 9e-5),
    }
    entries = {}
    for (t, h), (lat_s, over_s, idle_s) in terms.items():
        lat, over = message_keys(t, problem.dim, h)
        entries[lat] = {"value": lat_s, "samples": [1], "spread": 0.1}
        entries[over] = {"value": over_s, "samples": [1], "spread": 0.2}
        entries[cal_mod.idle_key(t, problem, 8, h)] = {"value": idle_s, "samples": [1], "spread": 0.3}
    path.write_text(json.dumps({"machine": {}, "entries": entries}))
    monkeypatch.setattr(resolve_mod, "measure_message_terms", lambda *a, **k: pytest.fail("must reuse the file"))
    monkeypatch.setattr(resolve_mod, "p1_run_samples", lambda *a, **k: pytest.fail("must reuse the file"))
    fixed = (("grad_s", 1e-3), ("update_s", 1e-6))
    costs = {}
    for rule_name in ("sgd", "amsgrad"):
        rule = build_rule("sgd", lr=0.1) if rule_name == "sgd" else build_rule("amsgrad", variant="torch", impl="eager")
        for t, h in terms:
            settings = _costs(*fixed, extra=[f"engine.transport={t}", f"engine.handoff={h or 'block'}"])
            assert settings.modelled_handoff() == h
            costs[rule_name, t, h] = cost_model(settings, problem, rule, Calibration(path))
    for key, (lat, over, idle) in terms.items():
        for r in ("sgd", "amsgrad"):
            c = costs[(r, *key)]
            assert (c.latency_s, c.overhead_s, c.overhead_idle_s) == (lat, over, idle)
            assert c.spread == {"latency_s": 0.1, "overhead_s": 0.2, "overhead_idle_s": 0.3}
    # handoff=auto on a core for every process (the pinned clock): the spinning hand-off's terms, as the engine spins
    auto = cost_model(
        _costs(*fixed, extra=["engine.handoff=auto"]), problem, build_rule("sgd", lr=0.1), Calibration(path)
    )
    assert (auto.latency_s, auto.overhead_s) == terms["shared_memory", "spin"][:2]
    assert message_keys("shared_memory", 8) == message_keys("shared_memory", 8, "block")  # block: the default
    assert "sgd" not in message_keys("shared_memory", 8)[0] and "d=8" in message_keys("shared_memory", 8)[0]
    assert update_key("amsgrad-torch-eager", 8) != update_key("sgd", 8)
    assert "B=8" in grad_key(problem, 8) and "d=8" in grad_key(problem, 8)
    with pytest.raises(ConfigError, match="engine.transport=tcp"):  # refused when the settings are built
        _costs(*fixed, extra=["engine.transport=tcp"])
    settings = _costs(*fixed)
    tcp = settings.model_copy(update={"engine": settings.engine.model_copy(update={"transport": "tcp"})})
    with pytest.raises(ValueError, match="engine.transport='tcp'"):  # and by the cost model itself
        cost_model(tcp, problem, build_rule("sgd", lr=0.1), Calibration(path))


def test_fixed_costs_never_touch_the_calibration_file(tmp_path):
    path = tmp_path / "none.json"
    fixed = (("grad_s", 2e-3), ("update_s", 1e-6), ("latency_s", 3e-6), ("overhead_s", 4e-6))
    rule = build_rule("sgd", lr=0.1)
    c = cost_model(_costs(*fixed), QuadraticProblem(), rule, Calibration(path))
    # a split sync round of 8 over 3 workers: minibatches of 3, 3, 2, priced linearly from grad_s at batch_size 8
    split = cost_model(
        _costs(*fixed, extra=["algorithm=sync_amsgrad", "workers=3"]), QuadraticProblem(), rule, Calibration(path)
    )
    assert not path.exists()
    assert c.grad == {8: 2e-3} and split.grad == {2: pytest.approx(5e-4), 3: pytest.approx(7.5e-4)}
    assert c.transport == split.transport == "config"
    assert c.as_dict(8) == {
        "grad_s": 2e-3,
        "update_s": 1e-6,
        "latency_s": 3e-6,
        "overhead_s": 4e-6,
        "master_s": pytest.approx(5e-6),
        "overhead_idle_s": 4e-6,
    }  # fixed overhead: both


def test_calibration_keys_name_the_implementation_that_runs():
    from experiments.clock.calibration import rule_calibration_key

    def key(variant, impl, dim):
        return rule_calibration_key(build_rule("amsgrad", variant=variant, impl=impl), dim)

    assert key("torch", "auto", 784) == key("torch", "fused", 784) == "amsgrad-torch-fused"
    assert key("torch", "eager", 784) == "amsgrad-torch-eager"
    assert (
        key("paper", "auto", 784)
        == key("paper", "auto", 2**17)
        == key("paper", "native", 784)
        == "amsgrad-paper-native"
    )
    assert key("paper", "eager", 784) == "amsgrad-paper-eager"
    assert key("paper", "auto", 2**19) == key("paper", "compiled", 2**17) == "amsgrad-paper-compiled"
    assert rule_calibration_key(build_rule("sgd", lr=0.1), 784) == "sgd"


def test_closed_form_sync_and_saturation():
    c = CostModel(grad={10: 1e-3, 3: 3e-4}, update_s=1e-5, latency_s=2e-5, overhead_s=3e-5)
    # sync, B = 10 split over P = 4: the slowest worker has ceil(10/4) = 3 samples
    assert predicted_time_per_epoch(c, 4, 10, 100, "sync") == pytest.approx(10 * (2 * 2e-5 + 3e-4 + 4 * 3e-5 + 1e-5))
    cycle = 1e-3 + 2 * 2e-5 + 4e-5
    assert saturation_workers(c, 10) == pytest.approx(cycle / 4e-5)
    idle = CostModel(grad={10: 1e-3, 3: 3e-4}, update_s=1e-5, latency_s=2e-5, overhead_s=3e-5, overhead_idle_s=7e-5)
    # a waiting master serves the round's first gradient and an unsaturated async worker's: the idle overhead
    assert predicted_time_per_epoch(idle, 4, 10, 100, "sync") == pytest.approx(
        10 * (2 * 2e-5 + 3e-4 + 7e-5 + 3 * 3e-5 + 1e-5)
    )
    assert predicted_time_per_epoch(idle, 1, 10, 100, "async") == pytest.approx(10 * (cycle + 4e-5))
    assert saturation_workers(idle, 10) == pytest.approx((cycle + 4e-5) / 4e-5)
    assert predicted_time_per_epoch(idle, 1000, 10, 100, "async") == pytest.approx(10 * 4e-5)  # queued: hot
    assert predicted_time_per_epoch(c, 1, 10, 100, "async") == pytest.approx(10 * cycle)
    assert predicted_time_per_epoch(c, 1000, 10, 100, "async") == pytest.approx(10 * 4e-5)
    free = CostModel(grad={10: 1e-3}, update_s=0.0, latency_s=0.0, overhead_s=0.0)
    assert math.isinf(saturation_workers(free, 10))


def test_a_run_copies_its_costs_into_provenance(tmp_path):
    from experiments.store.sink import RunSink

    sink = RunSink(tmp_path, "e", "r")
    sink.write_config("a: 1\n", {"host": "h"})
    sink.add_provenance({"costs": {"latency_s": 1e-5}, "calibration": "/x.json"})
    data = json.loads((sink.run_dir / "provenance.json").read_text())
    assert data.pop("config_sha256") == __import__("hashlib").sha256(b"a: 1\n").hexdigest()  # the sink's own
    assert data.pop("config_bytes") == 5
    assert data == {"host": "h", "costs": {"latency_s": 1e-5}, "calibration": "/x.json"}


def test_the_simulated_partner_of_an_emulated_run_costs_its_base(tmp_path):
    from experiments.store.summary import compute_columns

    over = [
        f"results_dir={tmp_path}",
        "batch_size=8",
        "algorithm=async_sgd",
        "algorithm.lr=0.01",
        "algorithm.lr_schedule=constant",
        "workers=4",
        "updates=100",
        "engine.compute=emulated",
        "engine.compute_base_s=0.02",
        "engine.costs.update_s=1e-5",
        "engine.costs.latency_s=1e-5",
        "engine.costs.overhead_s=2e-5",
        "engine.costs.late_s=1e-4",
        "eval_every=1",
    ]
    settings = settings_for(pinned(over))
    assert compute_columns(settings) == {"compute": "emulated", "compute_base_s": 0.02, "transport": "shared_memory"}
    problem = QuadraticProblem()
    rec = recorder_for(problem, settings, "simulated")
    result = run_engine(problem, build_rule("sgd", lr=0.01), settings, rec)
    assert result.costs["grad_s"] == 0.02 and result.costs["master_s"] == pytest.approx(3e-5)
    # every emulated wait ends late_s late (a twin of a worker that sleeps, then wakes late): 4 workers in rounds
    cycle = 0.02 + 1e-4 + 2 * 1e-5 + 3e-5
    assert result.time_s == pytest.approx(100 / 4 * cycle, abs=4 * 3e-5)
    assert result.provenance["cost_source"] == "config"
    with pytest.raises(ConfigError, match="engine.costs.grad_s"):
        settings_for(over + ["engine.costs.grad_s=0.01"])
    with pytest.raises(ConfigError, match="engine.compute_base_s"):
        settings_for(over[:-5] + ["engine.compute_base_s=null"])


def test_shared_memory_message_terms_are_measured_with_the_blocking_handoff(monkeypatch):
    """Both runs (P = 1 and saturated) use the same hand-off, the one named in the key: with ``auto`` a quiet machine
    spins at P = 1 and blocks when saturated. The latency is what a P = 1 run's update leaves after the worker's
    own time per gradient and the master's busy time: (0.1 - 0.01 - 0.02) / 2."""
    seen = {}

    class FakeEngine:
        def run(self, problem, rule, settings, recorder, costs=None):
            e = settings.engine
            seen.setdefault(e.name, []).append((getattr(e, "handoff", None), e.compute, settings.workers))
            return type(
                "R",
                (),
                {
                    "status": "ok",
                    "time_s": 1.0,
                    "timed_samples": 10,
                    "samples": 10,
                    "master_busy_s": 0.02,
                    "compute_times": [(0, i, 0.01, float("nan")) for i in range(10)],
                },
            )()

    monkeypatch.setattr(measure, "get_engine", lambda name: FakeEngine())
    base = settings_for(["engine.compute=emulated", "engine.compute_base_s=0.5"])  # the run being calibrated
    for t in ("shared_memory", "distributed"):
        assert measure.seconds_per_update(base, t, 8, 1, updates=10) == pytest.approx(0.1)
        assert measure.p1_latency_s(base, t, 8, updates=10) == pytest.approx(0.035)
    assert seen["shared_memory"] == [("block", "real", 1), ("block", "real", 1)]  # real compute, whatever the run's
    assert seen["distributed"] == [(None, "real", 1), (None, "real", 1)]
    assert message_keys("shared_memory", 8) == (
        "latency|shared_memory-block|d=8|net",
        "overhead|shared_memory-block|d=8",
    )
    assert message_keys("distributed", 8) == ("latency|distributed|d=8|net", "overhead|distributed|d=8")


def test_gradients_are_timed_inside_a_real_run_and_timing_only_ones_in_the_probe(monkeypatch):
    """A gradient's cost is what the worker of a P = 1 shared_memory run (blocking hand-off) measured, one median per
    repeat (a hot loop underestimates it: the worker's caches go cold while it waits); a timing-only problem, whose
    engine gradients are free, is timed with its real ``timed_loss_grad`` in the probe."""
    from problems.cnn import LeNet5
    from problems.timing import TimingOnlyCNN, fake_images

    problem = QuadraticProblem()
    base = settings_for([])
    samples = measure.engine_grad_samples(base, problem, 8, repeats=3)
    assert len(samples) == 3 and all(0 < s < 0.05 for s in samples)
    assert grad_key(problem, 8).endswith("|in=shared_memory-block")
    px, py = fake_images(4, (1, 28, 28), 10, seed=0)
    timing = TimingOnlyCNN(LeNet5, px, py, num_train=100)
    assert grad_key(timing, 2).endswith("|in=probe")
    monkeypatch.setattr(measure, "engine_grad_samples", lambda *a, **k: pytest.fail("a timing-only problem"))
    probe = measure.measure_grad_samples(base, timing, 2, reps=2, repeats=2)
    assert len(probe) == 2 and all(s > 1e-5 for s in probe)  # a real LeNet5 gradient, not the free one


def test_a_timing_only_problem_is_probed_once_for_every_size_it_lacks(tmp_path, monkeypatch):
    """One probe process times every batch size of a timing-only run that the calibration lacks (each process start
    builds the net again), and sizes the file already holds are not timed again."""
    from problems.cnn import LeNet5
    from problems.timing import TimingOnlyCNN, fake_images

    px, py = fake_images(4, (1, 28, 28), 10, seed=0)
    timing = TimingOnlyCNN(LeNet5, px, py, num_train=100)
    path = tmp_path / "cal.json"
    path.write_text(
        json.dumps({"machine": {}, "entries": {grad_key(timing, 4): {"value": 7e-3, "samples": [7e-3], "spread": 0.0}}})
    )
    calls, real_probe = [], resolve_mod.probe_grad_samples

    def counted(problem, sizes, *a, **k):
        calls.append(list(sizes))
        return real_probe(problem, sizes, reps=2, repeats=2)

    monkeypatch.setattr(resolve_mod, "probe_grad_samples", counted)
    fixed = (("update_s", 1e-6), ("latency_s", 1e-6), ("overhead_s", 1e-6))
    rule, cal = build_rule("sgd", lr=0.1), Calibration(path)

    def costs(batch_size, *extra):
        return cost_model(_costs(*fixed, batch_size=batch_size, extra=extra), timing, rule, cal)

    split = costs(65, "algorithm=sync_amsgrad", "workers=2")  # a split round: minibatches of 33 and 32
    assert calls == [[32, 33]]  # both missing sizes, one process
    assert costs(4).grad[4] == 7e-3  # kept from the file
    one = costs(1)
    assert calls == [[32, 33], [1]]  # only the size the file lacked
    assert costs(65, "algorithm=sync_amsgrad", "workers=2").grad == split.grad and len(calls) == 2  # reused
    # real LeNet5 gradients were timed (a zero-cost stand-in takes well under 10 us); their order (32 images cost
    # more than 1) is not asserted: two repeats on a loaded machine can swap it
    assert min(one.grad[1], split.grad[32], split.grad[33]) > 1e-5
    assert len(Calibration(path).read()["entries"][grad_key(timing, 33)]["samples"]) == 2


def test_lateness_of_long_waits_is_sampled_at_the_cap(monkeypatch):
    """An emulated wait of seconds is sampled at LATE_MAX_WAIT_S (its lateness is the wake-up, not the wait), as many
    times as the budget allows at that length; a short wait is sampled at its own length."""
    waits = []
    monkeypatch.setattr(measure.time, "sleep", waits.append)
    assert len(measure.measure_lateness_samples(5.728)) == 8 and set(waits) == {measure.LATE_MAX_WAIT_S}
    waits.clear()
    assert len(measure.measure_lateness_samples(0.05)) == 40 and set(waits) == {0.05}


# ---------------------------------------------------------------- damaged or unusable calibration files
GOOD = {"machine": {}, "entries": {"k": {"value": 2.0, "samples": [1.0, 2.0, 3.0], "spread": 1.0}}}


@pytest.mark.parametrize(
    "content",
    [
        b"\x00\xffgarbage",
        json.dumps(GOOD).encode()[:-7],
        b"",
        b"  \n",
        b"[1, 2]",
        b'{"entries": []}',
        b'{"entries": {"k": {"value": "fast"}}}',
        b'{"entries": {"k": {"value": 1.0, "samples": "x"}}}',
        b'{"machine": 3, "entries": {}}',
        b'{"entries": {"k": {"value": 1.0, "measured": "yesterday"}}}',  # its age read "unknown"
        b'{"entries": {"k": {"value": 1.0, "measured": "2099-01-01T00:00:00Z"}}}',  # "measured 0 s ago"
    ],
)
def test_a_damaged_calibration_is_set_aside_and_measured_again(tmp_path, capsys, content):
    path = tmp_path / "cal.json"
    path.write_bytes(content)
    cal = Calibration(path)
    assert cal.read()["entries"] == {}
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"warning: {path}: damaged calibration file (")
    assert (tmp_path / "cal.json.damaged-1").read_bytes() == content and not path.exists()
    assert cal.entry("k", lambda: [4.0, 6.0])["value"] == 5.0  # measured again, written whole
    assert json.loads(path.read_text())["entries"]["k"]["samples"] == [4.0, 6.0]
    path.write_bytes(content)
    cal.drop(["k"])  # a second damage: the next free name
    assert (tmp_path / "cal.json.damaged-2").read_bytes() == content
    assert json.loads(path.read_text())["entries"] == {}
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "cal.json",
        "cal.json.damaged-1",
        "cal.json.damaged-2",
        "cal.json.lock",
    ]


@pytest.mark.parametrize("content", [b"root:x:0:0:root:/root:/bin/bash\n", b"", b"[1, 2]", b'{"a": 1}'])
def test_a_damaged_file_that_may_not_be_a_calibration_is_refused_and_left_alone(tmp_path, capsys, content):
    """Only a .json file or an object with entries is set aside: a file named by mistake (``--file notes.txt``,
    ``engine.calibration=/etc/passwd``) was renamed and replaced by a calibration."""
    from experiments.errors import CalibrationError

    path = tmp_path / "notes.txt"
    path.write_bytes(content)
    for call in (lambda c: c.check(), lambda c: c.read(), lambda c: c.entry("k", lambda: [1.0]), lambda c: c.drop()):
        with pytest.raises(CalibrationError, match=r"notes.txt: not a calibration file \(.*\); left as it is"):
            call(Calibration(path))
    assert path.read_bytes() == content and sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    assert capsys.readouterr().err == ""
    path.write_bytes(b'{"entries": []}')  # the harness's own shape, damaged: set aside as a .json one is
    assert Calibration(path).read()["entries"] == {} and (tmp_path / "notes.txt.damaged-1").exists()


def test_a_fifo_folder_or_unreadable_calibration_is_a_config_error_and_never_waits(tmp_path, monkeypatch):
    import os

    from experiments.errors import ConfigError

    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    for call in (lambda c: c.read(), lambda c: c.entry("k", lambda: [1.0]), lambda c: c.drop()):
        with pytest.raises(ConfigError, match=r"pipe.json: the calibration file is a named pipe, not a regular file"):
            call(Calibration(fifo))
    with pytest.raises(ConfigError, match=r"the calibration file is a folder"):
        Calibration(tmp_path).read()
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(GOOD))
    assert Calibration(path).read() == GOOD
    monkeypatch.setattr(cal_mod.os, "access", lambda p, mode: False)  # as for chmod 000 (root reads anyway)
    with pytest.raises(ConfigError, match=r"cal.json: cannot read this calibration file \(permission denied\)"):
        Calibration(path).read()
    assert path.read_text() == json.dumps(GOOD)  # not set aside: it is not damaged


def test_a_fifo_calibration_stops_a_simulated_run_with_one_line_and_exit_2(tmp_path):
    import os
    import subprocess
    import sys

    from conftest import REPO

    data = tmp_path / "d.svm"
    data.write_text("".join(f"{1 if i % 2 else -1} 1:{(i % 7) / 7:.3f}\n" for i in range(32)))
    fifo = tmp_path / "cal.json"
    os.mkfifo(fifo)
    cmd = [
        sys.executable,
        "-m",
        "experiments.run",
        "problem=logreg_libsvm",
        f"problem.path={data}",
        "epochs=1",
        "batch_size=8",
        "engine=simulated",
        f"engine.calibration={fifo}",
        f"results_dir={tmp_path / 'res'}",
    ]
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-3000:]
    assert p.stderr.strip().splitlines()[-1] == (
        f"error: {fifo}: the calibration file is a named pipe, not a "
        "regular file (engine.calibration / APAM_CALIBRATION must name a "
        "JSON file)"
    )
