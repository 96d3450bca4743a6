"""BatchStream (experiments/training/sampling.py): the batches are the seeded permutations cut in order, across epoch
boundaries, whatever path (the fast slice inside a permutation, or the one that crosses into the next) cuts them."""

import pytest
import torch

from experiments.training.sampling import BatchStream, split_batch


def reference(num_train: int, seed: int, epochs: int) -> torch.Tensor:
    """The permutations BatchStream draws, one per epoch, from its own seeded generator, end to end."""
    gen = torch.Generator().manual_seed(seed)
    return torch.cat([torch.randperm(num_train, generator=gen) for _ in range(epochs)])


@pytest.mark.parametrize("num_train,batch", [(10, 3), (12, 4), (7, 7), (5, 8), (1, 1)])
def test_batches_cut_the_seeded_permutations_in_order(num_train, batch):
    stream = BatchStream(num_train, batch, seed=11)
    n = 6 * num_train // batch + 3
    got = torch.cat([stream.next() for _ in range(n)])
    want = reference(num_train, 11, epochs=n * batch // num_train + 2)[: n * batch]
    assert torch.equal(got, want)
    assert stream.samples == n * batch


def test_mixed_batch_sizes_and_epoch_coverage():
    stream = BatchStream(9, 2, seed=3)
    sizes = [2, 5, 1, 9, 3, 4, 2, 1, 9]
    parts = [stream.next(b) for b in sizes]
    assert [p.numel() for p in parts] == sizes and all(p.dtype == torch.int64 for p in parts)
    got = torch.cat(parts)
    assert torch.equal(got, reference(9, 3, epochs=5)[: sum(sizes)])
    for e in range(sum(sizes) // 9):  # every example exactly once per epoch
        assert sorted(got[9 * e : 9 * (e + 1)].tolist()) == list(range(9))


def test_same_seed_same_batches_other_seed_other_batches():
    a, b, c = (BatchStream(100, 10, s) for s in (5, 5, 6))
    batches = [(a.next(), b.next(), c.next()) for _ in range(25)]
    assert all(torch.equal(x, y) for x, y, _ in batches)
    assert not all(torch.equal(x, z) for x, _, z in batches)


@pytest.mark.parametrize("num_train,batch", [(0, 1), (5, 0)])
def test_bad_sizes_are_refused(num_train, batch):
    with pytest.raises(ValueError, match="num_train >= 1 and batch_size >= 1"):
        BatchStream(num_train, batch, 0)


def test_split_batch_sizes():
    assert split_batch(10, 4) == [3, 3, 2, 2]
    assert sum(split_batch(64, 32)) == 64


def test_the_settings_split_a_sync_batch_as_split_batch_does():
    from conftest import settings_for

    s = settings_for(["workers=4", "batch_size=10", "algorithm=sync_amsgrad"])
    assert s.worker_batches == split_batch(10, 4) == [3, 3, 2, 2] and s.samples_per_update == 10
