"""Regenerate the heaprule fixture: small jax programs compiled on CPU, their text dumps, and
memory_analysis() per module (manifest.json), the oracle for modules.xla_peak_bytes.

Run with a Python that has jax (CPU) and protobuf, from this directory:

    python make_dumps.py [--proto-dir DIR]

Each program compiles in its own process (XLA_FLAGS is read once per process), dumping
with --xla_dump_hlo_as_text --xla_dump_hlo_as_proto into a scratch directory; only the
after-optimizations text files are kept here, gzipped (manifest keys name them without
.gz). --proto-dir keeps the .hlo.pb files (heap-simulator traces) for investigation;
they are not part of the fixture.
The manifest also records how many heap-simulator traces the buffer assignment that
memory_analysis() itself used carries (serialized_buffer_assignment_proto, field 4 of
BufferAssignmentProto, counted with a wire-format walk), because peak_memory_in_bytes is
computed from exactly that proto.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TEXT_SUFFIXES = (
    "-buffer-assignment.txt",
    "-buffer-assignment-values.txt",
    "-live-range.txt",
    "-memory-usage-report.txt",
)


def programs():
    """name -> (devices, build) where build() returns (jitted function, abstract args)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    f32 = jnp.float32
    S = jax.ShapeDtypeStruct

    def mlp_forward():
        def f(x, w1, w2):
            return jnp.tanh(x @ w1) @ w2

        return jax.jit(f), (S((32, 64), f32), S((64, 128), f32), S((128, 16), f32))

    def mlp_grad():
        def loss(w1, w2, x):
            return jnp.mean((jnp.tanh(x @ w1) @ w2) ** 2)

        return jax.jit(jax.grad(loss, argnums=(0, 1))), (
            S((64, 128), f32),
            S((128, 16), f32),
            S((32, 64), f32),
        )

    def scan_rnn():
        def f(h, xs, w):
            def body(h, x):
                h = jnp.tanh(h @ w + x)
                return h, h.sum()

            return lax.scan(body, h, xs)

        return jax.jit(f), (S((8, 64), f32), S((12, 8, 64), f32), S((64, 64), f32))

    def scan_rnn_grad():
        def f(w, xs):
            def body(h, x):
                h = jnp.tanh(h @ w + x)
                return h, None

            h, _ = lax.scan(body, jnp.zeros((8, 32), f32), xs)
            return h.sum()

        return jax.jit(jax.grad(f)), (S((32, 32), f32), S((10, 8, 32), f32))

    def while_newton():
        def f(x):
            def cond(c):
                return (c[0] < 20) & (jnp.abs(c[1] * c[1] - x).max() > 1e-6)

            def body(c):
                i, y = c
                return i + 1, 0.5 * (y + x / y)

            return lax.while_loop(cond, body, (0, x))[1]

        return jax.jit(f), (S((256,), f32),)

    def fori_sgd():
        def f(w, x, y):
            def body(i, w):
                g = jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
                return w - 0.1 * g

            return lax.fori_loop(0, 5, body, w)

        return jax.jit(f), (S((16, 4), f32), S((64, 16), f32), S((64, 4), f32))

    def cond_branches():
        def f(p, x):
            return lax.cond(p > 0, lambda x: jnp.sin(x) @ x.T, lambda x: jnp.cos(x) @ x.T, x)

        return jax.jit(f), (S((), f32), S((32, 48), f32))

    def switch_three():
        def f(i, x):
            return lax.switch(i, [jnp.sin, lambda x: x * 2.0, lambda x: jnp.cumsum(x)], x)

        return jax.jit(f), (S((), jnp.int32), S((500,), f32))

    def sort_multi():
        def f(k, v):
            ks, vs = lax.sort((k, v), num_keys=1)
            return ks, vs, jnp.argsort(k)

        return jax.jit(f), (S((1000,), f32), S((1000,), jnp.int32))

    def top_k():
        def f(x):
            return lax.top_k(x, 5)

        return jax.jit(f), (S((64, 300), f32),)

    def reductions():
        def f(x):
            return x.sum(0), x.max(1), jax.nn.logsumexp(x, axis=1), jnp.var(x)

        return jax.jit(f), (S((128, 96), f32),)

    def donate_update():
        def f(params, grads):
            return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads)

        args = ({"w": S((128, 64), f32), "b": S((64,), f32)},) * 2
        return jax.jit(f, donate_argnums=0), args

    def remat_mlp():
        def layer(x, w):
            return jnp.tanh(x @ w)

        def loss(ws, x):
            for w in ws:
                x = jax.checkpoint(layer)(x, w)
            return x.sum()

        return jax.jit(jax.grad(loss)), ([S((64, 64), f32)] * 3, S((16, 64), f32))

    def pytree_outputs():
        def f(x):
            return {"a": x + 1, "b": (x * 2, x.sum()), "c": [x.T, x[:3]]}

        return jax.jit(f), (S((24, 40), f32),)

    def passthrough():
        def f(x, y):
            return x, y + 1

        return jax.jit(f), (S((100,), f32), S((50,), f32))

    def linalg_custom_calls():
        def f(a):
            spd = a @ a.T + 64.0 * jnp.eye(64, dtype=f32)
            chol = jnp.linalg.cholesky(spd)
            w, v = jnp.linalg.eigh(spd)
            return chol, w, v

        return jax.jit(f), (S((64, 64), f32),)

    def fft_ops():
        def f(x):
            return jnp.fft.irfft(jnp.fft.rfft(x) * 2.0, n=x.shape[-1])

        return jax.jit(f), (S((16, 256), f32),)

    def gather_scatter():
        def f(table, ids, upd):
            g = table[ids]
            return g, table.at[ids].add(upd)

        return jax.jit(f), (S((100, 32), f32), S((40,), jnp.int32), S((40, 32), f32))

    def conv2d():
        def f(x, k):
            return lax.conv_general_dilated(
                x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
            )

        return jax.jit(f), (S((2, 16, 16, 8), f32), S((3, 3, 8, 16), f32))

    def dynamic_update_loop():
        def f(buf, rows):
            def body(i, b):
                return lax.dynamic_update_slice(b, rows[i][None] * i, (i, 0))

            return lax.fori_loop(0, rows.shape[0], body, buf)

        return jax.jit(f), (S((32, 128), f32), S((32, 128), f32))

    def nested_loops():
        def f(x):
            def outer(c, _):
                def inner(i, y):
                    return jnp.sin(y) + i

                return lax.fori_loop(0, 3, inner, c) * 0.5, c.sum()

            return lax.scan(outer, x, None, length=4)

        return jax.jit(f), (S((64, 32), f32),)

    def random_normal():
        def f(key):
            return jax.random.normal(key, (128, 64))

        return jax.jit(f), (S((2,), jnp.uint32),)

    def bf16_matmul():
        def f(x, w):
            return (x.astype(jnp.bfloat16) @ w.astype(jnp.bfloat16)).astype(f32).sum(0)

        return jax.jit(f), (S((64, 96), f32), S((96, 80), f32))

    def sharded_matmul():
        from jax.sharding import Mesh, NamedSharding
        from jax.sharding import PartitionSpec as P

        mesh = Mesh(jax.devices()[:4], ("d",))
        xs = NamedSharding(mesh, P("d", None))
        ws = NamedSharding(mesh, P(None, None))

        def f(x, w):
            return jnp.tanh(x @ w).sum(0)

        return jax.jit(f), (S((64, 32), f32, sharding=xs), S((32, 48), f32, sharding=ws))

    def sharded_allreduce():
        from jax.sharding import Mesh
        from jax.sharding import PartitionSpec as P

        mesh = Mesh(jax.devices()[:4], ("d",))

        def g(x):
            return jax.lax.psum(x * 2.0, "d"), x.sum(0, keepdims=True)

        f = jax.shard_map(g, mesh=mesh, in_specs=P("d"), out_specs=(P(), P("d")))
        return jax.jit(f), (S((64, 16), f32),)

    return {
        name: (4 if name.startswith("sharded") else 1, build)
        for name, build in locals().items()
        if getattr(build, "__qualname__", "").startswith("programs.<locals>.")
    }


def _count_field(data: bytes, field: int) -> int:
    """How many times a top-level length-delimited field occurs in a serialized message."""
    count, i = 0, 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, i = _varint(data, i)
        elif wire == 1:
            i += 8
        elif wire == 2:
            n, i = _varint(data, i)
            i += n
            count += number == field
        elif wire == 5:
            i += 4
        else:
            raise ValueError(f"wire type {wire} at byte {i}")
    return count


def _varint(data: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = data[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def one(name: str, dump_dir: str) -> None:
    """Compile one program (child process) and print its memory_analysis() as JSON."""
    import jax

    fn, args = programs()[name][1]()
    compiled = fn.lower(*args).compile()
    ma = compiled.memory_analysis()
    fields = {
        k: int(getattr(ma, k))
        for k in dir(ma)
        if k.endswith("_in_bytes") and isinstance(getattr(ma, k), int)
    }
    fields["buffer_assignment_heap_traces"] = _count_field(ma.serialized_buffer_assignment_proto, 4)
    print(json.dumps({"memory_analysis": fields, "jax_version": jax.__version__}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--dump-dir", help=argparse.SUPPRESS)
    ap.add_argument("--proto-dir", help="also keep each program's .hlo.pb here")
    ns = ap.parse_args()
    if ns.one:
        one(ns.one, ns.dump_dir)
        return
    import jax

    names = sorted(programs())
    entries = {}
    for name in names:
        devices = programs()[name][0]
        out = HERE / name
        shutil.rmtree(out, ignore_errors=True)
        with tempfile.TemporaryDirectory() as scratch:
            flags = f"--xla_dump_to={scratch} --xla_dump_hlo_as_text --xla_dump_hlo_as_proto"
            if devices > 1:
                flags += f" --xla_force_host_platform_device_count={devices}"
            env = dict(os.environ, XLA_FLAGS=flags, JAX_PLATFORMS="cpu")
            res = subprocess.run(
                [sys.executable, __file__, "--one", name, "--dump-dir", scratch],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            record = json.loads(res.stdout.strip().splitlines()[-1])
            stems = sorted(
                p.name[: -len("-buffer-assignment.txt")]
                for p in Path(scratch).glob("*after_optimizations-buffer-assignment.txt")
            )
            if len(stems) != 1:
                raise SystemExit(f"{name}: expected one compiled module, found {stems}")
            stem = stems[0]
            out.mkdir()
            for suffix in (*TEXT_SUFFIXES, ".txt"):
                src = Path(scratch) / f"{stem}{suffix}"
                if src.exists():  # gzip without a timestamp: the same dump, the same bytes
                    with gzip.GzipFile(out / f"{src.name}.gz", "wb", mtime=0) as gz:
                        gz.write(src.read_bytes())
            if ns.proto_dir:
                Path(ns.proto_dir, name).mkdir(parents=True, exist_ok=True)
                for pb in Path(scratch).glob(f"{stem}*.pb"):
                    shutil.copy(pb, Path(ns.proto_dir, name, pb.name))
        key = f"{name}/{stem}-buffer-assignment.txt"
        entries[key] = {
            "program": name,
            "framework": "jax",
            "framework_version": record["jax_version"],
            "xla_flags": flags.replace(scratch, "<dump_dir>"),
            "num_devices": devices,
            "memory_analysis": record["memory_analysis"],
        }
        print(key, record["memory_analysis"]["peak_memory_in_bytes"], flush=True)
    manifest = {
        "description": "Small jax programs compiled on CPU by make_dumps.py; text dumps of each "
        "compiled module (gzipped; keys are paths without .gz) and its memory_analysis() "
        "(jax.jit(f).lower(*abstract_args).compile()).",
        "jax_version": jax.__version__,
        "buffer_assignment_heap_traces_note": "heap_simulator_traces in "
        "memory_analysis().serialized_buffer_assignment_proto, the proto peak_memory_in_bytes "
        "is computed from (XLA ComputePeakMemory)",
        "entries": entries,
    }
    (HERE / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
