"""The invariants of one dump's lines, declared once and checked over the scanned columns.

Both readers (scan.py, vector.py) only read lines; what must hold between
lines is here: each "exactly one" of the format (docs/format.md §10: an
allocation index, a value id, a Used values block per value, a live range per
value, a peak entry per value, a cross-color entry per value), the order and
numbering rules, and that every number fits the warehouse column it lands in.
Every scanned row carries its line, so each rule finds its first break; of all
the breaks, the first in file order is raised, at its line.
"""

from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bufferhouse.errors import ParseError
from bufferhouse.parse.model import Scanned
from bufferhouse.schema import TABLES_BY_NAME, arrow_schema

#: A break: (path, line, message).
Break = tuple[str, int, str]


def check(s: Scanned) -> None:
    """Raise ParseError where the module breaks a rule: a missing allocation section;
    then the first line, in file order, where a line rule breaks; then what a whole,
    uncut module has (totals that add up, a Used values block per placed value, its
    sections, a complete schedule)."""
    _present(s)
    _lines(s)
    _complete(s)


def _present(s: Scanned) -> None:
    ba_path = s.ba_path
    if "allocations" not in s.sections:
        raise ParseError(ba_path, 0, "no 'BufferAssignment:' section found")
    if s.allocs.num_rows == 0:
        raise ParseError(
            ba_path, s.ends.get(ba_path, 0), "no allocation after 'BufferAssignment:' (truncated?)"
        )


def _complete(s: Scanned) -> None:
    """What a module cut short or edited lacks, in the order the file would have it."""
    ba_path = s.ba_path
    alloc_sum = sum(s.allocs["size"].to_pylist())
    if s.total is not None and s.total != alloc_sum:
        path, line = s.total_line or (ba_path, 0)
        raise ParseError(
            path,
            line,
            f"'Total bytes used: {s.total}' but the allocations add up to {alloc_sum} "
            "(allocations missing or file edited?)",
        )
    _used_complete(s)
    split = "split" in s.features
    if not split and s.total is not None and "used_values" not in s.sections:
        path, line = s.total_line or (ba_path, 0)
        raise ParseError(
            path, line, "file ends after 'Total bytes used' without 'Used values:' (truncated?)"
        )
    if "used_values" not in s.sections:
        where = s.total_line[0] if s.total_line else ba_path
        raise ParseError(
            where,
            s.ends.get(where, 0),
            "no 'Used values:' section: the file ends in the BufferAssignment section "
            "(truncated?), or the -buffer-assignment-values.txt of a split (2026-04+) dump "
            "is missing",
        )
    if not split and "from_instruction" in s.features and "live_range" not in s.sections:
        raise ParseError(
            ba_path,
            s.ends.get(ba_path, 0),
            "no HloLiveRange section after Used values (truncated?)",
        )
    if s.schedule_length is not None and len(s.sequence) != s.schedule_length:
        raise ParseError(
            s.lr_path or ba_path,
            s.lr_line,
            f"InstructionSequence has {len(s.sequence)} steps but"
            f" 'HloLiveRange (max {s.schedule_length})' (file truncated?)",
        )


def _used_complete(s: Scanned) -> None:
    """Every placed value has its Used values block (the other half of _used), each
    with its ' from instruction:' line where the era prints one."""
    values, used = s.values, s.used
    if not used.num_rows:
        return
    missing = _np(pc.invert(pc.is_in(values["value_id"], value_set=used["value_id"])))
    first = _first(missing)
    if first is not None:
        raise ParseError(
            s.ba_path,
            values["line"][first].as_py(),
            f"{int(missing.sum())} placed values have no Used values block "
            f"(first: value {values['value_id'][first].as_py()}); file truncated?",
        )
    if "from_instruction" in s.features:
        first = _first(_np(pc.is_null(used["text"])))
        if first is not None:
            raise ParseError(
                s.used_path or s.ba_path,
                used["line"][first].as_py(),
                f"used value {used['value_id'][first].as_py()} has no ' from instruction:' line",
            )


def _lines(s: Scanned) -> None:
    """Raise ParseError at the first line, in file order, where a line rule breaks."""
    rank = {path: i for i, path in enumerate(s.ends)}
    found = [
        hit
        for rule in (_allocations, _values, _cross, _used, _schedule, _live, _peak, _trace, _fits)
        if (hit := rule(s)) is not None
    ]
    if found:
        path, line, message = min(found, key=lambda b: (rank.get(b[0], len(rank)), b[1]))
        raise ParseError(path, line, message)


def cross_color_flags(s: Scanned) -> pa.Array:
    """values.cross_color: the value is listed under ' reused by buffers of a different
    color:' (the rules have checked that each entry names a value of its allocation)."""
    flags = np.zeros(s.values.num_rows, dtype=bool)
    if s.cross.num_rows:
        flags[_rows_by_id(s.values["value_id"], s.cross["value_id"])] = True
    return pa.array(flags)


# -- helpers ----------------------------------------------------------------------------
def _np(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    return column.to_numpy(zero_copy_only=False)


def _codes(*columns: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """One int64 per row for the tuple of `columns` (equal tuples, equal codes)."""
    codes = np.zeros(len(columns[0]), dtype=np.int64)
    for column in columns:
        encoded = pc.dictionary_encode(column)
        if isinstance(encoded, pa.ChunkedArray):
            encoded = encoded.combine_chunks()
        codes = codes * max(len(encoded.dictionary), 1) + _np(encoded.indices)
    return codes


def _distinct(names: pa.ChunkedArray, indexes: pa.ChunkedArray) -> bool:
    """No (name, ShapeIndex) pair occurs twice (a ShapeIndex holds no '\\x1f')."""
    joined = pc.binary_join_element_wise(names, indexes, "\x1f")
    # pc.unique, not count_distinct (twice as long); a null is no pair, as count_distinct has it
    return not joined.null_count and len(pc.unique(joined)) == len(joined)


def _repeats(codes: np.ndarray) -> np.ndarray:
    """Rows whose code occurred in an earlier row."""
    order = np.argsort(codes, kind="stable")  # equal codes stay in file order
    ordered = codes[order]
    repeated = np.empty(len(codes), dtype=bool)
    repeated[order] = np.concatenate(([False], ordered[1:] == ordered[:-1]))
    return repeated


def _first(mask: np.ndarray) -> int | None:
    if not len(mask):
        return None
    i = int(mask.argmax())
    return i if mask[i] else None


def _rows_by_id(ids: pa.Array | pa.ChunkedArray, wanted: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Row of `ids` holding each of `wanted` (its first occurrence), -1 where none does."""
    where = pc.index_in(wanted, value_set=ids)
    return _np(pc.fill_null(where, -1)).astype(np.int64)


def _key(name: str, index: str | None) -> str:
    return name + (index or "")


# -- the rules -----------------------------------------------------------------------------
def _allocations(s: Scanned) -> Break | None:
    """An allocation index is printed once (§3.1)."""
    allocs = s.allocs
    row = _first(_repeats(_np(allocs["index"])))
    if row is None:
        return None
    return (
        s.ba_path,
        allocs["line"][row].as_py(),
        f"duplicate allocation index {allocs['index'][row]}",
    )


def _values(s: Scanned) -> Break | None:
    """A value is placed once (§3.2), inside its allocation's bytes."""
    values, allocs = s.values, s.allocs
    if not values.num_rows:
        return None
    repeated = _repeats(_np(values["value_id"]))
    indexes = _np(allocs["index"])
    if np.array_equal(indexes, np.arange(len(indexes))):  # as XLA prints them: row = index
        owner = _np(values["allocation"])
    else:
        owner = _rows_by_id(allocs["index"], values["allocation"])
    alloc_size = _np(allocs["size"])[owner]
    size, offset = _np(values["size"]), _np(values["byte_offset"])
    beyond = (size > alloc_size) | (offset > alloc_size - np.minimum(size, alloc_size))
    row = _first(repeated | beyond)
    if row is None:
        return None
    vid, line = values["value_id"][row].as_py(), values["line"][row].as_py()
    if repeated[row]:
        return s.ba_path, line, f"duplicate value id {vid}"
    start, end = int(offset[row]), int(offset[row]) + int(size[row])
    index = values["allocation"][row].as_py()
    return (
        s.ba_path,
        line,
        f"value occupies bytes {start}..{end} beyond allocation {index} of size {alloc_size[row]}",
    )


def _cross(s: Scanned) -> Break | None:
    """A cross-color entry (§3.3) names a value listed above it in its allocation, once."""
    cross = s.cross
    if not cross.num_rows:
        return None
    rows = _rows_by_id(s.values["value_id"], cross["value_id"])
    placed = _np(s.values["allocation"])[rows]
    listed = _np(s.values["line"])[rows]
    lines = _np(cross["line"])
    unlisted = (rows < 0) | (placed != _np(cross["allocation"])) | (listed > lines)
    repeated = _repeats(_np(cross["value_id"]))
    row = _first(unlisted | repeated)
    if row is None:
        return None
    vid, index = cross["value_id"][row].as_py(), cross["allocation"][row].as_py()
    if unlisted[row]:
        return (
            s.ba_path,
            int(lines[row]),
            f"cross-color value {vid} is not listed in allocation {index}",
        )
    return s.ba_path, int(lines[row]), f"cross-color value {vid} listed twice in allocation {index}"


def _used(s: Scanned) -> Break | None:
    """One Used values block per placed value (§4), in id order, named as placed."""
    used = s.used
    if not used.num_rows:
        return None
    ids = _np(used["value_id"])
    placed_ids = _np(s.values["value_id"])
    if len(ids) == len(placed_ids) and np.all(ids[1:] > ids[:-1]):  # the usual: all, in order
        rows = np.argsort(placed_ids)
        if (
            np.array_equal(placed_ids[rows], ids)
            and pc.all(pc.equal(s.values["instruction"].take(rows), used["instruction"])).as_py()
        ):
            return None
    repeated = _repeats(ids)
    before = np.maximum.accumulate(np.r_[np.iinfo(np.int64).min, ids[:-1]])
    unsorted = ids < before
    rows = _rows_by_id(s.values["value_id"], used["value_id"])
    unplaced = rows < 0
    if not s.values.num_rows:  # nothing placed (a cut file): no name to take
        placed_name = pa.nulls(len(ids), pa.string())
        renamed = np.zeros(len(ids), dtype=bool)
    else:
        placed_name = pc.take(s.values["instruction"], pa.array(np.maximum(rows, 0)))
        renamed = ~unplaced & ~_np(pc.equal(placed_name, used["instruction"]))
    row = _first(repeated | unsorted | unplaced | renamed)
    if row is None:
        return None
    path, line, vid = s.used_path or s.ba_path, used["line"][row].as_py(), int(ids[row])
    if repeated[row]:
        return path, line, f"value {vid} listed twice in Used values"
    if unsorted[row]:
        return path, line, f"Used values not sorted by id at value {vid}"
    if unplaced[row]:
        return path, line, f"used value {vid} is not placed in any allocation"
    name, placed = used["instruction"][row].as_py(), placed_name[row].as_py()
    return path, line, f"value {vid} is '{name}' here but '{placed}' in its allocation"


def _schedule(s: Scanned) -> Break | None:
    """InstructionSequence steps are numbered 0, 1, ... (§5.1)."""
    steps = _np(s.schedule["step"])
    row = _first(steps != np.arange(len(steps)))
    if row is None:
        return None
    return (
        s.lr_path or s.ba_path,
        s.schedule["line"][row].as_py(),
        f"InstructionSequence step {int(steps[row])}, expected {row}",
    )


def _live(s: Scanned) -> Break | None:
    """One BufferLiveRange entry per value (§5.2), start <= end <= max."""
    live = s.live
    if not live.num_rows:
        return None
    start, end = _np(live["start_time"]), _np(live["end_time"])
    backwards = end < start
    past = end > s.schedule_length if s.schedule_length is not None else np.zeros(len(end), bool)
    if _distinct(live["instruction"], live["shape_index"]):
        repeated = np.zeros(len(end), dtype=bool)
    else:
        repeated = _repeats(_codes(live["instruction"], live["shape_index"]))
    row = _first(repeated | backwards | past)
    if row is None:
        return None
    path, line = s.lr_path or s.ba_path, live["line"][row].as_py()
    if backwards[row]:
        return path, line, f"live range ends ({end[row]}) before it starts ({start[row]})"
    if past[row]:
        return path, line, f"live range end {end[row]} is past the schedule end {s.schedule_length}"
    key = _key(live["instruction"][row].as_py(), live["shape_index"][row].as_py())
    return path, line, f"a second BufferLiveRange entry for {key} (a value has one live range)"


def _peak(s: Scanned) -> Break | None:
    """A value is listed at the peak once (§5.3; before 2025-04 the list printed names
    only, and the values of one tuple instruction shared it, so only then may a name repeat)."""
    peak = s.peak
    if peak["index"].null_count == peak.num_rows:
        return None
    index = pc.fill_null(peak["index"], "")
    if _distinct(peak["name"], index):
        return None
    indexed = _np(pc.is_valid(peak["index"]))
    repeated = _repeats(_codes(peak["name"], index)) & indexed
    row = _first(repeated)
    if row is None:
        return None
    key = _key(peak["name"][row].as_py(), peak["index"][row].as_py())
    return s.lr_path or s.ba_path, peak["line"][row].as_py(), f"a second peak entry for {key}"


def _trace(s: Scanned) -> Break | None:
    """The stack-trace tree (§5.4): remaining = header total - running sum of current."""
    if not s.trace or s.trace_total is None:
        return None
    remaining = s.trace_total
    for *_, current, printed, _parent, line in s.trace:
        remaining -= current
        if printed != remaining:
            return (
                s.lr_path or s.ba_path,
                line,
                f"stack-trace line says remaining {printed} bytes, but the breakdown's total "
                f"less the bytes listed so far is {remaining} (line duplicated or moved?)",
            )
    return None


#: Scanned number columns and the warehouse column each lands in: (scanned table,
#: column, warehouse table, column, what the error calls it).
_LANDS_IN = (
    ("allocs", "index", "allocations", "allocation_index", "allocation index"),
    ("allocs", "color", "allocations", "color", "color"),
    ("allocs", "parameter_number", "allocations", "parameter_number", "parameter number"),
    ("values", "color", "hlo_values", "color", "color"),
    ("live", "start_time", "live_ranges", "start_time", "live range start"),
    ("live", "end_time", "live_ranges", "end_time", "live range end"),
)


def _fits(s: Scanned) -> Break | None:
    """Every number fits the warehouse column it is stored in (INTEGER is 32 bits)."""
    found: list[Break] = []
    rank = {path: i for i, path in enumerate(s.ends)}
    paths = {"allocs": s.ba_path, "values": s.ba_path, "live": s.lr_path or s.ba_path}
    for table, column, target, target_column, what in _LANDS_IN:
        scanned = getattr(s, table)
        least, greatest, _ = limits(target, target_column)
        bounds = pc.min_max(scanned[column])
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        if low is None or (least <= low and high <= greatest):
            continue
        numbers = _np(pc.fill_null(scanned[column], 0))
        row = _first(~fits(numbers, target, target_column))
        if row is not None:
            line = scanned["line"][row].as_py()
            found.append(
                (paths[table], line, too_large(what, int(numbers[row]), target, target_column))
            )
    for number, what, target, target_column, line in (
        (s.schedule_length, "max", "modules", "schedule_length", s.lr_line),
        (s.peak_time, "peak time", "modules", "logical_peak_time", s.peak_line),
    ):
        if number is not None and not fits(np.array([number]), target, target_column)[0]:
            found.append(
                (s.lr_path or s.ba_path, line, too_large(what, number, target, target_column))
            )
    if (
        s.uses.num_rows
        and pc.max(s.uses["operand_number"]).as_py() > limits("uses", "operand_number")[1]
    ):
        operand = _np(s.uses["operand_number"])
        row = _first(~fits(operand, "uses", "operand_number"))
        if row is not None:
            found.append(
                (
                    s.used_path or s.ba_path,
                    _use_line(s, row),
                    too_large("operand", int(operand[row]), "uses", "operand_number"),
                )
            )
    if not found:
        return None
    return min(found, key=lambda b: (rank.get(b[0], len(rank)), b[1]))


def _use_line(s: Scanned, row: int) -> int:
    """The line of use `row`: its block's header, ' positions:', the positions, ' uses:',
    then the uses in order (docs/format.md §4)."""
    vid = s.uses["value_id"][row].as_py()
    block = _rows_by_id(s.used["value_id"], pa.array([vid], pa.int64()))[0]
    positions = pc.sum(pc.equal(s.positions["value_id"], vid)).as_py() or 0
    return s.used["line"][int(block)].as_py() + 2 + positions + 1 + s.uses["ordinal"][row].as_py()


@functools.cache
def limits(table: str, column: str) -> tuple[int, int, int]:
    """(least, greatest, bits) of the numbers warehouse column `table.column` holds."""
    type_ = arrow_schema(TABLES_BY_NAME[table]).field(column).type
    if pa.types.is_list(type_):
        type_ = type_.value_type
    info = np.iinfo(type_.to_pandas_dtype())
    return int(info.min), int(info.max), type_.bit_width


def fits(numbers: np.ndarray, table: str, column: str) -> np.ndarray:
    """Which of `numbers` fit warehouse column `table.column`."""
    least, greatest, _ = limits(table, column)
    if numbers.dtype == object:
        return np.array([least <= int(n) <= greatest for n in numbers], dtype=bool)
    return (numbers >= least) & (numbers <= greatest)


def too_large(what: str, number: int, table: str, column: str, where: str = "") -> str:
    """The error for a number that does not fit its column: the field, the number, the column."""
    return (
        f"{what} {number}{where} is too large for its column ({table}.{column} holds "
        f"{limits(table, column)[2]}-bit numbers)"
    )
