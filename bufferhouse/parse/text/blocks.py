"""The column reader's Used values blocks (docs/format.md §4), and the Arrow helpers it shares
with vector.py: a block's lines are classified by one letter each (grammar.BLOCK_LETTERS)
and the string of letters matched against the block grammar (grammar.BLOCKS) at once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bufferhouse.parse import model
from bufferhouse.parse.text import grammar as g
from bufferhouse.parse.text import native
from bufferhouse.parse.text.native import Irregular
from bufferhouse.parse.text.scan import LineReader


def index_or_empty(column: pa.Array) -> pa.Array:
    """A ShapeIndex group: '{}' when the dump printed none."""
    return pc.if_else(pc.equal(column, ""), "{}", column)


def ordinals(groups: np.ndarray) -> np.ndarray:
    """Position of each row within its run of equal, sorted group numbers."""
    n = len(groups)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    first = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
    run_start = np.repeat(first, np.diff(np.r_[first, n]))
    return np.arange(n, dtype=np.int64) - run_start


def _whole_blocks(letters: np.ndarray, last: bool) -> bool:
    """The lines' letters make whole blocks (grammar.BLOCKS), and blank lines only where
    the section ends (BLOCKS_TO_END). Matched by RE2: Python's re took 0.1 CPU-s over
    2.8M letters, RE2 0.005."""
    pattern = (g.BLOCKS_TO_END if last else g.BLOCKS).pattern.decode()
    text = pa.array([letters.tobytes()], pa.large_binary())
    return pc.match_substring_regex(text, f"^(?:{pattern})$")[0].as_py()


T = TypeVar("T")


class Lane:
    """Calls run in order on a thread of their own while the caller goes on (the column
    reader's calls are Arrow kernels, which release the GIL), at most `limit` waiting:
    each holds a piece of a chunk, and pieces piling up behind a slower thread took a
    519 MB module's peak from 825 to 1,102 MiB. Without a thread, each runs at once."""

    def __init__(self, threads: bool, name: str, limit: int) -> None:
        self.thread = ThreadPoolExecutor(1, name) if threads else None
        self.limit = limit
        self.waiting: list[Future] = []

    def run(self, call: Callable[[], T]) -> T | Future[T]:
        """call()'s result, or with a thread its future."""
        if self.thread is None:
            return call()
        while len(self.waiting) >= self.limit:
            self.waiting.pop(0).result()
        future = self.thread.submit(call)
        self.waiting.append(future)
        return future

    def wait(self) -> None:
        """Every call done (the first error, in call order, raised here)."""
        waiting, self.waiting = self.waiting, []
        for future in waiting:
            future.result()

    def close(self) -> None:
        """Stop: calls not started are dropped."""
        if self.thread is not None:
            self.thread.shutdown(wait=True, cancel_futures=True)


class UsedBlocks:
    """The Used values blocks (header, positions, uses, from instruction), read as they come.

    A chunk of the section may end inside a block: the lines from its last
    header on wait for the next chunk, so each piece holds whole blocks.
    """

    def __init__(self, p: LineReader, threads: bool = False) -> None:
        self.p = p
        #: With threads, pieces are read in order on a thread of their own while the
        #: caller reads on; one is read while the next waits, no more.
        self.lane = Lane(threads, "bufferhouse-blocks", limit=2)
        self.carry: pa.Array | None = None  # lines of a block cut by the chunk's end
        self.carry_lines = np.zeros(0, np.int64)  # their 0-based line indexes in the file
        self.blocks = 0
        self.parts: list[dict[str, object]] = []
        self.spaced: set[bool] = set()  # after the colon: a space, or none, in the parts read
        self.ended = False
        self.blank_end = False  # the section's last line is blank
        self.texted: set[bool] = set()  # whether the parts read have from instruction lines

    def feed(self, lines: pa.Array, at: int) -> None:
        """Lines of the section; `at` is the 0-based file line index of lines[0]."""
        lines, numbers = unglue(lines, at + np.arange(len(lines), dtype=np.int64))
        block_starts = native.starting_with(lines, (b"<",))  # pc.starts_with: 0.06 CPU-s, 208 MB
        if self.carry is not None and len(self.carry):
            # The carried block ends where the first block here starts: only its lines are
            # joined to it (joining the whole chunk's copied it, 0.03-0.2 CPU-s on 208 MB).
            head = int(block_starts[0]) if len(block_starts) else len(lines)
            carried = pa.concat_arrays([self.carry, lines[:head]])
            carried_lines = np.concatenate([self.carry_lines, numbers[:head]])
            if head == len(lines):
                self.carry, self.carry_lines = carried, carried_lines
                return
            self._submit(carried, carried_lines, last=False)
            lines, numbers, block_starts = lines[head:], numbers[head:], block_starts - head
        cut = int(block_starts[-1]) if len(block_starts) else 0
        self.carry, self.carry_lines = lines[cut:], numbers[cut:]
        if cut:
            self._submit(lines[:cut], numbers[:cut], last=False)

    def end(self) -> None:
        """The section ended: read what is left, and wait for every piece."""
        if self.carry is not None and len(self.carry):
            self._submit(self.carry, self.carry_lines, last=True)
        self.carry = None
        self.lane.wait()  # the first piece's error, as read in order
        self.ended = True

    def close(self) -> None:
        """Stop reading pieces (the file is done with, read or not)."""
        self.lane.close()

    def _submit(self, section: pa.Array, numbers: np.ndarray, last: bool) -> None:
        self.lane.run(functools.partial(self._read, section, numbers, last))

    def leave_state_as_after_blocks(self) -> None:
        """The machine does not see the blocks: once they are read, leave it as after the last."""
        p = self.p
        if self.ended and self.blocks and p.state == "used" and p.block is None:
            p.block, p.block_state = [None, None, 0, ""], "instr"
            if self.blank_end:  # the reference leaves the blocks at the first blank line
                p.state = "between"

    def _read(self, section: pa.Array, numbers: np.ndarray, last: bool) -> None:
        """Whole blocks; `numbers` holds each line's 0-based line index in the file."""
        read = native.used_blocks(section, g.BLOCK_LETTERS)
        kind = read.letters
        if not _whole_blocks(kind, last):
            raise Irregular("Used values block structure")
        if last:
            self.blank_end = bool(len(kind)) and kind[-1] == ord("b")
        ids = read.ids
        self.blocks += len(ids)

        if len(read.texts) not in (0, len(ids)):
            raise Irregular("some values without their from instruction line")
        self.texted.add(bool(len(read.texts)) or not len(ids))
        if read.ends.any():
            raise Irregular("from instruction text may be glued to the next header")
        spaced = int(read.spaced.sum())
        if spaced not in (0, len(read.texts)):
            raise Irregular("some from instruction texts after a space, some not")
        if len(read.texts):
            self.spaced.add(spaced > 0)
        texts = read.texts
        if len(ids) and not len(texts):  # 2019-09 .. 2021-09: XLA printed no instruction text
            texts = pa.nulls(len(ids), pa.string())
        if np.any(kind == ord("n")):
            self.p.features.add("uses_none")

        self.parts.append(
            {
                "ids": ids,
                "names": read.names,
                "lines": numbers[kind == ord("h")] + 1,
                "texts": texts,
                "positions": pa.Table.from_arrays(
                    [
                        pa.array(ids[read.position_block], pa.int64()),
                        pa.array(ordinals(read.position_block)),
                        read.position_name,
                        index_or_empty(read.position_idx),
                    ],
                    schema=model.POSITIONS,
                ),
                "uses": pa.Table.from_arrays(
                    [
                        pa.array(ids[read.use_block], pa.int64()),
                        pa.array(ordinals(read.use_block)),
                        read.use_name,
                        pa.array(read.use_op),
                        index_or_empty(read.use_idx),
                    ],
                    schema=model.USES,
                ),
            }
        )

    def columns(self) -> dict[str, object]:
        """The blocks as model columns (rules.py checks them against the placed values)."""
        p = self.p
        ids = np.concatenate([part["ids"] for part in self.parts])
        if len(self.spaced) > 1:
            raise Irregular("some from instruction texts after a space, some not")
        if len(self.texted) > 1:
            raise Irregular("some values without their from instruction line")
        if self.spaced:
            p.features.add("from_instruction")
            if True in self.spaced:
                p.features.add("from_instruction_space")
        # The texts stay in their pieces: joined, they would be copied whole (the largest
        # column of a module); finish takes the ones it keeps a piece at a time.
        texts = [part.pop("texts") for part in self.parts]
        return {
            "used": pa.Table.from_arrays(
                [
                    pa.array(ids, pa.int64()),
                    pa.chunked_array([part["names"] for part in self.parts], pa.string()),
                    pa.array(np.concatenate([part["lines"] for part in self.parts]), pa.int64()),
                    pa.chunked_array(texts, pa.string()),
                ],
                schema=model.USED,
            ),
            "positions": pa.concat_tables([part["positions"] for part in self.parts]),
            "uses": pa.concat_tables([part["uses"] for part in self.parts]),
        }


def unglue(lines: pa.LargeStringArray, numbers: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """`lines` with each glued from instruction line split in two, its text then the
    header, as the reference splits it (scan.LineReader._from_instruction), and each line's
    file line index (the header keeps its line's).

    The split lines are new offsets into the same character data: nothing is copied.
    """
    where, splits = native.glued(lines, g.FROM)
    if not len(where):
        return lines, numbers
    _, offsets_buffer, data = lines.buffers()
    offsets = np.frombuffer(offsets_buffer, np.int64)[lines.offset : lines.offset + len(lines) + 1]
    new_offsets = np.insert(offsets, where + 1, splits)
    out = pa.LargeStringArray.from_buffers(len(new_offsets) - 1, pa.py_buffer(new_offsets), data)
    return out, np.insert(numbers, where + 1, numbers[where])
