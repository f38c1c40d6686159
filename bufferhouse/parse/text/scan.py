"""Read one module's dump files line by line: the reference scanner.

A line-driven state machine over exact line prefixes (format.md §12). The
buffer-assignment file, its `-values` and `-live-range` siblings (split era)
and the memory-usage report all feed the same machine, so the combined and the
split layout parse alike. Anything that breaks the grammar or an invariant
that XLA's printing code guarantees raises ParseError with file and line;
nothing is half-kept. `scanned()` hands the result to finish.py as columns.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa

from bufferhouse.errors import DumpError, ParseError
from bufferhouse.parse import model
from bufferhouse.parse.model import Alloc as _Alloc

INT64_MAX = (1 << 63) - 1

_ALLOC = re.compile(r"allocation (\d+): (?:(0x[0-9a-fA-F]+), )?size (\d+)(.*):$")
_VALUE_SHORT = r"<(\d+) ([^ {}<>]+)(\{[0-9,]*\})?( \(phi\))?(?: @(\d+))?>"
_VALUE_LINE = re.compile(r" value: " + _VALUE_SHORT + r" \(size=(\d+),offset=(\d+)\): (.*)$")
_CROSS_LINE = re.compile(r"  value: " + _VALUE_SHORT + r" \(color=(\d+)\)$")
_VALUE_HEADER = re.compile(_VALUE_SHORT + "$")
#: The next value's header glued to the end of a from instruction text (2024-01-16 …
#: 2024-11-01, when XLA printed no newline after the text); vector.py reads it too.
GLUED_HEADER = r"<\d+ [A-Za-z_][A-Za-z0-9_.\-]*(?:\{[0-9,]*\})?(?: \(phi\))?(?: @\d+)?>"
_GLUED = re.compile(f"({GLUED_HEADER})$")
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
_REPORT_SPACE = re.compile(r"Memory Space: (.*) \(color=(\d+)\)$")
_REPORT_TOTAL_B = re.compile(r"Total bytes: (\d+)(?: \(([^)]*)\))?$")
_LR_UNAVAILABLE = "HloLiveRange not available"


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

    def scanned(self, ba_path: str, **columns: object) -> model.Scanned:
        """Everything read, with the per-value facts as columns (see model.Scanned).

        `columns` are ones another scanner read instead of this machine (vector.py).
        """
        if "allocs" not in columns:
            rows = [model.alloc_row(self.allocs[i]) for i in self.alloc_order]
            columns["allocs"] = _columns(model.ALLOCS, list(zip(*rows)) if rows else None)
        if "values" not in columns:
            columns["values"] = self._value_columns()
        if "used" not in columns:
            columns.update(self._used_columns())
        if "sequence" not in columns:
            columns["sequence"] = pa.array(self.sequence, pa.string())
        if "live" not in columns:
            columns["live"] = _columns(
                model.LIVE, [list(c) for c in zip(*self.live)] if self.live else None
            )
        # As Arrow columns: a large module's peak list takes tens of MB as Python tuples.
        peak = _columns(model.PEAK, list(zip(*self.peak)) if self.peak else None)
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
            peak_time=self.peak_time,
            peak=peak,
            trace=self.trace,
            report=self.report,
            **columns,  # type: ignore[arg-type]
        )

    def _value_columns(self) -> pa.Table:
        vals = list(self.values.values())
        return _columns(
            model.VALUES,
            [
                [v.value_id for v in vals],
                [v.instruction for v in vals],
                [v.index for v in vals],
                [v.is_phi for v in vals],
                [v.color for v in vals],
                [v.allocation for v in vals],
                [v.offset for v in vals],
                [v.size for v in vals],
                [v.shape for v in vals],
                [v.line for v in vals],
                [v.cross_color for v in vals],
            ],
        )

    def _used_columns(self) -> dict[str, pa.Table]:
        blocks = list(self.used.values())
        positions = [
            (b["id"], i, name, index)
            for b in blocks
            for i, (name, index) in enumerate(b["positions"])
        ]
        uses = [
            (b["id"], i, name, operand, index)
            for b in blocks
            for i, (name, operand, index) in enumerate(b["uses"])
        ]
        return {
            "used": _columns(
                model.USED,
                [
                    [b["id"] for b in blocks],
                    [b["line"] for b in blocks],
                    [b["text"] for b in blocks],
                ],
            ),
            "positions": _columns(model.POSITIONS, list(zip(*positions)) if positions else None),
            "uses": _columns(model.USES, list(zip(*uses)) if uses else None),
        }

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
        """Parse one file line by line."""
        self.begin_file()
        for lineno, line in lines:
            self.last_line = lineno
            self._line(path, lineno, line)
        self.end_file(path)

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
                    path,
                    lineno,
                    f"unknown allocation attribute '{rest[pos:].split(',')[0][:60]}'",
                    line,
                )
    return flags


def _columns(schema: pa.Schema, columns: list | None) -> pa.Table:
    if columns is None:
        return schema.empty_table()
    return pa.Table.from_arrays(
        [pa.array(c, f.type) for f, c in zip(schema, columns)], schema=schema
    )
