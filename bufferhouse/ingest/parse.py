"""Turn one module's dump files into rows for the warehouse tables.

A line-driven state machine over exact line prefixes (format.md §12). The
buffer-assignment file, its `-values` and `-live-range` siblings (split era)
and the memory-usage report all feed the same machine, so the combined and the
split layout parse alike. Anything that breaks the grammar or an invariant
that XLA's printing code guarantees raises ParseError with file and line;
nothing is half-kept.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from bufferhouse.errors import DumpError, ParseError
from bufferhouse.ingest import hlo, shapes
from bufferhouse.ingest.reader import read_blocks, read_lines

INT64_MAX = (1 << 63) - 1

_ALLOC = re.compile(r"allocation (\d+): (?:(0x[0-9a-fA-F]+), )?size (\d+)(.*):$")
_VALUE_SHORT = r"<(\d+) ([^ {}<>]+)(\{[0-9,]*\})?( \(phi\))?(?: @(\d+))?>"
_VALUE_LINE = re.compile(r" value: " + _VALUE_SHORT + r" \(size=(\d+),offset=(\d+)\): (.*)$")
_CROSS_LINE = re.compile(r"  value: " + _VALUE_SHORT + r" \(color=(\d+)\)$")
_VALUE_HEADER = re.compile(_VALUE_SHORT + "$")
_GLUED = re.compile(r"(<\d+ [A-Za-z_][A-Za-z0-9_.\-]*(?:\{[0-9,]*\})?(?: \(phi\))?(?: @\d+)?>)$")
_TOTAL = re.compile(r"Total bytes used: (\d+)(?: \(([^)]*)\))?$")
_POSITION = re.compile(r"  ([^ ,{}]+)(?: (\{[0-9,]*\}))?$")
_USE = re.compile(r"  ([^ ,{}]+), operand (\d+)(?: (\{[0-9,]*\}))?$")
_LR_HEADER = re.compile(r"HloLiveRange \(max (\d+)\):$")
_SEQ = re.compile(r"    (\d+):(\S+)$")
_BLR = re.compile(r"    ([^ {}:]+)(\{[0-9,]*\}):(\d+)-(\d+)$")
_PEAK_HEADER = re.compile(r"  Live ranges at (\d+) \(peak\):$")
_PEAK = re.compile(r"    ([^ {}:]+)(\{[0-9,]*\})?: (\d+) bytes(?: \(cumulative: (\d+) bytes\))?$")
_SPACED = r"(\d{1,3}(?: \d{3})*)"
_TRACE_HEADER = re.compile(r"  Stack trace breakdown for peak usage: " + _SPACED + " bytes$")
_TRACE_LINE = re.compile(
    r"^(  (?:    |│   )*)(  |├── |└── )(.*) \((\d+\.\d)%, total: "
    + _SPACED
    + " bytes, current: "
    + _SPACED
    + " bytes, remaining: "
    + _SPACED
    + r" bytes\)$"
)
_BLOCK = re.compile(
    r"(?P<header><\d+ [^ {}<>\n]+(?:\{[0-9,]*\})?(?: \(phi\))?(?: @\d+)?>)\n"
    r" positions:\n(?P<positions>(?:  [^\n]*\n)+)"
    r" uses:\n(?P<uses>(?:  [^\n]*\n)*)"
    r" from instruction:(?P<instr>[^\n]*)\n"
)
_POSITION_ALL = re.compile(r"^  ([^ ,{}\n]+)(?: (\{[0-9,]*\}))?$", re.M)
_USE_ALL = re.compile(r"^  ([^ ,{}\n]+), operand (\d{1,9})(?: (\{[0-9,]*\}))?$", re.M)
_SEQ_RUN = re.compile(r"(?:    \d+:\S+\n)+")
_SEQ_ALL = re.compile(r"^    (\d{1,9}):(\S+)$", re.M)
_BLR_RUN = re.compile(r"(?:    [^ {}:\n]+\{[0-9,]*\}:\d{1,9}-\d{1,9}\n)+")
_BLR_ALL = re.compile(r"^    ([^ {}:\n]+)(\{[0-9,]*\}):(\d+)-(\d+)$", re.M)
_REPORT_SPACE = re.compile(r"Memory Space: (.*) \(color=(\d+)\)$")
_REPORT_TOTAL_B = re.compile(r"Total bytes: (\d+)(?: \(([^)]*)\))?$")
_LR_UNAVAILABLE = "HloLiveRange not available"

#: Feature -> earliest XLA commit date whose printer produces it (format.md §4.4, §5.3, §9).
ERA_FEATURES: dict[str, str] = {
    "value_lines": "2019-09-09",
    "total_line": "2019-10-14",
    "live_range": "2021-04-07",
    "total_human": "2021-08-09",
    "from_instruction": "2021-09-23",
    "from_instruction_space": "2024-01-16",
    "peak_index": "2025-04-14",
    "peak_cumulative": "2025-05-16",
    "stack_trace": "2025-07-23",
    "split": "2026-04-03",
    "uses_none": "2026-06-02",
    "cross_color": "2026-06-17",
}


@dataclass
class ParsedModule:
    """Everything read from one module: facts, table rows, warnings."""

    facts: dict[str, object] = field(default_factory=dict)
    rows: dict[str, list[tuple]] = field(default_factory=dict)
    warnings: list[DumpError] = field(default_factory=list)
    sections: list[str] = field(default_factory=list)
    features: set[str] = field(default_factory=set)


@dataclass
class _Alloc:
    index: int
    size: int
    color: int
    line: int
    flags: dict[str, object]


@dataclass
class _Value:
    value_id: int
    instruction: str
    index: str  # '{}' when not printed
    printed_index: bool
    is_phi: bool
    color: int | None
    allocation: int
    offset: int
    size: int
    shape: str
    line: int
    cross_color: bool = False


def _int(text: str, path: str, lineno: int, line: str, what: str) -> int:
    value = int(text)
    if value > INT64_MAX:
        raise ParseError(path, lineno, f"{what} {text} does not fit in 64 bits", line)
    return value


class _Parser:
    def __init__(self) -> None:
        self.allocs: dict[int, _Alloc] = {}
        self.alloc_order: list[int] = []
        self.values: dict[int, _Value] = {}
        self.total: int | None = None
        self.total_line: tuple[str, int] | None = None
        self.used: dict[int, dict] = {}
        self.instr_text: dict[str, str] = {}
        self.schedule_length: int | None = None
        self.sequence: list[str] = []
        self.live: list[tuple[str, str, int, int, int]] = []  # name, index, start, end, line
        self.peak_time: int | None = None
        self.peak: list[tuple[str, str | None, int, int | None, int]] = []
        self.trace_total: int | None = None
        self.trace: list[tuple[int, str, float, int, int, int, int]] = []
        self.report: list[tuple[str, int | None, str | None, int]] = []
        self.sections: list[str] = []
        self.features: set[str] = set()
        self.warnings: list[DumpError] = []
        self.lr_unavailable = False
        self._lr_part = ""
        self.ends: dict[str, int] = {}  # path -> its last line, for "truncated?" errors
        self.lr_path: str | None = None  # file holding the HloLiveRange section
        self.used_path: str | None = None  # file holding Used values (split: -values.txt)
        self._last_used = -1

    # -- helpers -------------------------------------------------------------
    def _section(self, name: str) -> None:
        if name not in self.sections:
            self.sections.append(name)

    # -- the buffer-assignment family of files --------------------------------
    def begin_file(self) -> None:
        self.state = "start"
        self.state_cross: _Alloc | None = None
        self.alloc: _Alloc | None = None
        self.block: dict | None = None  # current Used values block
        self.block_state = ""
        self.trace_stack: list[int] = []
        self.last_line = 0

    def feed(self, path: str, lines: Iterable[tuple[int, str]]) -> None:
        """Parse one file line by line (the reference path)."""
        self.begin_file()
        for lineno, line in lines:
            self.last_line = lineno
            self._line(path, lineno, line)
        self.end_file(path)

    def feed_blocks(self, path: str, blocks: Iterable[tuple[int, str]]) -> None:
        """Parse one file given as blocks of whole lines (the accelerated path).

        Runs of well-formed lines in the bulky sections (used values,
        instruction sequence, buffer live ranges) are matched many lines at a
        time with one regex; every other line, and any run the regex does not
        match exactly, goes through the same per-line state machine as
        `feed`, so both paths produce the same rows and the same errors.
        """
        self.begin_file()
        lineno = 0
        for first, text in blocks:
            lineno = first - 1
            pos, n = 0, len(text)
            while pos < n:
                if self.state == "used" and self.block_state in ("instr", ""):
                    m = _BLOCK.match(text, pos)
                    if m is not None and self._fast_block(path, lineno, m):
                        lineno += m.group().count("\n")
                        pos = m.end()
                        continue
                elif self.state == "lr" and self._lr_part in ("seq", "blr"):
                    run = (_SEQ_RUN if self._lr_part == "seq" else _BLR_RUN).match(text, pos)
                    if run is not None and self._fast_run(path, lineno, run.group()):
                        lineno += run.group().count("\n")
                        pos = run.end()
                        continue
                nl = text.find("\n", pos)
                end = n if nl < 0 else nl
                lineno += 1
                self.last_line = lineno
                self._line(path, lineno, text[pos:end])
                pos = end + 1
        if lineno:
            self.last_line = lineno
        self.end_file(path)

    def _fast_block(self, path: str, lineno: int, m: re.Match[str]) -> bool:
        """One complete used-value block; False (nothing consumed) if any line is unusual."""
        positions = _POSITION_ALL.findall(m.group("positions"))
        if len(positions) != m.group("positions").count("\n"):
            return False
        uses_text = m.group("uses")
        if uses_text == "  (none)\n":
            uses: list = []
            self.features.add("uses_none")
        else:
            uses = _USE_ALL.findall(uses_text)
            if len(uses) != uses_text.count("\n"):
                return False
        header_line = lineno + 1
        self.last_line = lineno + m.group().count("\n")
        block = self._used_header(path, header_line, m.group("header"))
        block["positions"] = [(name, index or "{}") for name, index in positions]
        block["uses"] = [(name, int(op), index or "{}") for name, op, index in uses]
        self._from_instruction(path, self.last_line, m.group("instr"), block)
        self.block, self.block_state = block, "instr"
        glued = block.pop("glued", None)
        if glued:
            self.block, self.block_state = self._used_header(path, self.last_line, glued), "header"
        return True

    def _fast_run(self, path: str, lineno: int, run: str) -> bool:
        """A run of InstructionSequence or BufferLiveRange lines."""
        if self._lr_part == "seq":
            start = len(self.sequence)
            items = _SEQ_ALL.findall(run)
            for i, (pos, _name) in enumerate(items):
                if int(pos) != start + i:
                    return False  # the per-line path reports it
            self.sequence.extend(name for _, name in items)
        else:
            items = _BLR_ALL.findall(run)
            limit = self.schedule_length
            rows = []
            for i, (name, index, start, end) in enumerate(items, lineno + 1):
                s, e = int(start), int(end)
                if e < s or (limit is not None and e > limit):
                    return False
                rows.append((name, index, s, e, i))
            self.live.extend(rows)
        self.last_line = lineno + run.count("\n")
        return True

    def _line(self, path: str, lineno: int, line: str) -> None:
        """One line of the state machine; the state lives on self between lines."""
        state, state_cross, alloc = self.state, self.state_cross, self.alloc
        block, block_state = self.block, self.block_state
        try:
            state, state_cross, alloc, block, block_state = self._step(
                path, lineno, line, state, state_cross, alloc, block, block_state
            )
        finally:
            self.state, self.state_cross, self.alloc = state, state_cross, alloc
            self.block, self.block_state = block, block_state

    def _step(self, path, lineno, line, state, state_cross, alloc, block, block_state):
        """Handle one line given the state; returns the new state."""
        if state == "alloc":
            if line.startswith(" value: "):
                if alloc is None:
                    raise ParseError(path, lineno, "value line before any allocation header", line)
                self._value_line(path, lineno, line, alloc)
                return state, state_cross, alloc, block, block_state
            if line.startswith("allocation "):
                alloc = self._alloc_line(path, lineno, line)
                return state, state_cross, alloc, block, block_state
            if line.startswith("  ") and not line.startswith("  value: "):
                raise ParseError(
                    path,
                    lineno,
                    "value entries of XLA before 2019-09 (LogicalBuffer era, "
                    "'  name[index](#id) [offset,size]') are not supported",
                    line,
                )
            if line.startswith("  value: "):
                if alloc is None or state_cross is not alloc:
                    raise ParseError(
                        path,
                        lineno,
                        "a two-space '  value:' line must follow "
                        "' reused by buffers of a different color:'",
                        line,
                    )
                self._cross_line(path, lineno, line, alloc)
                return state, state_cross, alloc, block, block_state
            if line == " reused by buffers of a different color:":
                if alloc is None:
                    raise ParseError(path, lineno, "cross-color block before any allocation", line)
                state_cross = alloc
                self.features.add("cross_color")
                return state, state_cross, alloc, block, block_state
            if not line.strip():
                return state, state_cross, alloc, block, block_state
        if state == "used" and block is not None:
            if line.startswith("<"):
                if block_state == "header" or (
                    block_state != "instr" and "from_instruction" in self.features
                ):
                    raise ParseError(
                        path,
                        lineno,
                        f"used value {block['id']} ends before its ' from instruction:' line",
                        line,
                    )
                block = self._used_header(path, lineno, line)
                block_state = "header"
                return state, state_cross, alloc, block, block_state
            if not line:
                state = "between"
                return state, state_cross, alloc, block, block_state
            if block_state == "instr":
                if not line.startswith("HloLiveRange "):
                    # JSON configs may print raw newlines: continuation of the text.
                    block["text"] += "\n" + line
                    return state, state_cross, alloc, block, block_state
                state = "between"
            elif line == " positions:":
                block_state = "positions"
                return state, state_cross, alloc, block, block_state
            elif line == " uses:" or line == " uses are not initialized yet.":
                block_state = "uses"
                return state, state_cross, alloc, block, block_state
            elif line.startswith(" from instruction:"):
                self._from_instruction(path, lineno, line[len(" from instruction:") :], block)
                block_state = "instr"
                glued = block.pop("glued", None)
                if glued:
                    block = self._used_header(path, lineno, glued)
                    block_state = "header"
                return state, state_cross, alloc, block, block_state
            elif block_state == "positions":
                m = _POSITION.match(line)
                if not m:
                    raise ParseError(path, lineno, "expected a position '  NAME[ {index}]'", line)
                block["positions"].append((m.group(1), m.group(2) or "{}"))
                return state, state_cross, alloc, block, block_state
            elif block_state == "uses":
                if line == "  (none)":
                    self.features.add("uses_none")
                    return state, state_cross, alloc, block, block_state
                m = _USE.match(line)
                if not m:
                    raise ParseError(
                        path, lineno, "expected a use '  NAME, operand N[ {index}]'", line
                    )
                operand = _int(m.group(2), path, lineno, line, "operand")
                block["uses"].append((m.group(1), operand, m.group(3) or "{}"))
                return state, state_cross, alloc, block, block_state
            else:
                raise ParseError(
                    path,
                    lineno,
                    "expected ' positions:', ' uses:' or ' from instruction:' in a used value",
                    line,
                )
        if state == "lr":
            handled, self.trace_stack = self._live_range_line(path, lineno, line, self.trace_stack)
            if handled:
                return state, state_cross, alloc, block, block_state
        # Section headers, valid from any state.
        if line == "BufferAssignment:":
            if "allocations" in self.sections:
                raise ParseError(path, lineno, "a second 'BufferAssignment:' section", line)
            self._section("allocations")
            state, alloc, state_cross = "alloc", None, None
            return state, state_cross, alloc, block, block_state
        if line.startswith("Total bytes used:"):
            m = _TOTAL.match(line)
            if not m:
                raise ParseError(path, lineno, "expected 'Total bytes used: N (human)'", line)
            if self.total is not None:
                raise ParseError(path, lineno, "a second 'Total bytes used' line", line)
            self.total = _int(m.group(1), path, lineno, line, "total")
            self.total_line = (path, lineno)
            self.features.add("total_line")
            if m.group(2) is not None:
                self.features.add("total_human")
            self._section("totals")
            state = "between"
            return state, state_cross, alloc, block, block_state
        if line == "Used values:":
            self._section("used_values")
            self.used_path = path
            state, block, block_state = "used", None, ""
            return state, state_cross, alloc, block, block_state
        if state == "used" and block is None and line.startswith("<"):
            if not _VALUE_HEADER.match(line):
                raise ParseError(path, lineno, "expected a value header '<id name @color>'", line)
            block = self._used_header(path, lineno, line)
            block_state = "header"
            return state, state_cross, alloc, block, block_state
        if line.startswith("HloLiveRange (max "):
            m = _LR_HEADER.match(line)
            if not m:
                raise ParseError(path, lineno, "expected 'HloLiveRange (max N):'", line)
            if self.schedule_length is not None:
                raise ParseError(path, lineno, "a second HloLiveRange section", line)
            self.schedule_length = _int(m.group(1), path, lineno, line, "max")
            self._section("live_range")
            self.lr_path = path
            self.features.add("live_range")
            state, self._lr_part = "lr", "header"
            return state, state_cross, alloc, block, block_state
        if line.startswith(_LR_UNAVAILABLE):
            self.lr_unavailable = True
            self._section("live_range_unavailable")
            state = "between"
            return state, state_cross, alloc, block, block_state
        if not line.strip():
            return state, state_cross, alloc, block, block_state
        if state == "start":
            raise ParseError(
                path,
                lineno,
                "expected 'BufferAssignment:' (not a buffer-assignment dump?)",
                line,
            )
        raise ParseError(path, lineno, f"unexpected line in the {self._where(state)}", line)

    def end_file(self, path: str) -> None:
        state, block, block_state, last_line = (
            self.state,
            self.block,
            self.block_state,
            self.last_line,
        )
        if last_line == 0:
            raise ParseError(path, 0, "empty file")
        self.ends[path] = last_line
        if state == "start":
            raise ParseError(
                path, 1, "no 'BufferAssignment:' header (not a buffer-assignment dump?)"
            )
        if (
            state == "used"
            and block is not None
            and block_state != "instr"
            and ("from_instruction" in self.features)
        ):
            raise ParseError(
                path, last_line, f"file ends inside used value {block['id']} (truncated?)"
            )
        if state == "used" and block is None:
            raise ParseError(path, last_line, "file ends right after 'Used values:' (truncated?)")
        if state == "lr" and self._lr_part != "peak" and self._lr_part != "trace":
            raise ParseError(
                path,
                last_line,
                "HloLiveRange section ends before '  Live ranges at T (peak):' (truncated?)",
            )

    def _where(self, state: str) -> str:
        return {
            "alloc": "BufferAssignment section: expected 'allocation N: size S...:' or ' value: ...'",
            "used": "Used values section",
            "between": "dump between sections",
            "lr": "HloLiveRange section",
        }.get(state, "dump")

    def _alloc_line(self, path: str, lineno: int, line: str) -> _Alloc:
        m = _ALLOC.match(line)
        if not m:
            raise ParseError(path, lineno, "expected 'allocation N: size S[, attributes]:'", line)
        index = _int(m.group(1), path, lineno, line, "allocation index")
        size = _int(m.group(3), path, lineno, line, "size")
        if index in self.allocs:
            raise ParseError(path, lineno, f"duplicate allocation index {index}", line)
        flags = _alloc_attributes(path, lineno, line, m.group(4))
        if m.group(2):
            flags["address"] = m.group(2)
        alloc = _Alloc(index, size, int(flags.pop("color", 0)), lineno, flags)
        self.allocs[index] = alloc
        self.alloc_order.append(index)
        return alloc

    def _value_line(self, path: str, lineno: int, line: str, alloc: _Alloc) -> None:
        m = _VALUE_LINE.match(line)
        if not m:
            raise ParseError(
                path,
                lineno,
                "expected ' value: <id name[{index}][ (phi)][ @color]> (size=S,offset=O): SHAPE'",
                line,
            )
        vid = _int(m.group(1), path, lineno, line, "value id")
        if vid in self.values:
            raise ParseError(path, lineno, f"duplicate value id {vid}", line)
        size = _int(m.group(6), path, lineno, line, "size")
        offset = _int(m.group(7), path, lineno, line, "offset")
        if offset + size > alloc.size:
            raise ParseError(
                path,
                lineno,
                f"value occupies bytes {offset}..{offset + size} beyond allocation "
                f"{alloc.index} of size {alloc.size}",
                line,
            )
        self.features.add("value_lines")
        self.values[vid] = _Value(
            vid,
            m.group(2),
            m.group(3) or "{}",
            m.group(3) is not None,
            m.group(4) is not None,
            int(m.group(5)) if m.group(5) is not None else None,
            alloc.index,
            offset,
            size,
            m.group(8),
            lineno,
        )

    def _cross_line(self, path: str, lineno: int, line: str, alloc: _Alloc) -> None:
        m = _CROSS_LINE.match(line)
        if not m:
            raise ParseError(path, lineno, "expected '  value: <id name @color> (color=N)'", line)
        vid = int(m.group(1))
        value = self.values.get(vid)
        if value is None or value.allocation != alloc.index:
            raise ParseError(
                path,
                lineno,
                f"cross-color value {vid} is not listed in allocation {alloc.index}",
                line,
            )
        value.cross_color = True

    def _used_header(self, path: str, lineno: int, text: str) -> dict:
        m = _VALUE_HEADER.match(text)
        if not m:
            raise ParseError(path, lineno, "expected a value header '<id name @color>'", text)
        vid = int(m.group(1))
        if vid in self.used:
            raise ParseError(path, lineno, f"value {vid} listed twice in Used values", text)
        if vid < self._last_used:
            raise ParseError(path, lineno, f"Used values not sorted by id at value {vid}", text)
        value = self.values.get(vid)
        if value is None:
            raise ParseError(
                path, lineno, f"used value {vid} is not placed in any allocation", text
            )
        if value.instruction != m.group(2):
            raise ParseError(
                path,
                lineno,
                f"value {vid} is '{m.group(2)}' here but '{value.instruction}' in its allocation",
                text,
            )
        self._last_used = vid
        block = {"id": vid, "positions": [], "uses": [], "text": None, "line": lineno}
        self.used[vid] = block
        return block

    def _from_instruction(self, path: str, lineno: int, text: str, block: dict) -> None:
        """`text` is what follows ' from instruction:' on the line."""
        self.features.add("from_instruction")
        if text.startswith(" "):
            text = text[1:]
            self.features.add("from_instruction_space")
        m = _GLUED.search(text) if text.endswith(">") else None
        if m and text.startswith("%"):
            block["glued"] = m.group(1)
            text = text[: m.start()]
        block["text"] = text

    # -- HloLiveRange ---------------------------------------------------------
    def _live_range_line(
        self, path: str, lineno: int, line: str, trace_stack: list[int]
    ) -> tuple[bool, list[int]]:
        part = self._lr_part
        if line == "  InstructionSequence:":
            self._lr_part = "seq"
            return True, trace_stack
        if line == "  BufferLiveRange:":
            self._lr_part = "blr"
            return True, trace_stack
        if line.startswith("  Live ranges at "):
            m = _PEAK_HEADER.match(line)
            if not m:
                raise ParseError(path, lineno, "expected '  Live ranges at T (peak):'", line)
            self.peak_time = int(m.group(1))
            self._section("peak")
            self._lr_part = "peak"
            return True, trace_stack
        if line.startswith("  Stack trace breakdown for peak usage: "):
            m = _TRACE_HEADER.match(line)
            if not m:
                raise ParseError(
                    path, lineno, "expected 'Stack trace breakdown ...: N bytes'", line
                )
            self.trace_total = int(m.group(1).replace(" ", ""))
            self._section("stack_trace")
            self.features.add("stack_trace")
            self._lr_part = "trace"
            return True, []
        if not line:
            return True, trace_stack
        if part == "seq":
            m = _SEQ.match(line)
            if not m:
                raise ParseError(
                    path, lineno, "expected '    N:instruction' in InstructionSequence", line
                )
            pos = int(m.group(1))
            if pos != len(self.sequence):
                raise ParseError(
                    path,
                    lineno,
                    f"InstructionSequence step {pos}, expected {len(self.sequence)}",
                    line,
                )
            self.sequence.append(m.group(2))
            return True, trace_stack
        if part == "blr":
            m = _BLR.match(line)
            if not m:
                raise ParseError(
                    path, lineno, "expected '    name{index}:start-end' in BufferLiveRange", line
                )
            start, end = int(m.group(3)), int(m.group(4))
            if end < start:
                raise ParseError(
                    path, lineno, f"live range ends ({end}) before it starts ({start})", line
                )
            if self.schedule_length is not None and end > self.schedule_length:
                raise ParseError(
                    path,
                    lineno,
                    f"live range end {end} is past the schedule end {self.schedule_length}",
                    line,
                )
            self.live.append((m.group(1), m.group(2), start, end, lineno))
            return True, trace_stack
        if part == "peak":
            m = _PEAK.match(line)
            if not m:
                raise ParseError(
                    path,
                    lineno,
                    "expected '    name{index}: N bytes[ (cumulative: M bytes)]'",
                    line,
                )
            if m.group(2) is not None:
                self.features.add("peak_index")
            if m.group(4) is not None:
                self.features.add("peak_cumulative")
            self.peak.append(
                (
                    m.group(1),
                    m.group(2),
                    _int(m.group(3), path, lineno, line, "bytes"),
                    _int(m.group(4), path, lineno, line, "cumulative") if m.group(4) else None,
                    lineno,
                )
            )
            return True, trace_stack
        if part == "trace":
            m = _TRACE_LINE.match(line)
            if not m:
                raise ParseError(
                    path, lineno, "expected a stack-trace tree line '... (P%, total: ...)'", line
                )
            prefix = m.group(1)
            depth = (len(prefix) - 2) // 4
            if depth > len(trace_stack):
                raise ParseError(path, lineno, "stack-trace node deeper than its parent", line)
            trace_stack = trace_stack[:depth]
            ordinal = len(self.trace)
            parent = trace_stack[-1] if trace_stack else None
            self.trace.append(
                (
                    depth,
                    m.group(3),
                    float(m.group(4)),
                    int(m.group(5).replace(" ", "")),
                    int(m.group(6).replace(" ", "")),
                    int(m.group(7).replace(" ", "")),
                    -1 if parent is None else parent,
                )
            )
            trace_stack = [*trace_stack, ordinal]
            return True, trace_stack
        return False, trace_stack

    # -- memory-usage report ---------------------------------------------------
    def feed_report(self, path: str, lines: Iterable[tuple[int, str]]) -> None:
        space: tuple[str, int] | None = None
        for lineno, line in lines:
            if line.startswith("Total bytes used:") and not self.report:
                m = _TOTAL.match(line)
                if not m:
                    raise ParseError(path, lineno, "expected 'Total bytes used: N (human)'", line)
                self.report.append(("A", None, None, int(m.group(1))))
                return  # the rest of version A repeats the allocations
            if line.startswith("Memory Space: "):
                m = _REPORT_SPACE.match(line)
                if not m:
                    raise ParseError(path, lineno, "expected 'Memory Space: NAME (color=N)'", line)
                space = (m.group(1), int(m.group(2)))
                continue
            if line.startswith("Total bytes: "):
                m = _REPORT_TOTAL_B.match(line)
                if not m or space is None:
                    raise ParseError(
                        path, lineno, "expected 'Total bytes: N' after 'Memory Space: ...'", line
                    )
                self.report.append(("B", space[1], space[0], int(m.group(1))))
                space = None
        if not self.report:
            self.warnings.append(
                DumpError(
                    path,
                    0,
                    "memory-usage report without 'Total bytes used' or 'Memory Space' totals",
                )
            )


def _alloc_attributes(path: str, lineno: int, line: str, rest: str) -> dict[str, object]:
    """Parse `, color N, parameter N, shape |S| at ShapeIndex {i}, output shape is |S|, ...`."""
    flags: dict[str, object] = {}
    pos = 0
    n = len(rest)
    while pos < n:
        if not rest.startswith(", ", pos):
            raise ParseError(
                path,
                lineno,
                f"expected ', ' before an allocation attribute at column {len(line) - n + pos}"
                + (" (the size is not a whole number of bytes?)" if pos == 0 else ""),
                line,
            )
        pos += 2
        if rest.startswith("color ", pos):
            m = re.compile(r"color (\d+)").match(rest, pos)
            if not m:
                raise ParseError(path, lineno, "expected 'color N'", line)
            flags["color"] = int(m.group(1))
            pos = m.end()
        elif rest.startswith("parameter ", pos):
            m = re.compile(r"parameter (\d+)").match(rest, pos)
            if not m:
                raise ParseError(path, lineno, "expected 'parameter N'", line)
            flags["parameter_number"] = int(m.group(1))
            pos = m.end()
            if rest.startswith(", shape |", pos):
                end = rest.find("|", pos + 9)
                if end < 0:
                    raise ParseError(
                        path, lineno, "unterminated '|shape|' in a parameter attribute", line
                    )
                flags["parameter_shape"] = rest[pos + 9 : end]
                pos = end + 1
            m = re.compile(r" at ShapeIndex (\{[0-9,]*\})").match(rest, pos)
            if m:
                flags["parameter_shape_index"] = m.group(1)
                pos = m.end()
        elif rest.startswith("output shape is |", pos):
            end = rest.find("|", pos + 17)
            if end < 0:
                raise ParseError(path, lineno, "unterminated 'output shape is |...|'", line)
            flags["output_shape"] = rest[pos + 17 : end]
            pos = end + 1
        else:
            for word in ("constant", "thread-local", "maybe-live-out", "preallocated-temp"):
                if rest.startswith(word, pos) and (
                    pos + len(word) == n or rest.startswith(",", pos + len(word))
                ):
                    flags[word] = True
                    pos += len(word)
                    break
            else:
                raise ParseError(
                    path, lineno, f"unknown allocation attribute '{rest[pos:].split(',')[0][:60]}'", line
                )
    return flags


def _category(a: _Alloc) -> str:
    f = a.flags
    if "parameter_number" in f:
        return "parameter"
    if f.get("maybe-live-out"):
        return "output"
    if f.get("thread-local"):
        return "thread-local"
    if f.get("constant"):
        return "constant"
    return "temp"


def _is_temp(a: _Alloc) -> bool:
    f = a.flags
    return not (
        "parameter_number" in f
        or f.get("maybe-live-out")
        or f.get("thread-local")
        or f.get("constant")
    )


def parse_module(
    files: list[tuple[str, str]],
    hlo_path: str | None = None,
    *,
    accelerate: bool = True,
) -> ParsedModule:
    """Parse a module's files, given as (role, path).

    `accelerate=False` runs the plain per-line state machine; the tests run
    both paths over every fixture and require identical results.
    """
    read = read_lines
    p = _Parser()
    ba_path = next(path for role, path in files if role == "buffer_assignment")
    for role, path in files:
        if role == "usage_report":
            p.feed_report(path, read_lines(path))
            p._section("usage_report")
        elif accelerate:
            p.feed_blocks(path, read_blocks(path))
        else:
            p.feed(path, read_lines(path))
    if len(files) > 1 and any(r in ("values", "live_range") for r, _ in files):
        p.features.add("split")
    return _finish(p, ba_path, files, hlo_path, read)


def _finish(p: _Parser, ba_path: str, files, hlo_path, read) -> ParsedModule:
    out = ParsedModule()
    if "allocations" not in p.sections:
        raise ParseError(ba_path, 0, "no 'BufferAssignment:' section found")
    if not p.allocs:
        raise ParseError(
            ba_path, p.ends.get(ba_path, 0), "no allocation after 'BufferAssignment:' (truncated?)"
        )
    lr_path = p.lr_path or ba_path
    # Invariants that XLA's printer guarantees; a break means a cut or edited file.
    alloc_sum = sum(a.size for a in p.allocs.values())
    if p.total is not None and p.total != alloc_sum:
        path, line = p.total_line or (ba_path, 0)
        raise ParseError(
            path,
            line,
            f"'Total bytes used: {p.total}' but the allocations add up to {alloc_sum} "
            "(allocations missing or file edited?)",
        )
    used_path = p.used_path or ba_path
    if p.used:
        missing = [vid for vid in p.values if vid not in p.used]
        if missing:
            raise ParseError(
                used_path,
                0,
                f"{len(missing)} placed values have no Used values block (first: value {missing[0]}); "
                "file truncated?",
            )
        for block in p.used.values():
            if block["text"] is None and "from_instruction" in p.features:
                raise ParseError(
                    used_path,
                    block["line"],
                    f"used value {block['id']} has no ' from instruction:' line",
                )
    split = "split" in p.features
    if not split and p.total is not None and "used_values" not in p.sections:
        raise ParseError(
            ba_path, 0, "file ends after 'Total bytes used' without 'Used values:' (truncated?)"
        )
    if "used_values" not in p.sections:
        where = p.total_line[0] if p.total_line else ba_path
        raise ParseError(
            where,
            p.ends.get(where, 0),
            "no 'Used values:' section: the file ends in the BufferAssignment section "
            "(truncated?), or the -buffer-assignment-values.txt of a split (2026-04+) dump "
            "is missing",
        )
    if not split and "from_instruction" in p.features and "live_range" not in p.sections:
        raise ParseError(ba_path, 0, "no HloLiveRange section after Used values (truncated?)")
    if p.schedule_length is not None and len(p.sequence) != p.schedule_length:
        raise ParseError(
            lr_path,
            0,
            f"InstructionSequence has {len(p.sequence)} steps but 'HloLiveRange (max {p.schedule_length})' "
            "(file truncated?)",
        )
    # Resolve live ranges to values by (name, index).
    by_key = {(v.instruction, v.index): v.value_id for v in p.values.values()}
    live_by_key: dict[tuple[str, str], tuple[int, int]] = {}
    live_rows = []
    for name, index, start, end, _line in p.live:
        vid = by_key.get((name, index))
        live_by_key[(name, index)] = (start, end)
        live_rows.append((vid, name, index, start, end))
    # Peak list: names must be live values; the list must be complete.
    peak_rows = []
    running = 0
    for ordinal, (name, index, nbytes, cumulative, line) in enumerate(p.peak):
        key = (name, index if index is not None else "{}")
        if index is not None and key not in live_by_key:
            raise ParseError(
                lr_path, line, f"peak list names {name}{index}, which has no BufferLiveRange entry"
            )
        if index is None and not any(k[0] == name for k in live_by_key):
            raise ParseError(
                lr_path, line, f"peak list names {name}, which has no BufferLiveRange entry"
            )
        running += nbytes
        if cumulative is not None and cumulative != running:
            raise ParseError(
                lr_path, line, f"cumulative {cumulative} bytes, but the running sum is {running}"
            )
        peak_rows.append((ordinal, name, index, by_key.get(key), nbytes, cumulative))
    if p.peak_time is not None and "peak_index" in p.features:
        live_at_peak = sum(1 for s, e in live_by_key.values() if s <= p.peak_time <= e)
        if live_at_peak != len(p.peak):
            raise ParseError(
                lr_path,
                p.peak[-1][4] if p.peak else p.ends.get(lr_path, 0),
                f"peak list at {p.peak_time} has {len(p.peak)} entries but {live_at_peak} values are live "
                "then per BufferLiveRange (file truncated?)",
            )
    if p.trace and p.trace[-1][5] != 0:
        raise ParseError(
            lr_path,
            p.ends.get(lr_path, 0),
            "stack-trace breakdown does not end with 'remaining: 0 bytes' (truncated?)",
        )

    # Instructions: parse each distinct text once.
    frames: dict[int, hlo.SourceLocation] = {}
    instr_rows = []
    texts: dict[str, str] = {}
    for vid in sorted(p.used):
        block = p.used[vid]
        name = p.values[vid].instruction
        if block["text"] is not None and name not in texts:
            texts[name] = block["text"]
    parsed_instr: dict[str, hlo.Instruction | None] = {}
    for name, text in texts.items():
        try:
            parsed_instr[name] = hlo.parse_instruction(text)
        except hlo.InstructionSyntaxError as exc:
            parsed_instr[name] = None
            out.warnings.append(
                DumpError(
                    used_path,
                    p.used[_first_value(p, name)]["line"],
                    f"instruction text not understood: {exc}",
                )
            )
    if hlo_path and any(
        i is not None and i.stack_frame_id is not None for i in parsed_instr.values()
    ):
        try:
            frames = hlo.parse_stack_frames(line for _, line in read(hlo_path))
            p._section("hlo")
        except DumpError as exc:
            out.warnings.append(exc)
    for name, text in texts.items():
        ins = parsed_instr[name]
        if ins is None:
            instr_rows.append(
                (
                    name,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    text,
                )
            )
            continue
        src_file, src_line, src_func = ins.source_file, ins.source_line, None
        if ins.stack_frame_id is not None and src_file is None:
            loc = frames.get(ins.stack_frame_id)
            if loc is not None:
                src_file, src_line, src_func = loc.file, loc.line, loc.function
        instr_rows.append(
            (
                name,
                ins.opcode,
                ins.shape,
                list(ins.operands),
                ins.parameter_number,
                ins.fusion_kind,
                list(ins.called),
                ins.custom_call_target,
                ins.op_name,
                ins.op_type,
                src_file,
                src_line,
                src_func,
                ins.stack_frame_id,
                text,
            )
        )

    # Allocation and value rows.
    alloc_rows = []
    for idx in p.alloc_order:
        a = p.allocs[idx]
        f = a.flags
        alloc_rows.append(
            (
                a.index,
                a.size,
                a.color,
                f.get("parameter_number"),
                f.get("parameter_shape"),
                f.get("parameter_shape_index"),
                f.get("output_shape"),
                "parameter_number" in f,
                bool(f.get("constant")),
                bool(f.get("thread-local")),
                bool(f.get("maybe-live-out")),
                bool(f.get("preallocated-temp")),
                _category(a),
                f.get("address"),
                a.line,
            )
        )
        if f.get("preallocated-temp") and not _is_temp(a):
            raise ParseError(
                ba_path,
                a.line,
                "'preallocated-temp' together with parameter/output/constant/thread-local",
            )
    if p.alloc_order != list(range(len(p.alloc_order))):
        out.warnings.append(
            DumpError(ba_path, 0, "allocation indices are not 0..n-1 in file order")
        )

    value_rows = []
    assign_rows = []
    for vid in sorted(p.values):
        v = p.values[vid]
        try:
            shape = shapes.parse_shape(v.shape)
            logical = shapes.byte_size(shape)
            value_rows.append(
                (
                    vid,
                    v.instruction,
                    v.index,
                    v.is_phi,
                    v.color,
                    v.shape,
                    shape.element_type,
                    list(shape.dims) if not shape.is_tuple else None,
                    any(shape.dynamic) if not shape.is_tuple else False,
                    list(shape.minor_to_major) if shape.minor_to_major is not None else None,
                    shape.tiles,
                    shape.memory_space,
                    logical,
                    shape.is_tuple,
                    v.line,
                )
            )
        except shapes.ShapeSyntaxError as exc:
            raise ParseError(
                ba_path, v.line, f"value shape not understood: {exc}", v.shape
            ) from None
        assign_rows.append((vid, v.allocation, v.offset, v.size, v.cross_color))

    pos_rows, use_rows = [], []
    for vid in sorted(p.used):
        block = p.used[vid]
        for i, (name, index) in enumerate(block["positions"]):
            pos_rows.append((vid, i, name, index))
        for i, (name, operand, index) in enumerate(block["uses"]):
            use_rows.append((vid, i, name, operand, index))

    seq_rows = list(enumerate(p.sequence))
    trace_rows = [
        (i, depth, None if parent < 0 else parent, name, pct, total, current, remaining)
        for i, (depth, name, pct, total, current, remaining, parent) in enumerate(p.trace)
    ]
    report_rows = list(p.report)
    heap_rows, alloc_live = _heap_peaks(p)
    alloc_rows = [(*row, alloc_live.get(row[0])) for row in alloc_rows]

    out.rows = {
        "allocations": alloc_rows,
        "hlo_values": value_rows,
        "assignments": assign_rows,
        "positions": pos_rows,
        "uses": use_rows,
        "instructions": instr_rows,
        "sequence": seq_rows,
        "live_ranges": live_rows,
        "peak_values": peak_rows,
        "stack_trace": trace_rows,
        "usage_report": report_rows,
        "heap_peaks": heap_rows,
    }
    out.sections = p.sections
    out.features = p.features
    out.warnings.extend(p.warnings)
    logical_peak = None
    if p.peak:
        last_cum = p.peak[-1][3]
        logical_peak = last_cum if last_cum is not None else sum(r[2] for r in p.peak)
    elif p.peak_time is not None:
        logical_peak = 0
    heap0 = next((r[5] for r in heap_rows if r[0] == 0), None)
    out.facts = {
        "total_bytes": p.total,
        "allocation_count": len(p.allocs),
        "value_count": len(p.values),
        "schedule_length": p.schedule_length,
        "logical_peak_time": p.peak_time,
        "logical_peak_bytes": logical_peak,
        "heap_peak_bytes": heap0,
        "format_era": max((ERA_FEATURES[f] for f in p.features if f in ERA_FEATURES), default=None),
        "layout": "split" if "split" in p.features else "combined",
        "tiled": any(r[10] is not None for r in value_rows),
        "has_address": any(r[13] is not None for r in alloc_rows),
    }
    return out


def _first_value(p: _Parser, name: str) -> int:
    return next(vid for vid in sorted(p.used) if p.values[vid].instruction == name)


def _heap_peaks(p: _Parser) -> tuple[list[tuple], dict[int, int | None]]:
    """Per color: indefinite bytes + max temp bytes in use at once.

    Bytes in use in a temp allocation at step t = the measure of the union of
    the byte ranges [offset, offset+size) of its values live at t (both ends
    inclusive). Aliases share a range and are counted once; values whose
    ranges the heap simulator overlapped only touch in time and are also
    counted once. Also returns each temp allocation's own maximum.
    """
    has_live = bool(p.live) or (p.schedule_length is not None)
    live_by_value: dict[int, tuple[int, int]] = {}
    by_key = {(v.instruction, v.index): v.value_id for v in p.values.values()}
    for name, index, start, end, _ in p.live:
        vid = by_key.get((name, index))
        if vid is not None:
            live_by_value[vid] = (start, end)
    colors: dict[int, dict[str, int]] = {}
    temps_by_color: dict[int, list[int]] = {}
    for idx in p.alloc_order:
        a = p.allocs[idx]
        c = colors.setdefault(a.color, {"total": 0, "indefinite": 0, "temp": 0})
        c["total"] += a.size
        if _is_temp(a):
            c["temp"] += a.size
            temps_by_color.setdefault(a.color, []).append(idx)
        else:
            c["indefinite"] += a.size
    values_by_alloc: dict[int, list[_Value]] = {}
    for v in p.values.values():
        values_by_alloc.setdefault(v.allocation, []).append(v)
    alloc_max: dict[int, int | None] = {}
    rows = []
    end_of_time = p.schedule_length if p.schedule_length is not None else 0
    for color in sorted(colors):
        c = colors[color]
        if not has_live and temps_by_color.get(color):
            for idx in temps_by_color[color]:
                alloc_max[idx] = None
            rows.append((color, c["total"], c["indefinite"], c["temp"], None, None, None))
            continue
        # events: time -> list of (alloc, interval, +1/-1)
        events: dict[int, list[tuple[int, tuple[int, int], int]]] = {}
        for idx in temps_by_color.get(color, []):
            alloc_max[idx] = 0
            for v in values_by_alloc.get(idx, []):
                if v.size == 0:
                    continue
                start, end = live_by_value.get(v.value_id, (0, end_of_time))
                iv = (v.offset, v.offset + v.size)
                events.setdefault(start, []).append((idx, iv, 1))
                events.setdefault(end + 1, []).append((idx, iv, -1))
        active: dict[int, dict[tuple[int, int], int]] = {}
        in_use: dict[int, int] = {}
        best, best_t, current = 0, 0 if events else None, 0
        for t in sorted(events):
            touched = set()
            added = False
            for idx, iv, delta in events[t]:
                bucket = active.setdefault(idx, {})
                n = bucket.get(iv, 0) + delta
                if n:
                    bucket[iv] = n
                else:
                    bucket.pop(iv, None)
                touched.add(idx)
                added |= delta > 0
            for idx in touched:
                current -= in_use.get(idx, 0)
                in_use[idx] = _union_length(active[idx])
                current += in_use[idx]
                if in_use[idx] > (alloc_max.get(idx) or 0):
                    alloc_max[idx] = in_use[idx]
            if current > best:
                best, best_t = current, t
        rows.append(
            (color, c["total"], c["indefinite"], c["temp"], best, c["indefinite"] + best, best_t)
        )
    return rows, alloc_max


def _union_length(intervals: dict[tuple[int, int], int]) -> int:
    total = 0
    cur_start = cur_end = -1
    for start, end in sorted(intervals):
        if start > cur_end:
            total += cur_end - cur_start
            cur_start, cur_end = start, end
        elif end > cur_end:
            cur_end = end
    total += cur_end - cur_start
    return total


def read_numbered(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    """Number lines from 1 (for tests and in-memory text)."""
    yield from enumerate(lines, 1)
