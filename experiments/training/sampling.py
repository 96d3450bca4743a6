"""Seeded minibatch streams over a training set (no DataLoader, no worker processes)."""

from __future__ import annotations

import torch


class BatchStream:
    """Epoch-wise shuffled minibatches of training-set indices, reproducible under a seed.

    Each epoch is a fresh permutation of ``range(num_train)`` drawn from a private ``torch.Generator``; a batch that
    would cross the epoch boundary is completed from the next permutation, so every batch has exactly
    ``batch_size`` indices and every example is seen once per ``num_train`` samples.

    Args:
        num_train: number of training examples N (>= 1).
        batch_size: minibatch size B (>= 1).
        seed: integer seed; the same seed gives the same sequence of batches.

    Raises:
        ValueError: if ``num_train`` or ``batch_size`` is < 1.
    """

    def __init__(self, num_train: int, batch_size: int, seed: int) -> None:
        if num_train < 1 or batch_size < 1:
            raise ValueError(f"BatchStream needs num_train >= 1 and batch_size >= 1, got {num_train}, {batch_size}")
        self.num_train = int(num_train)
        self.batch_size = int(batch_size)
        self._gen = torch.Generator().manual_seed(int(seed))
        self._new_epoch()
        self.samples = 0  # samples handed out so far

    def _new_epoch(self) -> None:
        # the permutation is drawn by torch (the seeded sequence); batches are sliced from its numpy view, which is
        # cheaper than slicing the tensor (a worker's hand-off path draws one batch per gradient)
        self._perm = torch.randperm(self.num_train, generator=self._gen).numpy()
        self._pos = 0

    def next(self, batch_size: int | None = None) -> torch.Tensor:
        """Return the next minibatch: an int64 tensor of shape (batch_size,) with indices in [0, num_train)."""
        b = self.batch_size if batch_size is None else int(batch_size)
        self.samples += b
        pos = self._pos
        if pos + b < self.num_train:  # the common case: inside the current permutation
            self._pos = pos + b
            return torch.from_numpy(self._perm[pos : pos + b])
        parts = []
        need = b
        while need > 0:
            take = min(need, self.num_train - self._pos)
            parts.append(torch.from_numpy(self._perm[self._pos : self._pos + take]))
            self._pos += take
            need -= take
            if self._pos == self.num_train:
                self._new_epoch()
        return parts[0] if len(parts) == 1 else torch.cat(parts)


def split_batch(batch_size: int, workers: int) -> list[int]:
    """Per-worker minibatch sizes of a global batch split across ``workers`` (sizes differ by at most one; the
    first ``batch_size mod workers`` workers take one more), e.g. ``split_batch(10, 4) == [3, 3, 2, 2]``."""
    base, extra = divmod(int(batch_size), int(workers))
    return [base + (1 if w < extra else 0) for w in range(workers)]
