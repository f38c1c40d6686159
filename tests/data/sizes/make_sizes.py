"""Make the two-size fixtures: the same five programs compiled by jax on CPU at a small
and a larger size (every array dimension times SCALE), each dumped as text and .hlo.pb
of one compile, so a diff of the two sizes must show every module grown in any form.

    JAX_PLATFORMS=cpu /path/to/jax/python tests/data/sizes/make_sizes.py

Each program compiles in a process of its own (XLA_FLAGS is read once per process).
manifest.json records each module's memory_analysis(); the project never imports jax.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SIZES = {"s1": 1, "s2": 2}
#: program -> host devices it needs
PROGRAMS = {"scan": 1, "remat": 1, "donation": 1, "while_loop": 1, "sharded": 2}
KEEP = (
    "_after_optimizations.hlo.pb",
    "_after_optimizations-buffer-assignment.txt",
    "_after_optimizations-buffer-assignment-values.txt",
    "_after_optimizations-live-range.txt",
    "_after_optimizations-memory-usage-report.txt",
    "_after_optimizations.txt",
)


def named(fn, name: str):
    """`fn` under `name`: jax names the module jit_<name>."""
    fn.__name__ = fn.__qualname__ = name
    return fn


def compile_one(program: str, scale: int) -> dict:
    """Runs in the child: compile `program` at `scale` and return memory_analysis()."""
    import jax
    import jax.numpy as jnp

    n = 32 * scale
    f32 = jnp.float32
    spec = jax.ShapeDtypeStruct
    if program == "scan":

        def step(h, x):
            return jnp.tanh(h @ x), h.sum()

        fn = jax.jit(named(lambda h, xs: jax.lax.scan(step, h, xs), program))
        args = (spec((n, n), f32), spec((8, n, n), f32))
    elif program == "remat":

        def mlp(w, x):
            for _ in range(3):
                x = jax.checkpoint(lambda x, w=w: jnp.tanh(x @ w))(x)
            return x.sum()

        fn = jax.jit(named(jax.grad(mlp), program))
        args = (spec((n, n), f32), spec((n, n), f32))
    elif program == "donation":
        fn = jax.jit(named(lambda w, g: w - 0.1 * g, program), donate_argnums=0)
        args = (spec((n, 4 * n), f32), spec((n, 4 * n), f32))
    elif program == "while_loop":

        def body(c):
            i, x = c
            return i + 1, jnp.sin(x) @ x

        fn = jax.jit(
            named(lambda x: jax.lax.while_loop(lambda c: c[0] < 5, body, (0, x))[1], program)
        )
        args = (spec((n, n), f32),)
    else:
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        mesh = Mesh(jax.devices()[:2], ("x",))
        sharded = NamedSharding(mesh, PartitionSpec("x", None))
        fn = jax.jit(named(lambda a, b: jnp.tanh(a @ b), program), in_shardings=(sharded, None))
        args = (spec((2 * n, n), f32), spec((n, n), f32))
    m = fn.lower(*args).compile().memory_analysis()  # the jit is named after the program
    return {
        k: getattr(m, k)
        for k in (
            "argument_size_in_bytes",
            "output_size_in_bytes",
            "alias_size_in_bytes",
            "temp_size_in_bytes",
            "peak_memory_in_bytes",
        )
        if hasattr(m, k)
    }


def main() -> None:
    if len(sys.argv) == 3:  # the child
        print(json.dumps(compile_one(sys.argv[1], int(sys.argv[2]))))
        return
    import jax

    manifest = {"jax": jax.__version__, "modules": {}}
    for size, scale in SIZES.items():
        out = HERE / size
        shutil.rmtree(out, ignore_errors=True)
        for program, devices in PROGRAMS.items():
            with tempfile.TemporaryDirectory() as tmp:
                env = dict(
                    os.environ,
                    JAX_PLATFORMS="cpu",
                    XLA_FLAGS=f"--xla_dump_to={tmp} --xla_dump_hlo_as_proto --xla_dump_hlo_as_text"
                    f" --xla_force_host_platform_device_count={devices}",
                )
                child = [sys.executable, __file__, program, str(scale)]
                result = subprocess.run(child, env=env, check=True, capture_output=True, text=True)
                dest = out / program
                dest.mkdir(parents=True)
                for f in sorted(Path(tmp).iterdir()):
                    if f.name.startswith("module_") and f.name.endswith(KEEP) and "jit_" in f.name:
                        shutil.copy(f, dest / f.name)
                manifest["modules"][f"{size}/{program}"] = json.loads(result.stdout)
    (HERE / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
