"""Every canned query on a warehouse of >= 10,000 modules, next to a plain full scan.

    python bench/queries.py [--modules 10000] [--rows 30000000] [--repeat 5] [--quick]
                            [--with TREE]... [--rebuild] [--reuse] [--json FILE]

The warehouse is built in two steps and cached under bench/_work/. (1) A seed:
one renamed copy of the committed corpus and samples plus the bench/ingest
fleet (1,250 modules, 1 GB of dumps; --with adds trees), ingested by the
installed CLI; it is re-ingested only when bufferhouse/ingest or
bufferhouse/schema change (--rebuild forces it, --reuse skips the check).
(2) The seed's modules copied by SQL (INSERT ... SELECT with new module ids and
content hashes) until there are --modules modules and --rows rows in the
`assignments` table, with module ids that increase in insertion order and every
table written in module_id order, as the ingest writer stores them.

Each query runs once to warm up, then --repeat times; the median is reported.
A query with a `module` parameter is timed twice: scoped to one module (by
module_id; by default the module with the most dump text, see
--module-quantile) and fleet-wide (module = NULL); heap-timeline and arena
need a module. In the same run, `SELECT sum(size) FROM` the largest table with
a `size` column is the full-scan yardstick; both ratios are printed (targets:
one module <= 1/10 of the scan, fleet-wide <= 5x). --quick: one corpus copy
without the fleet, copied to 300 modules, 3 repeats.
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
from bench.ingest import CLI, WORK, build_fleet, log, machine
from bufferhouse import queries as bq
from bufferhouse.queries.helpers import helper_macro_sql
from bufferhouse.schema import TABLES, macros
from bufferhouse.schema.warehouse import ensure_schema, open_connection
from tests.synth import DATA

PACKAGE = Path(bufferhouse.__file__).resolve().parent


def warehouse_code_hash() -> str:
    """Changes whenever the code that decides the warehouse's rows changes (ingest, schema).

    Query SQL is not part of it: editing a canned query must not re-ingest a GB of dumps.
    """
    h = hashlib.sha256()
    for sub in ("ingest", "schema"):
        for p in sorted((PACKAGE / sub).rglob("*.py")):
            h.update(str(p.relative_to(PACKAGE)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def build_tree(copies: int) -> Path:
    """Copies of corpus + samples with new module numbers / names."""
    sources = sorted((DATA / "corpus").glob("*/*/*.txt.gz")) + sorted(
        (DATA / "samples").glob("*.txt")
    )
    root = WORK / f"qtree-{copies}"
    spec = {"copies": copies, "version": 2}
    marker = root / "SPEC.json"
    if marker.exists() and json.loads(marker.read_text()) == spec:
        return root
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
    return root


def _cached(db: Path, spec: dict, rebuild: bool, reuse: bool) -> bool:
    """True if db was built from spec (or reuse); else clears it for a rebuild."""
    spec_path = db.with_suffix(".json")
    fresh = db.exists() and spec_path.exists()
    if fresh and not rebuild and (reuse or json.loads(spec_path.read_text()) == spec):
        return True
    for p in (db, db.with_name(db.name + ".wal"), spec_path):
        p.unlink(missing_ok=True)
    return False


def build_seed(trees: list[Path], rebuild: bool, reuse: bool) -> Path:
    """The dump trees ingested once by the installed CLI (what users run)."""
    db = WORK / ("seed-" + "-plus-".join(p.name for p in trees) + ".duckdb")
    spec_path = db.with_suffix(".json")
    spec = {"trees": [str(p) for p in trees], "code": warehouse_code_hash()}
    if _cached(db, spec, rebuild, reuse):
        return db
    log(f"ingesting {', '.join(map(str, trees))} into {db.name} (progress below)")
    started = time.monotonic()
    subprocess.run([CLI, "ingest", *map(str, trees), "--db", str(db)], check=True)
    log(f"seed ingested in {time.monotonic() - started:.0f}s")
    spec_path.write_text(json.dumps(spec))
    return db


def replicate(seed: Path, copies: int, rebuild: bool, reuse: bool) -> Path:
    """`copies` copies of the seed warehouse's modules, by SQL, with ordered module ids.

    Copy k of the seed's j-th module (in the seed's insertion order) gets module_id
    ((t0 + k) << 20) | j, t0 = the seed run's start in unix ms: ids increase in
    insertion order, as the writer assigns them, and every table is inserted in
    module_id order, so each module's rows sit in a few adjacent row groups whose
    zone maps exclude the rest. Copies after the first get a new content_hash.
    """
    db = WORK / f"queries-{copies}x-{seed.stem}.duckdb"
    spec_path = db.with_suffix(".json")
    spec = {"seed": seed.name, "seed_spec": json.loads(seed.with_suffix(".json").read_text())}
    spec |= {"copies": copies, "version": 1}
    if _cached(db, spec, rebuild, reuse):
        return db
    started = time.monotonic()
    con = open_connection(db, read_only=False)
    con.execute("SET threads = 2")
    con.execute("SET memory_limit = '6GB'")
    con.execute("SET preserve_insertion_order = true")
    ensure_schema(con, str(db))
    con.execute(f"ATTACH '{seed}' AS seed (READ_ONLY)")
    con.execute("INSERT INTO runs SELECT * FROM seed.runs")
    t0 = con.execute("SELECT min(run_id) // 1000 FROM seed.runs").fetchone()[0]
    con.execute(
        "CREATE TEMP TABLE seed_order AS SELECT module_id AS old_id,"
        " row_number() OVER (ORDER BY rowid) AS j FROM seed.modules"
    )
    tables = [t for t in TABLES if "module_id" in t.column_names and t.name != "diagnostics"]
    for k in range(copies):
        con.execute("BEGIN TRANSACTION")
        con.execute(
            "CREATE OR REPLACE TEMP TABLE ids AS SELECT old_id,"
            f" (({t0} + {k}) << 20) | j AS new_id FROM seed_order"
        )
        for table in tables:
            cols = []
            for c in table.column_names:
                if c == "module_id":
                    cols.append("i.new_id AS module_id")
                elif c == "content_hash" and k:
                    cols.append(f"sha256(t.content_hash || ' copy {k}') AS content_hash")
                else:
                    cols.append(f't."{c}"')
            con.execute(
                f'INSERT INTO "{table.name}" BY NAME SELECT {", ".join(cols)}'
                f' FROM seed."{table.name}" AS t JOIN ids AS i ON i.old_id = t.module_id'
                " ORDER BY i.new_id, t.rowid"
            )
        con.execute("COMMIT")
        log(f"copy {k + 1}/{copies} in {time.monotonic() - started:.0f}s")
    con.execute("DETACH seed")
    con.execute("CHECKPOINT")
    con.close()
    log(f"replicated in {time.monotonic() - started:.0f}s: {db.stat().st_size / 1e9:.1f} GB")
    spec_path.write_text(json.dumps(spec))
    return db


def timed(fn, repeat: int, slow: float = float("inf")) -> tuple[float, int, object]:
    """(median seconds, runs, result of the first call): a warm-up call, then `repeat` timed ones.

    A call whose warm-up takes more than `slow` seconds is timed by that call alone
    (the old queries take minutes on the full warehouse).
    """
    t = time.perf_counter()
    result = fn()
    first = time.perf_counter() - t
    if first > slow:
        return first, 1, result
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), repeat, result


def queries_at(rev: str | None) -> tuple[list[bq.Query], list[bq.Query]]:
    """(views, queries): the package's, or those of git revision `rev` (for before/after)."""
    if rev is None:
        return bq.views(), bq.queries()

    def files(folder: str) -> list[tuple[str, str]]:
        names = subprocess.run(
            ["git", "-C", str(PACKAGE.parent), "ls-tree", "--name-only", f"{rev}:{folder}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        return [
            (
                n,
                subprocess.run(
                    ["git", "-C", str(PACKAGE.parent), "show", f"{rev}:{folder}/{n}"],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout,
            )
            for n in sorted(names)
            if n.endswith(".sql")
        ]

    views = [bq.parse_query_file(t, n, "view") for n, t in files("bufferhouse/queries/views")]
    queries = [bq.parse_query_file(t, n) for n, t in files("bufferhouse/queries")]
    return views, queries


def run_query(con: duckdb.DuckDBPyConnection, q: bq.Query, params: dict):
    values = q.bind(params)
    return bq.arrow_result(con.sql(q.sql, params={k: values[k] for k in q.used_params()}))


def row_groups_read(con: duckdb.DuckDBPyConnection, q: bq.Query, params: dict) -> tuple:
    """(row groups read, row groups of the tables scanned), from DuckDB's profile of one run.

    Shows what a one-module query reads, whatever the fixed cost of planning it.
    """
    values = q.bind(params)
    sql = "EXPLAIN (ANALYZE, FORMAT JSON) " + q.sql
    doc = json.loads(con.execute(sql, {k: values[k] for k in q.used_params()}).fetchall()[0][1])
    stats = doc.get("query", {})
    return stats.get("total_row_groups_scanned"), stats.get("total_row_groups_to_scan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modules", type=int, default=10000, help="at least this many modules")
    ap.add_argument(
        "--rows", type=int, default=30_000_000, help="at least this many rows in assignments"
    )
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument(
        "--slow",
        type=float,
        default=10.0,
        help="a query whose warm-up run takes longer than this many seconds is timed once",
    )
    ap.add_argument(
        "--quick", action="store_true", help="no fleet, 300 modules, 3 repeats (a smoke run)"
    )
    ap.add_argument(
        "--no-fleet",
        action="store_true",
        help="seed from the corpus copy alone (no 1 GB fleet), still copied to --modules/--rows",
    )
    ap.add_argument("--rebuild", action="store_true", help="re-ingest the seed and copy it again")
    ap.add_argument(
        "--reuse",
        action="store_true",
        help="reuse the cached warehouse even if bufferhouse/ingest or schema changed since",
    )
    ap.add_argument(
        "--with",
        dest="extra",
        type=Path,
        action="append",
        default=[],
        help="also ingest this dump tree into the seed",
    )
    ap.add_argument(
        "--module-quantile",
        type=float,
        default=1.0,
        help="which module the one-module calls use, by size of text (1.0: the largest)",
    )
    ap.add_argument(
        "--rev",
        help="time the canned queries of this git revision instead of the package's "
        "(same warehouse: a before/after comparison)",
    )
    ap.add_argument("--json", type=Path, default=WORK / "queries-results.json")
    args = ap.parse_args(argv)
    WORK.mkdir(exist_ok=True)
    trees = [build_tree(1)]
    if args.quick:
        args.modules, args.rows, args.repeat = 300, 0, 3
    elif not args.no_fleet:
        trees.append(build_fleet(1000, 1000))
    seed = build_seed(trees + args.extra, args.rebuild, args.reuse)
    with duckdb.connect(str(seed), read_only=True) as con:
        seed_modules, seed_rows = con.execute(
            "SELECT (SELECT count(*) FROM modules), (SELECT count(*) FROM assignments)"
        ).fetchone()
    copies = max(-(-args.modules // seed_modules), -(-args.rows // max(seed_rows, 1)), 1)
    db = replicate(seed, copies, args.rebuild, args.reuse)
    info = machine()
    con = duckdb.connect(str(db), read_only=True)
    views, queries = queries_at(args.rev)
    con.execute(bq.selector_macro_sql(temp=True))  # as bq.use_package_views does
    con.execute(helper_macro_sql(temp=True))
    macros.install(con, temp=True)  # the shared rules (schema/macros.py)
    for v in views:  # temp views shadow the warehouse's, as bq.use_package_views does
        con.execute(
            v.view_sql().replace("CREATE OR REPLACE VIEW", "CREATE OR REPLACE TEMP VIEW", 1)
        )
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
    scan = timed(lambda: con.execute(scan_sql).fetchall(), args.repeat)[0]
    ranked = con.execute(
        "SELECT module_id, module_name, bytes_read FROM modules ORDER BY bytes_read, module_id"
    ).fetchall()
    module_id, module_name, module_bytes = ranked[round(args.module_quantile * (len(ranked) - 1))]
    one = str(module_id)
    floor = timed(lambda: con.execute("SELECT 1").fetchall(), args.repeat)[0]
    scoped_sql = f'SELECT sum(size) FROM "{scan_table}" WHERE module_id = $id'
    scoped = timed(lambda: con.execute(scoped_sql, {"id": module_id}).fetchall(), args.repeat)[0]
    rows = [
        f"| (reference) `SELECT 1` | - | {args.repeat} | {floor * 1000:,.2f} | {floor / scan:,.2f} | | | |",
        f"| (reference) `{scoped_sql}` | one module | {args.repeat} | {scoped * 1000:,.2f} | "
        f"{scoped / scan:,.2f} | | | |",
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
    for q in queries:
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
                seconds, runs, table = timed(
                    lambda q=q, params=params: run_query(con, q, params), args.repeat, args.slow
                )
                n_rows, error = table.num_rows, None
                read = row_groups_read(con, q, params) if seconds < args.slow else (None, None)
            except Exception as exc:  # report, keep going
                seconds, runs, n_rows, error = None, 0, None, str(exc).splitlines()[0][:120]
                read = (None, None)
                if scope == "fleet" and "needs a module" in error:
                    continue
            results["queries"].append(
                {
                    "query": q.name,
                    "scope": scope,
                    "seconds": seconds,
                    "runs": runs,
                    "rows": n_rows,
                    "row_groups_read": read[0],
                    "row_groups": read[1],
                    "error": error,
                }
            )
            if seconds is None:
                rows.append(f"| {q.name} | {scope} | error: {error} | | | | | |")
                continue
            ratio = seconds / scan
            target = "<= 0.10" if scope == "one module" else "<= 5"
            ok = ratio <= (0.1 if scope == "one module" else 5.0)
            groups = f"{read[0]:,} / {read[1]:,}" if read[0] is not None else "-"
            rows.append(
                f"| {q.name} | {scope} | {runs} | {seconds * 1000:,.2f} | {ratio:,.2f} | {target} | "
                f"{'yes' if ok else 'NO'} | {groups} |"
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
    print(
        f"Queries: {'git ' + args.rev if args.rev else 'the package'}'s. runs: timed runs after "
        f"a warm-up (1 = the warm-up alone, slower than --slow {args.slow:g} s). row groups "
        f"read: by all the query's table scans, of those tables' row groups (DuckDB's "
        f"profile of one run; not taken for queries slower than --slow).\n"
    )
    print("| query | scope | runs | median ms | / full scan | target | meets | row groups read |")
    print("|---|---|---:|---:|---:|---:|---|---:|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
