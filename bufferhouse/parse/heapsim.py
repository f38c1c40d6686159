"""XLA's reference-counted heap, replayed event by event (HeapSimulatorTrace).

One home for how the simulator counts bytes, used for the bytes in use after
each event of a trace (heap_events.heap_bytes) and for XLA's own peak
(ComputePeakMemorySizes, modules.xla_peak_bytes and trace_peak_bytes).
"""

from __future__ import annotations

__all__ = ["ALLOC", "FREE", "SHARE_WITH", "STEPS_PER_EVENT", "BadShare", "RefCountedHeap"]

ALLOC, FREE, SHARE_WITH = 0, 1, 2


#: Root lookups may take this many steps per event in all: XLA shares with a canonical
#: buffer, so its chains are one or two links long.
STEPS_PER_EVENT = 64


class BadShare(ValueError):
    """SHARE_WITH links no XLA trace makes: a cycle (the replay would loop forever), or
    chains so deep that following them costs more than the trace's length allows."""


class RefCountedHeap:
    """A buffer's bytes count while any holder has it, and SHARE_WITH makes a buffer
    one more holder of its canonical root."""

    def __init__(self, size: dict[int, int], events: int) -> None:
        self.size = size
        self.ref: dict[int, int] = {}
        self.under: dict[int, int] = {}
        self.mem = 0
        self.steps = STEPS_PER_EVENT * events + 1024  # a bound on time, by the input

    def root(self, b: int) -> int:
        """The canonical buffer whose bytes `b` stands for (links never form a cycle:
        `apply` refuses one; and their length is bounded by the input)."""
        while b in self.under:
            b = self.under[b]
            self.steps -= 1
            if self.steps < 0:
                raise BadShare(
                    f"SHARE_WITH chains longer than {STEPS_PER_EVENT} links per event "
                    "(expected SHARE_WITH to name a canonical buffer, as XLA's do)"
                )
        return b

    def hold(self, b: int) -> None:
        self.ref[b] = self.ref.get(b, 0) + 1
        if self.ref[b] == 1:
            self.mem += self.size.get(b, 0)

    def apply(self, kind: int, b: int, share: int) -> int:
        """One event (ALLOC, FREE, SHARE_WITH); returns the holders left of a freed
        buffer's root (negative: freed more often than allocated), else 1. Raises
        BadShare for a SHARE_WITH whose canonical buffer resolves to `b` itself."""
        if kind == ALLOC:
            self.hold(b)
        elif kind == FREE:
            root = self.root(b)
            self.under.pop(b, None)
            left = self.ref[root] = self.ref.get(root, 0) - 1
            if left == 0:
                self.mem -= self.size.get(root, 0)
            return left
        elif kind == SHARE_WITH:
            root = self.root(share)
            if root == b:  # b would stand for itself: every later root lookup would loop
                raise BadShare(
                    f"SHARE_WITH of buffer {b} with {share}, whose canonical buffer is {b} "
                    "itself: a cycle (expected a canonical buffer other than the one shared)"
                )
            self.under[b] = root
            self.hold(root)
        return 1
