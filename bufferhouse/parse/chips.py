"""Per-chip memory of the accelerators bufferhouse plans for, with where each figure is from.

Used only where the dump states no capacity: a GPU target config carries the
device's memory (device_memory_size), and a TPU's E1000 states the HBM the
compiler may use ("available HBM"), which is below the chip's HBM (the runtime
reserves some). The table gives both where they are known; `usable_bytes` is what
a fit is judged against.
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1 << 30


@dataclass(frozen=True)
class Chip:
    name: str  # v5e, h100, ...
    device_kind: str  # as jax's Device.device_kind / the dump names it
    hbm_bytes: int  # the chip's memory, from the vendor's specification
    usable_bytes: int  # what XLA lets a program use, where measured; else hbm_bytes
    source: str  # where the figures are from


CHIPS: tuple[Chip, ...] = (
    Chip(
        "v5e",
        "TPU v5 lite",
        16 * GIB,
        round(15.75 * GIB),
        "16 GiB HBM2 per chip (cloud.google.com/tpu/docs/v5e); 15.75G available HBM"
        " as libtpu 0.0.50's E1000 states it (tests/data/jax012/sweep)",
    ),
    Chip(
        "v6e",
        "TPU v6 lite",
        32 * GIB,
        round(31.24 * GIB),
        "32 GiB HBM per chip (cloud.google.com/tpu/docs/v6e); 31.24G available HBM"
        " as libtpu 0.0.50's E1000 states it (tests/data/jax012/sweep)",
    ),
    Chip(
        "v5p",
        "TPU v5",
        95 * GIB,
        95 * GIB,
        "95 GiB HBM2e per chip (cloud.google.com/tpu/docs/v5p); usable not measured",
    ),
    Chip(
        "v4",
        "TPU v4",
        32 * GIB,
        32 * GIB,
        "32 GiB HBM2 per chip (cloud.google.com/tpu/docs/v4); usable not measured",
    ),
    Chip(
        "h100",
        "NVIDIA H100 80GB HBM3",
        84_942_979_072,
        84_942_979_072,
        "device_memory_size of XLA's gpu_specs/h100_sxm.txtpb (the CUDA plugin's H100 spec)",
    ),
    Chip(
        "a100",
        "NVIDIA A100-SXM4-80GB",
        80 * 10**9,
        80 * 10**9,
        "80 GB HBM2e (NVIDIA A100 datasheet); usable not measured",
    ),
)

BY_KIND = {c.device_kind.lower(): c for c in CHIPS}
BY_NAME = {c.name: c for c in CHIPS}


def chip(device_kind_or_name: str | None) -> Chip | None:
    """The table's chip for a device kind (`TPU v5 lite`) or a name (`v5e`); None if unknown."""
    if not device_kind_or_name:
        return None
    key = device_kind_or_name.strip().lower()
    return BY_KIND.get(key) or BY_NAME.get(key.removeprefix("gpu:").split(":")[0].split("@")[0])
