"""Which modules of a batch rules.py might refuse, or that hold what the batch does not
read batch-wide: each is parsed alone instead, so that its error (or its rows) is the
one-module parse's, word for word.

rules.py words the first break of one module; a batch only needs to know which modules
have one, and that is a few grouped numpy tests over the batch's tables (by module,
through lexsort and the module offsets), not rules.py's ~40 Arrow calls a module. Every
test here is at least as strict as its rule: a module passed here breaks none of them
(a module flagged that breaks none is merely parsed alone, with the same result).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bufferhouse.parse.text import rules
from bufferhouse.parse.text.batch_scan import BatchScanned, module_bounds, rank


def suspects(b: BatchScanned) -> np.ndarray:
    """One flag a module: parse it alone (it failed to read, or may break a rule)."""
    bad = np.zeros(b.modules, dtype=bool)
    bad[list(b.failed)] = True
    _small_facts(b, bad)
    t = b.tables
    _allocations(t["allocs"], bad, b.modules)
    _values(t["values"], t["allocs"], bad, b.modules)
    bad[_np(t["cross"]["module"])] = True  # cross-color blocks: rare, read alone
    _used(b, bad)
    _numbered(t["schedule"], "step", bad, b.modules)
    _live(b, bad)
    _peak(t["peak"], bad, b.modules)
    _fits(t, bad)
    return bad


def _np(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    return column.to_numpy(zero_copy_only=False)


def _counts(table: pa.Table, modules: int) -> np.ndarray:
    return np.diff(module_bounds(table["module"], modules))


def _small_facts(b: BatchScanned, bad: np.ndarray) -> None:
    """rules._present and _complete's section and total tests, the stack-trace tree
    (rules._trace, finish._facts), and the printed numbers of the modules row."""
    sums = _sums(b.tables["allocs"]["size"], b.tables["allocs"]["module"], b.modules)
    steps = _counts(b.tables["schedule"], b.modules)
    allocs = _counts(b.tables["allocs"], b.modules)
    for i, r in enumerate(b.readers):
        if r is None or bad[i]:
            continue
        sections, features = r.sections, r.features
        bad[i] = (
            "allocations" not in sections
            or not allocs[i]
            or sums is None
            or (r.total is not None and r.total != int(sums[i]))
            or "used_values" not in sections
            or (
                "split" not in features
                and "from_instruction" in features
                and "live_range" not in sections
            )
            or (r.schedule_length is not None and steps[i] != r.schedule_length)
            or not _fits_row(r.schedule_length, "schedule_length")
            or not _fits_row(r.peak_time, "logical_peak_time")
            or not _trace_adds_up(r.trace, r.trace_total)
        )


def _sums(sizes: pa.ChunkedArray, module: pa.ChunkedArray, modules: int) -> np.ndarray | None:
    """Each module's sum of allocation sizes; None when int64 might not hold them exactly."""
    numbers = _np(sizes)
    if len(numbers) and (numbers.min() < 0 or numbers.max() >= (1 << 62) // len(numbers)):
        return None
    running = np.r_[0, np.cumsum(numbers)]
    at = module_bounds(module, modules)
    return running[at[1:]] - running[at[:-1]]


def _fits_row(number: int | None, column: str) -> bool:
    least, greatest, _ = rules.limits("modules", column)
    return number is None or least <= number <= greatest


def _trace_adds_up(trace: list, total: int | None) -> bool:
    """rules._trace holds, and the tree ends at 0 bytes remaining (finish._facts)."""
    if not trace:
        return True
    if trace[-1][5] != 0:
        return False
    if total is None:
        return True
    remaining = total
    for *_, current, printed, _parent, _line in trace:
        remaining -= current
        if printed != remaining:
            return False
    return True


def _allocations(allocs: pa.Table, bad: np.ndarray, modules: int) -> None:
    """Indices 0..n-1 in file order (no duplicate, and finish warns of no other order)."""
    module = _np(allocs["module"])
    off = _np(allocs["index"]) != rank(module, modules)
    bad[module[off]] = True


def _repeated(module: np.ndarray, *keys: np.ndarray) -> np.ndarray:
    """Rows whose (module, keys...) occurred in another row."""
    if not len(module):
        return np.zeros(0, dtype=bool)
    order = np.lexsort((*reversed(keys), module))
    same = np.ones(len(module) - 1, dtype=bool)
    for column in (module, *keys):
        ordered = column[order]
        same &= ordered[1:] == ordered[:-1]
    repeated = np.zeros(len(module), dtype=bool)
    repeated[order[1:][same]] = True
    repeated[order[:-1][same]] = True
    return repeated


def _values(values: pa.Table, allocs: pa.Table, bad: np.ndarray, modules: int) -> None:
    """rules._values: a value placed once, inside its allocation (whose index is its row
    in its module, as _allocations has it)."""
    module = _np(values["module"])
    if not len(module):
        return
    counts = _counts(allocs, modules)
    starts = module_bounds(allocs["module"], modules)[:-1]
    index = _np(values["allocation"])
    outside = (index < 0) | (index >= counts[module])
    owner = starts[module] + np.where(outside, 0, index)
    alloc_size = _np(allocs["size"])[np.minimum(owner, max(len(allocs) - 1, 0))]
    size, offset = _np(values["size"]), _np(values["byte_offset"])
    beyond = outside | (size > alloc_size) | (offset > alloc_size - np.minimum(size, alloc_size))
    repeated = _repeated(module, _np(values["value_id"]))
    bad[module[beyond | repeated]] = True


def _used(b: BatchScanned, bad: np.ndarray) -> None:
    """rules._used's usual case and _used_complete: a module's blocks are its placed values,
    all, in id order, named as placed, each with its text where the era prints one."""
    values, used, modules = b.tables["values"], b.tables["used"], b.modules
    vm, um = _np(values["module"]), _np(used["module"])
    same_count = _counts(values, modules) == _counts(used, modules)
    bad[~same_count] = True
    ids = _np(used["value_id"])
    unsorted = np.r_[False, (ids[1:] <= ids[:-1]) & (um[1:] == um[:-1])]
    bad[um[unsorted]] = True
    order = np.lexsort((_np(values["value_id"]), vm))
    keep_v, keep_u = same_count[vm[order]], same_count[um]
    placed = order[keep_v]
    differs = _np(values["value_id"])[placed] != ids[keep_u]
    names = pc.not_equal(
        values["instruction"].take(pa.array(placed)), used["instruction"].filter(keep_u)
    )
    differs |= _np(pc.fill_null(names, True))
    bad[um[keep_u][differs]] = True
    printing = np.array([r is not None and "from_instruction" in r.features for r in b.readers])
    untold = um[_np(pc.is_null(used["text"]))]
    bad[untold[printing[untold]]] = True  # rules._used_complete


def _numbered(table: pa.Table, column: str, bad: np.ndarray, modules: int) -> None:
    """rules._schedule: a module's steps are 0, 1, ..."""
    module = _np(table["module"])
    bad[module[_np(table[column]) != rank(module, modules)]] = True


def _codes(*columns: pa.ChunkedArray) -> list[np.ndarray]:
    """Each column's strings as numbers (equal strings, equal numbers; a null its own)."""
    out = []
    for column in columns:
        encoded = pc.dictionary_encode(column.combine_chunks())
        out.append(_np(pc.fill_null(encoded.indices, -1)).astype(np.int64))
    return out


def _live(b: BatchScanned, bad: np.ndarray) -> None:
    """rules._live: start <= end <= the schedule's end, one entry per (name, index)."""
    live = b.tables["live"]
    module = _np(live["module"])
    if not len(module):
        return
    start, end = _np(live["start_time"]), _np(live["end_time"])
    length = np.array(
        [
            -1 if r is None or bad[i] or r.schedule_length is None else r.schedule_length
            for i, r in enumerate(b.readers)
        ],
        dtype=np.int64,
    )  # -1: no end to be past (the rows check it fits the modules column)
    limit = length[module]
    past = (limit >= 0) & (end > limit)
    repeated = _repeated(module, *_codes(live["instruction"], live["shape_index"]))
    bad[module[(end < start) | past | repeated]] = True


def _peak(peak: pa.Table, bad: np.ndarray, modules: int) -> None:
    """rules._peak: where the list prints indices, a (name, index) once."""
    module = _np(peak["module"])
    if not len(module) or peak["index"].null_count == len(module):
        return
    repeated = _repeated(module, *_codes(peak["name"], peak["index"]))
    bad[module[repeated]] = True


def _fits(t: dict[str, pa.Table], bad: np.ndarray) -> None:
    """rules._fits: every number fits the warehouse column it lands in."""
    for table, column, target, target_column, _ in rules._LANDS_IN:
        numbers = t[table][column]
        _flag_outside(numbers, t[table]["module"], target, target_column, bad)
    _flag_outside(t["uses"]["operand_number"], t["uses"]["module"], "uses", "operand_number", bad)


def _flag_outside(
    numbers: pa.ChunkedArray, module: pa.ChunkedArray, table: str, column: str, bad: np.ndarray
) -> None:
    least, greatest, _ = rules.limits(table, column)
    bounds = pc.min_max(numbers)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    if low is None or (least <= low and high <= greatest):
        return
    values = _np(pc.fill_null(numbers, 0))
    bad[_np(module)[~rules.fits(values, table, column)]] = True
