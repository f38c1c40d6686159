"""The heap sweep (bytes in use = union of live byte ranges) against its definition,
computed the slow way: every step, every allocation, byte by byte."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bufferhouse.parse.derive.heap import _in_use_events, _max_per_alloc, _peak

_VALUE = st.tuples(
    st.integers(0, 3),  # allocation
    st.integers(0, 40),  # offset
    st.integers(1, 24),  # size
    st.integers(0, 12),  # first live step
    st.integers(0, 6),  # steps live after the first
)


def _by_definition(values):
    steps = max(s + d for _, _, _, s, d in values) + 2
    in_use = {}  # (alloc, step) -> bytes
    for t in range(steps):
        for alloc in {v[0] for v in values}:
            covered = set()
            for a, lo, size, s, d in values:
                if a == alloc and s <= t <= s + d:
                    covered.update(range(lo, lo + size))
            in_use[alloc, t] = len(covered)
    totals = [sum(in_use[a, t] for a in {v[0] for v in values}) for t in range(steps)]
    best = max(totals)
    best_t = totals.index(best) if best > 0 else 0
    per_alloc = {a: max(in_use[a, t] for t in range(steps)) for a in {v[0] for v in values}}
    return best, best_t, per_alloc


def _most(time, owner, delta):
    """_max_per_alloc as {allocation: most bytes in use}."""
    allocs, most = _max_per_alloc(time, owner, delta)
    return dict(zip(allocs.tolist(), most.tolist()))


@settings(max_examples=400, deadline=None)
@given(st.lists(_VALUE, min_size=1, max_size=12))
def test_sweep_matches_the_definition(values):
    alloc, lo, size, start, extra = (np.array(c, dtype=np.int64) for c in zip(*values))
    time, owner, delta = _in_use_events(alloc, lo, lo + size, start, start + extra)
    assert _peak(time, delta) == _by_definition(values)[:2]
    assert _most(time, owner, delta) == _by_definition(values)[2]


def test_no_values_no_peak():
    empty = np.zeros(0, dtype=np.int64)
    time, owner, delta = _in_use_events(empty, empty, empty, empty, empty)
    assert _peak(time, delta) == (0, None) and _most(time, owner, delta) == {}
