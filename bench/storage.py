"""Where a warehouse file's bytes go: per table and column, with DuckDB's chosen compression.

    python bench/storage.py WAREHOUSE [--top 40]

DuckDB reports segments (pragma_storage_info) but not their sizes: a segment
runs from its offset to the next segment's offset in the same block, and a
block holding one segment counts whole (plus any overflow blocks the segment
names). The empty tail after the last of several segments sharing a block is
reported as "shared-block tails": space the file pays for but no column uses.
Free blocks (left by checkpoints that rewrote row groups) and metadata blocks
are what remains of the file size.
"""

from __future__ import annotations

import argparse
import collections
import os

import duckdb


def segment_bytes(con: duckdb.DuckDBPyConnection) -> tuple[list[tuple], int, int]:
    """[(table, column, compression, bytes)] of every persistent segment, the
    shared-block tail bytes, and the block size."""
    block_size = con.execute("SELECT block_size FROM pragma_database_size()").fetchone()[0]
    segments = []
    for (table,) in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' ORDER BY 1"
    ).fetchall():
        segments += [
            (
                table,
                column if kind != "VALIDITY" else f"{column} (validity)",
                comp,
                block,
                off,
                extra,
            )
            for column, kind, comp, block, off, extra in con.execute(
                "SELECT column_name, segment_type, compression, block_id, block_offset, "
                "additional_block_ids FROM pragma_storage_info(?)",
                [table],
            ).fetchall()
        ]
    by_block = collections.defaultdict(list)
    for i, s in enumerate(segments):
        if s[3] >= 0:  # -1: a constant segment, stored in the metadata
            by_block[s[3]].append((s[4], i))
    size = [len(s[5] or []) * block_size for s in segments]
    tails = 0
    for members in by_block.values():
        members.sort()
        for k, (offset, i) in enumerate(members):
            if k + 1 < len(members):
                size[i] += members[k + 1][0] - offset
            elif len(members) == 1:
                size[i] += block_size - offset
            else:
                tails += block_size - offset
    return [(s[0], s[1], s[2], size[i]) for i, s in enumerate(segments)], tails, block_size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("warehouse")
    ap.add_argument("--top", type=int, default=40, help="columns to list, largest first")
    args = ap.parse_args()
    con = duckdb.connect(args.warehouse, read_only=True)
    segments, tails, block_size = segment_bytes(con)
    total, used, free = con.execute(
        "SELECT total_blocks, used_blocks, free_blocks FROM pragma_database_size()"
    ).fetchone()
    in_segments = sum(s[3] for s in segments)
    mb = 1e6
    print(
        f"{args.warehouse}: {os.path.getsize(args.warehouse) / mb:.2f} MB; {total} blocks of "
        f"{block_size // 1024} KiB ({used} used, {free} free = {free * block_size / mb:.2f} MB); "
        f"column segments {in_segments / mb:.2f} MB, shared-block tails {tails / mb:.2f} MB"
    )
    tables: collections.Counter[str] = collections.Counter()
    columns: dict[tuple[str, str], list] = {}
    for table, column, comp, n in segments:
        tables[table] += n
        entry = columns.setdefault((table, column), [0, collections.Counter()])
        entry[0] += n
        entry[1][comp] += 1
    print("\n| table | MB | share of segments |\n|---|---:|---:|")
    for table, n in tables.most_common():
        print(f"| {table} | {n / mb:.2f} | {100 * n / in_segments:.1f}% |")
    print("\n| table | column | MB | share | segments by compression |\n|---|---|---:|---:|---|")
    ranked = sorted(columns.items(), key=lambda kv: -kv[1][0])[: args.top]
    for (table, column), (n, comps) in ranked:
        kinds = ", ".join(f"{c} {k}" for c, k in comps.most_common())
        print(f"| {table} | {column} | {n / mb:.2f} | {100 * n / in_segments:.1f}% | {kinds} |")


if __name__ == "__main__":
    main()
