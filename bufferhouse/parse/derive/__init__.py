"""Derive: everything that follows from a module's reading, computed once for every form.

Every reader (text, `.hlo.pb`, a profile's program; text and proto combined)
hands over a `Reading`: the tables as the file gave them and a typed record of
what it printed. `derive` then computes, in one place, what follows: each
allocation's category, the heap peak of each memory space with the source that
gave it (the heap-simulator trace where the module has one, else the printed
live ranges), XLA's own peak, the assignment fingerprint and the module row. So a
compile gives the same figures whatever form it arrived in, and a new form adds a
reader and nothing else (docs/metrics.md says what each figure means).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bufferhouse.errors import DumpError, ParseError
from bufferhouse.parse import memory
from bufferhouse.parse.derive.fingerprint import assignment_fingerprint
from bufferhouse.parse.derive.heap import SpaceSweep, sum_exact, sweep, value_rows
from bufferhouse.parse.derive.tpu import tpu_figures, tpu_temp_parts
from bufferhouse.parse.derive.xla import XlaPeaks, xla_peaks
from bufferhouse.parse.model import Reading
from bufferhouse.parse.tpulog import LibtpuCompanion
from bufferhouse.schema import MODULE_TABLES, TABLES_BY_NAME, Table, arrow_schema
from bufferhouse.schema.ids import UNASSIGNED_MODULE_ID

__all__ = ["Derived", "ModuleRow", "Origin", "categories", "derive", "temp_mask"]

#: heap_peaks.peak_source / modules.peak_source: the heap-simulator trace, the printed
#: live ranges, or the allocations alone (a memory space without temp allocations).
TRACE, LIVE_RANGES, ALLOCATIONS = "trace", "live_ranges", "allocations"


@dataclass(frozen=True)
class Origin:
    """What the files say about a module besides its contents: names and where it lies."""

    file_stem: str
    module_name: str
    module_number: int | None
    backend: str | None
    target: str | None
    stage: str | None
    paths: list[str]
    content_hash: str
    bytes_read: int
    #: libtpu's log of the compile, found beside the module (parse/libtpu.py)
    libtpu: LibtpuCompanion | None = None


@dataclass
class ModuleRow:
    """The `modules` row of one module (module_id and run_id are given by the sink)."""

    module_id: int
    content_hash: str
    run_id: int | None
    module_name: str
    module_number: int | None
    file_stem: str
    backend: str
    target: str | None
    stage: str | None
    layout: str
    format_era: str | None
    sections: list[str]
    paths: list[str]
    bytes_read: int
    total_bytes: int
    allocation_count: int
    value_count: int
    schedule_length: int | None
    logical_peak_time: int | None
    logical_peak_bytes: int | None
    heap_peak_bytes: int | None
    xla_peak_bytes: int | None
    trace_peak_bytes: int | None
    #: None until a batch computes it (parse.batch: fingerprints over the whole batch).
    assignment_fingerprint: str | None
    source_kind: str
    peak_source: str | None
    xla_temp_bytes: int | None = None
    generated_code_bytes: int | None = None

    def as_dict(self) -> dict:
        """The row as a dict; its lists are copies (dataclasses.asdict's deep copy of
        these flat fields cost 0.15 ms a module)."""
        return {k: list(v) if isinstance(v, list) else v for k, v in self.__dict__.items()}


@dataclass
class Derived:
    """A module ready for a sink: its row, its tables (without module_id), its warnings."""

    row: ModuleRow
    tables: dict[str, pa.Table]
    warnings: list[DumpError]


def temp_mask(allocations: pa.Table) -> pa.Array:
    """Allocations that hold temporaries: not parameter, output, thread-local or constant."""
    return pc.invert(
        pc.or_(
            pc.or_(allocations["is_parameter"], allocations["is_maybe_live_out"]),
            pc.or_(allocations["is_thread_local"], allocations["is_constant"]),
        )
    )


def categories(allocations: pa.Table) -> pa.Array:
    """Each allocation's XLA category, exclusive, in this order of precedence:
    parameter, output (maybe-live-out), thread-local, constant, else temp."""
    return pc.case_when(
        pc.make_struct(
            allocations["is_parameter"],
            allocations["is_maybe_live_out"],
            allocations["is_thread_local"],
            allocations["is_constant"],
        ),
        "parameter",
        "output",
        "thread-local",
        "constant",
        "temp",
    )


#: Modules with fewer allocations keep the sweep's scratch memory until their parse ends:
#: handing it back costs a millisecond or more.
RELEASE_MIN_ALLOCATIONS = 1 << 16


@functools.cache
def _empty(table: Table) -> pa.Table:
    """A module table with no rows, without module_id (Arrow tables are immutable: one
    serves every module; built per module, a dozen cost 0.2 ms a module)."""
    return arrow_schema(table).remove(0).empty_table()


def derive(reading: Reading, origin: Origin, fingerprint: bool = True) -> Derived:
    """The module row and every table of a reading, with the figures derived from it.
    `fingerprint=False`: the row's assignment_fingerprint is left None, for a batch to
    compute over all its modules at once (parse.batch)."""
    tables = {t.name: reading.tables.get(t.name) or _empty(t) for t in MODULE_TABLES}
    allocations = tables["allocations"]
    temp = temp_mask(allocations)
    _check_preallocated(allocations, temp, origin)
    is_temp = temp.to_numpy(zero_copy_only=False)
    value_row = value_rows(tables["hlo_values"], tables["assignments"])
    swept, most = _sweep(reading, is_temp, value_row)
    if allocations.num_rows >= RELEASE_MIN_ALLOCATIONS:
        # The sweep's scratch goes back before the fingerprint's: on the 500 MB module
        # (423K allocations) both held at once were the ingest's peak, ~1,020 MiB.
        memory.release()
    traced = _trace_peaks(tables["heap_events"], tables["sequence"])
    warnings = [*reading.warnings, *_disagreements(origin, traced, swept)]
    asg_tuple = _assignment_is_tuple(tables["hlo_values"], value_row)
    if tables["heap_events"].num_rows:
        untraced = _tuple_only_spaces(allocations, is_temp, tables["assignments"], asg_tuple)
        traced.update({c: SpaceSweep(0, None) for c in untraced - traced.keys()})
    heap_rows = _heap_peak_rows(allocations, is_temp, traced, swept)
    derived_columns = {
        "category": categories(allocations),
        "max_live_bytes": most,
        "is_preallocated_temp": pc.coalesce(allocations["is_preallocated_temp"], temp),
    }
    for name, column in derived_columns.items():
        allocations = allocations.set_column(allocations.schema.get_field_index(name), name, column)
    tables["allocations"] = allocations
    tables["heap_peaks"] = _heap_peaks_table(heap_rows)
    xla = xla_peaks(allocations, tables["assignments"], tables["heap_events"])
    row = _module_row(reading, origin, heap_rows, xla, tables, value_row if fingerprint else None)
    if row.backend == "tpu":
        space0 = next((r for r in heap_rows if r.color == 0), None)
        parts = tpu_temp_parts(
            allocations,
            is_temp,
            tables["assignments"],
            asg_tuple,
            _assignment_is_scalar(tables["hlo_values"], value_row),
            space0.temp_peak_bytes if space0 else 0,
        )
        tpu = tpu_figures(parts, origin.libtpu)
        row.xla_temp_bytes, row.generated_code_bytes = tpu.temp_bytes, tpu.code_bytes
        warnings += tpu.warnings
    return Derived(row, tables, warnings)


def _assignment_is_tuple(values: pa.Table, value_row: pa.Array) -> np.ndarray:
    """Row for row with assignments: whether the value is tuple-shaped (False unknown)."""
    return pc.fill_null(pc.take(values["is_tuple"], value_row), False).to_numpy(
        zero_copy_only=False
    )


def _assignment_is_scalar(values: pa.Table, value_row: pa.Array) -> np.ndarray:
    """Row for row with assignments: whether the value is an array of rank 0."""
    rank = pc.list_value_length(pc.take(values["dims"], value_row))
    return pc.fill_null(pc.equal(rank, 0), False).to_numpy(zero_copy_only=False)


def _tuple_only_spaces(
    allocations: pa.Table, is_temp: np.ndarray, assignments: pa.Table, is_tuple: np.ndarray
) -> set[int]:
    """Colors whose temp allocations hold tuple-shaped values only: XLA never
    heap-simulates those (AssignSingleHloBuffer gives each its own allocation), so a
    proto has no trace there and the most temp bytes in use is 0, as the live ranges say."""
    index = allocations["allocation_index"].to_numpy()
    color = allocations["color"].to_numpy()
    temp_color = dict(zip(index[is_temp].tolist(), color[is_temp].tolist()))
    spaces = set(temp_color.values())
    sizes = assignments["size"].to_numpy()
    for a, tup, size in zip(assignments["allocation_index"].to_numpy().tolist(), is_tuple, sizes):
        if a in temp_color and size and not tup:
            spaces.discard(temp_color[a])
    return spaces


def _check_preallocated(allocations: pa.Table, temp: pa.Array, origin: Origin) -> None:
    """A printed `preallocated-temp` flag on an allocation of another kind: a damaged file."""
    flagged = pc.fill_null(allocations["is_preallocated_temp"], False)
    bad = pc.and_(flagged, pc.invert(temp))
    if pc.any(bad).as_py():
        i = pc.index(bad, True).as_py()
        raise ParseError(
            origin.paths[0] if origin.paths else origin.file_stem,
            allocations["line"][i].as_py() or 0,
            "'preallocated-temp' together with parameter/output/constant/thread-local",
        )


def _sweep(
    reading: Reading, is_temp: np.ndarray, value_row: pa.Array
) -> tuple[dict[int, SpaceSweep], pa.Array]:
    """The live-range sweep where the reading has live ranges; else no space, and each
    allocation's own most unknown. `value_row`: each assignment's row in hlo_values."""
    tables = reading.tables
    allocations = tables["allocations"]
    if not reading.facts.has_live_ranges or "live_ranges" not in tables:
        return {}, pa.nulls(allocations.num_rows, pa.int64())
    values, assignments = tables["hlo_values"], tables["assignments"]
    is_tuple = pc.take(values["is_tuple"], value_row)
    live = tables["live_ranges"]
    return sweep(allocations, is_temp, assignments, is_tuple, live, reading.facts.schedule_length)


def _trace_peaks(events: pa.Table, sequence: pa.Table) -> dict[int, SpaceSweep]:
    """Per color with a trace: the most bytes the trace's heap holds at once (its
    largest heap_bytes; with several traces in a space, the largest of them), and the
    program-order step of the instruction whose event first reaches it."""
    if events.num_rows == 0:
        return {}
    out = {}
    steps = dict(zip(sequence["instruction"].to_pylist(), range(sequence.num_rows)))
    ordered = events.sort_by([("trace_index", "ascending"), ("event_index", "ascending")])
    colors = ordered["color"].to_numpy(zero_copy_only=False)
    heap = ordered["heap_bytes"].to_numpy(zero_copy_only=False)
    for c in np.unique(colors).tolist():
        mine = np.flatnonzero(colors == c)
        at = mine[int(np.argmax(heap[mine]))]
        best = int(heap[at])
        if best <= 0:
            out[c] = SpaceSweep(0, 0)
            continue
        out[c] = SpaceSweep(best, steps.get(ordered["instruction"][int(at)].as_py()))
    return out


def _disagreements(
    origin: Origin, traced: dict[int, SpaceSweep], swept: dict[int, SpaceSweep]
) -> list[DumpError]:
    """Where a module carries both a trace and live ranges, the two temp peaks should be
    one figure (docs/metrics.md): each disagreement is a warning; the trace's is kept."""
    out = []
    for color in sorted(traced.keys() & swept.keys()):
        t, s = traced[color].temp_peak_bytes, swept[color].temp_peak_bytes
        if t != s:
            out.append(
                DumpError(
                    origin.file_stem,
                    0,
                    f"memory space {color}: the heap-simulator trace's temp peak is {t} bytes,"
                    f" the live ranges' {s}; the trace's is kept",
                )
            )
    return out


@dataclass(frozen=True)
class _HeapPeak:
    color: int
    total_bytes: int
    indefinite_bytes: int
    temp_allocation_bytes: int
    temp_peak_bytes: int | None
    heap_peak_bytes: int | None
    peak_time: int | None
    peak_source: str | None


def _heap_peak_rows(
    allocations: pa.Table,
    is_temp: np.ndarray,
    traced: dict[int, SpaceSweep],
    swept: dict[int, SpaceSweep],
) -> list[_HeapPeak]:
    """One row per color: the trace's temp peak where the color has a trace, else the
    live-range sweep's, else unknown; a color without temp allocations has none."""
    color = allocations["color"].to_numpy()
    size = allocations["size"].to_numpy()
    rows = []
    for c in np.unique(color).tolist():
        mine = color == c
        total, indefinite = sum_exact(size[mine]), sum_exact(size[mine & ~is_temp])
        if not (mine & is_temp).any():
            temp, source = SpaceSweep(0, None), ALLOCATIONS
        elif c in traced:
            temp, source = traced[c], TRACE
        elif c in swept:
            temp, source = swept[c], LIVE_RANGES
        else:
            temp, source = None, None
        rows.append(
            _HeapPeak(
                c,
                total,
                indefinite,
                total - indefinite,
                temp.temp_peak_bytes if temp is not None else None,
                indefinite + temp.temp_peak_bytes if temp is not None else None,
                temp.peak_time if temp is not None else None,
                source,
            )
        )
    return rows


_HEAP_PEAKS = arrow_schema(TABLES_BY_NAME["heap_peaks"]).remove(0)


def _heap_peaks_table(rows: list[_HeapPeak]) -> pa.Table:
    return pa.Table.from_pylist([r.__dict__ for r in rows], schema=_HEAP_PEAKS)  # flat fields


def _module_row(
    reading: Reading,
    origin: Origin,
    heap_rows: list[_HeapPeak],
    xla: XlaPeaks,
    tables: dict[str, pa.Table],
    value_row: pa.Array | None,
) -> ModuleRow:
    """The module's row; its assignment fingerprint left None without `value_row`."""
    facts = reading.facts
    values = tables["hlo_values"]
    allocations = tables["allocations"]
    tiled = values["tiles"].null_count < values.num_rows
    backend = origin.backend or ("tpu" if tiled else "unknown")
    space0 = next((r for r in heap_rows if r.color == 0), None)
    # memory_analysis(): the CPU executable keeps no traces, so its figure is the static
    # part; elsewhere with the traces, where the module carries them; from text on other
    # backends unproven (docs/metrics.md, xla_peak_bytes).
    if backend == "cpu":
        xla_peak = xla.static_bytes
    else:
        xla_peak = xla.with_traces if reading.form != "text" else None
    return ModuleRow(
        module_id=UNASSIGNED_MODULE_ID,
        content_hash=origin.content_hash,
        run_id=None,
        module_name=origin.module_name,
        module_number=origin.module_number,
        file_stem=origin.file_stem,
        backend=backend,
        target=origin.target,
        stage=origin.stage,
        layout=facts.layout,
        format_era=facts.format_era,
        sections=list(reading.sections),
        paths=origin.paths,
        bytes_read=origin.bytes_read,
        total_bytes=sum_exact(allocations["size"].to_numpy()),
        allocation_count=allocations.num_rows,
        value_count=values.num_rows,
        schedule_length=facts.schedule_length,
        logical_peak_time=facts.logical_peak_time,
        logical_peak_bytes=facts.logical_peak_bytes,
        heap_peak_bytes=space0.heap_peak_bytes if space0 else None,
        peak_source=space0.peak_source if space0 else None,
        xla_peak_bytes=xla_peak,
        trace_peak_bytes=xla.with_traces,
        assignment_fingerprint=(
            None if value_row is None else assignment_fingerprint(tables, value_row)
        ),
        source_kind=reading.form,
    )
