"""libtpu's own memory summary of a compile, from its stderr log (TPU_STDERR_LOG_LEVEL=0).

After each compile libtpu logs (deepsea_compiler_backend.cc), per program:

    XLA::TPU module name: jit_f
    Total hbm usage >= 280.32M:
        reserved        279.00M
        program          836.0K
        arguments        512.0K
    Output size 1.0K; shares 0B with arguments.
    Program hbm requirement 836.0K:
        HLO temp         576.0K (99.9% utilization: Unpadded (512.1K) Padded (512.6K), 11.0% fragmentation (63.4K))
        overlays         260.0K
    Program vmem requirement 772.0K: ...

The sizes are rounded to the unit printed (so a figure is exact only in bytes).
A summary is named by the `XLA::TPU module name:` line before it; a log cut to its
memory lines may have lost that line, and then the summary is unnamed: the log names
its modules elsewhere only (`... for module: jit_f`, tpu_plumb_vmem_info.cc), and
`summary_for` takes an unnamed summary for a module only where the log names that one
module and no other (docs/discovery.md, libtpu logs).
What the buffer assignment cannot say comes only from here: the reserved HBM, the
program (code) size, the scoped VMEM/SMEM. The rest checks the warehouse's own
figures (docs/metrics.md, TPU temp): `HLO temp` of hbm is memory space 0's temp
allocation rounded up to 16 KiB, `Padded` its most bytes in use plus the tuple
pointer tables, and the fragmentation their difference.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from bufferhouse.parse.oom.sizes import SizeError, parse_size

__all__ = [
    "MARKERS",
    "HloTemp",
    "LibtpuLog",
    "ProgramMemory",
    "SpaceRequirement",
    "is_libtpu_log",
    "parse_libtpu_log",
    "read_libtpu_log",
    "summary_for",
]

_SZ = r"-?(?:\d+(?:\.\d*)?|\.\d+)\s?[A-Za-z]*"
_MODULE = re.compile(r"XLA::TPU module name: (?P<name>\S+)")
#: Other lines of a compile that name its module (tpu_plumb_vmem_info.cc).
_MENTION = re.compile(r"(?:XLA::TPU module name|\bfor module): (?P<name>\S+)")
#: The first line of libtpu's summary of a compile (deepsea_compiler_backend.cc).
_PROGRAM_USAGE = re.compile(r"XLA::TPU program HBM usage: ")
#: Bytes that only libtpu's summary holds: how a log is told from another.
MARKERS = (b"XLA::TPU program HBM usage: ", b"Program hbm requirement ")
_TOTAL = re.compile(r"Total (?P<space>[\w-]+) usage >= (?P<size>" + _SZ + r"):")
_REQUIREMENT = re.compile(r"Program (?P<space>[\w-]+) requirement (?P<size>" + _SZ + r"):")
_OUTPUT = re.compile(r"Output size (?P<size>" + _SZ + r"); shares (?P<shared>" + _SZ + r") with")
_PART = re.compile(r"^\s+(?P<name>[A-Za-z][\w ]*?)\s{2,}(?P<size>" + _SZ + r")\s*(?P<rest>\(.*)?$")
_HLO_TEMP = re.compile(
    r"\((?P<util>[\d.]+)% utilization: Unpadded \((?P<unpadded>" + _SZ + r")\) Padded \("
    r"(?P<padded>" + _SZ + r")\), (?P<frag_pct>[\d.]+)% fragmentation \((?P<frag>" + _SZ + r")\)\)"
)
#: A glog header: a line that starts another message ends the summary's indented block.
_GLOG = re.compile(r"^[IWEF]\d{4} ")


@dataclass(frozen=True)
class HloTemp:
    """`HLO temp X (N% utilization: Unpadded (U) Padded (P), F% fragmentation (B))`."""

    bytes: int
    utilization: float
    unpadded_bytes: int
    padded_bytes: int
    fragmentation_bytes: int
    #: (bytes, padded, fragmentation): how far each may lie from the figure (slack)
    slack: tuple[int, int, int] = (0, 0, 0)


@dataclass
class SpaceRequirement:
    """`Program <space> requirement X:` and its parts (reserved, scoped, overlays, ...)."""

    bytes: int
    parts: dict[str, int] = field(default_factory=dict)
    hlo_temp: HloTemp | None = None
    #: part -> how far its bytes may lie from the printed figure (slack)
    part_slack: dict[str, int] = field(default_factory=dict)


@dataclass
class ProgramMemory:
    """One compile's summary: its module, the `Total <space> usage >=` blocks (with their
    parts and the output line after each) and the per-space program requirements."""

    module_name: str | None  # None: the log lost the `XLA::TPU module name:` line
    line: int
    totals: dict[str, SpaceRequirement] = field(default_factory=dict)
    outputs: dict[str, tuple[int, int]] = field(default_factory=dict)  # space -> (size, shared)
    requirements: dict[str, SpaceRequirement] = field(default_factory=dict)


@dataclass
class LibtpuLog:
    """A libtpu log's summaries, in log order, and every module name the log gives."""

    programs: list[ProgramMemory]
    names: set[str]


def _bytes(text: str) -> int:
    return parse_size(text)[0]


_SCALE = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def slack(text: str) -> int:
    """How far the bytes a printed size stands for may lie from its value: half its
    last digit, in its unit (`132.0K`: 52), and a KiB more above K, libtpu dividing
    by 1024 in whole numbers before it prints (tsl's HumanReadableNumBytes). 0 for
    whole bytes; -1 for a unit not known (never taken as close)."""
    m = re.fullmatch(r"-?(\d*)(?:\.(\d*))?\s?([A-Za-z]*)", text.strip())
    unit = (m.group(3) if m else "?").upper().removesuffix("IB").rstrip("B") or "B"
    scale = _SCALE.get(unit[:1] if unit != "B" else "B")
    if m is None or scale is None:
        return -1
    decimals = len(m.group(2) or "")
    if scale == 1 and not decimals:
        return 0
    return -(-scale * 5 // 10 ** (decimals + 1)) + (1024 if scale > 1024 else 0)


def is_libtpu_log(head: bytes) -> bool:
    """Whether bytes of a log hold libtpu's memory summary of a compile."""
    return any(marker in head for marker in MARKERS)


def parse_libtpu_log(text: str) -> list[ProgramMemory]:
    """Every compile's memory summary in a libtpu stderr log, in log order."""
    return read_libtpu_log(text).programs


def read_libtpu_log(text: str | Iterable[str]) -> LibtpuLog:
    """Every compile's memory summary in a libtpu stderr log and the module names it
    gives. Lines that are no part of a summary are passed over; a size that does not
    parse raises SizeError naming the line."""
    out: list[ProgramMemory] = []
    names: set[str] = set()
    block: SpaceRequirement | None = None
    last_total = None
    lines = text.splitlines() if isinstance(text, str) else (ln.rstrip("\r\n") for ln in text)
    for number, line in enumerate(lines, 1):
        mention = _MENTION.search(line)
        if mention:
            names.add(mention.group("name").rstrip(".,;:"))
        try:
            block, last_total = _line(out, line, number, block, last_total)
        except SizeError as exc:
            raise SizeError(f"line {number}: {exc}") from None
    return LibtpuLog(out, names)


def summary_for(log: LibtpuLog, module_name: str) -> ProgramMemory | str:
    """The one summary of `module_name` in the log, or why there is none to use.

    A summary named for the module is its; an unnamed one only where the log gives
    no module name but this one (a log of one compile cut to its memory lines). Two
    or more that could be the module's and differ: ambiguous (never a guess)."""
    named = [p for p in log.programs if p.module_name == module_name]
    unnamed = [p for p in log.programs if p.module_name is None]
    if not named and unnamed:
        if log.names != {module_name}:
            given = ", ".join(sorted(log.names)) or "none"
            return (
                f"its summaries do not name their module, and it names modules {given}:"
                f" which is {module_name}'s is not known"
            )
        named = unnamed
    if not named:
        return f"it holds no summary of {module_name}"
    if len(named) > 1 and any(_figures(p) != _figures(named[0]) for p in named[1:]):
        lines = ", ".join(str(p.line) for p in named)
        return f"it holds {len(named)} different summaries of {module_name} (lines {lines})"
    return named[0]


def _figures(program: ProgramMemory) -> tuple:
    """What a summary says, for telling two summaries apart."""
    return (program.totals, program.outputs, program.requirements)


def _line(out, line, number, block, last_total):
    """Read one line into the summaries; returns the block and total it leaves open."""
    m = _MODULE.search(line)
    if m:
        out.append(ProgramMemory(m.group("name"), number))
        return None, None
    if _PROGRAM_USAGE.search(line) and (not out or _started(out[-1])):
        out.append(ProgramMemory(None, number))  # a summary whose name line was cut
        return None, None
    m = _TOTAL.search(line)
    if m:
        program = _open(out, number, m.group("space"), "totals")
        block = program.totals[m.group("space")] = SpaceRequirement(_bytes(m.group("size")))
        return block, m.group("space")
    m = _REQUIREMENT.search(line)
    if m:
        program = _open(out, number, m.group("space"), "requirements")
        block = program.requirements[m.group("space")] = SpaceRequirement(_bytes(m.group("size")))
        return block, None
    if not out:
        return None, None
    program = out[-1]
    m = _OUTPUT.search(line)
    if m and last_total is not None:
        program.outputs[last_total] = (_bytes(m.group("size")), _bytes(m.group("shared")))
        return None, None
    m = _PART.match(line)
    if m and block is not None and not _GLOG.match(line):
        name = m.group("name").strip()
        block.parts[name] = _bytes(m.group("size"))
        block.part_slack[name] = slack(m.group("size"))
        temp = _HLO_TEMP.search(m.group("rest") or "")
        if name == "HLO temp" and temp:
            block.hlo_temp = HloTemp(
                _bytes(m.group("size")),
                float(temp.group("util")),
                _bytes(temp.group("unpadded")),
                _bytes(temp.group("padded")),
                _bytes(temp.group("frag")),
                (slack(m.group("size")), slack(temp.group("padded")), slack(temp.group("frag"))),
            )
        return block, last_total
    if _GLOG.match(line):
        return None, None
    return block, last_total


def _started(program: ProgramMemory) -> bool:
    return bool(program.totals or program.outputs or program.requirements)


def _open(out: list[ProgramMemory], number: int, space: str, kind: str) -> ProgramMemory:
    """The summary a `Total`/`Program ... requirement` line belongs to: the open one,
    or a new unnamed one if none is open or this space's block is in it already."""
    if not out or space in getattr(out[-1], kind):
        out.append(ProgramMemory(None, number))
    return out[-1]


@dataclass(frozen=True)
class LibtpuCompanion:
    """A libtpu log beside a module that names it: its summary of the module's compile,
    or why none is used (the figures it would fill stay NULL, with a diagnostic)."""

    path: str
    summary: ProgramMemory | None = None
    why: str | None = None


def companions(logs: list[tuple[str, LibtpuLog | str]], modules: dict[str, int]) -> dict:
    """{module name: LibtpuCompanion} for the modules of one directory (`modules`: name
    -> how many module groups have it) from its libtpu logs (each read, or why not).

    A module gets the summary that names it in exactly one log; a log that names
    several modules gives each its own summary (by name) or none; a log that names no
    module gives none, and says so to every module of the directory; two modules of one
    name in the directory, or two logs with a summary for it: which compile is which is
    not known, so none."""
    out: dict[str, LibtpuCompanion] = {}
    for name, count in sorted(modules.items()):
        found = [(path, _pick(log, name)) for path, log in logs if _names(log, name)]
        unnamed = [path for path, log in logs if isinstance(log, LibtpuLog) and not log.names]
        if not found and unnamed:
            out[name] = LibtpuCompanion(unnamed[0], why="it names no module")
        elif found:
            out[name] = _one(name, count, found)
    return out


def _names(log: LibtpuLog | str, name: str) -> bool:
    return isinstance(log, str) or name in log.names


def _pick(log: LibtpuLog | str, name: str) -> ProgramMemory | str:
    return log if isinstance(log, str) else summary_for(log, name)


def _one(name: str, count: int, found: list[tuple[str, ProgramMemory | str]]) -> LibtpuCompanion:
    usable = [(p, s) for p, s in found if isinstance(s, ProgramMemory)]
    path = (usable or found)[0][0]
    if count > 1:
        return LibtpuCompanion(path, why=f"{count} modules here are named {name}")
    if len(usable) > 1 and any(_figures(s) != _figures(usable[0][1]) for _, s in usable[1:]):
        others = ", ".join(p for p, _ in usable[1:])
        return LibtpuCompanion(path, why=f"{others} also summarises a compile of {name}")
    if not usable:
        return LibtpuCompanion(path, why=str(found[0][1]))
    return LibtpuCompanion(path, summary=usable[0][1])
