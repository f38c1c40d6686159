"""The target a module was compiled for, and its per-chip capacity, from the files
XLA writes beside the dump.

- TPU: `module_NNNN.<name>.<...>/topology.pb` (PjRtTopologyDescriptionProto:
  platform_name = 2, platform_version = 3, whose first line names the chip,
  `TFRT TPU v5 lite`) and `<stem>.target_arguments.txt` (`tpu_topology_args`:
  chips_per_host_bounds and host_bounds give the chip count).
- GPU: `<stem>.gpu_target_config.pbtxt` (GpuTargetConfigProto text:
  device_description_str names the device, gpu_device_info.device_memory_size is
  its memory in bytes: a capacity XLA states).
- Else the capacity comes from the documented table (chips.py) by device kind.

Files are found by the module's stem prefix (`module_0000.jit_step.cl_1004524046`)
in the dump's directory; a file that is absent or does not parse gives nothing.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from bufferhouse.parse.chips import chip

_NUMBERED = re.compile(r"^(module_\d+\.[^.]+)\.")
_BOUNDS = re.compile(r"(chips_per_host_bounds|host_bounds) \{\s*([^}]*)\}")
_AXIS = re.compile(r"([xyz]): (\d+)")


@dataclass(frozen=True)
class Target:
    platform: str | None  # tpu, gpu
    device_kind: str | None  # TPU v5 lite, NVIDIA H100 80GB HBM3
    chips: int | None
    capacity_bytes: int | None
    #: dump (a file of the compile states it) or table (chips.py); None without one.
    capacity_source: str | None
    files: tuple[str, ...] = ()


def read_target(directory: str, stem: str) -> Target | None:
    """The target of the module whose files have `stem` in `directory`; None if no file
    beside it names one."""
    try:
        names = os.listdir(directory)
    except OSError:
        return None
    prefix = _prefix(stem)
    mine = [n for n in names if n.startswith(prefix)]
    platform = kind = None
    chips = capacity = None
    source = None
    used: list[str] = []
    for name in mine:
        path = os.path.join(directory, name)
        if name.endswith(".gpu_target_config.pbtxt"):
            platform, kind, capacity = "gpu", *_gpu_config(path)
            source = "dump" if capacity else None
            used.append(path)
        elif name.endswith(".target_arguments.txt"):
            chips = _tpu_chips(path) or chips
            used.append(path)
        elif os.path.isdir(path) and os.path.exists(os.path.join(path, "topology.pb")):
            platform_name, version = _topology(os.path.join(path, "topology.pb"))
            platform = platform or platform_name
            if version and platform_name == "tpu":
                kind = version.removeprefix("TFRT ").strip()
            used.append(os.path.join(path, "topology.pb"))
    if platform is None and kind is None:
        return None
    if capacity is None and (known := chip(kind)) is not None:
        capacity, source = known.usable_bytes, "table"
    return Target(platform, kind, chips, capacity, source, tuple(sorted(used)))


def _prefix(stem: str) -> str:
    m = _NUMBERED.match(stem)
    return m.group(1) + "." if m else stem.split("-", 1)[0]


def _gpu_config(path: str) -> tuple[str | None, int | None]:
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None, None
    kind = re.search(r'device_description_str: "([^"]*)"', text)
    memory = re.search(r"device_memory_size: (\d+)", text)
    return (kind.group(1) if kind else None), (int(memory.group(1)) if memory else None)


def _tpu_chips(path: str) -> int | None:
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    total = 1
    found = False
    for _, body in _BOUNDS.findall(text):
        for _, n in _AXIS.findall(body):
            total *= int(n)
            found = True
    return total if found else None


def _topology(path: str) -> tuple[str | None, str | None]:
    """platform_name and the first line of platform_version of a topology.pb."""
    try:
        with open(path, "rb") as f:
            data = f.read(1 << 20)
    except OSError:
        return None, None
    fields: dict[int, bytes] = {}
    at = 0
    try:
        while at < len(data):
            key, at = _varint(data, at)
            number, wire = key >> 3, key & 7
            if wire == 0:
                _, at = _varint(data, at)
            elif wire == 2:
                size, at = _varint(data, at)
                fields.setdefault(number, data[at : at + size])
                at += size
            else:
                break
    except IndexError:
        return None, None
    name = fields.get(2, b"").decode("utf-8", "replace") or None
    version = fields.get(3, b"").decode("utf-8", "replace").split("\n", 1)[0] or None
    return name, version


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7
