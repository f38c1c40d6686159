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


class Listings:
    """Each directory's names, listed once, by their numbered stem prefix: a dump directory
    of a fleet holds thousands of modules' files, and listing it again for each module
    (then testing every name) made record_targets quadratic (1,050 modules a directory:
    3 listings of ~3,300 names a module)."""

    def __init__(self) -> None:
        self._dirs: dict[str, tuple[list[str], dict[str, list[str]]] | None] = {}

    def names_with(self, directory: str, prefix: str) -> list[str] | None:
        """The names in `directory` that start with `prefix`, in listing order; None if
        it cannot be listed."""
        if directory not in self._dirs:
            self._dirs[directory] = _listing(directory)
        listed = self._dirs[directory]
        if listed is None:
            return None
        names, numbered = listed
        if _NUMBERED.match(prefix) and prefix.count(".") == 2:  # module_NNNN.<name>.
            return numbered.get(prefix, [])
        return [n for n in names if n.startswith(prefix)]


def _listing(directory: str) -> tuple[list[str], dict[str, list[str]]] | None:
    try:
        names = os.listdir(directory)
    except OSError:
        return None
    numbered: dict[str, list[str]] = {}
    for n in names:
        if (m := _NUMBERED.match(n)) is not None:
            numbered.setdefault(m.group(1) + ".", []).append(n)
    return names, numbered


def read_target(directory: str, stem: str, listings: Listings | None = None) -> Target | None:
    """The target of the module whose files have `stem` in `directory`; None if no file
    beside it names one. `listings`: directories listed already (by default, listed
    here)."""
    mine = (listings or Listings()).names_with(directory, _prefix(stem))
    if mine is None:
        return None
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
