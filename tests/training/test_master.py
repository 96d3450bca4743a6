"""The master logic shared by every engine: protocols, versions, staleness bookkeeping."""

import pytest
import torch

from algorithms import build_rule
from experiments.training.master import Master


def _sgd():
    return build_rule("sgd", lr=0.5)


def test_async_applies_one_update_per_gradient_and_records_staleness():
    m = Master(_sgd(), torch.zeros(3), "async", workers=4)
    assert m.receive(torch.ones(3), read_version=0)
    assert m.receive(torch.ones(3), read_version=0)  # computed before the first update: tau = 1
    assert m.receive(torch.ones(3), read_version=2)
    assert m.version == 3 and m.gradients == 3
    assert torch.equal(m.x, torch.full((3,), -1.5))
    assert m.histogram == {0: 2, 1: 1}
    mean, mx = m.take_staleness()
    assert mean == pytest.approx(1 / 3) and mx == 1
    assert m.take_staleness()[1] == 0  # window emptied


def test_sync_averages_a_round_into_one_update():
    m = Master(_sgd(), torch.zeros(2), "sync", workers=3)
    assert not m.receive(torch.tensor([1.0, 0.0]), 0)
    assert not m.receive(torch.tensor([2.0, 0.0]), 0)
    assert m.receive(torch.tensor([3.0, 3.0]), 0)
    assert m.version == 1 and m.gradients == 3
    assert torch.allclose(m.x, torch.tensor([-1.0, -0.5]))  # 0.5 * mean
    assert m.histogram == {0: 1}


def test_receive_round_equals_a_round_of_receives():
    """A whole round handed over as its mean (the simulated engine's sync path) leaves the master exactly as P
    receive calls with the same mean would: iterate, AMSGrad state, counts, staleness."""
    gs = [torch.tensor([1.0, -2.0]), torch.tensor([0.5, 4.0]), torch.tensor([3.0, 1.0])]
    one_by_one, at_once = (
        Master(build_rule("amsgrad", variant="torch", lr=0.1), torch.zeros(2), "sync", workers=3) for _ in range(2)
    )
    for k in range(2):
        for w, g in enumerate(gs):
            one_by_one.receive(g * (k + 1), k, worker=w)
        assert at_once.receive_round(sum(g * (k + 1) for g in gs) / 3, k)
    assert torch.equal(one_by_one.x, at_once.x)
    a, b = one_by_one.state, at_once.state
    assert a.k == b.k == 2 and all(torch.equal(getattr(a, n), getattr(b, n)) for n in ("m", "v", "vhat"))
    assert (at_once.version, at_once.gradients, at_once.histogram) == (2, 6, {0: 2})
    assert at_once.per_worker == one_by_one.per_worker == {0: (0, 2), 1: (0, 2), 2: (0, 2)}
    with pytest.raises(ValueError, match="version 1"):
        at_once.receive_round(gs[0], 1)
    at_once.receive(gs[0], 2)
    with pytest.raises(ValueError, match="1 gradients of the round"):
        at_once.receive_round(gs[0], 2)
    with pytest.raises(ValueError, match="sync protocol"):
        Master(_sgd(), torch.zeros(2), "async", workers=2).receive_round(gs[0], 0)


def test_sync_rejects_a_stale_gradient():
    m = Master(_sgd(), torch.zeros(2), "sync", workers=1)
    m.receive(torch.ones(2), 0)
    with pytest.raises(ValueError, match="version 0"):
        m.receive(torch.ones(2), 0)


def test_master_copies_x0_and_checks_arguments():
    x0 = torch.zeros(2)
    m = Master(_sgd(), x0, "async", 1)
    m.receive(torch.ones(2), 0)
    assert torch.equal(x0, torch.zeros(2))
    with pytest.raises(ValueError, match="protocol"):
        Master(_sgd(), x0, "gossip", 1)
    with pytest.raises(ValueError, match="workers=0"):  # a sync round needs a worker
        Master(_sgd(), x0, "sync", 0)
    with pytest.raises(ValueError, match="workers=-1"):
        Master(_sgd(), x0, "async", -1)
    assert Master(_sgd(), x0, "async", 0).workers == 0  # async: the master alone computing (master_computes)
