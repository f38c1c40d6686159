"""The warehouse's schema versions and the in-place upgrade from each to the next.

A writer that opens a warehouse of an older schema version runs the steps from
its version on (`upgrade`), in one transaction; readers refuse an older file and
say how to upgrade it (warehouse.check_version).
"""

from __future__ import annotations

import contextlib

import duckdb
import pyarrow as pa

from bufferhouse.errors import WarehouseError
from bufferhouse.schema.ids import ModuleIds
from bufferhouse.schema.tables import MODULE_TABLES, SCHEMA_VERSION

__all__ = ["UPGRADES", "first_row", "schema_version", "upgrade"]


def first_row(con: duckdb.DuckDBPyConnection, sql: str, params=None) -> tuple | None:
    """The first row of a query, its result read to the end.

    `execute(...).fetchone()` leaves the result unfinished, and DuckDB 2 then
    refuses any other statement on that connection (ResourceInUseException):
    a connection handed to a user must never carry one.
    """
    rows = con.execute(sql, params).fetchall() if params else con.execute(sql).fetchall()
    return rows[0] if rows else None


def schema_version(con: duckdb.DuckDBPyConnection) -> int | None:
    (exists,) = first_row(
        con,
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'schema_info' AND schema_name = 'main'",
    )
    if not exists:
        return None
    row = first_row(con, "SELECT value FROM schema_info WHERE key = 'schema_version'")
    return int(row[0]) if row else None


def _renumber_modules(con: duckdb.DuckDBPyConnection) -> None:
    """1 -> 2: module ids were the content hash's first 8 bytes, random, so zone maps
    never skipped a row group. Give every module a new id in insertion order (the
    order its rows are stored in), in every table that names modules."""
    from bufferhouse.schema import quote_identifier

    old = [r[0] for r in con.execute("SELECT module_id FROM modules ORDER BY rowid").fetchall()]
    ids = ModuleIds()
    renumber = pa.table(
        {
            "old_id": pa.array(old, pa.int64()),
            "new_id": pa.array([ids.next() for _ in old], pa.int64()),
        }
    )
    con.register("_bh_renumber", renumber)
    try:
        for table in ("modules", "labels", *(t.name for t in MODULE_TABLES), "diagnostics"):
            name = quote_identifier(table)
            con.execute(
                f"UPDATE {name} SET module_id = r.new_id FROM _bh_renumber AS r "
                f"WHERE {name}.module_id = r.old_id"
            )
    finally:
        con.unregister("_bh_renumber")


def _add_derived_tables(con: duckdb.DuckDBPyConnection) -> None:
    """2 -> 3: the derived tables (heap-peak buffers and sources, space totals, padded
    values); the last step fills them for every module by the statements ingest runs."""
    from bufferhouse.schema import create_statements

    for statement in create_statements():  # IF NOT EXISTS: only the new tables
        con.execute(statement)


def _add_xla_peak_bytes(con: duckdb.DuckDBPyConnection) -> None:
    """3 -> 4: modules.xla_peak_bytes, filled for CPU modules by XLA's static rule
    (schema.rules.static_buffers, the rule ingest applies) over each module's stored
    rows. heap_peaks and heap_peak_bytes of modules whose temp allocations hold
    tuple-shaped values stay as they were: the sweep needs the dumps (re-ingest them;
    CHANGELOG.md)."""
    from bufferhouse.schema.rules import static_buffers

    con.execute("ALTER TABLE modules ADD COLUMN IF NOT EXISTS xla_peak_bytes BIGINT")
    cpu = [
        r[0] for r in con.execute("SELECT module_id FROM modules WHERE backend = 'cpu'").fetchall()
    ]
    for module_id in cpu:
        one = {"id": module_id}
        allocations = con.sql(
            "SELECT allocation_index, is_parameter, is_constant, is_maybe_live_out,"
            " is_thread_local FROM allocations WHERE module_id = $id",
            params=one,
        ).to_arrow_table()
        assignments = con.sql(
            "SELECT value_id, allocation_index, size FROM assignments WHERE module_id = $id",
            params=one,
        ).to_arrow_table()
        held = static_buffers(allocations, assignments)
        total = sum(held["size"].to_pylist())
        con.execute("UPDATE modules SET xla_peak_bytes = ? WHERE module_id = ?", [total, module_id])


def _add_proto_columns(con: duckdb.DuckDBPyConnection) -> None:
    """4 -> 5: protos and profiles (issue 16): the heap_events table, the modules columns
    trace_peak_bytes, assignment_fingerprint and source_kind (NULL for modules loaded
    before), and hlo_values.is_phi nullable (a proto does not say)."""
    from bufferhouse.schema import create_statements

    for statement in create_statements():  # IF NOT EXISTS: only the new tables
        con.execute(statement)
    for column, type_ in (
        ("trace_peak_bytes", "BIGINT"),
        ("assignment_fingerprint", "VARCHAR"),
        ("source_kind", "VARCHAR"),
    ):
        con.execute(f"ALTER TABLE modules ADD COLUMN IF NOT EXISTS {column} {type_}")
    con.execute("ALTER TABLE hlo_values ALTER COLUMN is_phi DROP NOT NULL")


def _add_oom_tables(con: duckdb.DuckDBPyConnection) -> None:
    """5 -> 6: the OOM event tables (oom_events, oom_buffers, oom_labels), and
    diagnostics.event_id for the problems of an event."""
    from bufferhouse.schema import create_statements

    for statement in create_statements():  # IF NOT EXISTS: only the new tables
        con.execute(statement)
    con.execute("ALTER TABLE diagnostics ADD COLUMN IF NOT EXISTS event_id BIGINT")


def _add_xla_temp_bytes(con: duckdb.DuckDBPyConnection) -> None:
    """10 -> 11: modules.xla_temp_bytes, memory_analysis()'s temp where the rule is known
    (TPU, issue 36), and hlo_values.tiled_bytes (the size in the tiled layout); NULL for
    modules loaded before: re-ingest them for it."""
    con.execute("ALTER TABLE modules ADD COLUMN IF NOT EXISTS xla_temp_bytes BIGINT")
    con.execute("ALTER TABLE hlo_values ADD COLUMN IF NOT EXISTS tiled_bytes BIGINT")


def _add_generated_code_bytes(con: duckdb.DuckDBPyConnection) -> None:
    """13 -> 14: modules.generated_code_bytes, memory_analysis()'s generated code size
    where libtpu's log beside the dump states it (TPU); NULL for modules loaded before:
    re-ingest them, with the log, for it (and for the xla_temp_bytes it decides)."""
    con.execute("ALTER TABLE modules ADD COLUMN IF NOT EXISTS generated_code_bytes BIGINT")


def _add_peak_sources(con: duckdb.DuckDBPyConnection) -> None:
    """6 -> 7: one peak per module and memory space whichever form carried it:
    heap_peaks.peak_source and modules.peak_source. A space without temp allocations is
    `allocations`, one with live-range figures `live_ranges`. Modules read from a proto
    before this release keep no figure from their trace (NULL, as they had): re-ingest
    them into a new warehouse for it (CHANGELOG.md)."""
    from bufferhouse.schema import create_statements
    from bufferhouse.schema.derive import derive_all

    con.execute("ALTER TABLE heap_peaks ADD COLUMN IF NOT EXISTS peak_source VARCHAR")
    con.execute("ALTER TABLE modules ADD COLUMN IF NOT EXISTS peak_source VARCHAR")
    con.execute(
        """
        UPDATE heap_peaks SET peak_source = CASE
          WHEN NOT EXISTS (
            SELECT 1 FROM allocations AS a
            WHERE a.module_id = heap_peaks.module_id
              AND a.color = heap_peaks.color AND a.category = 'temp'
          ) THEN 'allocations'
          WHEN temp_peak_bytes IS NOT NULL THEN 'live_ranges'
        END
        """
    )
    con.execute(
        """
        UPDATE modules SET peak_source = h.peak_source
        FROM heap_peaks AS h
        WHERE h.module_id = modules.module_id AND h.color = 0
        """
    )
    for statement in create_statements():  # IF NOT EXISTS: a version-2 file lacks some
        con.execute(statement)
    derive_all(con)  # the derived tables by this release's statements


def _add_runtime_tables(con: duckdb.DuckDBPyConnection) -> None:
    """7 -> 8: the device memory profile tables
    (runtime_snapshots, runtime_samples, runtime_frames, runtime_labels), empty."""
    from bufferhouse.schema import create_statements

    for statement in create_statements():  # IF NOT EXISTS: only the new tables
        con.execute(statement)


def _add_oom_fragment_columns(con: duckdb.DuckDBPyConnection) -> None:
    """8 -> 9: oom_events.is_fragment (true for the events loaded before whose message
    started without its first line, as their diagnostic says) and oom_events.byte_length
    (NULL before: such an event is never replaced by a grown log's longer read)."""
    (present,) = first_row(
        con,
        "SELECT count(*) FROM duckdb_columns() WHERE table_name = 'oom_events'"
        " AND column_name = 'is_fragment'",
    )
    if present:  # made by the 5 -> 6 step of this release, with both columns
        return
    # NOT NULL at once (DuckDB builds no constraint over outstanding updates), so without
    # IF NOT EXISTS, which DuckDB refuses for a NOT NULL column
    con.execute("ALTER TABLE oom_events ADD COLUMN is_fragment BOOLEAN NOT NULL DEFAULT false")
    con.execute("ALTER TABLE oom_events ADD COLUMN IF NOT EXISTS byte_length BIGINT")
    con.execute(
        "UPDATE oom_events SET is_fragment = true WHERE event_id IN (SELECT event_id"
        " FROM diagnostics WHERE message LIKE 'message starts without its first line%')"
    )


def _add_unknown_input_columns(con: duckdb.DuckDBPyConnection) -> None:
    """9 -> 10: today's XLA (issue 36): allocations.page and allocations.unknown_attributes,
    diagnostics.text (the input a message is about); NULL for what was loaded before."""
    for table, column, type_ in (
        ("allocations", "page", "BIGINT"),
        ("allocations", "unknown_attributes", "VARCHAR"),
        ("diagnostics", "text", "VARCHAR"),
    ):
        con.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column} {type_}")


def _add_file_stats(con: duckdb.DuckDBPyConnection) -> None:
    """11 -> 12: file_stats, what ingest saw of each module's files (re-ingest at stat
    speed); empty until the next ingest records them."""
    from bufferhouse.schema import create_statements

    for statement in create_statements():  # IF NOT EXISTS: only the new table
        con.execute(statement)


def _add_targets_and_error_codes(con: duckdb.DuckDBPyConnection) -> None:
    """12 -> 13: module_targets (each module's chip and capacity, empty for modules
    loaded before: re-ingest their dumps for it), oom_events.error_code and error_name
    (NULL before), and the derived rows again: heap_peak_buffers lists each indefinite
    allocation once in every form (issue 40)."""
    from bufferhouse.schema import create_statements
    from bufferhouse.schema.derive import derive_all

    for statement in create_statements():  # IF NOT EXISTS: only the new table
        con.execute(statement)
    for column in ("error_code", "error_name"):
        con.execute(f"ALTER TABLE oom_events ADD COLUMN IF NOT EXISTS {column} VARCHAR")
    derive_all(con)


def _add_targets_looked(con: duckdb.DuckDBPyConnection) -> None:
    """14 -> 15: file_stats.targets_looked_ns (a module whose directories were looked in
    for target files, none found); NULL before: the next ingest looks once more."""
    con.execute("ALTER TABLE file_stats ADD COLUMN IF NOT EXISTS targets_looked_ns BIGINT")


def _add_shardings(con: duckdb.DuckDBPyConnection) -> None:
    """15 -> 16: the shardings table (each proto's parameter, result and instruction
    shardings, for diff's `sharding` cause); empty for modules loaded before: re-ingest
    their .hlo.pb for it."""
    from bufferhouse.schema import create_statements

    for statement in create_statements():  # IF NOT EXISTS: only the new table
        con.execute(statement)


#: Schema version -> the step that brings a warehouse of that version to the next.
UPGRADES = {
    1: _renumber_modules,
    2: _add_derived_tables,
    3: _add_xla_peak_bytes,
    4: _add_proto_columns,
    5: _add_oom_tables,
    6: _add_peak_sources,
    7: _add_runtime_tables,
    8: _add_oom_fragment_columns,
    9: _add_unknown_input_columns,
    10: _add_xla_temp_bytes,
    11: _add_file_stats,
    12: _add_targets_and_error_codes,
    13: _add_generated_code_bytes,
    14: _add_targets_looked,
    15: _add_shardings,
}


def upgrade(con: duckdb.DuckDBPyConnection, path: str) -> None:
    """Bring a warehouse of an older schema version to this one, in one transaction.

    A failure leaves the file as it was. Refreshes the column docs and
    checkpoints, so the rewritten columns get their new min/max statistics.
    """
    from bufferhouse.schema import comment_statements

    version = schema_version(con)
    if version not in UPGRADES:
        return
    con.execute("BEGIN TRANSACTION")
    try:
        while version in UPGRADES:
            UPGRADES[version](con)
            version += 1
        for statement in comment_statements():
            con.execute(statement)
        con.execute("UPDATE schema_info SET value = ? WHERE key = 'schema_version'", [str(version)])
        con.execute("COMMIT")
    except Exception as exc:
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK")
        if isinstance(exc, duckdb.Error):
            raise WarehouseError(
                f"cannot upgrade warehouse {path} to schema version {SCHEMA_VERSION}: {exc}. "
                "It is unchanged."
            ) from None
        raise
    con.execute("CHECKPOINT")
