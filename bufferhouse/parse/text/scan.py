"""The line reader: one module's dump files read one line at a time, the reference.

A state machine over the line kinds and section markers of grammar.py
(docs/format.md §12). The buffer-assignment file, its `-values` and `-live-range`
siblings (split era) and the memory-usage report all feed the same machine,
so the combined and the split layout read alike. A line that breaks the
grammar raises ParseError at that line; what must hold between lines is
checked afterwards, over the columns, by rules.py. `read` is the whole
reference path; vector.py feeds it only the few structural lines of a large
dump (`LineReader.line`).
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

from bufferhouse.errors import DumpError, ParseError, UnknownInput
from bufferhouse.parse import model
from bufferhouse.parse.model import Alloc
from bufferhouse.parse.reader import read_lines
from bufferhouse.parse.text import grammar as g

#: Lines that open a section wherever they stand, but inside a block still being read.
_TOP_MARKERS = tuple(prefix for prefix, kind in g.SECTIONS if not prefix.startswith("  "))
#: Block states in which the block is still incomplete (its lines are all known kinds).
_OPEN_BLOCK = ("header", "positions", "positions+")
_WHERE = {
    "alloc": "BufferAssignment section: expected 'allocation N: size S...:' or ' value: ...'",
    "used": "Used values section",
    "between": "dump between sections",
    "lr": "HloLiveRange section",
}

_CALLED_STATE = {
    "alloc": "BufferAssignment section",
    "between": "dump between sections",
    "unknown": "dump between sections",
    "lr": "HloLiveRange section",
}


def split_layout(files: list[tuple[str, str]]) -> bool:
    """The module is printed over several files (2026-04+)."""
    return len(files) > 1 and any(role in ("values", "live_range") for role, _ in files)


def read(files: list[tuple[str, str]]) -> model.Scanned:
    """A module's files, given as (role, path), read line by line."""
    reader = LineReader()
    for role, path in files:
        if role == "usage_report":
            reader.feed_report(path, read_lines(path))
        else:
            reader.feed(path, read_lines(path))
    if split_layout(files):
        reader.features.add("split")
    return reader.scanned(next(path for role, path in files if role == "buffer_assignment"))


class LineReader:
    """The machine. Its state lives on it between lines (vector.py sets it after the
    blocks it read in bulk: `state`, `block`, `block_state`)."""

    def __init__(self) -> None:
        self.allocs: list[Alloc] = []
        self.values: list[tuple] = []  # model.VALUES rows
        self.cross: list[tuple[int, int, int]] = []  # value id, allocation, line
        self.total: int | None = None
        self.total_line: tuple[str, int] | None = None
        self.used: list[list] = []  # [value id, name, line, text]
        self.positions: list[tuple] = []
        self.uses: list[tuple] = []
        self.schedule_length: int | None = None
        self.lr_line = 0
        self.schedule: list[tuple[int, str, int]] = []
        self.live: list[tuple[str, str, int, int, int]] = []  # name, index, start, end, line
        self.peak_time: int | None = None
        self.peak_line = 0
        self.peak: list[tuple[str, str | None, int, int | None, int]] = []
        self.trace_total: int | None = None
        self.trace: list[tuple[int, str, float, int, int, int, int, int]] = []
        self.report: list[tuple[str, int | None, str | None, int]] = []
        self.sections: list[str] = []  # modules.sections, in order
        self.markers: list[str] = []  # grammar.SECTIONS kinds met, over all files
        self.features: set[str] = set()
        self.warnings: list[DumpError] = []
        self.lr_unavailable = False
        self.lr_part = ""
        self.ends: dict[str, int] = {}  # path -> its last line, for "truncated?" errors
        self.lr_path: str | None = None  # file holding the HloLiveRange section
        self.used_path: str | None = None  # file holding Used values (split: -values.txt)

    def mark_section(self, name: str) -> None:
        if name not in self.sections:
            self.sections.append(name)

    def enter(self, kind: str, path: str, lineno: int, line: str) -> None:
        """Section marker `kind` at this line: once each, in XLA's order."""
        why = g.out_of_order(kind, self.markers)
        if why:
            raise ParseError(path, lineno, why, line)
        self.markers.append(kind)
        if kind in g.SECTION_NAMES:
            self.mark_section(g.SECTION_NAMES[kind])

    # -- the result ---------------------------------------------------------------------
    def scanned(self, ba_path: str, **columns: object) -> model.Scanned:
        """Everything read, the per-line facts as columns (model.Scanned).

        `columns` are ones the column reader read instead of this machine (vector.py).
        """
        if "allocs" not in columns:
            columns["allocs"] = _table(model.ALLOCS, [model.alloc_row(a) for a in self.allocs])
        if "values" not in columns:
            columns["values"] = _table(model.VALUES, self.values)
            columns["cross"] = _table(model.CROSS, self.cross)
        if "used" not in columns:
            columns["used"] = _table(model.USED, self.used)
            columns["positions"] = _table(model.POSITIONS, self.positions)
            columns["uses"] = _table(model.USES, self.uses)
        if "schedule" not in columns:
            columns["schedule"] = _table(model.SCHEDULE, self.schedule)
        if "live" not in columns:
            columns["live"] = _table(model.LIVE, self.live)
        # As Arrow columns: a large module's peak list takes tens of MB as Python tuples.
        if "peak" not in columns:
            columns["peak"] = _table(model.PEAK, self.peak)
        self.peak = []
        return model.Scanned(
            ba_path=ba_path,
            sections=self.sections,
            features=self.features,
            warnings=self.warnings,
            ends=self.ends,
            total=self.total,
            total_line=self.total_line,
            lr_path=self.lr_path,
            used_path=self.used_path,
            schedule_length=self.schedule_length,
            lr_line=self.lr_line,
            peak_time=self.peak_time,
            peak_line=self.peak_line,
            trace_total=self.trace_total,
            trace=self.trace,
            report=self.report,
            **columns,  # type: ignore[arg-type]
        )

    # -- the buffer-assignment family of files --------------------------------------------
    def begin_file(self) -> None:
        self.state = "start"
        self.cross_of: Alloc | None = None  # the allocation whose cross-color block is open
        self.alloc: Alloc | None = None
        self.block: list | None = None  # current Used values block (a row of self.used)
        self.block_state = ""
        self.block_items = 0  # positions, then uses, read in the current block
        self.trace_stack: list[int] = []
        self.last_line = 0

    def feed(self, path: str, lines: Iterable[tuple[int, str]]) -> None:
        """Read one file."""
        self.begin_file()
        for lineno, line in lines:
            self.last_line = lineno
            self.line(path, lineno, line)
        self.end_file(path)

    def line(self, path: str, lineno: int, line: str) -> None:
        """One line of the machine."""
        state = self.state
        if line.startswith(_TOP_MARKERS) and not (
            state == "used" and self.block is not None and self.block_state in _OPEN_BLOCK
        ):
            self._marker(path, lineno, line)
        elif state == "alloc":
            self._allocation_part(path, lineno, line)
        elif state == "used" and self.block is not None:
            self._block_line(path, lineno, line)
        elif state == "lr" and self._live_range_line(path, lineno, line):
            pass
        elif state == "unknown" and (line.startswith(" ") or not line.strip()):
            pass  # the body of a section a newer XLA prints: kept by its header's warning
        else:
            self._marker(path, lineno, line)

    def _marker(self, path: str, lineno: int, line: str) -> None:
        """Section markers, and what may stand between sections."""
        if line == "BufferAssignment:":
            self.enter("ba", path, lineno, line)
            self.state, self.alloc, self.cross_of = "alloc", None, None
        elif line.startswith("Total bytes used:"):
            m = g.TOTAL.parse(path, lineno, line)
            self.enter("total", path, lineno, line)
            self.total = g.TOTAL.number(m, "total", path, lineno)
            self.total_line = (path, lineno)
            self.features.add("total_line")
            if m.group("human") is not None:
                self.features.add("total_human")
            self.state = "between"
        elif line == "Used values:":
            self.enter("used", path, lineno, line)
            self.used_path = path
            self.state, self.block, self.block_state = "used", None, ""
        elif self.state == "used" and self.block is None and line.startswith("<"):
            self._used_header(path, lineno, line)
        elif line.startswith("HloLiveRange (max "):
            m = g.LIVE_RANGE.parse(path, lineno, line)
            self.enter("lr", path, lineno, line)
            self.schedule_length = g.LIVE_RANGE.number(m, "max", path, lineno)
            self.mark_section("live_range")
            self.lr_line, self.lr_path = lineno, path
            self.features.add("live_range")
            self.state, self.lr_part = "lr", "header"
        elif line.startswith(g.LIVE_RANGE_UNAVAILABLE):
            self.enter("lr", path, lineno, line)
            self.lr_unavailable = True
            self.mark_section("live_range_unavailable")
            self.state = "between"
        elif not line.strip():
            pass
        elif self.state == "start":
            raise ParseError(
                path, lineno, "expected 'BufferAssignment:' (not a buffer-assignment dump?)", line
            )
        elif self.state in _CALLED_STATE and g.unknown_line(line):
            self._unknown_line(path, lineno, line)
        else:
            raise ParseError(
                path, lineno, f"unexpected line in the {_WHERE.get(self.state, 'dump')}", line
            )

    def _unknown_line(self, path: str, lineno: int, line: str) -> None:
        """A line a newer XLA prints (grammar.unknown_line): kept in its warning. Between
        sections it may head a section of its own, whose indented lines it takes."""
        where = _CALLED_STATE[self.state]
        if self.state in ("between", "unknown"):
            self.state = "unknown"
            what = "unknown section (its indented lines skipped)"
        else:
            what = "unknown line"
        message = f"{what} in the {where}, kept in diagnostics.text (a newer XLA?)"
        self.warnings.append(UnknownInput(path, lineno, message, line))

    def end_file(self, path: str) -> None:
        state, block, last_line = self.state, self.block, self.last_line
        if last_line == 0:
            raise ParseError(path, 0, "empty file")
        self.ends[path] = last_line
        if state == "start":
            raise ParseError(
                path, 1, "no 'BufferAssignment:' header (not a buffer-assignment dump?)"
            )
        if state == "used" and block is not None and self._needs_text():
            raise ParseError(
                path, last_line, f"file ends inside used value {block[0]} (truncated?)"
            )
        if state == "used" and block is None:
            raise ParseError(path, last_line, "file ends right after 'Used values:' (truncated?)")
        if state == "lr" and self.lr_part not in ("peak", "trace"):
            raise ParseError(
                path,
                last_line,
                "HloLiveRange section ends before '  Live ranges at T (peak):' (truncated?)",
            )

    # -- §3 allocations -------------------------------------------------------------------
    def _allocation_part(self, path: str, lineno: int, line: str) -> None:
        alloc = self.alloc
        if line.startswith(" value: "):
            if alloc is None:
                raise ParseError(path, lineno, "value line before any allocation header", line)
            self._value_line(path, lineno, line, alloc)
        elif line.startswith("allocation "):
            self.alloc = self._alloc_line(path, lineno, line)
        elif line.startswith("  value: "):
            if alloc is None or self.cross_of is not alloc:
                raise ParseError(
                    path,
                    lineno,
                    "a two-space '  value:' line must follow "
                    "' reused by buffers of a different color:'",
                    line,
                )
            m = g.CROSS.parse(path, lineno, line)
            self.cross.append((g.CROSS.number(m, "id", path, lineno), alloc.index, lineno))
        elif line.startswith("  "):
            raise ParseError(
                path,
                lineno,
                "value entries of XLA before 2019-09 (LogicalBuffer era, "
                "'  name[index](#id) [offset,size]') are not supported",
                line,
            )
        elif line == g.CROSS_HEAD:
            if alloc is None:
                raise ParseError(path, lineno, "cross-color block before any allocation", line)
            if self.cross_of is alloc:
                raise ParseError(
                    path, lineno, f"a second cross-color block in allocation {alloc.index}", line
                )
            self.cross_of = alloc
            self.features.add("cross_color")
        elif line.strip():
            self._marker(path, lineno, line)

    def _alloc_line(self, path: str, lineno: int, line: str) -> Alloc:
        m = g.ALLOCATION.parse(path, lineno, line)
        index = g.ALLOCATION.number(m, "index", path, lineno)
        size = g.ALLOCATION.number(m, "size", path, lineno)
        flags = g.alloc_attributes(path, lineno, line, m.group("rest"))
        if m.group("address"):
            flags["address"] = m.group("address")
        alloc = Alloc(index, size, int(flags.pop("color", 0)), lineno, flags)  # type: ignore[arg-type]
        self.allocs.append(alloc)
        return alloc

    def _value_line(self, path: str, lineno: int, line: str, alloc: Alloc) -> None:
        m = g.VALUE.parse(path, lineno, line)
        number = g.VALUE.number
        self.features.add("value_lines")
        self.values.append(
            (
                number(m, "id", path, lineno),
                m.group("name"),
                m.group("idx") or "{}",
                m.group("phi") is not None,
                number(m, "color", path, lineno),
                alloc.index,
                number(m, "offset", path, lineno),
                number(m, "size", path, lineno),
                m.group("shape"),
                lineno,
            )
        )

    # -- §4 Used values -------------------------------------------------------------------
    def _needs_text(self) -> bool:
        """The current block still lacks its from instruction line (2021-09+ dumps)."""
        return self.block_state != "instr" and "from_instruction" in self.features

    def _block_line(self, path: str, lineno: int, line: str) -> None:
        block, state = self.block, self.block_state
        assert block is not None
        if line.startswith("<"):
            if state in _OPEN_BLOCK or self._needs_text():
                raise ParseError(
                    path,
                    lineno,
                    f"used value {block[0]} ends before its ' from instruction:' line",
                    line,
                )
            self._used_header(path, lineno, line)
        elif not line:
            if state in _OPEN_BLOCK:
                raise ParseError(
                    path, lineno, f"blank line inside used value {block[0]} (truncated?)", line
                )
            self.state = "between"
        elif state == "instr":
            # JSON configs may print raw newlines: continuation of the text (docs/format.md §11.8);
            # but not a line that can only be one of the grammar's, which is out of place.
            if _unmistakable(line):
                raise ParseError(
                    path,
                    lineno,
                    f"line out of place after the instruction text of used value {block[0]}",
                    line,
                )
            block[3] += "\n" + line
        elif line == g.POSITIONS:
            self._expect(state == "header", path, lineno, line, "after the value header")
            self.block_state, self.block_items = "positions", 0
        elif line in (g.USES, g.USES_UNKNOWN):
            self._expect(state == "positions+", path, lineno, line, "after its positions")
            self.block_state, self.block_items = "uses", 0
        elif line.startswith(g.FROM):
            self._expect(state in ("uses", "none"), path, lineno, line, "after its uses")
            self._from_instruction(path, lineno, line[len(g.FROM) :], block)
        elif state in ("positions", "positions+"):
            m = g.POSITION.parse(path, lineno, line)
            self.positions.append(
                (block[0], self.block_items, m.group("name"), m.group("idx") or "{}")
            )
            self.block_items += 1
            self.block_state = "positions+"
        elif line == g.NO_USES:
            self._expect(
                state == "uses" and not self.block_items, path, lineno, line, "as the only use"
            )
            self.features.add("uses_none")
            self.block_state = "none"
        elif state == "uses":
            m = g.USE.parse(path, lineno, line)
            self.uses.append(
                (
                    block[0],
                    self.block_items,
                    m.group("name"),
                    g.USE.number(m, "op", path, lineno),
                    m.group("idx") or "{}",
                )
            )
            self.block_items += 1
        else:
            raise ParseError(
                path,
                lineno,
                "expected ' positions:', ' uses:' or ' from instruction:' in a used value",
                line,
            )

    def _expect(self, ok: bool, path: str, lineno: int, line: str, where: str) -> None:
        if not ok:
            assert self.block is not None
            raise ParseError(
                path,
                lineno,
                f"'{line.strip()}' out of place in used value {self.block[0]}: it comes {where}",
                line,
            )

    def _used_header(self, path: str, lineno: int, text: str) -> None:
        m = g.HEADER.parse(path, lineno, text)
        block = [g.HEADER.number(m, "id", path, lineno), m.group("name"), lineno, None]
        self.used.append(block)
        self.block, self.block_state = block, "header"

    def _from_instruction(self, path: str, lineno: int, text: str, block: list) -> None:
        """`text` is what follows ' from instruction:' on the line."""
        self.features.add("from_instruction")
        if text.startswith(" "):
            text = text[1:]
            self.features.add("from_instruction_space")
        self.block_state = "instr"
        if text.endswith(">") and text.startswith("%"):
            glued = _glued_header(text)
            if glued is not None:  # 2024-01 .. 2024-11: the next header on the same line
                block[3] = text[:glued]
                self._used_header(path, lineno, text[glued:])
                return
        block[3] = text

    # -- §5 HloLiveRange --------------------------------------------------------------------
    def _live_range_line(self, path: str, lineno: int, line: str) -> bool:
        """Read a line of the section; False if it is none of its lines."""
        part = self.lr_part
        if line == g.SEQUENCE_HEAD:
            self.enter("seq", path, lineno, line)
            self.lr_part = "seq"
        elif line == g.BUFFER_LIVE_RANGE_HEAD:
            self.enter("blr", path, lineno, line)
            self.lr_part = "blr"
        elif line.startswith("  Live ranges at "):
            m = g.PEAK_HEAD.parse(path, lineno, line)
            self.enter("peak", path, lineno, line)
            self.peak_time = g.PEAK_HEAD.number(m, "time", path, lineno)
            self.peak_line = lineno
            self.lr_part = "peak"
        elif line.startswith("  Stack trace breakdown for peak usage: "):
            m = g.TRACE_HEAD.parse(path, lineno, line)
            self.enter("trace", path, lineno, line)
            self.trace_total = _spaced(m, "total", path, lineno)
            self.features.add("stack_trace")
            self.lr_part, self.trace_stack = "trace", []
        elif not line:
            pass
        elif part == "seq":
            m = g.STEP.parse(path, lineno, line)
            self.schedule.append((g.STEP.number(m, "step", path, lineno), m.group("name"), lineno))
        elif part == "blr":
            m = g.BUFFER_LIVE_RANGE.parse(path, lineno, line)
            number = g.BUFFER_LIVE_RANGE.number
            start, end = number(m, "start", path, lineno), number(m, "end", path, lineno)
            self.live.append((m.group("name"), m.group("idx"), start, end, lineno))
        elif part == "peak":
            self._peak_line(path, lineno, line)
        elif part == "trace":
            self._trace_line(path, lineno, line)
        else:
            return False
        return True

    def _peak_line(self, path: str, lineno: int, line: str) -> None:
        m = g.PEAK.parse(path, lineno, line)
        if m.group("idx") is not None:
            self.features.add("peak_index")
        if m.group("cumulative") is not None:
            self.features.add("peak_cumulative")
        self.peak.append(
            (
                m.group("name"),
                m.group("idx"),
                g.PEAK.number(m, "bytes", path, lineno),
                g.PEAK.number(m, "cumulative", path, lineno),
                lineno,
            )
        )

    def _trace_line(self, path: str, lineno: int, line: str) -> None:
        m = g.TRACE.parse(path, lineno, line)
        depth = (len(m.group("indent")) - 2) // 4
        if depth > len(self.trace_stack):
            raise ParseError(path, lineno, "stack-trace node deeper than its parent", line)
        stack = self.trace_stack[:depth]
        ordinal = len(self.trace)
        self.trace.append(
            (
                depth,
                m.group("name"),
                float(m.group("pct")),
                _spaced(m, "total", path, lineno),
                _spaced(m, "current", path, lineno),
                _spaced(m, "remaining", path, lineno),
                stack[-1] if stack else -1,
                lineno,
            )
        )
        self.trace_stack = [*stack, ordinal]

    # -- §7 the memory-usage report -----------------------------------------------------------
    def feed_report(self, path: str, lines: Iterable[tuple[int, str]]) -> None:
        self.mark_section("usage_report")
        space: tuple[str, int] | None = None
        for lineno, line in lines:
            if line.startswith("Total bytes used:") and not self.report:
                m = g.TOTAL.parse(path, lineno, line)
                self.report.append(("A", None, None, g.TOTAL.number(m, "total", path, lineno)))  # type: ignore[arg-type]
                return  # the rest of version A repeats the allocations
            if line.startswith("Memory Space: "):
                m = g.REPORT_SPACE.parse(path, lineno, line)
                space = (m.group("name"), g.REPORT_SPACE.number(m, "color", path, lineno))  # type: ignore[assignment]
            elif line.startswith("Total bytes: "):
                m = g.REPORT_TOTAL.match(line)
                if m is None or space is None:
                    raise ParseError(path, lineno, f"expected {g.REPORT_TOTAL.expected}", line)
                total = g.REPORT_TOTAL.number(m, "total", path, lineno)
                self.report.append(("B", space[1], space[0], total))  # type: ignore[arg-type]
                space = None
        if not self.report:
            self.warnings.append(
                DumpError(
                    path,
                    0,
                    "memory-usage report without 'Total bytes used' or 'Memory Space' totals",
                )
            )


#: Lines no instruction text continues with: block lines, and lines that only the
#: BufferAssignment section prints.
_BLOCK_MARKERS = (g.POSITIONS, g.USES, g.USES_UNKNOWN, g.CROSS_HEAD)


def _unmistakable(line: str) -> bool:
    """`line` is one of the grammar's own kinds, never a piece of instruction text."""
    if line in _BLOCK_MARKERS:
        return True
    if line.startswith("allocation "):
        return g.ALLOCATION.match(line) is not None
    if line.startswith((" value: ", "  value: ")):
        return (g.VALUE.match(line) or g.CROSS.match(line)) is not None
    return False


def _spaced(m, group: str, path: str, lineno: int) -> int:
    """A number printed with spaces between groups of three (the stack-trace tree)."""
    return g.number(m.group(group).replace(" ", ""), group, path, lineno, m.string)


def _glued_header(text: str) -> int | None:
    """Where a value header glued to the end of `text` starts (the leftmost that runs
    to the end), None if there is none."""
    at = text.find("<")
    while at > 0:
        if g.GLUED_HEADER.match(text[at:]):
            return at
        at = text.find("<", at + 1)
    return None


def _table(schema: pa.Schema, rows: list) -> pa.Table:
    """A table of `schema` from row tuples, transposed once."""
    if not rows:
        return schema.empty_table()
    return pa.Table.from_arrays(
        [pa.array(c, f.type) for f, c in zip(schema, zip(*rows))], schema=schema
    )
