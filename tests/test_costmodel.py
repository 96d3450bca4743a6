"""The cost model's layers: the machine's calibration file (reuse, keys, spread) and the closed form."""
import json
import math

import pytest
from omegaconf import OmegaConf

from algorithms import build_rule
from conftest import QuadraticProblem
from experiments.clock import calibration as cal_mod
from experiments.clock.calibration import Calibration, cost_model, grad_key, message_keys, update_key
from experiments.clock.costmodel import CostModel, predicted_time_per_epoch, saturation_workers


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


def _alg(name):
    return OmegaConf.create({"rule": "sgd"} if name == "sgd" else {"rule": "amsgrad", "variant": "torch",
                                                                     "impl": "eager"})


def test_message_terms_are_keyed_by_engine_and_dimension_not_by_rule(tmp_path, monkeypatch):
    problem = QuadraticProblem()
    path = tmp_path / "cal.json"
    entries = {}
    for t in ("shared_memory", "distributed"):
        lat, over = message_keys(t, problem.dim)
        entries[lat] = {"value": 1e-5 if t == "shared_memory" else 4e-5, "samples": [1], "spread": 0.1}
        entries[over] = {"value": 2e-5 if t == "shared_memory" else 8e-5, "samples": [1], "spread": 0.2}
        entries[cal_mod.idle_key(t, problem, 8)] = {"value": 3e-5 if t == "shared_memory" else 9e-5,
                                                    "samples": [1], "spread": 0.3}
    path.write_text(json.dumps({"machine": {}, "entries": entries}))
    monkeypatch.setattr(cal_mod, "measure_message_terms", lambda *a, **k: pytest.fail("must reuse the file"))
    monkeypatch.setattr(cal_mod, "p1_run_samples", lambda *a, **k: pytest.fail("must reuse the file"))
    fixed = {"grad_s": 1e-3, "update_s": 1e-6}
    costs = {}
    for rule_name in ("sgd", "amsgrad"):
        rule = build_rule("sgd", lr=0.1) if rule_name == "sgd" else build_rule("amsgrad", variant="torch", impl="eager")
        for t in ("shared_memory", "distributed"):
            costs[rule_name, t] = cost_model(problem, rule, [8], fixed, Calibration(path), _alg(rule_name), 8, t)
    for t, (lat, over, idle) in {"shared_memory": (1e-5, 2e-5, 3e-5), "distributed": (4e-5, 8e-5, 9e-5)}.items():
        for r in ("sgd", "amsgrad"):
            assert (costs[r, t].latency_s, costs[r, t].overhead_s, costs[r, t].overhead_idle_s) == (lat, over, idle)
            assert costs[r, t].spread == {"latency_s": 0.1, "overhead_s": 0.2, "overhead_idle_s": 0.3}
    assert "sgd" not in message_keys("shared_memory", 8)[0] and "d=8" in message_keys("shared_memory", 8)[0]
    assert update_key("amsgrad-torch-eager", 8) != update_key("sgd", 8)
    assert "B=8" in grad_key(problem, 8) and "d=8" in grad_key(problem, 8)
    with pytest.raises(ValueError, match="engine.transport='tcp'"):
        cost_model(problem, build_rule("sgd", lr=0.1), [8], fixed, Calibration(path), _alg("sgd"), 8, "tcp")


def test_fixed_costs_never_touch_the_calibration_file(tmp_path):
    path = tmp_path / "none.json"
    fixed = {"grad_s": 2e-3, "update_s": 1e-6, "latency_s": 3e-6, "overhead_s": 4e-6}
    c = cost_model(QuadraticProblem(), build_rule("sgd", lr=0.1), [8, 4], fixed, Calibration(path), _alg("sgd"), 8)
    assert not path.exists()
    assert c.grad == {4: 1e-3, 8: 2e-3} and c.transport == "config"
    assert c.as_dict(8) == {"grad_s": 2e-3, "update_s": 1e-6, "latency_s": 3e-6, "overhead_s": 4e-6,
                            "master_s": pytest.approx(5e-6), "overhead_idle_s": 4e-6}  # fixed overhead: both


def test_closed_form_sync_and_saturation():
    c = CostModel(grad={10: 1e-3, 3: 3e-4}, update_s=1e-5, latency_s=2e-5, overhead_s=3e-5)
    # sync, B = 10 split over P = 4: the slowest worker has ceil(10/4) = 3 samples
    assert predicted_time_per_epoch(c, 4, 10, 100, "sync") == pytest.approx(10 * (2 * 2e-5 + 3e-4 + 4 * 3e-5 + 1e-5))
    cycle = 1e-3 + 2 * 2e-5 + 4e-5
    assert saturation_workers(c, 10) == pytest.approx(cycle / 4e-5)
    idle = CostModel(grad={10: 1e-3, 3: 3e-4}, update_s=1e-5, latency_s=2e-5, overhead_s=3e-5, overhead_idle_s=7e-5)
    # a waiting master serves the round's first gradient and an unsaturated async worker's: the idle overhead
    assert predicted_time_per_epoch(idle, 4, 10, 100, "sync") == pytest.approx(
        10 * (2 * 2e-5 + 3e-4 + 7e-5 + 3 * 3e-5 + 1e-5))
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
    from conftest import compose_cfg
    from experiments.engines import simulated
    from experiments.errors import ConfigError
    from experiments.training.recorder import Recorder
    from experiments.run import _compute_columns
    from experiments.settings.validate import validate

    over = [f"results_dir={tmp_path}", "batch_size=8", "algorithm=async_sgd", "algorithm.lr=0.01",
            "algorithm.lr_schedule=constant", "workers=4", "updates=100", "engine.compute=emulated",
            "engine.compute_base_s=0.02", "engine.costs.update_s=1e-5", "engine.costs.latency_s=1e-5",
            "engine.costs.overhead_s=2e-5", "engine.costs.late_s=1e-4"]
    cfg = compose_cfg(over)
    validate(cfg)
    assert _compute_columns(cfg) == {"compute": "emulated", "compute_base_s": 0.02, "transport": "shared_memory"}
    problem = QuadraticProblem()
    rec = Recorder(problem, {"run_id": "t"}, eval_every=1, total_epochs=None, f_star=None, clock="simulated",
                   progress=False)
    result = simulated.run(problem, build_rule("sgd", lr=0.01), cfg, rec)
    assert result.costs["grad_s"] == 0.02 and result.costs["master_s"] == pytest.approx(3e-5)
    # every emulated wait ends late_s late (a twin of a worker that sleeps, then wakes late): 4 workers in rounds
    cycle = 0.02 + 1e-4 + 2 * 1e-5 + 3e-5
    assert result.time_s == pytest.approx(100 / 4 * cycle, abs=4 * 3e-5)
    assert result.provenance["cost_source"] == "config"
    with pytest.raises(ConfigError, match="engine.costs.grad_s"):
        validate(compose_cfg(over + ["engine.costs.grad_s=0.01"]))
    with pytest.raises(ConfigError, match="engine.compute_base_s"):
        validate(compose_cfg(over[:-4] + ["engine.compute_base_s=null"]))


def test_shared_memory_message_terms_are_measured_with_the_blocking_handoff(monkeypatch):
    """Both runs (P = 1 and saturated) use the same hand-off, the one named in the key: with ``auto`` a quiet machine
    spins at P = 1 and blocks when saturated. The latency is what a P = 1 run's update leaves after the worker's
    own time per gradient and the master's busy time: (0.1 - 0.01 - 0.02) / 2."""
    import experiments.engines as engines

    seen = {}

    class FakeEngine:
        def run(self, problem, rule, cfg, recorder):
            seen.setdefault(cfg.engine.name, []).append(cfg.engine.get("handoff"))
            return type("R", (), {"status": "ok", "time_s": 1.0, "timed_samples": 10, "samples": 10,
                                  "master_busy_s": 0.02,
                                  "compute_times": [(0, i, 0.01, float("nan")) for i in range(10)]})()

    monkeypatch.setattr(engines, "get_engine", lambda name: FakeEngine())
    for t in ("shared_memory", "distributed"):
        assert cal_mod.seconds_per_update(t, 8, 1, updates=10) == pytest.approx(0.1)
        assert cal_mod.p1_latency_s(t, 8, updates=10) == pytest.approx(0.035)
    assert seen["shared_memory"] == ["block", "block"]
    assert message_keys("shared_memory", 8) == ("latency|shared_memory-block|d=8|net",
                                                "overhead|shared_memory-block|d=8")
    assert message_keys("distributed", 8) == ("latency|distributed|d=8|net", "overhead|distributed|d=8")


def test_gradients_are_timed_inside_a_real_run_and_timing_only_ones_in_the_probe(monkeypatch):
    """A gradient's cost is what the worker of a P = 1 shared_memory run (blocking hand-off) measured, one median per
    repeat (a hot loop underestimates it: the worker's caches go cold while it waits); a timing-only problem, whose
    engine gradients are free, is timed with its real ``timed_loss_grad`` in the probe."""
    from problems.cnn import LeNet5
    from problems.timing import TimingOnlyCNN, fake_images

    problem = QuadraticProblem()
    samples = cal_mod.engine_grad_samples(problem, 8, repeats=3)
    assert len(samples) == 3 and all(0 < s < 0.05 for s in samples)
    assert grad_key(problem, 8).endswith("|in=shared_memory-block")
    px, py = fake_images(4, (1, 28, 28), 10, seed=0)
    timing = TimingOnlyCNN(LeNet5, px, py, num_train=100)
    assert grad_key(timing, 2).endswith("|in=probe")
    monkeypatch.setattr(cal_mod, "engine_grad_samples", lambda *a, **k: pytest.fail("a timing-only problem"))
    probe = cal_mod.measure_grad_samples(timing, 2, reps=2, repeats=2)
    assert len(probe) == 2 and all(s > 1e-5 for s in probe)  # a real LeNet5 gradient, not the free one


def test_a_timing_only_problem_is_probed_once_for_every_size_it_lacks(tmp_path, monkeypatch):
    """One probe process times every batch size of a timing-only run that the calibration lacks (each process start
    builds the net again), and sizes the file already holds are not timed again."""
    from problems.cnn import LeNet5
    from problems.timing import TimingOnlyCNN, fake_images

    px, py = fake_images(4, (1, 28, 28), 10, seed=0)
    timing = TimingOnlyCNN(LeNet5, px, py, num_train=100)
    path = tmp_path / "cal.json"
    path.write_text(json.dumps({"machine": {}, "entries": {
        grad_key(timing, 4): {"value": 7e-3, "samples": [7e-3], "spread": 0.0}}}))
    calls, real_probe = [], cal_mod.probe_grad_samples

    def counted(problem, sizes, *a, **k):
        calls.append(list(sizes))
        return real_probe(problem, sizes, reps=2, repeats=2)

    monkeypatch.setattr(cal_mod, "probe_grad_samples", counted)
    fixed = {"update_s": 1e-6, "latency_s": 1e-6, "overhead_s": 1e-6}
    c = cost_model(timing, build_rule("sgd", lr=0.1), [32, 4, 1], fixed, Calibration(path), _alg("sgd"), 32)
    assert calls == [[1, 32]]                                 # both missing sizes, one process
    assert c.grad[4] == 7e-3                                   # kept from the file
    assert 1e-5 < c.grad[1] < c.grad[32]                       # real LeNet5 gradients: 32 images cost more than 1
    assert len(Calibration(path).read()["entries"][grad_key(timing, 32)]["samples"]) == 2


def test_lateness_of_long_waits_is_sampled_at_the_cap(monkeypatch):
    """An emulated wait of seconds is sampled at LATE_MAX_WAIT_S (its lateness is the wake-up, not the wait), as many
    times as the budget allows at that length; a short wait is sampled at its own length."""
    waits = []
    monkeypatch.setattr(cal_mod.time, "sleep", waits.append)
    assert len(cal_mod.measure_lateness_samples(5.728)) == 8 and set(waits) == {cal_mod.LATE_MAX_WAIT_S}
    waits.clear()
    assert len(cal_mod.measure_lateness_samples(0.05)) == 40 and set(waits) == {0.05}


# ---------------------------------------------------------------- damaged or unusable calibration files
GOOD = {"machine": {}, "entries": {"k": {"value": 2.0, "samples": [1.0, 2.0, 3.0], "spread": 1.0}}}


@pytest.mark.parametrize("content", [b"\x00\xffgarbage", json.dumps(GOOD).encode()[:-7], b"", b"  \n",
                                     b"[1, 2]", b'{"entries": []}', b'{"entries": {"k": {"value": "fast"}}}',
                                     b'{"entries": {"k": {"value": 1.0, "samples": "x"}}}', b'{"machine": 3, "entries": {}}'])
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
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cal.json", "cal.json.damaged-1", "cal.json.damaged-2",
                                                          "cal.json.lock"]


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
    cmd = [sys.executable, "-m", "experiments.run", "problem=logreg_libsvm", f"problem.path={data}", "epochs=1",
           "batch_size=8", "engine=simulated", f"engine.calibration={fifo}", f"results_dir={tmp_path / 'res'}"]
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-3000:]
    assert p.stderr.strip().splitlines()[-1] == (f"error: {fifo}: the calibration file is a named pipe, not a "
                                                 "regular file (engine.calibration / APAM_CALIBRATION must name a "
                                                 "JSON file)")
