"""The master logic shared by every engine: protocols, versions, staleness bookkeeping."""
import pytest
import torch

from algorithms import build_rule
from experiments.master import Master


def _sgd():
    return build_rule("sgd", lr=0.5)


def test_async_applies_one_update_per_gradient_and_records_staleness():
    m = Master(_sgd(), torch.zeros(3), "async", workers=4)
    assert m.receive(torch.ones(3), read_version=0)
    assert m.receive(torch.ones(3), read_version=0)   # computed before the first update: tau = 1
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
    with pytest.raises(ValueError, match="workers=0"):
        Master(_sgd(), x0, "async", 0)
