"""How precise a calibration entry is: its spread, the bound on it, and how many rounds of repeats an entry above
the bound gets (experiments/clock/calibration.py stores the entries, experiments/clock/resolve.py measures the rounds).
"""

from __future__ import annotations

import statistics
from math import comb

SPREAD_BOUND = 0.25
"""The widest spread (:func:`spread_of`: the relative width of the confidence interval of an entry's median) taken
as a measurement. A run that uses an entry above it measures :data:`experiments.clock.measure.REPEATS` more repeats
of that entry and pools them with the ones it has, up to :data:`POOL_ROUNDS` rounds
(:func:`experiments.clock.resolve.resolve`): the median's interval narrows as repeats accrue, however noisy each
repeat is. Still above after the last round, the entry is used -- on a busy machine no measurement may ever get under
it, and refusing would stop every run -- with a warning on stderr and its key under
``calibration_used.spread_above_bound`` in the run's provenance.json. Only entries whose samples repeat one cost are
bounded (:data:`BOUNDED_KINDS`); the gradient times of the ``measured`` law and the wake-up lateness samples are
distributions, wide by nature. ``python -m experiments.calibrate --only ID`` lists each entry's spread and flags
those above the bound."""
SPREAD_LEVEL = 1 - 2 / 2**5
"""The confidence level of :func:`spread_of`'s interval: at least 93.75 %, the coverage of the range of 5 repeats
(1 - 2 / 2^5), so that the first :data:`experiments.clock.measure.REPEATS` = 5 repeats give ``(max - min) /
median`` as before, and more repeats a narrower interval at the same level."""
POOL_ROUNDS = 5
"""Rounds of repeats an entry is measured in at most: the first and, while its spread is above
:data:`SPREAD_BOUND`, up to four more pooled with it (25 repeats: the interval from the 8th to the 18th smallest,
about half as wide as the range of 5 when the repeats scatter normally)."""
BOUNDED_KINDS = ("grad", "update", "latency", "overhead", "overhead_idle", "round")
"""Key prefixes of the entries :data:`SPREAD_BOUND` applies to (repeats of one cost)."""


def median_interval(samples) -> tuple[float, float]:
    """The distribution-free confidence interval of the median of ``samples`` (seconds) at level
    :data:`SPREAD_LEVEL`: ``(x_(j), x_(n+1-j))`` of the sorted samples, with the largest ``j >= 1`` whose coverage
    ``1 - 2 P(Bin(n, 1/2) <= j - 1)`` is at least the level (Conover, *Practical Nonparametric Statistics*, 3rd ed.,
    sec. 3.2; fewer than 5 samples: their range, at a lower coverage). Raises ValueError when ``samples`` is empty."""
    s = sorted(float(v) for v in samples)
    n = len(s)
    if not n:
        raise ValueError("median_interval: no samples")
    j, below = 1, 0.0  # below: P(Bin(n, 1/2) <= j - 1)
    while j < (n + 1) // 2:
        below_next = below + comb(n, j) / 2**n
        if 1 - 2 * below_next < SPREAD_LEVEL - 1e-12:
            break
        j, below = j + 1, below_next
    return s[j - 1], s[n - j]


def spread_of(samples) -> float:
    """The spread of an entry's repeats: the width of :func:`median_interval` over the median (0 when the median is
    not positive). Five repeats: ``(max - min) / median``; fifteen: from the 4th to the 12th smallest."""
    med = statistics.median(samples)
    lo, hi = median_interval(samples)
    return (hi - lo) / med if med > 0 else 0.0


def above_bound(key: str, entry: dict) -> bool:
    """True when ``entry`` (under ``key``) repeats one cost and its spread is above :data:`SPREAD_BOUND`."""
    return key.split("|", 1)[0] in BOUNDED_KINDS and float(entry.get("spread") or 0.0) > SPREAD_BOUND


def rounds_pooled(entry: dict) -> int:
    """The rounds of repeats pooled into ``entry`` after its first (its ``remeasured``, 0 when absent). An older
    file's ``"remeasured": true`` counts none: such an entry was measured once more from scratch and kept only that
    second round, so its samples are one round and it may still pool up to ``POOL_ROUNDS - 1`` more."""
    rounds = entry.get("remeasured") or 0
    return 0 if isinstance(rounds, bool) else int(rounds)
