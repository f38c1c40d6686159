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

#: A printed size in a message's grammar (a number and an optional unit).
SZ = r"-?(?:\d+(?:\.\d*)?|\.\d+)\s?[A-Za-z]*"
_SIZE = re.compile(r"(-?)(\d+(?:\.\d*)?|\.\d+)\s?([A-Za-z]*)")
_EXACT = re.compile(r"\(\s*(-?[\d,]+)\s*bytes?\s*\)|\((-?\d+)B\)")

#: The largest size a warehouse column holds (BIGINT): a printed size above it is an error
#: of that figure, not of the log.
MAX_BYTES = (1 << 63) - 1
#: Digits read of a whole number: more cannot be below MAX_BYTES (and int() of 4,300
#: digits or more raises), so a longer one is refused before it is converted.
_MAX_DIGITS = 19


class SizeError(ValueError):
    """A size that does not parse; the message says what was expected."""


def parse_size(text: str) -> tuple[int, bool]:
    """(bytes, exact) of one printed size, e.g. '4.00GiB' -> (4294967296, False).

    Binary units (K, KiB, KB all mean 1024: XLA and the TPU stack both print
    powers of two). Exact when the unit is bytes and the number whole.
    """
    m = _SIZE.fullmatch(text.strip())
    if not m:
        raise SizeError(f"expected a size like 4.00GiB, 17.25G or 123B, found {shown(text)}")
    sign, number, unit = m.groups()
    key = unit.upper()
    if key not in _UNITS:
        if key.endswith("IB"):
            key = key[:-2]
        elif key.endswith("B") and len(key) == 2:
            key = key[:-1]
    if key not in _UNITS:
        raise SizeError(
            f"unknown unit {shown(unit)} in size {shown(text)} (expected B, K/KiB, M/MiB, G/GiB, T/TiB)"
        )
    scale = _UNITS[key]
    exact = scale == 1 and "." not in number
    whole = number.split(".")[0].lstrip("0")
    if len(whole) > _MAX_DIGITS:
        raise SizeError(_too_large(text))
    value = round(float(number) * scale) if not exact else int(number)
    if value > MAX_BYTES:
        raise SizeError(_too_large(text))
    return (-value if sign else value), exact


def exact_bytes(text: str) -> int | None:
    """The exact byte count of a `(554,696,704 bytes)` or `(1073741824B)` aside, if any.
    Raises SizeError for an aside without digits or beyond MAX_BYTES."""
    m = _EXACT.search(text)
    if not m:
        return None
    return whole_bytes((m.group(1) or m.group(2)).replace(",", ""), m.group(0))


def whole_bytes(digits: str, shown_as: str | None = None) -> int:
    """A byte count printed as a whole number (optionally signed), bounded by MAX_BYTES."""
    sign = digits.startswith("-")
    body = digits[sign:].lstrip("0") or ("0" if digits[sign:] else "")
    if not body.isdigit():
        raise SizeError(f"expected a number of bytes, found {shown(shown_as or digits)}")
    if len(body) > _MAX_DIGITS or int(body) > MAX_BYTES:
        raise SizeError(_too_large(shown_as or digits))
    return -int(body) if sign else int(body)


def _too_large(text: str) -> str:
    return f"size {shown(text)} is larger than the largest a warehouse holds (2^63-1 bytes)"


def shown(text: str, limit: int = 60) -> str:
    """`text` quoted for a message, its middle left out past `limit` characters: a
    diagnostic names what it found without repeating a megabyte line."""
    text = text.strip()
    if len(text) > limit:
        return f"{text[: limit // 2]!r}...{text[-limit // 4 :]!r} ({len(text):,} characters)"
    return repr(text)
