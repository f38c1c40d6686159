"""Make the device memory profile fixtures: one jax run on 4 CPU devices, its dumps
and two snapshots, and the oracle (manifest.json).

    .venv/bin/pip install jax   # in a venv of your own: never a dependency
    .venv/bin/python tests/data/runtime/make_profiles.py

The run (run/): parameters sharded over the 4 devices, a replicated vector and an
array on one device; a jitted step whose output is sharded; then `before.prof`;
then a cache that grows by CACHE_ADDS sharded arrays (one line of this file makes
them); then `after.prof`. XLA dumps the step's module under run/dumps (text buffer
assignment; only jit_step, to keep the fixture small).

The oracle is computed from each array's shape, dtype and sharding, never from
the arrays: per device, one buffer of the shard's bytes (sharding.shard_shape)
for each device the sharding places it on (devices_indices_map). Before each
snapshot the script checks that jax.live_arrays() is exactly the arrays listed,
so the oracle counts every array the devices hold. The step's memory_analysis()
is recorded too (the compile-time transient device-budget adds).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUN = HERE / "run"
DEVICES = 4
CACHE_ADDS = 3
#: The dump files kept: the ones bufferhouse reads.
KEEP = (
    "_after_optimizations.txt",
    "_after_optimizations-buffer-assignment.txt",
    "_after_optimizations-buffer-assignment-values.txt",
    "_after_optimizations-memory-usage-report.txt",
)


def _expected(specs: list[tuple[str, tuple[int, ...], object, object]]) -> dict[str, dict]:
    """device -> {bytes, count} of the arrays described by (name, shape, dtype, sharding)."""
    import numpy as np

    out: dict[str, dict] = {}
    for _, shape, dtype, sharding in specs:
        shard = sharding.shard_shape(shape)
        size = int(np.prod(shard, dtype=np.int64)) * np.dtype(dtype).itemsize
        for device in sharding.devices_indices_map(shape):
            entry = out.setdefault(str(device), {"bytes": 0, "count": 0})
            entry["bytes"] += size
            entry["count"] += 1
    return dict(sorted(out.items()))


def _check_live(specs: list, arrays: list) -> None:
    """jax.live_arrays() is the arrays described, one for one (nothing else is live)."""
    import jax

    live = {id(a) for a in jax.live_arrays()}
    mine = {id(a) for a in arrays}
    if live != mine:
        sys.exit(f"live arrays differ from the oracle's list: {len(live)} live, {len(mine)} listed")
    for (name, shape, dtype, sharding), a in zip(specs, arrays):
        if a.shape != shape or a.dtype != dtype or a.sharding != sharding:
            sys.exit(f"{name}: made {a.shape} {a.dtype} {a.sharding}, described otherwise")


def main() -> None:
    if RUN.exists():
        shutil.rmtree(RUN)
    (RUN / "dumps").mkdir(parents=True)
    os.environ["XLA_FLAGS"] = (
        f"--xla_force_host_platform_device_count={DEVICES} --xla_dump_to={RUN / 'dumps'}"
        " --xla_dump_hlo_module_re=jit_step"
    )
    os.environ["JAX_PLATFORMS"] = "cpu"
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, SingleDeviceSharding
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()), ("x",))
    sharded, replicated = NamedSharding(mesh, P("x")), NamedSharding(mesh, P())
    one = SingleDeviceSharding(jax.devices()[1])
    specs = [
        ("weights", (64, 32), np.float32, sharded),
        ("table", (16,), np.int32, replicated),
        ("scalars", (10,), np.float32, one),
    ]
    arrays = [jax.device_put(np.ones(shape, dtype), s) for _, shape, dtype, s in specs]

    def step(w, t):
        return w * 2.0 + t.sum().astype(w.dtype)

    jitted = jax.jit(step, out_shardings=sharded)
    compiled = jitted.lower(arrays[0], arrays[1]).compile()
    analysis = compiled.memory_analysis()
    out = jitted(arrays[0], arrays[1])
    out.block_until_ready()
    specs.append(("step_output", (64, 32), np.float32, sharded))
    arrays.append(out)
    _check_live(specs, arrays)
    before = _expected(specs)
    jax.profiler.save_device_memory_profile(str(RUN / "before.prof"))

    cache_specs = [(f"cache_{i}", (8, 128), np.float32, sharded) for i in range(CACHE_ADDS)]
    cache = []
    for _, shape, dtype, s in cache_specs:
        cache.append(jax.device_put(np.ones(shape, dtype), s))  # CACHE LINE
    _check_live(specs + cache_specs, arrays + cache)
    after = _expected(specs + cache_specs)
    jax.profiler.save_device_memory_profile(str(RUN / "after.prof"))

    for path in (RUN / "dumps").iterdir():  # only what bufferhouse reads
        if path.is_dir():
            shutil.rmtree(path)
        elif not path.name.endswith(KEEP):
            path.unlink()
    source = Path(__file__).read_text().splitlines()
    cache_line = next(i for i, text in enumerate(source, 1) if text.endswith("# CACHE LINE"))
    manifest = {
        "jax": jax.__version__,
        "devices": [str(d) for d in jax.devices()],
        "snapshots": {"before.prof": before, "after.prof": after},
        "growth": {
            "source_file": "make_profiles.py",
            "source_line": cache_line,
            "per_device": _expected(cache_specs),
        },
        "step_memory_analysis": {
            "temp_size_in_bytes": analysis.temp_size_in_bytes,
            "output_size_in_bytes": analysis.output_size_in_bytes,
            "alias_size_in_bytes": analysis.alias_size_in_bytes,
            "argument_size_in_bytes": analysis.argument_size_in_bytes,
        },
    }
    (HERE / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
