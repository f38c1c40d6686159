"""Make the snapshot-diff fixtures: one program run twice, as `base` and as `head`, on
2 CPU devices, each run saving `start.prof` and `end.prof`; and the oracle
(manifest.json).

    JAX_VENV/bin/python tests/data/runtime-diff/make_pair.py   # jax 0.12, CPU

Each variant runs in a process of its own, by the script's path relative to the
repository root, so the stacks say tests/data/runtime-diff/make_pair.py; the
frames of jax's own files are cut to `.venv/lib/pythonX.Y/site-packages/...`
(still under a `jax` directory, so still jax's frames), no machine path kept.
Pinned: jax 0.12.0.1 on CPU (the manifest records the version that made them).

The two variants differ by known allocations, each made at a line marked
`# LINE: name` (its number is looked up, not written down):

- `params`: the same in both (replicated over the 2 devices): unchanged;
- `cache`: CACHE[variant] sharded arrays appended one per step: grows;
- `scratch`: an array on device 0 that head deletes before `end.prof`: gone;
- `split`: on device 1, base makes one (16, 128) array and head two (8, 128)
  arrays at the same line: the same bytes, one buffer more;
- `extra` (in function `extra_buffers`, head only): a replicated array: new.

The oracle is computed from each array's shape, dtype and sharding, never from
the arrays: per device one buffer of the shard's bytes for each device the
sharding places it on. Before each snapshot the script checks that
jax.live_arrays() is exactly the arrays listed, so it counts every array held.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
#: The script as the profiles' stacks name it: relative to the repository root.
ME = str(Path(__file__).resolve().relative_to(ROOT))
DEVICES = 2
CACHE = {"base": 2, "head": 5}


def _bytes(shape, dtype, sharding) -> dict[str, dict[str, int]]:
    """device -> {bytes, count} of one array."""
    import numpy as np

    shard = sharding.shard_shape(shape)
    size = int(np.prod(shard, dtype=np.int64)) * np.dtype(dtype).itemsize
    return {str(d): {"bytes": size, "count": 1} for d in sharding.devices_indices_map(shape)}


def _add(total: dict, part: dict) -> None:
    for device, v in part.items():
        entry = total.setdefault(device, {"bytes": 0, "count": 0})
        entry["bytes"] += v["bytes"]
        entry["count"] += v["count"]


class Held:
    """The arrays the program holds, each with the line tag that made it and its oracle."""

    def __init__(self) -> None:
        self.arrays: list[tuple[str, object, dict]] = []

    def put(self, tag: str, array) -> object:
        self.arrays.append((tag, array, _bytes(array.shape, array.dtype, array.sharding)))
        return array

    def drop(self, tag: str) -> None:
        self.arrays = [a for a in self.arrays if a[0] != tag]

    def snapshot(self, path: Path) -> dict:
        """Check that jax holds exactly these arrays, save the profile, return the oracle:
        per device totals and per line tag."""
        import jax

        live = {id(a) for a in jax.live_arrays()}
        if live != {id(a) for _, a, _ in self.arrays}:
            sys.exit(f"{path.name}: {len(live)} live arrays, {len(self.arrays)} listed")
        jax.profiler.save_device_memory_profile(str(path))
        devices: dict = {}
        lines: dict = {}
        for tag, _, part in self.arrays:
            _add(devices, part)
            _add(lines.setdefault(tag, {}), part)
        return {"devices": dict(sorted(devices.items())), "lines": lines}


def extra_buffers(held: Held, replicated):
    import jax
    import numpy as np

    host = np.ones((32,), np.int32)
    return held.put("extra", jax.device_put(host, replicated))  # LINE: extra


def run(variant: str, out: Path) -> dict:
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={DEVICES}"
    os.environ["JAX_PLATFORMS"] = "cpu"
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, SingleDeviceSharding
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()), ("x",))
    sharded, replicated = NamedSharding(mesh, P("x")), NamedSharding(mesh, P())
    first, second = (SingleDeviceSharding(d) for d in jax.devices())
    held = Held()
    params, scratch = np.ones((64, 16), np.float32), np.ones((256,), np.float32)
    held.put("params", jax.device_put(params, replicated))  # LINE: params
    held.put("scratch", jax.device_put(scratch, first))  # LINE: scratch
    pieces = 1 if variant == "base" else 2
    piece = np.ones((16 // pieces, 128), np.float32)
    for _ in range(pieces):
        held.put("split", jax.device_put(piece, second))  # LINE: split
    oracle = {"start.prof": held.snapshot(out / "start.prof")}
    entry = np.ones((4, 64), np.float32)
    for _ in range(CACHE[variant]):
        held.put("cache", jax.device_put(entry, sharded))  # LINE: cache
    if variant == "head":
        held.drop("scratch")  # its last reference: the buffer is freed
        extra_buffers(held, replicated)
    import gc

    gc.collect()
    oracle["end.prof"] = held.snapshot(out / "end.prof")
    oracle["jax"] = jax.__version__
    return oracle


#: An installed package's file, from the interpreter's prefix on.
_SITE = re.compile(r"^/.*?/(lib/python[^/]+/site-packages/)")


def _varint(data: bytes, i: int) -> tuple[int, int]:
    shift = n = 0
    while True:
        b = data[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return n, i


def _encode_varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _without_machine_paths(prof: Path) -> None:
    """The Profile's string_table (field 6, pprof's profile.proto) with each installed
    file's path cut to `.venv/lib/...`; every other top-level field copied as it is."""
    import gzip

    data = gzip.decompress(prof.read_bytes())
    out, i = bytearray(), 0
    while i < len(data):
        start = i
        key, i = _varint(data, i)
        wire = key & 7
        if wire == 0:
            _, i = _varint(data, i)
        elif wire in (1, 5):
            i += 8 if wire == 1 else 4
        elif wire == 2:
            size, i = _varint(data, i)
            if key >> 3 == 6:
                text = _SITE.sub(r".venv/\1", data[i : i + size].decode()).encode()
                out += _encode_varint(key) + _encode_varint(len(text)) + text
                i += size
                continue
            i += size
        else:
            sys.exit(f"{prof}: top-level field {key >> 3} of wire type {wire}")
        out += data[start:i]
    prof.write_bytes(gzip.compress(bytes(out), mtime=0))


def main() -> None:
    if len(sys.argv) == 3:  # one variant, in a process of its own
        variant, out = sys.argv[1], HERE / sys.argv[2]
        out.mkdir(parents=True, exist_ok=True)
        print(json.dumps(run(variant, out)))
        return
    lines = {}
    for n, text in enumerate((ROOT / ME).read_text().splitlines(), 1):
        marked = re.search(r"\)  # LINE: (\w+)$", text)
        if marked:
            lines[marked.group(1)] = n
    manifest: dict = {"source_file": ME, "lines": lines, "variants": {}}
    for variant in CACHE:
        # run by its relative path (runpy keeps it as the code's file name; python
        # itself would make it absolute), so the stacks hold no machine path
        child = f"import runpy, sys; sys.argv = [{ME!r}, {variant!r}, {variant!r}]; "
        child += f"runpy.run_path({ME!r}, run_name='__main__')"
        done = subprocess.run(
            [sys.executable, "-c", child],
            check=True,
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        oracle = json.loads(done.stdout.splitlines()[-1])
        for name in ("start.prof", "end.prof"):
            _without_machine_paths(HERE / variant / name)
        manifest["jax"] = oracle.pop("jax")
        manifest["variants"][variant] = oracle
    (HERE / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
