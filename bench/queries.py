"""Every canned query on a warehouse of >= 10,000 modules, next to a plain full scan.

    python bench/queries.py [--modules 10000] [--repeat 5] [--quick] [--rebuild]
                            [--json FILE]

The warehouse holds renamed copies of the committed corpus and samples (each
copy gets new module numbers / file names, so it is a new module), built with
the installed CLI and cached under bench/_work/ until the package's code
changes (--rebuild forces it). Each query runs once to warm up, then
--repeat times; the median is reported. A query with a `module` parameter is
timed twice: scoped to one module (by module_id; by default the module with the
most dump text, see --module-quantile) and fleet-wide (module = NULL); heap-timeline needs a module.
In the same run, `SELECT sum(size) FROM` the largest table with a `size`
column is the full-scan yardstick; both ratios are printed (targets: one
module <= 1/10 of the scan, fleet-wide <= 5x).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import bufferhouse
from bench.ingest import CLI, WORK, log, machine
from bench.synth import DATA
from bufferhouse import queries as bq

PACKAGE = Path(bufferhouse.__file__).resolve().parent


def code_hash() -> str:
    """Changes whenever the package's Python or SQL changes (the warehouse is rebuilt)."""
    h = hashlib.sha256()
    for p in sorted(PACKAGE.rglob("*")):
        if p.suffix in (".py", ".sql") and "__pycache__" not in p.parts:
            h.update(str(p.relative_to(PACKAGE)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def build_tree(n_modules: int) -> tuple[Path, int]:
    """Copies of corpus + samples with new module numbers / names until n_modules."""
    sources = sorted((DATA / "corpus").glob("*/*/*.txt.gz")) + sorted(
        (DATA / "samples").glob("*.txt")
    )
    per_copy = sum(1 for s in sources if s.name.endswith("-buffer-assignment.txt.gz")) + sum(
        1 for s in sources if s.parent.name == "samples"
    )
    copies = -(-n_modules // per_copy)
    root = WORK / f"qtree-{copies}"
    spec = {"copies": copies, "version": 2}
    marker = root / "SPEC.json"
    if marker.exists() and json.loads(marker.read_text()) == spec:
        return root, copies * per_copy
    shutil.rmtree(root, ignore_errors=True)
    blobs = {}
    for src in sources:
        blobs[src] = gzip.decompress(src.read_bytes()) if src.suffix == ".gz" else src.read_bytes()
    for i in range(copies):
        for src, data in blobs.items():
            if src.parent.name == "samples":
                dest = root / f"copy-{i:03d}" / "samples" / src.name.replace(".txt", f"_c{i}.txt")
            else:
                rel = src.relative_to(DATA / "corpus")
                name = src.name[:-3]
                num = name[len("module_") : name.index(".")]
                name = name.replace(f"module_{num}", f"module_{int(num) + 100000 * (i + 1):06d}", 1)
                dest = root / f"copy-{i:03d}" / rel.parent / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
    marker.write_text(json.dumps(spec))
    return root, copies * per_copy


def build_warehouse(
    n_modules: int, rebuild: bool, reuse: bool = False, extra: list[Path] | None = None
) -> Path:
    tree, expected = build_tree(n_modules)
    extra = extra or []
    tag = "-plus-" + "-".join(p.name for p in extra) if extra else ""
    db = WORK / f"queries-{expected}{tag}.duckdb"
    spec_path = db.with_suffix(".json")
    spec = {"modules": expected, "extra": [str(p) for p in extra], "code": code_hash()}
    if (
        not rebuild
        and db.exists()
        and spec_path.exists()
        and (reuse or json.loads(spec_path.read_text()) == spec)
    ):
        return db
    for p in (db, db.with_name(db.name + ".wal")):
        p.unlink(missing_ok=True)
    log(f"building {db.name}: {expected} modules from {tree} (progress below)")
    started = time.monotonic()
    subprocess.run([CLI, "ingest", str(tree), *map(str, extra), "--db", str(db)], check=True)
    log(f"built in {time.monotonic() - started:.0f}s")
    with duckdb.connect(str(db), read_only=True) as con:
        n = con.execute("SELECT count(*) FROM modules").fetchall()[0][0]
    if n < expected:
        raise SystemExit(f"warehouse has {n} modules, expected {expected}")
    spec_path.write_text(json.dumps(spec))
    return db


def timed(fn, repeat: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modules", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="a few hundred modules, 3 repeats")
    ap.add_argument("--rebuild", action="store_true", help="rebuild the cached warehouse")
    ap.add_argument(
        "--reuse",
        action="store_true",
        help="reuse the cached warehouse even if the package code changed since",
    )
    ap.add_argument(
        "--with",
        dest="extra",
        type=Path,
        action="append",
        help="also ingest this dump tree (e.g. the bench/ingest fleet) for bigger tables",
    )
    ap.add_argument(
        "--module-quantile",
        type=float,
        default=1.0,
        help="which module the one-module calls use, by size of text (1.0: the largest)",
    )
    ap.add_argument("--json", type=Path, default=WORK / "queries-results.json")
    args = ap.parse_args(argv)
    if args.quick:
        args.modules, args.repeat = 300, 3
    WORK.mkdir(exist_ok=True)
    db = build_warehouse(args.modules, args.rebuild, args.reuse, args.extra)
    info = machine()
    con = duckdb.connect(str(db), read_only=True)
    bq.use_package_views(con)
    n_modules = con.execute("SELECT count(*) FROM modules").fetchall()[0][0]
    tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
    counts = {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchall()[0][0] for t in tables}
    with_size = {
        r[0]
        for r in con.execute(
            "SELECT table_name FROM duckdb_columns() WHERE column_name = 'size'"
        ).fetchall()
    }
    largest = max(counts, key=counts.get)
    scan_table = max((t for t in counts if t in with_size), key=counts.get)
    scan_sql = f'SELECT sum(size) FROM "{scan_table}"'
    scan = timed(lambda: con.execute(scan_sql).fetchall(), args.repeat)
    ranked = con.execute(
        "SELECT module_id, module_name, bytes_read FROM modules ORDER BY bytes_read, module_id"
    ).fetchall()
    module_id, module_name, module_bytes = ranked[round(args.module_quantile * (len(ranked) - 1))]
    one = str(module_id)
    floor = timed(lambda: con.execute("SELECT 1").fetchall(), args.repeat)
    scoped_sql = f'SELECT sum(size) FROM "{scan_table}" WHERE module_id = $id'
    scoped = timed(lambda: con.execute(scoped_sql, {"id": module_id}).fetchall(), args.repeat)
    rows = [
        f"| (reference) `SELECT 1` | - | {floor * 1000:,.2f} | {floor / scan:,.2f} | | |",
        f"| (reference) `{scoped_sql}` | one module | {scoped * 1000:,.2f} | "
        f"{scoped / scan:,.2f} | | |",
    ]
    results = {
        "machine": info,
        "db": str(db),
        "db_bytes": db.stat().st_size,
        "modules": n_modules,
        "rows": counts,
        "scan": {"sql": scan_sql, "seconds": scan},
        "floor_seconds": floor,
        "scoped_scan_seconds": scoped,
        "module": {"module_id": module_id, "name": module_name, "bytes": module_bytes},
        "queries": [],
    }
    for q in bq.queries():
        names = {p.name for p in q.params}
        variants = []
        if "module" in names:
            variants.append(("one module", {"module": one}))
            if q.name != "heap-timeline":
                variants.append(("fleet", {}))
        else:
            variants.append(("fleet", {}))
        for scope, params in variants:
            try:
                n_rows = bq.run(con, q.name, params).num_rows
                seconds = timed(lambda q=q, params=params: bq.run(con, q.name, params), args.repeat)
                error = None
            except Exception as exc:  # report, keep going
                seconds, n_rows, error = None, None, str(exc).splitlines()[0][:120]
                if scope == "fleet" and "needs a module" in error:
                    continue
            results["queries"].append(
                {
                    "query": q.name,
                    "scope": scope,
                    "seconds": seconds,
                    "rows": n_rows,
                    "error": error,
                }
            )
            if seconds is None:
                rows.append(f"| {q.name} | {scope} | error: {error} | | | |")
                continue
            ratio = seconds / scan
            target = "<= 0.10" if scope == "one module" else "<= 5"
            ok = ratio <= (0.1 if scope == "one module" else 5.0)
            rows.append(
                f"| {q.name} | {scope} | {seconds * 1000:,.2f} | {ratio:,.2f} | {target} | "
                f"{'yes' if ok else 'NO'} |"
            )
    con.close()
    info["load_after"] = os.getloadavg()
    args.json.write_text(json.dumps(results, indent=2))
    print(
        f"Machine: {info['cores']} cores, {info['memory_gib']} GiB, {info['cpu']}; "
        f"Python {info['python']}, DuckDB {info['duckdb']}, bufferhouse {info['bufferhouse']} "
        f"({info['commit']}); {info['date']}; load average before "
        f"{info['load_before'][0]:.2f}, after {info['load_after'][0]:.2f}"
    )
    print(
        f"\nWarehouse: {n_modules:,} modules, {db.stat().st_size / 1e6:,.0f} MB; largest table "
        f"{largest} ({counts[largest]:,} rows). Full scan: `{scan_sql}` "
        f"({counts[scan_table]:,} rows) = {scan * 1000:.2f} ms (median of {args.repeat}). "
        f"One module = module_id {module_id} ({module_name}, {module_bytes / 1e6:.2f} MB of text, "
        f"quantile {args.module_quantile:g} by size).\n"
    )
    print("| query | scope | median ms | / full scan | target | meets |")
    print("|---|---|---:|---:|---:|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
