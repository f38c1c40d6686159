"""The assignment fingerprint: one compile recognisable whether it came as a text
dump, a `.hlo.pb` or a program inside a profile (modules.assignment_fingerprint)."""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bufferhouse.parse.derive.heap import value_rows

__all__ = ["assignment_fingerprint", "batch_fingerprints"]


def assignment_fingerprint(tables: dict[str, pa.Table], value_row: pa.Array | None = None) -> str:
    """A SHA-256 of the buffer assignment as both text and proto carry it, so the same
    compile seen as a dump, a proto or inside a profile has the same fingerprint.

    Covers, in a fixed order: each allocation's (index, size, color, parameter number,
    constant, thread-local, maybe-live-out) and each placement's (value id, defining
    instruction, shape index, allocation, offset, size). Not file names, metadata or
    instruction ids (a profile's HloProto renumbers them). Computed on whole columns.
    `value_row`: heap.value_rows of the tables, when the caller has it.
    """
    h = hashlib.sha256(_HEADER)
    allocs = tables["allocations"].sort_by("allocation_index")
    _hash_rows(h, allocs, _ALLOCATION_COLUMNS)
    # Each placement with its value's instruction and shape index, in (value, allocation,
    # offset) order: looked up a slice at a time, not joined whole (a join and a sort of
    # the whole table were a 519 MB module's peak, +300 MB).
    values, asg = tables["hlo_values"], tables["assignments"]
    order = pc.sort_indices(
        asg,
        [
            ("value_id", "ascending"),
            ("allocation_index", "ascending"),
            ("byte_offset", "ascending"),
        ],
    )
    if value_row is None:
        value_row = value_rows(values, asg)
    for start in range(0, len(order), HASH_ROWS):
        rows = order.slice(start, HASH_ROWS)
        found = pc.take(value_row, rows)
        placed = {
            c: pc.take(asg[c], rows)
            for c in ("value_id", "allocation_index", "byte_offset", "size")
        }
        placed["instruction"] = pc.take(values["instruction"], found)
        placed["shape_index"] = pc.take(values["shape_index"], found)
        _hash_slice(
            h,
            pa.table(placed),
            _PLACEMENT_COLUMNS,
        )
    return h.hexdigest()


_HEADER = b"bufferhouse-assignment-v1\n"
_ALLOCATION_COLUMNS = (
    "allocation_index",
    "size",
    "color",
    "parameter_number",
    "is_constant",
    "is_thread_local",
    "is_maybe_live_out",
)
_PLACEMENT_COLUMNS = (
    "value_id",
    "instruction",
    "shape_index",
    "allocation_index",
    "byte_offset",
    "size",
)
_PLACEMENT_KEYS = ("value_id", "allocation_index", "byte_offset")
#: A batch's value ids and module ordinals share one int64 key (module << 32 | id).
_ID_LIMIT = 1 << 32


def batch_fingerprints(batch: list[dict[str, pa.Table]]) -> list[str]:
    """assignment_fingerprint of each module of `batch` (its tables, every module with
    the same schemas), computed over the batch's rows at once: one sort, one text column
    and one join for all its allocations, and for all its placements; then each
    module's bytes, a contiguous slice, hashed alone. The bytes hashed are each module's
    own, in its order, so each digest is the one assignment_fingerprint gives. Raises
    ValueError where a batch-wide key does not hold (a null key, value ids that do not
    ascend or pass 32 bits): the caller fingerprints those modules one by one."""
    allocs = pa.concat_tables([t["allocations"].select(_ALLOCATION_COLUMNS) for t in batch])
    alloc_module = _module_column([t["allocations"].num_rows for t in batch])
    alloc_order = np.lexsort((_keys(allocs["allocation_index"]), alloc_module))
    alloc_text = _row_texts(allocs.take(alloc_order), _ALLOCATION_COLUMNS)
    asg = pa.concat_tables([t["assignments"].select((*_PLACEMENT_KEYS, "size")) for t in batch])
    values = pa.concat_tables([t["hlo_values"].select(_VALUE_COLUMNS) for t in batch])
    asg_module = _module_column([t["assignments"].num_rows for t in batch])
    value_module = _module_column([t["hlo_values"].num_rows for t in batch])
    found = _batch_value_rows(values["value_id"], value_module, asg["value_id"], asg_module)
    keys = [_keys(asg[c]) for c in reversed(_PLACEMENT_KEYS)]
    order = pa.array(np.lexsort((*keys, asg_module)))
    placed = {c: pc.take(asg[c], order) for c in (*_PLACEMENT_KEYS, "size")}
    found = pc.take(found, order)
    placed["instruction"] = pc.take(values["instruction"], found)
    placed["shape_index"] = pc.take(values["shape_index"], found)
    place_text = _row_texts(pa.table(placed), _PLACEMENT_COLUMNS)
    alloc_cuts = _cuts(alloc_text, alloc_module, len(batch))
    place_cuts = _cuts(place_text, asg_module, len(batch))
    digests = []
    for m in range(len(batch)):
        h = hashlib.sha256(_HEADER)
        h.update(alloc_text[1][alloc_cuts[m] : alloc_cuts[m + 1]])
        h.update(place_text[1][place_cuts[m] : place_cuts[m + 1]])
        digests.append(h.hexdigest())
    return digests


_VALUE_COLUMNS = ("value_id", "instruction", "shape_index")


def _module_column(counts: list[int]) -> np.ndarray:
    return np.repeat(np.arange(len(counts), dtype=np.int64), counts)


def _keys(column: pa.ChunkedArray) -> np.ndarray:
    """A sort key column as numpy; a null in it: ValueError (Arrow sorts nulls last)."""
    if column.null_count:
        raise ValueError("a null sort key")
    return column.to_numpy()


def _batch_value_rows(
    ids: pa.ChunkedArray, id_module: np.ndarray, wanted: pa.ChunkedArray, want_module: np.ndarray
) -> pa.Array:
    """heap.value_rows over the batch, as rows of the concatenated values: each module's
    ids must ascend (a text reading's do) and fit 32 bits, so (module, id) is one key."""
    have, want = _keys(ids), _keys(wanted)
    if len(have) and (have.min() < 0 or have.max() >= _ID_LIMIT):
        raise ValueError("value ids past 32 bits")
    have_key = (id_module << 32) | have
    if len(have_key) and not np.all(have_key[1:] > have_key[:-1]):
        raise ValueError("value ids do not ascend")
    if not len(have_key):
        return pa.nulls(len(want), pa.int64())
    want_key = (want_module << 32) | np.clip(want, 0, _ID_LIMIT - 1)
    at = np.minimum(np.searchsorted(have_key, want_key), len(have_key) - 1)
    return pa.array(at, mask=(have_key[at] != want_key) | (want < 0) | (want >= _ID_LIMIT))


def _row_texts(table: pa.Table, columns: tuple[str, ...]) -> tuple[np.ndarray, memoryview]:
    """(each row's end offset, from 0; the rows' text), as _hash_slice joins them."""
    texts = [pc.fill_null(pc.cast(table[c], pa.large_string()), "\x00") for c in columns]
    ends, sep = pa.scalar("", pa.large_string()), pa.scalar("\x1f", pa.large_string())
    rows = pc.binary_join_element_wise(*texts, ends, sep)
    if isinstance(rows, pa.ChunkedArray):
        rows = rows.combine_chunks()
    if not len(rows):
        return np.zeros(1, dtype=np.int64), memoryview(b"")
    offsets = np.frombuffer(rows.buffers()[1], dtype=np.int64)[
        rows.offset : rows.offset + len(rows) + 1
    ]
    return offsets, memoryview(rows.buffers()[2])


def _cuts(text: tuple[np.ndarray, memoryview], module: np.ndarray, modules: int) -> list[int]:
    """Where each module's bytes start in `text` (rows sorted by module), and the end."""
    first_row = np.searchsorted(module, np.arange(modules + 1))  # module sorted: ascending
    return text[0][first_row].tolist()


#: Rows turned into text at a time: the text of all rows at once was the peak of a
#: 519 MB module's ingest (1.1 GiB); bytes hashed are the same either way.
HASH_ROWS = 1 << 17


def _hash_rows(h, table: pa.Table, columns: tuple[str, ...]) -> None:
    """Feed each row's columns as text, joined by \x1f and ended by \x1e, into `h`."""
    for start in range(0, table.num_rows, HASH_ROWS):
        _hash_slice(h, table.slice(start, HASH_ROWS), columns)


def _hash_slice(h, table: pa.Table, columns: tuple[str, ...]) -> None:
    texts = [pc.fill_null(pc.cast(table[c], pa.string()), "\x00") for c in columns]
    rows = pc.binary_join_element_wise(*texts, "", "\x1f")  # trailing "" ends each row
    if isinstance(rows, pa.ChunkedArray):
        rows = rows.combine_chunks()
    offsets = np.frombuffer(rows.buffers()[1], dtype=np.int32)
    first, last = offsets[rows.offset], offsets[rows.offset + len(rows)]
    h.update(memoryview(rows.buffers()[2])[first:last])
