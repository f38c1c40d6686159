"""XLA's reference-counted heap, replayed event by event (HeapSimulatorTrace).

One home for how the simulator counts bytes, used for the bytes in use after
each event of a trace (heap_events.heap_bytes) and for XLA's own peak
(ComputePeakMemorySizes, modules.xla_peak_bytes and trace_peak_bytes).
"""

from __future__ import annotations

__all__ = ["ALLOC", "FREE", "SHARE_WITH", "HeapCycle", "RefCountedHeap"]

ALLOC, FREE, SHARE_WITH = 0, 1, 2


class HeapCycle(ValueError):
    """A SHARE_WITH that would make a buffer share its own bytes (a cycle)."""


class RefCountedHeap:
    """A buffer's bytes count while any holder has it, and SHARE_WITH makes a buffer
    one more holder of its canonical root."""

    def __init__(self, size: dict[int, int]) -> None:
        self.size = size
        self.ref: dict[int, int] = {}
        self.under: dict[int, int] = {}
        self.mem = 0

    def root(self, b: int) -> int:
        """The canonical buffer whose bytes `b` stands for (links never form a cycle:
        `apply` refuses one, so this ends)."""
        while b in self.under:
            b = self.under[b]
        return b

    def hold(self, b: int) -> None:
        self.ref[b] = self.ref.get(b, 0) + 1
        if self.ref[b] == 1:
            self.mem += self.size.get(b, 0)

    def apply(self, kind: int, b: int, share: int) -> int:
        """One event (ALLOC, FREE, SHARE_WITH); returns the holders left of a freed
        buffer's root (negative: freed more often than allocated), else 1. Raises
        HeapCycle for a SHARE_WITH whose canonical buffer resolves to `b` itself."""
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
            if root == b:
                raise HeapCycle(f"buffer {b} shares with {share}, whose bytes are its own")
            self.under[b] = root
            self.hold(root)
        return 1
