"""memory_analysis()'s TPU figures that libtpu computes (closed code): the temp, from
the buffer assignment and, where the dump alone cannot say, libtpu's own log of the
compile; the generated code size, from the log alone (docs/metrics.md, TPU temp).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from bufferhouse.errors import DumpError
from bufferhouse.parse.tpulog import LibtpuCompanion, SpaceRequirement

__all__ = ["CODE_STEP", "TPU_TEMP_STEP", "TempParts", "TpuFigures", "tpu_figures", "tpu_temp_parts"]

#: libtpu counts the HBM temp allocation in steps of 16 KiB: the alignment
#: CombineTempAllocations puts between the parts it joins into the TPU temp
#: allocation (every part of every fixture starts at a multiple of 16 KiB), and the
#: `HLO temp` figure libtpu's log prints under `Program hbm requirement`.
TPU_TEMP_STEP = 16 * 1024
#: Every generated code size seen is a multiple of 512 bytes (the 37 compiles of
#: tests/data/tpu and tests/data/jax012): a part libtpu prints to 0.1 KiB (52 bytes
#: either way) then names one such multiple, which is read as its size.
CODE_STEP = 512


@dataclass(frozen=True)
class TempParts:
    """What the buffer assignment says of libtpu's HBM temp: R, memory space 0's temp
    allocations holding heap-simulated values, each rounded up to 16 KiB; P, the most
    temp bytes in use at once plus the tuple tables there (None without a color-0 temp
    peak); whether any value there is heap-simulated, and whether all such are scalars."""

    rounded: int
    padded: int | None
    heap: bool
    scalars_only: bool

    def rule(self) -> int | None:
        """R + (R - P); 0 when nothing is heap-simulated (libtpu prints no HBM temp);
        None when every heap-simulated value is a scalar (libtpu counts some such
        compiles by the rule and gives 0 for others: only its log tells) or without P."""
        if not self.heap:
            return 0
        if self.scalars_only or self.padded is None:
            return None
        return 2 * self.rounded - self.padded


@dataclass(frozen=True)
class TpuFigures:
    temp_bytes: int | None
    code_bytes: int | None
    warnings: list[DumpError]


def tpu_temp_parts(
    allocations: pa.Table,
    is_temp: np.ndarray,
    assignments: pa.Table,
    is_tuple: np.ndarray,
    is_scalar: np.ndarray,
    temp_peak: int | None,
) -> TempParts:
    """R and P over memory space 0's temp allocations (docs/metrics.md, TPU temp).
    `is_tuple`, `is_scalar`: row for row with `assignments`."""
    index = allocations["allocation_index"].to_numpy()
    color = allocations["color"].to_numpy()
    size = allocations["size"].to_numpy()
    candidates = set(index[is_temp & (color == 0)].tolist())
    a_alloc = assignments["allocation_index"].to_numpy().tolist()
    a_offset = assignments["byte_offset"].to_numpy().tolist()
    a_size = assignments["size"].to_numpy().tolist()
    heap = [
        (a, scalar)
        for a, s, tup, scalar in zip(a_alloc, a_size, is_tuple.tolist(), is_scalar.tolist())
        if a in candidates and s and not tup
    ]
    counted = {a for a, _ in heap}
    rounded = sum(
        -(-int(s) // TPU_TEMP_STEP) * TPU_TEMP_STEP
        for i, s in zip(index.tolist(), size.tolist())
        if i in counted
    )
    tuples = {
        (a, off, s)
        for a, off, s, tup in zip(a_alloc, a_offset, a_size, is_tuple.tolist())
        if a in counted and tup and s
    }
    padded = None if temp_peak is None else temp_peak + sum(s for _, _, s in tuples)
    return TempParts(rounded, padded, bool(heap), all(scalar for _, scalar in heap))


def tpu_figures(parts: TempParts, log: LibtpuCompanion | None) -> TpuFigures:
    """The temp by the rule, decided or checked by libtpu's log where one names the
    module; the code size from the log. A log that disagrees with the buffer assignment
    leaves the temp NULL (never a wrong figure), with a warning saying why."""
    temp = parts.rule()
    if log is None:
        return TpuFigures(temp, None, [])
    if log.summary is None or "hbm" not in log.summary.requirements:
        why = log.why or "it has no `Program hbm requirement` for the module"
        return TpuFigures(temp, None, [_warn(log, 0, f"not used: {why}", temp)])
    hbm = log.summary.requirements["hbm"]
    line = log.summary.line
    logged, why = _logged_temp(parts, hbm)
    if why is not None:
        return TpuFigures(None, code_bytes(hbm), [_warn(log, line, why, None)])
    return TpuFigures(logged, code_bytes(hbm), [])


def _logged_temp(parts: TempParts, hbm: SpaceRequirement) -> tuple[int | None, str | None]:
    """The temp where the log's `Program hbm requirement` agrees with the buffer
    assignment, or why it does not."""
    hlo = hbm.hlo_temp
    if "HLO temp" not in hbm.parts:  # libtpu holds no HBM temp: its figure is 0
        if parts.heap and not parts.scalars_only:
            return None, "it prints no HBM `HLO temp`, but the module has HBM temporaries"
        return 0, None
    if hlo is None or not parts.heap or parts.padded is None:
        return None, "its HBM `HLO temp` cannot be checked against the buffer assignment"
    r, p = parts.rounded, parts.padded
    checks = (("HLO temp", r, hlo.bytes), ("Padded", p, hlo.padded_bytes))
    checks += (("fragmentation", r - p, hlo.fragmentation_bytes),)
    for (name, ours, printed), slack in zip(checks, hlo.slack):
        if slack < 0 or abs(ours - printed) > slack:
            return None, f"its HBM {name} ({printed:,} bytes) is not the dump's {ours:,}"
    return 2 * r - p, None


def code_bytes(hbm: SpaceRequirement) -> int | None:
    """memory_analysis()'s generated_code_size_in_bytes: the `Program hbm requirement`
    less its `HLO temp` (the overlays and globals), where each part is printed in
    bytes or to 0.1 KiB near a multiple of CODE_STEP; None otherwise."""
    total = 0
    for name, printed in hbm.parts.items():
        if name == "HLO temp":
            continue
        slack = hbm.part_slack.get(name, -1)
        step = round(printed / CODE_STEP) * CODE_STEP
        if slack == 0:
            total += printed
        elif 0 < slack < CODE_STEP // 2 and abs(step - printed) <= slack:
            total += step
        else:
            return None
    return total if hbm.parts.keys() - {"HLO temp"} else None


def _warn(log: LibtpuCompanion, line: int, why: str, temp: int | None) -> DumpError:
    kept = "xla_temp_bytes stays NULL" if temp is None else f"xla_temp_bytes {temp:,} by the rule"
    return DumpError(log.path, line, f"libtpu log for this module {why}; {kept}")
