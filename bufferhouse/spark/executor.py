"""What runs on the executors: parse module groups into Arrow tables (as IPC rows),
or write them straight into a Parquet dataset as a local `--to-parquet` ingest does."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import pyarrow as pa

from bufferhouse.export.dataset import table_schema
from bufferhouse.export.parquet import PartWriter, reserve_run
from bufferhouse.load import parse_labels
from bufferhouse.load.targets import target_rows
from bufferhouse.load.writer import with_module_id
from bufferhouse.parse import parse_files, with_programs
from bufferhouse.parse.discover import ModuleFiles
from bufferhouse.parse.results import (
    Failed,
    ParsedModule,
    ParseResult,
    Present,
    Skipped,
    outcome_name,
)
from bufferhouse.schema import TABLES_BY_NAME, Table
from bufferhouse.schema.derive import derived_tables
from bufferhouse.schema.ids import ModuleIds
from bufferhouse.schema.kinds import MODULE
from bufferhouse.spark.types import (
    FAILURE,
    MODULE_ROW,
    from_ipc,
    group_of,
    parsed_arrow_schema,
    to_ipc,
)

#: Module ids of the modules this process parses (created in the executor's process).
_ids: ModuleIds | None = None


def _next_module_id() -> int:
    global _ids
    if _ids is None:
        _ids = ModuleIds()
    return _ids.next()


def parse_rows(
    files: ModuleFiles, known: frozenset[str] = frozenset(), program: bytes | None = None
) -> Iterator[dict]:
    """Parse one module group; one row per table (see PARSED_SCHEMA). Never raises.

    A parsed module gets its module_id here, from this process's allocator: the
    same content parsed twice gets two ids, and the readers keep one copy.
    """
    result = parse_files(files, known, program=program)
    yield from _result_rows(result)
    if isinstance(result, ParsedModule) and result.companion is not None:
        yield from _result_rows(result.companion[1])  # a proto of another compile


def _result_rows(result: ParseResult) -> Iterator[dict]:
    if isinstance(result, Skipped):  # an HloProto without buffer assignment: not a module
        return
    if isinstance(result, Failed):
        e = result.error
        problem = json.dumps([e.path, e.line, e.message, e.text]) if e else None
        yield {
            "content_hash": result.content_hash,
            "module_id": None,
            "status": "failed",
            "table": FAILURE,
            "message": problem,
            "data": None,
        }
        return
    if isinstance(result, Present):  # its module_id is the holder's, unknown here
        yield {
            "content_hash": result.content_hash,
            "module_id": None,
            "status": "present",
            "table": MODULE_ROW,
            "message": None,
            "data": None,
        }
        return
    assert isinstance(result, ParsedModule)
    module_id = _next_module_id()
    tables = {name: with_module_id(name, data, module_id) for name, data in result.tables.items()}
    counts = {name: data.num_rows for name, data in tables.items()}
    row = dict(result.row, module_id=module_id, row_counts=counts)
    modules = pa.Table.from_pylist([row], schema=table_schema(TABLES_BY_NAME["modules"]))
    warnings = json.dumps([[w.path, w.line, w.message, w.text] for w in result.warnings])
    yield {
        "content_hash": result.content_hash,
        "module_id": module_id,
        "status": "parsed",
        "table": MODULE_ROW,
        "message": warnings,
        "data": to_ipc(modules),
    }
    tables |= derived_tables(tables)
    targets = target_rows([(module_id, row.get("paths"))])  # the files beside the dump
    if targets:
        schema = table_schema(TABLES_BY_NAME["module_targets"])
        tables["module_targets"] = pa.Table.from_pylist(targets, schema=schema)
    for name, data in tables.items():
        if data.num_rows:
            yield {
                "content_hash": result.content_hash,
                "module_id": module_id,
                "status": "parsed",
                "table": name,
                "message": None,
                "data": to_ipc(data),
            }


def parse_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow function: module groups (GROUP_SCHEMA) in, parsed rows (PARSED_SCHEMA) out.

    Each output row holds one table of one module as Arrow IPC bytes: exactly
    the Arrow table a local ingest produces for it (`parsed_tables` decodes).
    The task's groups are listed first, so that its programs of a profile are read
    in one pass over it (with_programs), not one pass each.
    """
    schema = parsed_arrow_schema()
    per_batch = [[group_of(row) for row in batch.to_pylist()] for batch in batches]
    groups = with_programs([g for batch in per_batch for g in batch])
    for batch in per_batch:
        taken = itertools.islice(groups, len(batch))
        rows = [r for files, program in taken for r in parse_rows(files, program=program)]
        yield pa.RecordBatch.from_pylist(rows, schema=schema)


def decoder(table: Table):
    """A mapInArrow function: parsed rows of one table in, that table's rows out."""
    schema = table_schema(table)

    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for data in batch.column("data").to_pylist():
                if data is not None:
                    yield from from_ipc(data).cast(schema).to_batches()

    return decode


def decode_parsed(parsed: pa.Table) -> dict[str, pa.Table]:
    """Collected `parse_batches` output as the per-table Arrow tables of a local ingest.

    For small results on the driver (tests, notebooks); `parsed_tables` keeps
    them distributed. Modules parsed twice are kept once (the copy with the
    lowest module_id); run_id stays NULL.
    """
    rows = [r for r in parsed.to_pylist() if r["status"] == "parsed" and r["data"] is not None]
    kept: dict[str, int] = {}
    for row in rows:
        if row["table"] == MODULE_ROW:
            kept[row["content_hash"]] = min(
                row["module_id"], kept.get(row["content_hash"], row["module_id"])
            )
    seen: set[tuple[str, str]] = set()
    parts: dict[str, list[pa.Table]] = {}
    for row in rows:
        key = (row["content_hash"], row["table"])
        if kept.get(row["content_hash"]) != row["module_id"] or key in seen:
            continue
        seen.add(key)
        parts.setdefault(row["table"], []).append(from_ipc(row["data"]))
    out = {}
    for table in (TABLES_BY_NAME["modules"], *MODULE.children):
        schema = table_schema(table)
        got = parts.get(table.name)
        out[table.name] = (
            pa.concat_tables([t.cast(schema) for t in got]) if got else schema.empty_table()
        )
    return out


def write_batches(
    out_dir: str,
    labels: Iterable[str] | dict[str, str] = (),
    known: Mapping[str, int] | None = None,
):
    """A mapInArrow function: module groups in, part files written to `out_dir`.

    Each task is one ingest run (it claims its own run_id) and writes its
    modules as part files, exactly as `bufferhouse ingest --to-parquet` does;
    it yields one INGEST_SCHEMA row per group. `known`: content_hash ->
    module_id of the modules the dataset holds (`known_module_ids`), only
    labelled if met again.
    """
    label_pairs = list(labels.items()) if isinstance(labels, dict) else parse_labels(labels)
    held = dict(known or {})
    root = str(Path(out_dir).absolute())

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        path = Path(root)
        writer: PartWriter | None = None
        out = []
        directories: set[str] = set()
        # the task's groups first: its programs of a profile are read in one pass
        groups = [group_of(row) for batch in batches for row in batch.to_pylist()]
        for files, program in with_programs(groups):
            directories.add(files.directory)
            if writer is None:
                writer = PartWriter(path, reserve_run(path), label_pairs, held=held)
            result = parse_files(files, writer.module_ids, program=program)
            parts: list[tuple[ModuleFiles, ParseResult]] = [(files, result)]
            if isinstance(result, ParsedModule) and result.companion is not None:
                parts.append(result.companion)  # a proto of another compile beside the text
            for part, result in parts:
                module_id = None
                message = None
                status = outcome_name(result)
                match result:
                    case Skipped(error=error):
                        message = error.describe()
                    case Failed(error=error):
                        writer.add_failure(error)
                        message = error.describe()
                    case Present(content_hash=content_hash):
                        module_id = writer.add_labels(content_hash)
                    case ParsedModule(row=row, tables=tables, warnings=warnings):
                        module_id = writer.add(row, tables, warnings)
                        status = "loaded"
                out.append((writer.run_id, part.stem, status, module_id, message))
            if writer.full:
                writer.flush()
        if writer is not None:
            writer.flush()
            writer.start(sorted(directories))  # the run's row names the directories it read
            writer.finish()  # tables no task filled get a file without rows, for the readers
        names = ("run_id", "stem", "status", "module_id", "message")
        yield pa.RecordBatch.from_pylist(
            [dict(zip(names, r)) for r in out],
            schema=pa.schema(
                [
                    ("run_id", pa.int64()),
                    ("stem", pa.string()),
                    ("status", pa.string()),
                    ("module_id", pa.int64()),
                    ("message", pa.string()),
                ]
            ),
        )

    return write
