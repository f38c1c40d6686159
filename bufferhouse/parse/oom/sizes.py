"""Sizes as OOM messages print them: XLA's `4.00GiB`, the TPU stack's `17.25G`,
exact `(554,696,704 bytes)`, plain byte counts.

A human size is rounded (tsl HumanReadableNumBytes prints KiB with one
decimal, larger units with two): the parsed bytes are the printed mantissa
times the unit, and the caller is told the figure is not exact.
"""

from __future__ import annotations

import re

_UNITS = {
    "": 1,
    "B": 1,
    "BYTE": 1,
    "BYTES": 1,
    "K": 1 << 10,
    "M": 1 << 20,
    "G": 1 << 30,
    "T": 1 << 40,
    "P": 1 << 50,
    "E": 1 << 60,
}

_SIZE = re.compile(r"(-?)(\d+(?:\.\d*)?|\.\d+)\s?([A-Za-z]*)")
_EXACT = re.compile(r"\(\s*(-?[\d,]+)\s*bytes?\s*\)|\((-?\d+)B\)")


class SizeError(ValueError):
    """A size that does not parse; the message says what was expected."""


def parse_size(text: str) -> tuple[int, bool]:
    """(bytes, exact) of one printed size, e.g. '4.00GiB' -> (4294967296, False).

    Binary units (K, KiB, KB all mean 1024: XLA and the TPU stack both print
    powers of two). Exact when the unit is bytes and the number whole.
    """
    m = _SIZE.fullmatch(text.strip())
    if not m:
        raise SizeError(f"expected a size like 4.00GiB, 17.25G or 123B, found {text.strip()!r}")
    sign, number, unit = m.groups()
    key = unit.upper()
    if key not in _UNITS:
        if key.endswith("IB"):
            key = key[:-2]
        elif key.endswith("B") and len(key) == 2:
            key = key[:-1]
    if key not in _UNITS:
        raise SizeError(
            f"unknown unit {unit!r} in size {text.strip()!r} (expected B, K/KiB, M/MiB, G/GiB, T/TiB)"
        )
    scale = _UNITS[key]
    exact = scale == 1 and "." not in number
    value = round(float(number) * scale) if not exact else int(number)
    return (-value if sign else value), exact


def exact_bytes(text: str) -> int | None:
    """The exact byte count of a `(554,696,704 bytes)` or `(1073741824B)` aside, if any."""
    m = _EXACT.search(text)
    if not m:
        return None
    return int((m.group(1) or m.group(2)).replace(",", ""))
