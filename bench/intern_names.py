"""What storing instruction names as per-module integer ids would save: file size and write CPU.

    python bench/intern_names.py DUMP_TREE [--rounds 2] [--threads 1]

A measurement for a schema decision (issue 5's 15% warehouse target), not a
feature. The tree is parsed once, in this process; then the same modules are
written to fresh warehouses by the package's ModuleWriter (batches of 256
modules or 2M rows, one transaction each, DuckDB threads as given), the arms
alternating round by round:

- `strings`: today's schema.
- `ids`: each module's instruction names (the union over the seven tables that
  name instructions) numbered in name order; `instruction` columns hold the
  number (INTEGER) and a new table `instruction_names` (module_id,
  instruction_id, name) holds each name once. `instructions` stays stored in
  name order (id order is name order).
- `ids+operands`: `instructions.operands` as INTEGER[] of those numbers too.

Not measured in any arm: the derived tables (their SQL joins on names; about
14% of the writer's CPU), and the cost of answering queries through the extra
join. Prints, per arm, write CPU seconds (this process, user + system),
wall seconds, and the file's bytes per byte of dump text.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import time

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from bufferhouse.load import writer as load
from bufferhouse.load.schedule import input_bytes, largest_first
from bufferhouse.parse import parse_files
from bufferhouse.parse.discover import discover
from bufferhouse.parse.results import ParsedModule
from bufferhouse.schema.warehouse import ensure_schema, open_connection

#: The tables whose `instruction` column names an instruction of the module.
NAMED = (
    "hlo_values",
    "positions",
    "uses",
    "instructions",
    "sequence",
    "live_ranges",
    "peak_values",
)
NAMES_SCHEMA = pa.schema(
    [("module_id", pa.int64()), ("instruction_id", pa.int32()), ("name", pa.string())]
)


def cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def interned(tables: dict[str, pa.Table], operands: bool) -> dict[str, pa.Table]:
    """The module's tables with names replaced by their number, plus instruction_names."""
    columns = [tables[t]["instruction"] for t in NAMED]
    if operands:
        columns.append(pc.list_flatten(tables["instructions"]["operands"]))
    names = pc.unique(pa.chunked_array([c for col in columns for c in col.chunks], pa.string()))
    names = names.take(pc.sort_indices(names))
    out = dict(tables)
    for t in NAMED:
        data = tables[t]
        i = data.schema.get_field_index("instruction")
        ids = pc.index_in(data["instruction"], value_set=names).cast(pa.int32())
        out[t] = data.set_column(i, "instruction", ids)
    if operands:
        data = out["instructions"]
        lists = data["operands"].combine_chunks()
        ids = pc.index_in(lists.values, value_set=names).cast(pa.int32())
        rebuilt = pa.ListArray.from_arrays(lists.offsets, ids, mask=lists.is_null())
        out["instructions"] = data.set_column(
            data.schema.get_field_index("operands"), "operands", rebuilt
        )
    module_id = tables["hlo_values"]["module_id"][0] if tables["hlo_values"].num_rows else 0
    out["instruction_names"] = pa.Table.from_arrays(
        [
            pa.repeat(pa.scalar(module_id, pa.int64()), len(names)),
            pa.array(range(len(names)), pa.int32()),
            names,
        ],
        schema=NAMES_SCHEMA,
    )
    return out


def make_warehouse(path: str, arm: str) -> duckdb.DuckDBPyConnection:
    con = open_connection(path, read_only=False)  # the storage version and block size ingest uses
    ensure_schema(con, path)
    if arm != "strings":
        for t in NAMED:
            con.execute(f"ALTER TABLE {t} ALTER COLUMN instruction SET DATA TYPE INTEGER")
        if arm == "ids+operands":
            con.execute("ALTER TABLE instructions ALTER COLUMN operands SET DATA TYPE INTEGER[]")
        con.execute(
            "CREATE TABLE instruction_names (module_id BIGINT, instruction_id INTEGER, name VARCHAR)"
        )
    return con


def write(parsed: list, arm: str, threads: int) -> tuple[float, float, int, int]:
    """(write CPU s, wall s, file bytes, free bytes in it) of writing `parsed` under `arm`."""
    original = load.stored_order
    load._derive_batch = lambda con, ids: None  # not comparable: its SQL joins names

    def stored_order(name: str, data: pa.Table):
        return None if name == "instruction_names" else original(name, data)

    load.stored_order = stored_order
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        path = os.path.join(tmp, "w.duckdb")
        con = make_warehouse(path, arm)
        con.execute(f"SET threads = {threads}")
        writer = load.ModuleWriter(con, 1, [])
        t, c = time.perf_counter(), cpu()
        for row, tables in parsed:
            tables = dict(tables)
            writer.add(row, tables, [])
            if writer.full:
                writer.flush()
        writer.flush()
        con.close()
        seconds, cpu_s = time.perf_counter() - t, cpu() - c
        size = os.path.getsize(path)
        con = open_connection(path, read_only=True)
        free = con.execute("SELECT free_blocks * block_size FROM pragma_database_size()").fetchone()
        con.close()
    load.stored_order = original
    return cpu_s, seconds, size, free[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tree")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    groups = largest_first(discover([args.tree]))
    text = sum(input_bytes(g) for g in groups)
    t = time.perf_counter()
    parsed = []
    for g in groups:
        r = parse_files(g)
        if isinstance(r, ParsedModule):
            parsed.append((r.row, r.tables))
    print(
        f"{len(parsed)} modules, {text / 1e6:.1f} MB of text, parsed in {time.perf_counter() - t:.1f} s"
    )
    arms = {"strings": None, "ids": False, "ids+operands": True}
    inputs = {}
    for arm, operands in arms.items():
        c = cpu()
        # The module ids the writer gives are unknown here: number with the parse's placeholder.
        inputs[arm] = (
            parsed
            if operands is None
            else [(row, interned(tables, operands)) for row, tables in parsed]
        )
        print(f"{arm}: convert {cpu() - c:.2f} CPU s")
    results: dict[str, list[tuple[float, float, int, int]]] = {a: [] for a in arms}
    for r in range(args.rounds):
        for arm in arms if r % 2 == 0 else reversed(list(arms)):
            results[arm].append(write(inputs[arm], arm, args.threads))
            cpu_s, wall, size, free = results[arm][-1]
            print(
                f"round {r} {arm}: write {cpu_s:.2f} CPU s, {wall:.2f} s, "
                f"{size / 1e6:.1f} MB ({free / 1e6:.1f} MB free)"
            )
    print(
        "\n| arm | write CPU s | wall s | file MB | free MB | file / text | used / text |"
        "\n|---|---:|---:|---:|---:|---:|---:|"
    )
    for arm, rs in results.items():
        c, w, size, free = (statistics.median(r[i] for r in rs) for i in range(4))
        print(
            f"| {arm} | {c:.2f} | {w:.2f} | {size / 1e6:.1f} | {free / 1e6:.1f} "
            f"| {size / text:.1%} | {(size - free) / text:.1%} |"
        )


if __name__ == "__main__":
    main()
