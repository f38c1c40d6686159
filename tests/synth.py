"""Tile real dumps into one large, consistent module for benchmarks.

    python tests/synth.py OUT_DIR --mb 500 [--format combined|split|stacktrace]
                          [--seed SUBSTRING ...] [--name jit_synth] [--number 0]

The seeds are the committed test dumps (tests/data/corpus, tests/data/samples):
`combined` tiles jax-0.6.2 (one -buffer-assignment.txt with Used values and
HloLiveRange), `stacktrace` jax-0.7.2 (the same plus the "Stack trace breakdown"),
`split` jax-0.10.2 (-buffer-assignment.txt, -values, -live-range), each with its
memory-usage report. `--seed` picks seeds by substring of their path (repeatable;
`--seed samples/003` works too); by default every usable seed of the format is
used in turn.

Copy k of a seed becomes part of ONE module: every instruction and computation
name gets the suffix `.t<k>` (copy 0 keeps its names), value ids, allocation
indices, entry-parameter numbers, stack-frame ids and sequence positions are
shifted past the previous copies, and the copies run one after the other in
the schedule. Live ranges that end at the seed's `max` (entry parameters and
live-out values) end at the new `max`. Non-temp allocations come first and the
preallocated temps form the suffix, as XLA prints them; only the first copy
keeps `output shape is |...|`, so the module has one output allocation.

Everything that XLA derives from the whole module is recomputed rather than
copied: `Total bytes used`, `HloLiveRange (max N)`, the peak time (the first
time the add-before-remove sweep over the live ranges, with the defining
instruction's full shape size, is greatest: HloLiveRange::ComputePeakMemoryMoment),
the peak list (bytes of the value's own shape, sorted by bytes desc, name, index,
with cumulative sums), the stack-trace breakdown tree (instruction -> its
computation -> the callers of that computation, from the seed's optimized HLO
file) and the memory-usage report (version A: allocations sorted by size with
the k=50 / 5% cut, then every allocation with its table; version B: per
memory space). A seed is only used if rendering it once reproduces its own
files byte for byte, which checks all of the above against what XLA printed.

The output is written copy by copy (a few MB in memory at a time), beside a
minimal `<stem>.txt` HLO file holding the seeds' stack-frame tables (all the
ingest reads from it). MB here is 10**6 bytes.
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bufferhouse.parse import shapes
from tests.conftest import DATA

FORMATS = {
    "combined": "jax-0.6.2",
    "stacktrace": "jax-0.7.2",
    "split": "jax-0.10.2",
}
_ROLES = (
    ("-buffer-assignment-values.txt", "values"),
    ("-buffer-assignment.txt", "buffer_assignment"),
    ("-live-range.txt", "live_range"),
    ("-memory-usage-report.txt", "usage_report"),
)

_NAME = r"[A-Za-z_][A-Za-z0-9_.\-]*"
_ALLOC = re.compile(r"allocation (\d+): size (\d+)(.*):$")
_PARAM_ATTR = re.compile(r", parameter (\d+)")
_OUTPUT_ATTR = re.compile(r", output shape is \|[^|]*\|")
_COLOR_ATTR = re.compile(r", color (\d+)")
_VALUE = re.compile(r"( {1,2}value: <)(\d+) ([^ {}<>]+)(\{[0-9,]*\})?(.*)$")
_VALUE_SHAPE = re.compile(r"\(size=(\d+),offset=(\d+)\): (.*)$")
_HEADER = re.compile(r"<(\d+) ([^ {}<>]+)(\{[0-9,]*\})?(.*)>$")
_USE = re.compile(r"  ([^ ,{}]+)(, operand \d+(?: \{[0-9,]*\})?)$")
_POSITION = re.compile(r"  ([^ ,{}]+)((?: \{[0-9,]*\})?)$")
_TEXT_TOKEN = re.compile(
    r"%(" + _NAME + r")|(?<= parameter\()(\d+)(?=\))|(?<=stack_frame_id=)(\d+)"
)
_SEQ = re.compile(r"    (\d+):(\S+)$")
_BLR = re.compile(r"    ([^ {}:]+)(\{[0-9,]*\}):(\d+)-(\d+)$")
_PEAK = re.compile(r"    ([^ {}:]+)(\{[0-9,]*\}): (\d+) bytes \(cumulative: (\d+) bytes\)$")
_OP_NAME = re.compile(r'op_name="((?:[^"\\]|\\.)*)"')
_HLO_COMP = re.compile(r"(ENTRY )?%(" + _NAME + r") .*\{$")
_HLO_INSTR = re.compile(r"  (?:ROOT )?%(" + _NAME + r") = (.*)$")
_SUFFIXED = re.compile(r"\.t\d+$")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"'}
FRAME_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")


class SeedError(ValueError):
    """A seed that cannot be tiled faithfully (it is skipped)."""


# -- XLA's number formats ------------------------------------------------------
def human(n: int) -> str:
    """tsl::strings::HumanReadableNumBytes."""
    if n < 0:
        return "-" + human(-n)
    if n < 1024:
        return f"{n}B"
    units, unit = "KMGTPE", 0
    while n >= 1024 * 1024:
        n //= 1024
        unit += 1
    digits = 1 if unit == 0 else 2
    return f"{n / 1024.0:.{digits}f}{units[unit]}iB"


def spaced(n: int) -> str:
    """FormatBytesWithSpaces: 1619208 -> '1 619 208'."""
    s = str(n)
    head = len(s) % 3 or 3
    return " ".join([s[:head]] + [s[i : i + 3] for i in range(head, len(s), 3)])


def _pct(part: int, total: int) -> str:
    return f"{100.0 * part / total:3.0f}" if total else "-nan"  # 0/0 on x86


def _unescape(text: str) -> str:
    """absl::CUnescape of a metadata string (enough for op_name)."""
    if "\\" not in text:
        return text
    out, i = bytearray(), 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            m = re.match(r"[0-7]{1,3}", text[i + 1 : i + 4])
            if m:
                out.append(int(m.group(), 8) & 0xFF)
                i += 1 + m.end()
                continue
            out += _ESCAPES.get(text[i + 1], text[i + 1]).encode()
            i += 2
            continue
        out += c.encode()
        i += 1
    return out.decode("utf-8", "replace")


def split_params(label: str) -> list[str]:
    """SplitParamsString: "params['a/b'].attr" -> ['params', 'a', 'b', 'attr']."""
    m = re.match(r"[a-zA-Z_]\w*", label, re.ASCII)
    if not m:
        return [label]
    parts, pos, has_keys = [m.group()], m.end(), False
    while True:
        key = re.compile(r"\['([^']+)'\]").match(label, pos)
        if key:
            has_keys = True
            parts.extend(key.group(1).split("/"))
            pos = key.end()
            continue
        attr = re.compile(r"\.(\w+)", re.ASCII).match(label, pos)
        if attr:
            parts.append(attr.group(1))
            pos = attr.end()
            continue
        break
    return parts if pos == len(label) and has_keys else [label]


def _index_key(index: str) -> tuple[int, ...]:
    inner = index[1:-1]
    return tuple(int(x) for x in inner.split(",")) if inner else ()


# -- templates ----------------------------------------------------------------
# Hole kinds, rendered per copy: N name (+suffix), V value id, A allocation index,
# P entry-parameter number, T time, E live-range end, F stack-frame id, O output attr.
KINDS = "NVAPTEFO"


class _Template:
    """Seed text with holes; one str.format call renders a whole copy."""

    def __init__(self, keys: dict[str, dict]) -> None:
        self.parts: list[str | tuple[str, object]] = []
        self.keys = keys

    def lit(self, text: str) -> None:
        self.parts.append(text)

    def hole(self, kind: str, key: object) -> None:
        slots = self.keys[kind]
        if key not in slots:
            slots[key] = len(slots)
        self.parts.append((kind, key))

    def compile(self, offsets: dict[str, int]) -> str:
        out = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part.replace("{", "{{").replace("}", "}}"))
            else:
                kind, key = part
                out.append(f"{{{offsets[kind] + self.keys[kind][key]}}}")
        return "".join(out)


@dataclass
class _Alloc:
    pos: int  # position in the seed file
    index: int
    size: int
    color: int
    temp: bool
    n_values: int = 0
    header: str = ""  # the seed's header line
    report_fmt: str = ""  # format string: {0} index, {1} param, {2} output attr, {3} size


@dataclass
class _Live:
    name: str
    index: str
    start: int
    end: int
    instr_bytes: int
    value_bytes: int | None
    traces: list[list[tuple[str, str]]] = field(default_factory=list)


@dataclass
class Seed:
    """One committed module, parsed once into per-copy templates and peak facts."""

    id: str
    layout: str  # combined | split
    files: dict[str, str]  # role -> text
    hlo: str | None
    stem: str
    allocs: list[_Alloc] = field(default_factory=list)
    n_prefix: int = 0  # allocations before the trailing run of temps
    total: int = 0
    max_vid: int = -1
    n_params: int = 0
    schedule: int = 0
    peak_time: int = 0
    peak_lines: list[str] = field(default_factory=list)
    trace_lines: list[str] | None = None
    report: str | None = None
    live: list[_Live] = field(default_factory=list)
    entry: str | None = None
    frame_tables: dict[str, list[tuple[int, str]]] = field(default_factory=dict)
    hlo_header: str | None = None
    keys: dict[str, dict] = field(default_factory=lambda: {k: {} for k in KINDS})
    sections: dict[str, _Template] = field(default_factory=dict)
    compiled: dict[str, str] = field(default_factory=dict)
    output_attrs: list[str] = field(default_factory=list)
    # peak sweep facts
    a0: int = 0
    best_rest: int = 0
    best_rest_t: int = 0
    long_bytes: int = 0
    carry: int = 0
    base_bytes: int = 0  # literal text and names of one copy, report included
    holes: dict[str, tuple[int, int]] = field(default_factory=dict)  # kind -> (count, max key)
    report_tails: dict[int, str] = field(default_factory=dict)  # A: alloc pos -> tail
    report_b: dict[int, list[str]] = field(default_factory=dict)  # B: color -> tables
    space_names: dict[int, str] = field(default_factory=dict)


def _read(path: Path) -> str:
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
            return f.read()
    return path.read_text(encoding="utf-8")


def find_seeds(fmt: str) -> list[Path]:
    """Buffer-assignment files of every committed module of a format, sorted."""
    root = DATA / "corpus" / FORMATS[fmt]
    return sorted(root.glob("*/*-buffer-assignment.txt.gz"))


def sample_seeds() -> list[Path]:
    return sorted((DATA / "samples").glob("*.txt"))


def load_seed(ba_path: Path) -> Seed:
    """Parse a seed module given its buffer-assignment file (siblings found by stem)."""
    name = ba_path.name
    base = name[:-3] if name.endswith(".gz") else name
    if base.endswith("-buffer-assignment.txt"):
        stem = base[: -len("-buffer-assignment.txt")]
    else:
        stem = base[: -len(".txt")]
    files: dict[str, str] = {"buffer_assignment": _read(ba_path)}
    for suffix, role in _ROLES:
        if role == "buffer_assignment":
            continue
        for cand in (stem + suffix, stem + suffix + ".gz"):
            p = ba_path.parent / cand
            if p.exists():
                files[role] = _read(p)
    hlo = None
    if base.endswith("-buffer-assignment.txt"):
        for cand in (stem + ".txt", stem + ".txt.gz"):
            p = ba_path.parent / cand
            if p.exists():
                hlo = _read(p)
    rel = os.path.relpath(ba_path, DATA)
    layout = "split" if "values" in files or "live_range" in files else "combined"
    seed = Seed(rel, layout, files, hlo, stem)
    _parse(seed)
    return seed


def _parse(seed: Seed) -> None:
    if seed.layout == "split":
        lines = seed.files["buffer_assignment"].split("\n")
        lines += seed.files.get("values", "").split("\n")
        lines += seed.files.get("live_range", "").split("\n")
    else:
        lines = seed.files["buffer_assignment"].split("\n")
    keys = seed.keys
    prefix, temp, used, seq, blr = (_Template(keys) for _ in range(5))
    seed.sections = {"prefix": prefix, "temp": temp, "used": used, "seq": seq, "blr": blr}
    alloc_lines: list[tuple[_Alloc, list[str]]] = []
    values: dict[tuple[str, str], str] = {}  # (name, index) -> value shape
    texts: dict[str, str] = {}  # instruction name -> text
    entry_params: set[str] = set()
    param_allocs: dict[int, int] = {}
    state = "start"
    lr_part = ""
    trace: list[str] | None = None
    used_lines: list[str] = []
    for line in lines:
        if line == "BufferAssignment:":
            state = "alloc"
            continue
        if state == "alloc":
            m = _ALLOC.match(line)
            if m:
                rest = m.group(3)
                c = _COLOR_ATTR.match(rest)
                temp_flag = rest.endswith(", preallocated-temp")
                a = _Alloc(
                    len(alloc_lines),
                    int(m.group(1)),
                    int(m.group(2)),
                    int(c.group(1)) if c else 0,
                    temp_flag,
                    header=line,
                )
                p = _PARAM_ATTR.search(rest)
                if p:
                    param_allocs[a.pos] = int(p.group(1))
                alloc_lines.append((a, []))
                continue
            m = _VALUE.match(line)
            if m and alloc_lines:
                alloc_lines[-1][1].append(line)
                if line.startswith(" value:"):
                    alloc_lines[-1][0].n_values += 1
                    shape = _VALUE_SHAPE.search(m.group(5))
                    if shape is None:
                        raise SeedError(f"value line not understood: {line}")
                    values[(m.group(3), m.group(4) or "{}")] = shape.group(3)
                    if alloc_lines[-1][0].pos in param_allocs:
                        entry_params.add(m.group(3))
                continue
            if line == " reused by buffers of a different color:":
                alloc_lines[-1][1].append(line)
                continue
            if not line:
                continue
            if not line.startswith("Total bytes used: "):
                raise SeedError(f"unexpected line in allocations: {line}")
            state = "between"
        if line.startswith("Total bytes used: "):
            seed.total = int(line.split()[3])
            continue
        if line == "Used values:":
            state = "used"
            continue
        if line.startswith("HloLiveRange (max "):
            seed.schedule = int(line[len("HloLiveRange (max ") : -2])
            state, lr_part = "lr", "header"
            continue
        if state == "used":
            used_lines.append(line)
            continue
        if state == "lr":
            if line == "  InstructionSequence:":
                lr_part = "seq"
            elif line == "  BufferLiveRange:":
                lr_part = "blr"
            elif line.startswith("  Live ranges at "):
                seed.peak_time = int(line.split()[3])
                lr_part = "peak"
            elif line.startswith("  Stack trace breakdown for peak usage: "):
                trace = [line]
                lr_part = "trace"
            elif not line:
                continue
            elif lr_part == "seq":
                m = _SEQ.match(line)
                if not m:
                    raise SeedError(f"sequence line not understood: {line}")
                seq.lit("    ")
                seq.hole("T", int(m.group(1)))
                seq.lit(":")
                seq.hole("N", m.group(2))
                seq.lit("\n")
            elif lr_part == "blr":
                m = _BLR.match(line)
                if not m:
                    raise SeedError(f"live range not understood: {line}")
                start, end = int(m.group(3)), int(m.group(4))
                blr.lit("    ")
                blr.hole("N", m.group(1))
                blr.lit(m.group(2) + ":")
                blr.hole("T", start)
                blr.lit("-")
                blr.hole("E", end)
                blr.lit("\n")
                seed.live.append(_Live(m.group(1), m.group(2), start, end, 0, None))
            elif lr_part == "peak":
                seed.peak_lines.append(line)
            elif lr_part == "trace" and trace is not None:
                trace.append(line)
            else:
                raise SeedError(f"unexpected line in HloLiveRange: {line}")
            continue
        if line.strip():
            raise SeedError(f"unexpected line: {line}")
    seed.trace_lines = trace
    if not alloc_lines or not seed.live or seed.schedule < 2:
        raise SeedError("no allocations or a schedule shorter than 2 steps")
    if [a.index for a, _ in alloc_lines] != list(range(len(alloc_lines))):
        raise SeedError("allocation indices are not 0..n-1")

    comp_of, callers, op_names, entry = _parse_hlo(seed)

    # Used values (first pass: instruction texts, for entry parameters and shapes).
    block_name = None
    for line in used_lines:
        if line.startswith(" from instruction: "):
            m = re.match(r" from instruction: %(" + _NAME + ") = ", line)
            if m:
                texts[m.group(1)] = line[len(" from instruction: ") :]
    if entry is not None:  # entry parameters without an allocation still need renumbering
        entry_params |= {
            n for n, t in texts.items() if comp_of.get(n) == entry and " parameter(" in t
        }
    # Allocations: non-temps first, then the trailing run of temps.
    n_prefix = len(alloc_lines)
    while n_prefix and alloc_lines[n_prefix - 1][0].temp:
        n_prefix -= 1
    seed.n_prefix = n_prefix
    for a, vlines in alloc_lines:
        tpl = prefix if a.pos < n_prefix else temp
        m = _ALLOC.match(a.header)
        assert m is not None
        rest = m.group(3)
        tpl.lit("allocation ")
        tpl.hole("A", a.pos)
        tpl.lit(f": size {a.size}")
        fmt = ["allocation {0}: size {3}"]
        pos = 0
        for attr in re.finditer(r", parameter (\d+)|, output shape is \|[^|]*\|", rest):
            tpl.lit(rest[pos : attr.start()])
            fmt.append(_braces(rest[pos : attr.start()]))
            if attr.group(1) is not None:
                tpl.lit(", parameter ")
                tpl.hole("P", int(attr.group(1)))
                fmt.append(", parameter {1}")
            else:
                tpl.hole("O", len(seed.output_attrs))
                seed.output_attrs.append(attr.group())
                fmt.append("{2}")
            pos = attr.end()
        tpl.lit(rest[pos:] + ":\n")
        fmt.append(_braces(rest[pos:]) + ":")
        a.report_fmt = "".join(fmt)
        for vline in vlines:
            m2 = _VALUE.match(vline)
            if m2 is None:
                tpl.lit(vline + "\n")
                continue
            vid = int(m2.group(2))
            seed.max_vid = max(seed.max_vid, vid)
            tpl.lit(m2.group(1))
            tpl.hole("V", vid)
            tpl.lit(" ")
            tpl.hole("N", m2.group(3))
            tpl.lit((m2.group(4) or "") + m2.group(5) + "\n")
        seed.allocs.append(a)
    seed.n_params = 1 + max(param_allocs.values(), default=-1)
    for name, text in texts.items():
        if name in entry_params:
            p = re.search(r" parameter\((\d+)\)", text)
            if p:
                seed.n_params = max(seed.n_params, int(p.group(1)) + 1)

    # Used values (second pass: the template).
    for line in used_lines:
        if line.startswith("<"):
            m = _HEADER.match(line)
            if not m:
                raise SeedError(f"value header not understood: {line}")
            used.lit("<")
            used.hole("V", int(m.group(1)))
            used.lit(" ")
            used.hole("N", m.group(2))
            used.lit((m.group(3) or "") + m.group(4) + ">\n")
            block_name = m.group(2)
        elif line in (" positions:", " uses:", " uses are not initialized yet.", "  (none)"):
            used.lit(line + "\n")
        elif line.startswith(" from instruction: "):
            used.lit(" from instruction: ")
            _text(used, line[len(" from instruction: ") :], entry_params)
            used.lit("\n")
        elif line.startswith("  ") and block_name is not None:
            m = _USE.match(line) or _POSITION.match(line)
            if not m:
                raise SeedError(f"position or use not understood: {line}")
            used.lit("  ")
            used.hole("N", m.group(1))
            used.lit(m.group(2) + "\n")
        elif line:
            _text(used, line, entry_params)  # continuation of an instruction text
            used.lit("\n")
    # the split values file ends right after the last block; combined adds blank lines
    for name in keys["N"]:
        if _SUFFIXED.search(name):
            raise SeedError(f"name {name} already looks like a tiled copy")

    # Live ranges: instruction sizes for the sweep, value sizes and trace paths for the list.
    for lv in seed.live:
        text = texts.get(lv.name)
        if text is None:
            raise SeedError(f"live range of {lv.name} without an instruction text")
        start = text.index(" = ") + 3
        instr_shape, _ = shapes.parse_shape_at(text, start)
        lv.instr_bytes = shapes.byte_size(instr_shape) or 0
        vshape = values.get((lv.name, lv.index))
        if vshape is not None:
            lv.value_bytes = shapes.byte_size(shapes.parse_shape(vshape))
        lv.traces = _traces(lv.name, comp_of, callers, op_names, texts, entry)
        if lv.index != "{}":
            for tr in lv.traces:
                kind, text_ = tr[-1]
                tr[-1] = (kind, text_ + lv.index)
    seed.entry = entry
    _sweep_facts(seed)
    if "usage_report" in seed.files:
        _parse_report(seed, seed.files["usage_report"])
    _size_facts(seed)


def _size_facts(seed: Seed) -> None:
    """What one copy adds to the output, to pick the number of copies for a size."""
    counts = dict.fromkeys(KINDS, 0)
    nbytes = 0
    for part in _all_parts(seed):
        if isinstance(part, str):
            nbytes += len(part.encode())
        elif part[0] == "N":
            counts["N"] += 1
            nbytes += len(str(part[1]))
        else:
            counts[part[0]] += 1
    seed.holes = {
        k: (counts[k], max((v for v in seed.keys[k] if isinstance(v, int)), default=0))
        for k in KINDS
    }
    if seed.report == "A":
        nbytes += sum(len(a.header) + len(seed.report_tails[a.index]) for a in seed.allocs)
    seed.base_bytes = nbytes


def _braces(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _all_parts(seed: Seed) -> Iterator[object]:
    for tpl in seed.sections.values():
        yield from tpl.parts


def _text(tpl: _Template, text: str, entry_params: set[str]) -> None:
    """Instruction text: %names get the suffix, entry parameter(N) and stack frames shift."""
    m = re.match(r"%(" + _NAME + ") = ", text)
    is_param = bool(m and m.group(1) in entry_params)
    pos = 0
    for tok in _TEXT_TOKEN.finditer(text):
        if tok.group(2) is not None and not is_param:
            continue
        tpl.lit(text[pos : tok.start()])
        if tok.group(1) is not None:
            tpl.lit("%")
            tpl.hole("N", tok.group(1))
        elif tok.group(2) is not None:
            tpl.hole("P", int(tok.group(2)))
        else:
            tpl.hole("F", int(tok.group(3)))
        pos = tok.end()
    tpl.lit(text[pos:])


def _parse_hlo(seed: Seed):
    """Instruction -> computation, computation -> callers, op_names, entry name, frames."""
    comp_of: dict[str, str] = {}
    callers: dict[str, list[str]] = {}
    op_names: dict[str, str] = {}
    entry = None
    if seed.hlo is None:
        return comp_of, callers, op_names, entry
    lines = seed.hlo.split("\n")
    header: list[str] = []
    table = None
    i = 0
    while i < len(lines):  # module line, blank lines and the frame tables
        line = lines[i]
        if line in FRAME_TABLES:
            table = line
            seed.frame_tables[table] = []
        elif line.startswith("HloModule") or not line.strip():
            pass
        elif table is not None and re.match(r"\d+ ", line):
            n, _, rest = line.partition(" ")
            seed.frame_tables[table].append((int(n), rest))
        else:
            break
        header.append(line)
        i += 1
    seed.hlo_header = header[0] if header else None
    comps: list[str] = []
    instr_lines: list[tuple[str, str]] = []
    current = None
    for line in lines[i:]:
        m = _HLO_COMP.match(line)
        if m and not line.startswith(" "):
            current = m.group(2)
            comps.append(current)
            if m.group(1):
                entry = current
            continue
        m = _HLO_INSTR.match(line)
        if m and current is not None:
            comp_of[m.group(1)] = current
            instr_lines.append((m.group(1), m.group(2)))
            op = _OP_NAME.search(m.group(2))
            if op and op.group(1):
                op_names[m.group(1)] = _unescape(op.group(1))
    known = set(comps)
    for name, body in instr_lines:
        for ref in re.findall(r"%(" + _NAME + ")", body):
            if ref in known:
                callers.setdefault(ref, []).append(name)
    return comp_of, callers, op_names, entry


def _traces(name, comp_of, callers, op_names, texts, entry) -> list[list[tuple[str, str]]]:
    """BuildStackTracesRecursive: one path per call chain, outermost first.

    Parts are (kind, text): 'L' literal (from an op_name), 'N' an instruction name,
    'C' a computation name, 'E' the entry computation.
    """
    if not comp_of:
        # No HLO beside the seed: everything is in the entry computation.
        return [[("E", ""), *_label(name, op_names, texts)]]
    out: list[list[tuple[str, str]]] = []

    def walk(instr: str, path: list[tuple[str, str]], depth: int) -> None:
        if depth > 50:
            raise SeedError("call chain too deep (a cycle?)")
        path = _label(instr, op_names, texts) + path
        comp = comp_of.get(instr)
        if comp is None:
            raise SeedError(f"{instr} is not in the seed's HLO file")
        path = [("E", "") if comp == entry else ("C", comp), *path]
        if comp == entry or comp not in callers:
            out.append(path)
            return
        for caller in callers[comp]:
            walk(caller, path, depth + 1)

    walk(name, [], 0)
    return out


def _label(instr: str, op_names: dict[str, str], texts: dict[str, str]) -> list[tuple[str, str]]:
    op = op_names.get(instr)
    if op is None and instr in texts:
        m = _OP_NAME.search(texts[instr])
        op = _unescape(m.group(1)) if m and m.group(1) else None
    if op:
        return [("L", part) for part in split_params(op)]
    parts = split_params(instr)
    if parts == [instr]:
        return [("N", instr)]
    return [("L", part) for part in parts]  # a name that splits never gets the suffix


def _sweep_facts(seed: Seed) -> None:
    """Per seed: the add-before-remove sweep at each step, and what crosses copies.

    A(t) = sum of instruction bytes of values with start <= t <= end + 1: at time t
    XLA adds the values starting at t before it removes those that ended at t - 1.
    """
    L = seed.schedule
    diff = [0] * (L + 3)
    for lv in seed.live:
        if lv.end > L:
            raise SeedError("live range past max")
        diff[lv.start] += lv.instr_bytes
        diff[min(lv.end + 2, L + 2)] -= lv.instr_bytes
    a, run = [], 0
    for t in range(L):
        run += diff[t]
        a.append(run)
    best, best_t = 0, 0
    for t, v in enumerate(a):
        if v > best:
            best, best_t = v, t
    if best_t != seed.peak_time:
        raise SeedError(f"recomputed peak time {best_t} != printed {seed.peak_time}")
    seed.a0 = a[0]
    seed.best_rest, seed.best_rest_t = max(((v, -t) for t, v in enumerate(a) if t), default=(0, 0))
    seed.best_rest_t = -seed.best_rest_t
    seed.long_bytes = sum(lv.instr_bytes for lv in seed.live if lv.end == L)
    seed.carry = sum(lv.instr_bytes for lv in seed.live if lv.end == L - 1)


def _parse_report(seed: Seed, text: str) -> None:
    lines = text.split("\n")
    if lines[0].startswith("Total bytes used: "):
        marker = "Allocations sorted by size with their values:"
        if marker not in lines:
            raise SeedError("report A without the per-allocation part")
        i = lines.index(marker) + 1
        body = "\n".join(lines[i:])
        heads = list(re.finditer(r"^allocation (\d+): .*\n", body, re.M))
        if not heads or heads[0].start() != 0:
            raise SeedError("report A: text before the first allocation")
        for h, nxt in zip(heads, [*heads[1:], None]):
            seed.report_tails[int(h.group(1))] = body[h.end() : nxt.start() if nxt else len(body)]
        seed.report = "A"
        return
    seed.report = "B"
    color = None
    table: list[str] = []
    for line in lines:
        m = re.match(r"Memory Space: (.*) \(color=(\d+)\)$", line)
        if m:
            color = int(m.group(2))
            seed.space_names[color] = m.group(1)
            seed.report_b[color] = []
            continue
        if line.startswith("Total bytes: "):
            continue
        if color is None:
            if line:
                raise SeedError("report B: text before 'Memory Space'")
            continue
        if line:
            table.append(line)
        elif table:
            seed.report_b[color].append("\n".join(table) + "\n")
            table = []


# -- the tiled module -----------------------------------------------------------
@dataclass
class _Copy:
    seed: Seed
    k: int
    sfx: str
    voff: int
    apre: int
    atmp: int
    poff: int
    toff: int
    foff: int


@dataclass
class Plan:
    copies: list[_Copy]
    schedule: int
    total: int
    n_allocs: int
    entry: str
    frame_offsets: dict[str, dict[str, int]]


def plan(seeds: list[Seed], target_bytes: int) -> Plan:
    """Pick copies (cycling through the seeds) until the text reaches target_bytes."""
    copies: list[_Copy] = []
    est = 0
    k = voff = poff = toff = 0
    while est < target_bytes or not copies:
        s = seeds[k % len(seeds)]
        sfx = f".t{k}" if k else ""
        copies.append(_Copy(s, k, sfx, voff, 0, 0, poff, toff, 0))
        est += s.base_bytes + s.holes["N"][0] * len(sfx)
        offsets = {"V": voff, "A": k * len(s.allocs), "P": poff, "T": toff, "E": toff}
        for kind, off in offsets.items():
            count, top = s.holes[kind]
            est += count * len(str(top + off))
        voff += s.max_vid + 1
        poff += s.n_params
        toff += s.schedule
        k += 1
    n_pre = sum(c.seed.n_prefix for c in copies)
    apre = 0
    atmp = n_pre
    for c in copies:
        c.apre, c.atmp = apre, atmp
        apre += c.seed.n_prefix
        atmp += len(c.seed.allocs) - c.seed.n_prefix
    frame_offsets: dict[str, dict[str, int]] = {}
    running = dict.fromkeys(FRAME_TABLES, 0)
    for c in copies:
        if c.seed.id not in frame_offsets:
            frame_offsets[c.seed.id] = dict(running)
            for table in FRAME_TABLES:
                rows = c.seed.frame_tables.get(table, [])
                running[table] += max((n for n, _ in rows), default=0)
        c.foff = frame_offsets[c.seed.id]["StackFrames"]
    entry = seeds[0].entry or _trace_entry(seeds[0]) or "main"
    return Plan(copies, toff, sum(c.seed.total for c in copies), atmp, entry, frame_offsets)


def _trace_entry(seed: Seed) -> str | None:
    if seed.trace_lines and len(seed.trace_lines) > 1:
        m = re.match(r"    (\S+) \(", seed.trace_lines[1])
        return m.group(1) if m else None
    return None


def _args(c: _Copy, plan_: Plan) -> list[str]:
    s, keys = c.seed, c.seed.keys
    sfx = c.sfx
    out: list[str] = [n + sfx for n in keys["N"]] if sfx else list(keys["N"])
    out += [str(v + c.voff) for v in keys["V"]]
    out += [str(c.apre + a if a < s.n_prefix else c.atmp + a - s.n_prefix) for a in keys["A"]]
    out += [str(p + c.poff) for p in keys["P"]]
    out += [str(t + c.toff) for t in keys["T"]]
    L, new_max = s.schedule, plan_.schedule
    out += [str(new_max if e == L else e + c.toff) for e in keys["E"]]
    out += [str(f + c.foff) for f in keys["F"]]
    out += [s.output_attrs[o] if c.k == 0 else "" for o in keys["O"]]
    return out


def _compile(seed: Seed) -> None:
    if seed.compiled:
        return
    offsets, n = {}, 0
    for kind in KINDS:
        offsets[kind] = n
        n += len(seed.keys[kind])
    seed.compiled = {name: tpl.compile(offsets) for name, tpl in seed.sections.items()}


def _render(plan_: Plan, section: str) -> Iterator[str]:
    for c in plan_.copies:
        _compile(c.seed)
        yield c.seed.compiled[section].format(*_args(c, plan_))


def _peak(plan_: Plan) -> tuple[int, int, int]:
    """(copy, time in copy, absolute time) of the tiled module's peak (see _sweep_facts)."""
    best, where = 0, (0, 0)
    baseline = 0
    prev: Seed | None = None
    for i, c in enumerate(plan_.copies):
        s = c.seed
        v0 = s.a0 + baseline + (prev.carry if prev is not None else 0)
        v1 = s.best_rest + baseline
        cand, t = (v0, 0) if v0 >= v1 else (v1, s.best_rest_t)
        if cand > best:
            best, where = cand, (i, t)
        baseline += s.long_bytes
        prev = s
    i, t = where
    return i, t, plan_.copies[i].toff + t


def _render_path(path: list[tuple[str, str]], c: _Copy, entry: str) -> tuple[str, ...]:
    out = []
    for kind, text in path:
        if kind == "E":
            out.append(entry)
        elif kind in "NC":
            # a '{i}' leaf suffix sits after the name: keep it last
            if text.endswith("}") and "{" in text:
                at = text.index("{")
                out.append(text[:at] + c.sfx + text[at:])
            else:
                out.append(text + c.sfx)
        else:
            out.append(text)
    return tuple(out)


def peak_section(plan_: Plan) -> Iterator[str]:
    """'Live ranges at T (peak):', the sorted list and the stack-trace tree."""
    ci, t, when = _peak(plan_)
    entries = []  # (bytes, name, index, copy, live)
    for c in plan_.copies[:ci]:
        for lv in c.seed.live:
            if lv.end == c.seed.schedule:
                entries.append((lv, c))
    c_peak = plan_.copies[ci]
    for lv in c_peak.seed.live:
        if lv.start <= t <= lv.end:
            entries.append((lv, c_peak))
    rows = []
    for lv, c in entries:
        if lv.value_bytes is None:
            raise SeedError(f"{lv.name}{lv.index} is live at the peak but has no value line")
        rows.append((-lv.value_bytes, lv.name + c.sfx, _index_key(lv.index), lv, c))
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    yield f"  Live ranges at {when} (peak):\n"
    cum = 0
    buf = []
    for neg, name, _, lv, _c in rows:
        cum += -neg
        buf.append(f"    {name}{lv.index}: {-neg} bytes (cumulative: {cum} bytes)\n")
        if len(buf) >= 4096:
            yield "".join(buf)
            buf = []
    yield "".join(buf)
    if plan_.copies[0].seed.trace_lines is not None:
        yield from _tree(rows, cum, plan_.entry)


class _Node:
    __slots__ = ("children", "name", "size", "total")

    def __init__(self, name: str) -> None:
        self.name = name
        self.size = 0
        self.total = 0
        self.children: dict[str, _Node] = {}


def _tree(rows, total: int, entry: str) -> Iterator[str]:
    root = _Node("")
    for neg, _name, _key, lv, c in rows:
        nbytes = -neg
        paths = [_render_path(p, c, entry) for p in lv.traces]
        if not paths:
            continue
        base, rem = divmod(nbytes, len(paths))
        for i, path in enumerate(paths):
            node = root
            for part in path:
                child = node.children.get(part)
                if child is None:
                    child = node.children[part] = _Node(part)
                node = child
            node.size += base + (1 if i < rem else 0)
    order = []
    stack = [root]
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(node.children.values())
    for node in reversed(order):
        node.total = node.size + sum(ch.total for ch in node.children.values())
    yield f"  Stack trace breakdown for peak usage: {spaced(total)} bytes\n"
    remaining = total
    out: list[str] = []
    # iterative PrintStackTree: (node, prefix, is_last)
    work = [(root, "  ", True)]
    while work:
        node, prefix, is_last = work.pop()
        if node.name:
            connector = "  " if prefix == "  " else ("└── " if is_last else "├── ")
            pct = 100.0 * node.total / total if total > 0 else 0.0
            remaining -= node.size
            out.append(
                f"{prefix}{connector}{node.name} ({pct:.1f}%, total: {spaced(node.total)} bytes, "
                f"current: {spaced(node.size)} bytes, remaining: {spaced(remaining)} bytes)\n"
            )
            if len(out) >= 4096:
                yield "".join(out)
                out = []
        kids = sorted(
            (ch for ch in node.children.values() if ch.total != 0),
            key=lambda ch: (-ch.total, ch.name.encode()),
        )
        child_prefix = prefix + ("" if not node.name else ("    " if is_last else "│   "))
        for i in reversed(range(len(kids))):
            work.append((kids[i], child_prefix, i == len(kids) - 1))
    yield "".join(out)


@dataclass
class _TiledAlloc:
    size: int
    index: int
    color: int
    alloc: _Alloc
    copy: _Copy

    def header(self, human_size: bool) -> str:
        c, a = self.copy, self.alloc
        p = _PARAM_ATTR.search(a.header)
        param = str(int(p.group(1)) + c.poff) if p else ""
        out = _OUTPUT_ATTR.search(a.header)
        return a.report_fmt.format(
            self.index,
            param,
            out.group() if out and c.k == 0 else "",
            human(self.size) if human_size else self.size,
        )


def _tiled_allocs(plan_: Plan) -> list[_TiledAlloc]:
    out = []
    for c in plan_.copies:
        s = c.seed
        for a in s.allocs:
            idx = c.apre + a.pos if a.pos < s.n_prefix else c.atmp + a.pos - s.n_prefix
            out.append(_TiledAlloc(a.size, idx, a.color, a, c))
    out.sort(key=lambda t: (-t.size, t.index))
    return out


def report_text(plan_: Plan) -> Iterator[str]:
    """The memory-usage report, version A or B as the first seed printed it."""
    first = plan_.copies[0].seed
    allocs = _tiled_allocs(plan_)
    total = plan_.total
    if first.report == "A":
        yield f"Total bytes used: {total} ({human(total)})\n\nAllocations sorted by size:\n\n"
        yield "cumulative_size; total_size - cumulative_size; allocation\n"
        yield "-" * 78 + "\n"
        cum = 0
        buf = []
        for i, ta in enumerate(allocs):
            cum += ta.size
            buf.append(
                f"{human(cum):>10}({_pct(cum, total)}%); {human(total - cum):>10}; "
                f"{ta.header(True)}\n"
            )
            if i + 1 > 50 and total - cum < 0.05 * total:
                buf.append(
                    f"The rest {len(allocs) - i - 1} allocations are less than 5% of the "
                    "total size and not shown.\n"
                )
                break
        yield "".join(buf)
        yield "\n\nAllocations sorted by size with their values:\n"
        buf = []
        for ta in allocs:
            tail = ta.copy.seed.report_tails[ta.alloc.index]
            buf.append(ta.header(True) + "\n" + tail)
            if len(buf) >= 4096:
                yield "".join(buf)
                buf = []
        yield "".join(buf)
        return
    by_color: dict[int, list[_TiledAlloc]] = {}
    for ta in allocs:
        by_color.setdefault(ta.color, []).append(ta)
    for color in sorted(by_color):
        group = by_color[color]
        ctotal = sum(ta.size for ta in group)
        name = first.space_names.get(color, f"color_{color}")
        out = [
            f"Memory Space: {name} (color={color})\n",
            f"Total bytes: {ctotal} ({human(ctotal)})\n",
        ]
        cum = 0
        for i, ta in enumerate(group):
            s = ta.copy.seed
            seed_group = sorted(
                (a for a in s.allocs if a.color == color), key=lambda a: (-a.size, a.index)
            )
            rank = seed_group.index(ta.alloc)
            tables = s.report_b.get(color, [])
            if rank >= len(tables):
                raise SeedError(f"{s.id}: no report table for allocation {ta.alloc.index}")
            out.append(tables[rank] + "\n")
            cum += ta.size
            if i + 1 > 50 and ctotal - cum < 0.05 * ctotal:
                break
        out.append("\n")
        yield "".join(out)


def write_module(plan_: Plan, out_dir: Path, stem: str) -> dict[str, Path]:
    """Stream the tiled module into out_dir; returns role -> path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    first = plan_.copies[0].seed
    paths: dict[str, Path] = {}

    def open_(role_suffix: str):
        p = out_dir / f"{stem}{role_suffix}"
        paths[role_suffix] = p
        return open(p, "w", encoding="utf-8", newline="", buffering=1 << 20)

    total = plan_.total
    with open_("-buffer-assignment.txt") as f:
        f.write("BufferAssignment:\n")
        for chunk in _render(plan_, "prefix"):
            f.write(chunk)
        for chunk in _render(plan_, "temp"):
            f.write(chunk)
        g = open_("-buffer-assignment-values.txt") if first.layout == "split" else f
        g.write(f"\nTotal bytes used: {total} ({human(total)})\n\nUsed values:\n")
        for chunk in _render(plan_, "used"):
            g.write(chunk)
        if first.layout == "split":
            g.close()
            h = open_("-live-range.txt")
        else:
            f.write("\n\n")
            h = f
        h.write(f"HloLiveRange (max {plan_.schedule}):\n  InstructionSequence:\n")
        for chunk in _render(plan_, "seq"):
            h.write(chunk)
        h.write("  BufferLiveRange:\n")
        for chunk in _render(plan_, "blr"):
            h.write(chunk)
        for chunk in peak_section(plan_):
            h.write(chunk)
        if h is not f:
            h.close()
    if first.report is not None:
        with open_("-memory-usage-report.txt") as f:
            for chunk in report_text(plan_):
                f.write(chunk)
    hlo = _hlo_prefix(plan_, stem)
    if hlo is not None:
        with open_(".txt") as f:
            f.write(hlo)
    return paths


def _hlo_prefix(plan_: Plan, stem: str) -> str | None:
    """The HloModule line and merged stack-frame tables (what the ingest reads)."""
    seeds = []
    for c in plan_.copies:
        if c.seed not in seeds:
            seeds.append(c.seed)
    if not any(s.frame_tables for s in seeds):
        return None
    merged: dict[str, list[str]] = {t: [] for t in FRAME_TABLES}
    refs = {
        "file_name_id": "FileNames",
        "function_name_id": "FunctionNames",
        "file_location_id": "FileLocations",
        "parent_frame_id": "StackFrames",
    }
    for s in seeds:
        shift = plan_.frame_offsets[s.id]

        def move(m: re.Match[str], shift=shift) -> str:
            return f"{m.group(1)}={int(m.group(2)) + shift[refs[m.group(1)]]}"

        for table in FRAME_TABLES:
            for n, rest in s.frame_tables.get(table, []):
                rest = re.sub(r"\b(" + "|".join(refs) + r")=(\d+)", move, rest)
                merged[table].append(f"{n + shift[table]} {rest}")
    head = plan_.copies[0].seed.hlo_header or "HloModule synth"
    name = stem.split(".")[1] if stem.count(".") >= 2 else "synth"
    head = re.sub(r"^HloModule [^ ,]+", f"HloModule {name}", head)
    parts = [head, ""]
    for table in FRAME_TABLES:
        parts.append(table)
        parts.extend(merged[table])
        parts.append("")
    return "\n".join(parts) + "\n"


# -- seed selection and checks ------------------------------------------------
def seed_paths(fmt: str, picks: list[str] | None = None) -> list[Path]:
    if not picks:
        return find_seeds(fmt)
    every = [*find_seeds("combined"), *find_seeds("stacktrace"), *find_seeds("split")]
    every += sample_seeds()
    out = []
    for pick in picks:
        hits = [p for p in every if pick in os.path.relpath(p, DATA)]
        if not hits:
            raise SystemExit(f"synth: no seed matches {pick!r}")
        out.extend(h for h in hits if h not in out)
    return out


def check_seed(seed: Seed, tmp: Path) -> None:
    """Rendering one copy must give back the seed's own files, byte for byte."""
    p = plan([seed], 0)
    stem = "module_0000.check.x"
    paths = write_module(p, tmp, stem)
    want = {
        "-buffer-assignment.txt": seed.files["buffer_assignment"],
        "-buffer-assignment-values.txt": seed.files.get("values"),
        "-live-range.txt": seed.files.get("live_range"),
        "-memory-usage-report.txt": seed.files.get("usage_report"),
    }
    for suffix, path in paths.items():
        if suffix == ".txt":
            continue
        got = path.read_text(encoding="utf-8")
        if got != want[suffix]:
            line = next(
                (
                    i
                    for i, (a, b) in enumerate(zip(got.split("\n"), want[suffix].split("\n")), 1)
                    if a != b
                ),
                min(got.count("\n"), want[suffix].count("\n")) + 1,
            )
            raise SeedError(f"{suffix} differs from the seed at line {line}")
        path.unlink()
    for path in paths.values():
        if path.exists():
            path.unlink()


def usable_seeds(paths: list[Path], tmp: Path, log=None) -> list[Seed]:
    out = []
    for path in paths:
        try:
            seed = load_seed(path)
            check_seed(seed, tmp)
        except SeedError as exc:
            if log:
                log(f"synth: skipping seed {os.path.relpath(path, DATA)}: {exc}")
            continue
        out.append(seed)
    return out


@dataclass
class Result:
    paths: dict[str, Path]
    bytes: int
    copies: int
    seeds: int
    schedule: int
    seconds: float


def glue(lines: Iterable[str]) -> Iterator[str]:
    """A combined dump's lines (newlines kept) as XLA printed them from 2024-01-16 to
    2024-11-01 (jax 0.4.24-0.4.35): no newline after a from instruction text, so the
    next value's header follows on the same line, and one blank line, not two,
    after the last text. A text that runs on over several lines is left as it is."""
    held = None  # a from instruction line, newline dropped, waiting for the next line
    drop_blank = False
    for line in lines:
        if held is not None:
            if line.startswith("<"):
                yield held + line
                held = None
                continue
            yield held + "\n"
            drop_blank = line == "\n"
            held = None
        if drop_blank:
            drop_blank = False
            if line == "\n":
                continue
        if line.startswith(" from instruction:") and line.endswith("\n"):
            held = line[:-1]
            continue
        yield line
    if held is not None:
        yield held + "\n"


def glue_file(path: Path) -> None:
    """Rewrite a combined -buffer-assignment.txt in place as `glue` prints it."""
    tmp = path.with_name(path.name + ".glued")
    with open(path, encoding="utf-8") as src, open(tmp, "w", encoding="utf-8") as out:
        out.writelines(glue(src))
    os.replace(tmp, path)


def synthesize(
    out_dir: str | os.PathLike[str],
    mb: float,
    fmt: str = "stacktrace",
    seeds: list[Seed] | None = None,
    picks: list[str] | None = None,
    name: str | None = None,
    number: int = 0,
    log=None,
    glued: bool = False,
) -> Result:
    """Write one tiled module of about `mb` MB (10**6 bytes) into out_dir; `glued`:
    its buffer assignment as the 2024 releases printed it (see `glue`)."""
    started = time.monotonic()
    out = Path(out_dir)
    if seeds is None:
        seeds = usable_seeds(seed_paths(fmt, picks), out / ".seedcheck", log)
        if (out / ".seedcheck").exists():
            (out / ".seedcheck").rmdir()
    if not seeds:
        raise SystemExit("synth: no usable seed")
    layouts = {s.layout for s in seeds}
    if len(layouts) > 1:
        raise SystemExit("synth: seeds mix the combined and split layouts")
    p = plan(seeds, int(mb * 1e6))
    name = name or f"jit_synth_{fmt}"
    stem_tail = seeds[0].stem.split(".")[-1] if seeds[0].stem.startswith("module_") else None
    stem = f"module_{number:04d}.{name}.{stem_tail or 'cpu_after_optimizations'}"
    paths = write_module(p, out, stem)
    if glued:
        if seeds[0].layout != "combined":
            raise SystemExit("synth: --glued needs a combined layout (combined or stacktrace)")
        glue_file(paths["-buffer-assignment.txt"])
    nbytes = sum(v.stat().st_size for k, v in paths.items() if k != ".txt")
    return Result(
        paths,
        nbytes,
        len(p.copies),
        len(seeds),
        p.schedule,
        time.monotonic() - started,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--mb", type=float, default=10.0, help="size of the dump text, 10**6 bytes")
    ap.add_argument("--format", choices=sorted(FORMATS), default="stacktrace")
    ap.add_argument("--seed", action="append", help="seed path substring (repeatable)")
    ap.add_argument("--name", default=None, help="module name in the file names")
    ap.add_argument("--number", type=int, default=0, help="module number in the file names")
    ap.add_argument(
        "--glued",
        action="store_true",
        help="print Used values as XLA did from 2024-01-16 to 2024-11-01 (headers glued to texts)",
    )
    args = ap.parse_args(argv)
    res = synthesize(
        args.out_dir,
        args.mb,
        args.format,
        picks=args.seed,
        name=args.name,
        number=args.number,
        log=lambda m: print(m, file=sys.stderr),
        glued=args.glued,
    )
    print(
        f"{res.bytes / 1e6:.1f} MB in {res.copies} copies of {res.seeds} seed(s), "
        f"schedule {res.schedule}, {res.seconds:.1f}s -> "
        + ", ".join(str(p) for p in res.paths.values()),
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
