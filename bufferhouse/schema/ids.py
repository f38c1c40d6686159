"""Module ids: warehouse surrogate keys that grow in insertion order.

Every per-module table starts with `module_id`, and rows are appended module
after module. When ids grow with insertion order, each DuckDB row group (and
each Parquet row group) covers a narrow, non-overlapping id range, so the
zone maps skip everything but the one module a scoped query asks for. Ids
derived from content hashes are random and defeat that.

Layout: `(unix_milliseconds << 20) | low`. A fresh id takes the clock and 19
random low bits, so two writers that start in the same millisecond (Parquet
part writers, Spark tasks) almost never meet; an allocator then never hands
out an id below its last plus one, so its ids strictly increase even when many
are taken within one millisecond or the clock steps back. Positive, and fits
a BIGINT until the year 2248. The module's identity across warehouses is its
`content_hash`, not this id.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable

#: module_id of the rows a parser returns: the sink that takes the module assigns the real one.
UNASSIGNED_MODULE_ID = 0

#: Bits below the millisecond clock.
LOW_BITS = 20
#: Random bits of a fresh id: one bit less than LOW_BITS, so half the space of a
#: millisecond stays free for ids taken in a row.
RANDOM_BITS = LOW_BITS - 1


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class ModuleIds:
    """Hands out strictly increasing module ids (see the module docstring).

    `after`: the largest id the sink already holds (a warehouse's
    max(module_id)); every id handed out is above it.
    """

    def __init__(self, after: int | None = None, clock: Callable[[], int] = _now_ms) -> None:
        self.last = max(after or 0, 0)
        self._clock = clock

    def next(self) -> int:
        candidate = (self._clock() << LOW_BITS) | secrets.randbits(RANDOM_BITS)
        self.last = max(self.last + 1, candidate)
        return self.last
