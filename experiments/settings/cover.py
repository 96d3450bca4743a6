"""A covering array of a sweep's values: a few jobs that together hold every value, or every pair of values of two
keys -- the jobs to compose when what is asked depends on single values (which clock an engine option has, which
seeds a sweep has) or on pairs of them, without composing every job of a sweep of thousands."""

from __future__ import annotations

import itertools


def covering(lists: list[list[str]], strength: int = 1) -> list[list[str]]:
    """Jobs (one value of each list, in the lists' order) that hold every value (``strength=1``: max(len(values))
    jobs) or every pair of values of two lists (``strength=2``, a pairwise covering array built greedily: each next
    job is the one of the full product that holds the most pairs not yet held).

    Raises:
        ValueError: strength not 1 or 2.
    """
    if strength not in (1, 2):
        raise ValueError(f"strength={strength}: must be 1 or 2")
    if strength == 1 or len(lists) < 2:  # fewer than two keys: no pairs, every value is the cover
        return [[vals[i % len(vals)] for vals in lists] for i in range(max((len(v) for v in lists), default=1))]
    n = len(lists)
    candidates = list(itertools.product(*(range(len(v)) for v in lists)))

    def pairs(c):
        return {(i, c[i], j, c[j]) for i in range(n) for j in range(i + 1, n)}

    held = [pairs(c) for c in candidates]
    todo = set().union(*held) if held else set()
    chosen = []
    while todo:
        k = max(range(len(candidates)), key=lambda k: len(held[k] & todo))
        todo -= held[k]
        chosen.append(candidates[k])
    return [[lists[k][i] for k, i in enumerate(c)] for c in chosen] or [[]]
