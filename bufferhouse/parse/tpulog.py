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
What the buffer assignment cannot say comes only from here: the reserved HBM, the
program (code) size, the scoped VMEM/SMEM. The rest checks the warehouse's own
figures (docs/metrics.md, TPU temp): `HLO temp` of hbm is memory space 0's temp
allocation rounded up to 16 KiB, `Padded` its most bytes in use plus the tuple
pointer tables, and the fragmentation their difference.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bufferhouse.parse.oom.sizes import SizeError, parse_size

__all__ = ["HloTemp", "ProgramMemory", "SpaceRequirement", "parse_libtpu_log"]

_SZ = r"-?(?:\d+(?:\.\d*)?|\.\d+)\s?[A-Za-z]*"
_MODULE = re.compile(r"XLA::TPU module name: (?P<name>\S+)")
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


@dataclass
class SpaceRequirement:
    """`Program <space> requirement X:` and its parts (reserved, scoped, overlays, ...)."""

    bytes: int
    parts: dict[str, int] = field(default_factory=dict)
    hlo_temp: HloTemp | None = None


@dataclass
class ProgramMemory:
    """One compile's summary: its module, the `Total <space> usage >=` blocks (with their
    parts and the output line after each) and the per-space program requirements."""

    module_name: str
    line: int
    totals: dict[str, SpaceRequirement] = field(default_factory=dict)
    outputs: dict[str, tuple[int, int]] = field(default_factory=dict)  # space -> (size, shared)
    requirements: dict[str, SpaceRequirement] = field(default_factory=dict)


def _bytes(text: str) -> int:
    return parse_size(text)[0]


def parse_libtpu_log(text: str) -> list[ProgramMemory]:
    """Every compile's memory summary in a libtpu stderr log, in log order. Lines that
    are no part of a summary are passed over; a size that does not parse raises
    SizeError naming the line."""
    out: list[ProgramMemory] = []
    block: SpaceRequirement | None = None
    last_total = None
    for number, line in enumerate(text.splitlines(), 1):
        try:
            block, last_total = _line(out, line, number, block, last_total)
        except SizeError as exc:
            raise SizeError(f"line {number}: {exc}") from None
    return out


def _line(out, line, number, block, last_total):
    """Read one line into the summaries; returns the block and total it leaves open."""
    m = _MODULE.search(line)
    if m:
        out.append(ProgramMemory(m.group("name"), number))
        return None, None
    if not out:
        return None, None
    program = out[-1]
    m = _TOTAL.search(line)
    if m:
        block = program.totals[m.group("space")] = SpaceRequirement(_bytes(m.group("size")))
        return block, m.group("space")
    m = _REQUIREMENT.search(line)
    if m:
        block = program.requirements[m.group("space")] = SpaceRequirement(_bytes(m.group("size")))
        return block, None
    m = _OUTPUT.search(line)
    if m and last_total is not None:
        program.outputs[last_total] = (_bytes(m.group("size")), _bytes(m.group("shared")))
        return None, None
    m = _PART.match(line)
    if m and block is not None and not _GLOG.match(line):
        name = m.group("name").strip()
        block.parts[name] = _bytes(m.group("size"))
        temp = _HLO_TEMP.search(m.group("rest") or "")
        if name == "HLO temp" and temp:
            block.hlo_temp = HloTemp(
                _bytes(m.group("size")),
                float(temp.group("util")),
                _bytes(temp.group("unpadded")),
                _bytes(temp.group("padded")),
                _bytes(temp.group("frag")),
            )
        return block, last_total
    if _GLOG.match(line):
        return None, None
    return block, last_total
