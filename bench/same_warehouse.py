"""Compare two warehouses table by table, row for row: the proof that a change of
structure changed no data (issue 37).

    python bench/same_warehouse.py BEFORE.duckdb AFTER.duckdb

Keys that differ between two ingests of the same files by design are mapped to the
identities they stand for (schema/kinds.py: module_id -> modules.content_hash,
event_id -> oom_events.event_hash, snapshot_id -> runtime_snapshots.snapshot_hash);
run ids, ingest times and hosts are left out. Every other column of every table is compared as a
multiset of rows. Exit status 1 and a line per differing table when they differ.
"""

from __future__ import annotations

import sys

import duckdb

from bufferhouse.schema.kinds import KINDS

#: Each kind's warehouse key -> (its table, its identity column).
_KEYS = {k.id_column: (k.table.name, k.hash_column) for k in KINDS}
_LEFT_OUT = {"run_id", "started_at", "host", "tool_version", "roots"}


def _rows(con: duckdb.DuckDBPyConnection, db: str, table: str) -> list[tuple]:
    cols = [
        r[0]
        for r in con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE database_name = ? AND table_name = ?"
            " ORDER BY column_index",
            [db, table],
        ).fetchall()
    ]
    picks = []
    for c in cols:
        if c in _LEFT_OUT:
            continue
        if c in _KEYS and table != _KEYS[c][0]:
            owner, ident = _KEYS[c]
            picks.append(f'(SELECT o.{ident} FROM {db}.{owner} o WHERE o.{c} = t."{c}") AS "{c}"')
        elif c in _KEYS:
            continue  # the table's own key: its identity column stands for it
        else:
            picks.append(f't."{c}"')
    sql = f"SELECT {', '.join(picks)} FROM {db}.{table} t"
    return sorted(map(repr, con.execute(sql).fetchall()))


def main(before: str, after: str) -> int:
    con = duckdb.connect()
    con.execute(f"ATTACH '{before}' AS a (READ_ONLY)")
    con.execute(f"ATTACH '{after}' AS b (READ_ONLY)")
    tables = {
        db: {
            r[0]
            for r in con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE database_name = ?", [db]
            ).fetchall()
        }
        for db in ("a", "b")
    }
    bad = 0
    if tables["a"] != tables["b"]:
        print("tables differ:", sorted(tables["a"] ^ tables["b"]))
        bad += 1
    for table in sorted(tables["a"] & tables["b"]):
        ra, rb = _rows(con, "a", table), _rows(con, "b", table)
        same = ra == rb
        print(f"{table:24} {len(ra):8} rows  {'same' if same else 'DIFFERENT'} ({len(rb)} after)")
        bad += not same
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
