"""The SQL building blocks several statements share, each one scalar macro (Perfetto's
stdlib style): the one home of a rule that the derive statements (schema/derive/),
the views and canned queries (queries/) and the checks (check/sql/) all spell.

A macro is expanded where it is called, before planning, so it costs what the
expression written out costs: it changes no scan, filter or join (bench/queries.py
reads the same row groups with the copies and with the macros; docs/history/
2026-12-macros.md has the run). They are installed with the views (the
warehouse's, or the session's by queries.use_package_views), and `derive` installs
them for its own connection; `export.transpile` writes them out for other engines.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from bufferhouse.schema import sql_string


@dataclass(frozen=True)
class Macro:
    """`CREATE MACRO name(params) AS body`, and the sentence COMMENT ON gives it."""

    name: str
    params: tuple[str, ...]
    body: str
    doc: str

    def create_sql(self, temp: bool = False) -> str:
        kind = "TEMP MACRO" if temp else "MACRO"
        return f"CREATE OR REPLACE {kind} {self.name}({', '.join(self.params)}) AS {self.body}"

    def comment_sql(self) -> str:
        return f"COMMENT ON MACRO {self.name} IS {sql_string(self.doc)}"


#: The heap's peak event: of a module's events in one memory space (or one trace),
#: the first one, in trace order, at the highest heap_bytes. An aggregate, also used
#: over a window: `pos` is the event's place in trace order (its step, or the pair
#: {'trace_index': ..., 'event_index': ...}), and the result is the `pos` of that event.
PEAK_FIRST = Macro(
    "bh_peak_first",
    ("pos", "heap_bytes"),
    "arg_min(pos, {'neg_heap_bytes': -heap_bytes, 'pos': pos})",
    "Aggregate: the pos (trace-order position) of the first event at the highest "
    "heap_bytes, the heap's peak event. Usage: SELECT module_id, color, "
    "bh_peak_first(event_index, heap_bytes) FROM heap_events WHERE trace_index = 0 "
    "GROUP BY ALL",
)

#: A value is live at program-order step t when its live range covers t, both ends
#: inclusive; a value with no live range (NULL start) counts as live throughout, as
#: XLA keeps a value it has no range for.
LIVE_AT = Macro(
    "bh_live_at",
    ("t", "start_time", "end_time"),
    "(start_time IS NULL OR t BETWEEN start_time AND end_time)",
    "True when a value whose live range is [start_time, end_time] (inclusive; NULL: "
    "no range, live throughout) is live at program-order step t. Usage: SELECT * FROM "
    "live_ranges WHERE bh_live_at(3, start_time, end_time)",
)

#: Every shared macro, in install order.
MACROS: tuple[Macro, ...] = (PEAK_FIRST, LIVE_AT)


def install(con: duckdb.DuckDBPyConnection, temp: bool = False) -> None:
    """Create (or replace) every shared macro on `con`; with COMMENT ON unless temp."""
    for macro in MACROS:
        con.execute(macro.create_sql(temp))
        if not temp:
            con.execute(macro.comment_sql())
