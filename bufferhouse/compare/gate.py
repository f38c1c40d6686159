"""The CI gate: a threshold (`5%`, `10MiB`) on how much a matched module's peak may grow."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa

from bufferhouse.errors import DiffError
from bufferhouse.render import human_bytes

#: --peak choices and the figure each names.
PEAKS = {"heap": "heap_peak_bytes", "logical": "logical_peak_bytes", "total": "total_bytes"}
PEAK_TITLES = {
    "heap": "heap peak (memory space 0)",
    "logical": "logical peak",
    "total": "total bytes",
}
_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_THRESHOLD = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(%|[a-z]*)\s*$", re.IGNORECASE)


def signed(n: int | None) -> str:
    """Bytes with their sign (+1.5 MiB, -2 KiB); empty for None."""
    if n is None:
        return ""
    return ("+" if n > 0 else "") + human_bytes(n)


def pct(p: float | None) -> str:
    """A signed percentage, one decimal (one significant digit below 0.05%)."""
    if p is None:
        return ""
    if p == 0:
        return "0%"
    if abs(p) < 0.05:
        return f"{p:+.1g}%"
    return f"{p:+.1f}%"


@dataclass(frozen=True)
class Threshold:
    """How much a module's peak may grow: a percentage of its base, or bytes."""

    kind: str  # "pct" or "bytes"
    value: float
    text: str

    def exceeded(self, base: int | None, head: int | None) -> bool:
        """Whether growing from `base` to `head` bytes is past the threshold (strictly)."""
        if base is None or head is None or head <= base:
            return False
        delta = head - base
        if self.kind == "bytes":
            return delta > self.value
        return base == 0 or delta * 100 > self.value * base

    def __str__(self) -> str:
        return self.text


def parse_threshold(spec: str | int | Threshold) -> Threshold:
    """`5%`, `0.5%`, `1048576`, `10MiB` or `1.5GB`. A bare number is bytes, and the
    threshold says so wherever it is shown (`5` -> "5 bytes")."""
    if isinstance(spec, Threshold):
        return spec
    if isinstance(spec, bool) or not isinstance(spec, (str, int)):
        raise DiffError(f"threshold must be PCT% or BYTES, got {spec!r}")
    if isinstance(spec, int):
        if spec < 0:
            raise DiffError(f"threshold must not be negative, got {spec}")
        return Threshold("bytes", float(spec), _bytes_text(float(spec)))
    m = _THRESHOLD.match(spec)
    unit = m.group(2).lower() if m else ""
    if not m or (unit != "%" and unit not in _UNITS):
        raise DiffError(f"threshold {spec!r} is not PCT% or BYTES (e.g. 5%, 1048576, 10MiB, 1.5GB)")
    number = float(m.group(1))
    if unit == "%":
        return Threshold("pct", number, f"{m.group(1)}%")
    value = number * _UNITS[unit]
    if unit in ("", "b"):
        return Threshold("bytes", value, _bytes_text(value))
    return Threshold("bytes", value, f"{m.group(1)} {m.group(2)} ({_bytes_text(value)})")


def _bytes_text(n: float) -> str:
    """A byte count said with its unit: `5 bytes`, `1 byte`, `10,485,760 bytes`."""
    whole = int(n)
    count = f"{whole:,}" if whole == n else f"{n:,}"
    return f"{count} byte{'' if n == 1 else 's'}"


@dataclass(frozen=True)
class Gate:
    """The CI gate: which matched modules' chosen peak grew past the threshold."""

    peak: str  # heap | logical | total
    threshold: Threshold
    failures: pa.Table  # rows of DiffResult.modules over the threshold
    #: Matched modules whose chosen peak is unknown on a side: the gate cannot compare
    #: them, and a gate that cannot compare fails (it never passes on a missing figure).
    uncomparable: pa.Table

    @property
    def passed(self) -> bool:
        return self.failures.num_rows == 0 and self.uncomparable.num_rows == 0

    def details(self, limit: int = 10) -> str:
        """Which modules grew past the threshold (at most `limit` named), or that none did;
        and which could not be compared."""
        what = f"more than {self.threshold} in {PEAK_TITLES[self.peak]}"
        blind = self._uncomparable(limit)
        if self.failures.num_rows == 0:
            return blind or f"no matched module grew {what}"
        rows = self.failures.to_pylist()
        shown = ", ".join(
            f"{r['module_name']} {signed(r['delta_bytes'])}"
            + (f" ({pct(r['change_pct'])})" if r["change_pct"] is not None else "")
            for r in rows[:limit]
        )
        more = f" and {len(rows) - limit} more" if len(rows) > limit else ""
        n = len(rows)
        grew = f"{n} matched module{'s' if n != 1 else ''} grew {what}: {shown}{more}"
        return f"{grew}; {blind}" if blind else grew

    def _uncomparable(self, limit: int) -> str:
        rows = self.uncomparable.to_pylist()
        if not rows:
            return ""
        names = ", ".join(
            f"{r['module_name']} ({'base' if r['base_bytes'] is None else 'head'})"
            for r in rows[:limit]
        )
        more = f" and {len(rows) - limit} more" if len(rows) > limit else ""
        n = len(rows)
        return (
            f"{n} matched module{'s' if n != 1 else ''} cannot be compared, no"
            f" {PEAK_TITLES[self.peak]} on one side: {names}{more} (see peak_source in"
            " docs/metrics.md; --peak total compares what every form carries)"
        )

    def describe(self, limit: int = 10) -> str:
        return f"gate {'passed' if self.passed else 'failed'}: {self.details(limit)}"


__all__ = ["PEAKS", "PEAK_TITLES", "Gate", "Threshold", "parse_threshold", "pct", "signed"]
