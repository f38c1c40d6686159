"""Whole warehouses of two commits compared row for row: the same inputs, the same tables.

    python bench/same_tables.py [--base-rev 5697635] [PATH ...]

Each PATH (default: every tree under tests/data, one ingest each, and the real-shaped
fleet of bench/fleet.py at --fleet-small modules) is ingested by the installed CLI
twice, into fresh warehouses: once with this tree's code, once with --base-rev's (a
worktree under bench/_work, first on PYTHONPATH). Then every table the base's
warehouse has is compared in full: its rows as multisets (EXCEPT ALL both ways), each
module's rows keyed by the module's content hash, not its id (ids follow the order
modules are written in, which batching may change), run ids and times left out.
Exit status 1 if any table differs; the differing tables and row counts are printed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import fleet, native

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
CLI = str(Path(sys.executable).with_name("bufferhouse"))

#: Columns that differ between two ingests of the same files.
VARYING = {"run_id", "started_at", "ingested_at", "host", "tool_version",
           "targets_looked_ns"}  # fmt: skip  # a directory mtime; schema 15 on

#: Columns naming a module or event by id: replaced by the content hash of what they name.
IDS = {"module_id": ("modules", "content_hash"), "event_id": ("oom_events", "event_hash"),
       "snapshot_id": ("runtime_snapshots", "snapshot_hash")}  # fmt: skip


def ingest(path: Path, db: Path, tree: Path | None) -> int:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    cmd = [CLI, "ingest", str(path), "--db", str(db), "--quiet", "--jobs", "1"]
    return subprocess.run(cmd, env=env, capture_output=True).returncode


def _select(con: duckdb.DuckDBPyConnection, schema: str, table: str) -> str:
    cols = [r[0] for r in con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE database_name = ? AND table_name = ?"
        " ORDER BY column_index", [schema, table]).fetchall()]  # fmt: skip
    parts, joins = [], []
    for c in cols:
        if c in VARYING:
            continue
        ref = IDS.get(c)
        if ref is None:
            parts.append(f't."{c}"')
        elif table != ref[0]:  # the owner's own id column goes: its hash is a column too
            alias = f"j_{c}"
            joins.append(f"LEFT JOIN {schema}.{ref[0]} AS {alias} ON {alias}.{c} = t.{c}")
            parts.append(f"{alias}.{ref[1]} AS {c}")
    return f"SELECT {', '.join(parts)} FROM {schema}.{table} AS t {' '.join(joins)}"


def compare(ours: Path, base: Path) -> list[str]:
    """Tables whose rows differ, each with how many rows each side has the other lacks."""
    con = duckdb.connect()
    con.execute(f"ATTACH '{ours}' AS a (READ_ONLY)")
    con.execute(f"ATTACH '{base}' AS b (READ_ONLY)")
    tables = [r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = 'b' ORDER BY 1").fetchall()]  # fmt: skip
    problems = []
    for t in tables:
        if t == "schema_info":  # the schema version: what a schema change changes
            continue
        qa, qb = _select(con, "a", t), _select(con, "b", t)
        only_a = con.execute(f"SELECT count(*) FROM ({qa} EXCEPT ALL {qb})").fetchall()[0][0]
        only_b = con.execute(f"SELECT count(*) FROM ({qb} EXCEPT ALL {qa})").fetchall()[0][0]
        if only_a or only_b:
            problems.append(f"{t}: {only_a} rows only in ours, {only_b} only in the base")
    con.close()
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", type=Path)
    ap.add_argument("--base-rev", default="5697635")
    ap.add_argument("--fleet-small", type=int, default=2000)
    args = ap.parse_args(argv)
    paths = args.paths or [
        *sorted(p for p in DATA.iterdir() if p.is_dir()),
        fleet.build(fleet.WORK / f"realfleet-{args.fleet_small}", small=args.fleet_small,
                    large=(2.0,), log=lambda m: print(m, file=sys.stderr)),
    ]  # fmt: skip
    base_tree = native.worktree(args.base_rev)
    failed = 0
    for path in paths:
        with tempfile.TemporaryDirectory(prefix="bufferhouse-same-") as tmp:
            a, b = Path(tmp) / "ours.duckdb", Path(tmp) / "base.duckdb"
            ra, rb = ingest(path, a, None), ingest(path, b, base_tree)
            if not a.exists() or not b.exists():
                same = ra == rb and not a.exists() and not b.exists()
                print(
                    f"{path.name}: no warehouse ({'both' if same else 'one side'}; exit {ra}, {rb})"
                )
                failed += not same
                continue
            problems = compare(a, b) + ([f"exit status {ra} vs {rb}"] if ra != rb else [])
            print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: "
                  + ("same tables" if not problems else "; ".join(problems)))  # fmt: skip
            failed += bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
