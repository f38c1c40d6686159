"""A canned query's declared parameters: their types, ranges and choices, and how a
value given (from Python or as --param text) is checked and converted."""

from __future__ import annotations

import math
from dataclasses import dataclass

from bufferhouse.errors import QueryError

#: The values DuckDB's integer types hold: a --param outside them is the tool's
#: error, not DuckDB's Conversion Error.
INTEGER_RANGES = {"INTEGER": (-(2**31), 2**31 - 1), "BIGINT": (-(2**63), 2**63 - 1)}


@dataclass(frozen=True)
class Param:
    """A declared parameter: `-- param NAME TYPE [>= MIN | in (A, B)] = DEFAULT: doc`."""

    name: str
    type: str
    default: str  # SQL literal
    doc: str
    minimum: int | None = None  # numbers: the least value accepted
    choices: tuple[str, ...] = ()  # VARCHAR: the values accepted (NULL aside)

    @property
    def constraint(self) -> str:
        """The declared range or choices as the docs show them ('' when none)."""
        if self.minimum is not None:
            return f">= {self.minimum}"
        if self.choices:
            return f"in ({', '.join(self.choices)})"
        return ""

    def check(self, value: object) -> object:
        """`value` when the parameter accepts it; otherwise a QueryError that says what
        it accepts (the value's type, its range, the choices)."""
        if value is None or self.type.endswith("[]"):
            return value
        if self.type in INTEGER_RANGES:
            low, high = INTEGER_RANGES[self.type]
            if self.minimum is not None:
                low = max(low, self.minimum)
            if isinstance(value, bool) or not isinstance(value, int):
                raise QueryError(f"parameter {self.name} wants an integer, got {value!r}")
            if not low <= value <= high:
                raise QueryError(
                    f"parameter {self.name} wants an integer from {low} to {high}, got {value}"
                )
        elif self.type == "DOUBLE":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise QueryError(f"parameter {self.name} wants a number, got {value!r}")
            if not math.isfinite(value) or (self.minimum is not None and value < self.minimum):
                at_least = f" at least {self.minimum}" if self.minimum is not None else ""
                raise QueryError(
                    f"parameter {self.name} wants a finite number{at_least}, got {value}"
                )
        elif self.type == "BOOLEAN":
            if not isinstance(value, bool):
                raise QueryError(f"parameter {self.name} wants true or false, got {value!r}")
        elif self.type == "VARCHAR":
            if not isinstance(value, str):
                raise QueryError(f"parameter {self.name} wants text, got {value!r}")
            if self.choices and value not in self.choices:
                raise QueryError(
                    f"parameter {self.name} wants one of {', '.join(self.choices)}, got {value!r}"
                )
        return value

    def convert(self, text: str) -> object:
        """A --param value given, converted to the declared type.

        `NULL` (any case) gives NULL for a number or boolean, which no such value spells:
        how a shell user asks for `top` NULL (all rows) or resets a parameter to NULL.
        """
        if self.type != "VARCHAR" and text.strip().upper() == "NULL":
            return None
        if self.type in ("INTEGER", "BIGINT"):
            try:
                return int(text)
            except ValueError:
                raise QueryError(f"parameter {self.name} wants an integer, got {text!r}") from None
        if self.type == "DOUBLE":
            try:
                return float(text)
            except ValueError:
                raise QueryError(f"parameter {self.name} wants a number, got {text!r}") from None
        if self.type == "BOOLEAN":
            if text.lower() in ("true", "1", "yes"):
                return True
            if text.lower() in ("false", "0", "no"):
                return False
            raise QueryError(f"parameter {self.name} wants true or false, got {text!r}")
        return text

    @property
    def default_value(self) -> object:
        d = self.default.strip()
        if d.upper() == "NULL":
            return None
        if d.startswith("'") and d.endswith("'"):
            return d[1:-1].replace("''", "'")
        if d.upper() in ("TRUE", "FALSE"):
            return d.upper() == "TRUE"
        try:
            return int(d)
        except ValueError:
            return float(d)
