"""Before/after of the SQL that the shared macros (schema/macros.py) replaced: the
copies of 9287c26 against the package's, interleaved on one warehouse, with the row
groups each reads (DuckDB's profile) and whether both give the same rows.

    python bench/macro_ab.py WAREHOUSE.duckdb [--repeat 7]

Use a warehouse with heap-simulator traces (protos or profiles), copied large enough
to span many row groups: bench/queries.py's `replicate` of an ingest of tests/data.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bufferhouse import queries as bq  # noqa: E402
from bufferhouse.queries.helpers import helper_macro_sql  # noqa: E402
from bufferhouse.schema import macros  # noqa: E402
from bufferhouse.schema.derive import STATEMENTS  # noqa: E402

BEFORE = "9287c26"


def at_before(path: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{BEFORE}:{path}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def row_groups(con: duckdb.DuckDBPyConnection, sql: str, params: dict) -> tuple:
    doc = json.loads(con.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params).fetchall()[0][1])
    doc = doc[0] if isinstance(doc, list) else doc
    doc = doc.get("query", doc)
    return doc.get("total_row_groups_scanned"), doc.get("total_row_groups_to_scan")


def cases(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[str, dict]]]:
    """name -> [(SQL before, params), (SQL after, params)]."""
    (module,) = con.execute(
        "SELECT module_id FROM heap_events GROUP BY module_id ORDER BY count(*) DESC, module_id"
        " LIMIT 1"
    ).fetchone()
    lo, hi = con.execute(
        "SELECT min(module_id), max(module_id) FROM"
        " (SELECT module_id FROM modules ORDER BY module_id LIMIT 200)"
    ).fetchone()
    out = {}
    for name in ("heap-trace", "heap-timeline"):
        pair = []
        for q in (
            bq.parse_query_file(at_before(f"bufferhouse/queries/{name}.sql"), name),
            bq.get(name),
        ):
            values = q.bind({"module": str(module)})
            pair.append((q.sql, {k: values[k] for k in q.used_params()}))
        out[f"{name} (module {module})"] = pair
    before = at_before("bufferhouse/schema/derive/heap_peak_buffers.sql")
    out["heap_peak_buffers (200 modules)"] = [
        (sql, {"lo": lo, "hi": hi}) for sql in (before, STATEMENTS["heap_peak_buffers"])
    ]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("db", type=Path)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    con = duckdb.connect(str(args.db), read_only=True)
    con.execute(bq.selector_macro_sql(temp=True))
    con.execute(helper_macro_sql(temp=True))
    macros.install(con, temp=True)
    for name, pair in cases(con).items():
        rows = [sorted(map(repr, con.execute(sql, p).fetchall())) for sql, p in pair]  # warm-up
        times: list[list[float]] = [[], []]
        for _ in range(args.repeat):
            for i, (sql, p) in enumerate(pair):
                t = time.perf_counter()
                con.execute(sql, p).fetchall()
                times[i].append(time.perf_counter() - t)
        before, after = (statistics.median(t) * 1000 for t in times)
        print(
            f"{name}: row groups {row_groups(con, *pair[0])} -> {row_groups(con, *pair[1])};"
            f" {before:.1f} -> {after:.1f} ms (median of {args.repeat}, interleaved);"
            f" {len(rows[0])} rows, same: {rows[0] == rows[1]}"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
