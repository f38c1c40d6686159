"""Regenerate the protobuf fixtures: XLA dumps with text and protos side by side,
proto-only dumps, and a small XProf profile, from jax on CPU.

    JAX_PLATFORMS=cpu /path/to/jax/python tests/data/proto/gen.py

Each program compiles AOT (`jax.jit(f).lower(*ShapeDtypeStructs).compile()`) in a
process of its own, so XLA_FLAGS (read once per process) can differ per tree and
each dump holds one program. Only the files bufferhouse reads are kept (plus a
`before_optimizations.hlo.pb`, `compile_options.pb` and `topology.pb` in one tree,
to prove they are skipped); files over 32 KiB are gzipped. manifest.json records
memory_analysis() of every module, keyed by the path of its .hlo.pb (or, for the
profile, by the xplane path and program name). The project never imports jax:
this script runs only in a separate environment that has it.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
GZIP_OVER = 32 * 1024

#: name -> (devices forced on the host platform, extra note)
PROGRAMS = {
    "scan_rnn": 1,
    "donate_sgd": 1,
    "sharded_matmul": 4,
    "remat_mlp_grad": 1,
    "while_newton": 1,
    "cholesky_solve": 1,
}

#: what each tree's XLA_FLAGS add to --xla_dump_to
TREES = {
    "both": "--xla_dump_hlo_as_proto --xla_dump_hlo_as_text",
    "proto_only": "--xla_dump_hlo_as_proto",
}

KEEP_SUFFIXES = (
    "_after_optimizations.hlo.pb",
    "_after_optimizations-buffer-assignment.txt",
    "_after_optimizations-buffer-assignment-values.txt",
    "_after_optimizations-live-range.txt",
    "_after_optimizations-memory-usage-report.txt",
    "_after_optimizations-memory-usage-report.pb",
    "_after_optimizations.txt",
)


# --------------------------------------------------------------------------- programs
# Defined inside functions so that the parent process never imports jax.


def build(name):
    """Return (function, argument ShapeDtypeStructs, jit kwargs) for one program."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    f32 = jnp.float32
    sds = jax.ShapeDtypeStruct
    if name == "scan_rnn":

        def scan_rnn(xs, w, u):
            def body(h, x):
                h = jnp.tanh(h @ w + x @ u)
                return h, h.sum(axis=-1)

            return lax.scan(body, jnp.zeros((xs.shape[1], w.shape[0]), f32), xs)

        return scan_rnn, (sds((24, 8, 64), f32), sds((96, 96), f32), sds((64, 96), f32)), {}
    if name == "donate_sgd":

        def donate_sgd(params, x, y):
            def loss(p):
                h = jnp.tanh(x @ p["w1"] + p["b1"])
                return jnp.mean((h @ p["w2"] - y) ** 2)

            g = jax.grad(loss)(params)
            return jax.tree_util.tree_map(lambda p, d: p - 0.01 * d, params, g)

        params = {
            "w1": sds((64, 128), f32),
            "b1": sds((128,), f32),
            "w2": sds((128, 16), f32),
        }
        return (
            donate_sgd,
            (params, sds((32, 64), f32), sds((32, 16), f32)),
            {"donate_argnums": (0,)},
        )
    if name == "sharded_matmul":
        from jax.sharding import Mesh, NamedSharding
        from jax.sharding import PartitionSpec as P

        mesh = Mesh(jax.devices()[:4], ("x",))
        rows = NamedSharding(mesh, P("x", None))
        cols = NamedSharding(mesh, P(None, "x"))

        def sharded_matmul(a, b):
            c = jnp.tanh(a @ b)
            return c.sum(axis=0), c.T @ a

        return (
            sharded_matmul,
            (
                sds((128, 64), f32, sharding=rows),
                sds((64, 32), f32, sharding=cols),
            ),
            {},
        )
    if name == "remat_mlp_grad":

        def remat_mlp_grad(ws, x):
            @jax.checkpoint
            def layer(h, w):
                return jnp.tanh(h @ w)

            def loss(ws):
                h = x
                for w in ws:
                    h = layer(h, w)
                return jnp.sum(h**2)

            return jax.value_and_grad(loss)(ws)

        return remat_mlp_grad, ([sds((64, 64), f32)] * 4, sds((16, 64), f32)), {}
    if name == "while_newton":

        def while_newton(a, x0):
            def cond(s):
                i, _x, err = s
                return (i < 50) & (err > 1e-6)

            def body(s):
                i, x, _ = s
                fx = x * x - a
                nx = x - fx / (2 * x)
                return i + 1, nx, jnp.max(jnp.abs(nx - x))

            return lax.while_loop(cond, body, (0, x0, jnp.float32(1.0)))

        return while_newton, (sds((256,), f32), sds((256,), f32)), {}
    if name == "cholesky_solve":

        def cholesky_solve(a, b):
            spd = a @ a.T + 64 * jnp.eye(a.shape[0], dtype=a.dtype)
            chol = jnp.linalg.cholesky(spd)
            return jax.scipy.linalg.cho_solve((chol, True), b)

        return cholesky_solve, (sds((48, 48), f32), sds((48, 4), f32)), {}
    if name == "profile_mlp":

        def profile_mlp(x, w1, w2):
            return jnp.tanh(x @ w1) @ w2

        return profile_mlp, (sds((32, 64), f32), sds((64, 128), f32), sds((128, 8), f32)), {}
    raise KeyError(name)


def memory_dict(compiled):
    m = compiled.memory_analysis()
    keys = (
        "argument_size_in_bytes",
        "output_size_in_bytes",
        "alias_size_in_bytes",
        "temp_size_in_bytes",
        "generated_code_size_in_bytes",
        "host_argument_size_in_bytes",
        "host_output_size_in_bytes",
        "host_alias_size_in_bytes",
        "host_temp_size_in_bytes",
        "peak_memory_in_bytes",
    )
    return {k: int(getattr(m, k)) for k in keys}


def child_compile(name, out_json):
    """In a child process: compile one program AOT; write its memory_analysis()."""
    import jax

    fn, args, kw = build(name)
    compiled = jax.jit(fn, **kw).lower(*args).compile()
    Path(out_json).write_text(
        json.dumps({"function": fn.__name__, "memory_analysis": memory_dict(compiled)})
    )


def child_profile(trace_dir, out_json):
    """In a child process: compile and run two programs under jax.profiler.trace."""
    import jax
    import numpy as np

    result = {}
    with jax.profiler.trace(trace_dir):
        for name in ("profile_mlp", "scan_rnn"):
            fn, args, kw = build(name)
            compiled = jax.jit(fn, **kw).lower(*args).compile()
            inputs = [np.ones(a.shape, a.dtype) for a in args]
            jax.block_until_ready(compiled(*inputs))
            result[fn.__name__] = memory_dict(compiled)
    Path(out_json).write_text(json.dumps(result))


# --------------------------------------------------------------------------- parent


def run_child(mode, args, env_extra):
    env = dict(os.environ, JAX_PLATFORMS="cpu", **env_extra)
    subprocess.run([sys.executable, __file__, mode, *args], check=True, env=env)


def keep(src_dir: Path, dst_dir: Path, extra=()) -> list[Path]:
    """Copy the files bufferhouse reads (gzipping big ones); return the kept paths."""
    dst_dir.mkdir(parents=True, exist_ok=True)
    kept = []
    for src in sorted(src_dir.rglob("*")):
        if not src.is_file():
            continue
        rel = src.name
        if not (rel.endswith(KEEP_SUFFIXES) or rel in extra or any(rel.endswith(e) for e in extra)):
            continue
        data = src.read_bytes()
        if len(data) > GZIP_OVER:
            dst = dst_dir / (rel + ".gz")
            dst.write_bytes(gzip.compress(data, mtime=0))
        else:
            dst = dst_dir / rel
            dst.write_bytes(data)
        kept.append(dst)
    return kept


def main():
    entries = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for tree, flags in TREES.items():
            for name, devices in PROGRAMS.items():
                dump = tmp / tree / name
                info = tmp / f"{tree}-{name}.json"
                xla_flags = f"--xla_dump_to={dump} {flags}"
                if devices > 1:
                    xla_flags += f" --xla_force_host_platform_device_count={devices}"
                run_child("compile", [name, str(info)], {"XLA_FLAGS": xla_flags})
                extra = ()
                if tree == "proto_only" and name == "scan_rnn":
                    # siblings that must be skipped: by name, or (no buffer
                    # assignment) quietly and counted
                    extra = ("before_optimizations.hlo.pb", "compile_options.pb", "topology.pb")
                kept = keep(dump, HERE / tree / name, extra)
                meta = json.loads(info.read_text())
                pbs = [p for p in kept if "_after_optimizations.hlo.pb" in p.name]
                assert len(pbs) == 1, (tree, name, pbs)
                entries[str(pbs[0].relative_to(HERE))] = {
                    "program": name,
                    "function": meta["function"],
                    "tree": tree,
                    "xla_flags": xla_flags.replace(str(dump), "<dump_dir>"),
                    "num_devices": devices,
                    "files": sorted(str(p.relative_to(HERE)) for p in kept),
                    "memory_analysis": meta["memory_analysis"],
                }
        # The profile: two programs compiled and run under jax.profiler.trace; the
        # same process dumps their protos, so the profile and a dump can be compared.
        trace = tmp / "trace"
        dump = tmp / "profile_dump"
        info = tmp / "profile.json"
        run_child(
            "profile",
            [str(trace), str(info)],
            {"XLA_FLAGS": f"--xla_dump_to={dump} --xla_dump_hlo_as_proto"},
        )
        meta = json.loads(info.read_text())
        kept = keep(dump, HERE / "profile_dump")
        for pb in (p for p in kept if "_after_optimizations.hlo.pb" in p.name):
            function = pb.name.split(".")[1].removeprefix("jit_")
            entries[str(pb.relative_to(HERE))] = {
                "program": function,
                "function": function,
                "tree": "profile_dump",
                "xla_flags": "--xla_dump_to=<dump_dir> --xla_dump_hlo_as_proto",
                "num_devices": 1,
                "files": [str(pb.relative_to(HERE))],
                "memory_analysis": meta[function],
            }
        (xplane,) = trace.rglob("*.xplane.pb")
        dst = HERE / "profile" / "plugins" / "profile" / "run1" / "host.xplane.pb.gz"
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(gzip.compress(xplane.read_bytes(), mtime=0))
        rel = str(dst.relative_to(HERE))
        for function, ma in meta.items():
            entries[f"{rel}#jit_{function}"] = {
                "program": function,
                "function": function,
                "tree": "profile",
                "xla_flags": "",
                "num_devices": 1,
                "files": [rel],
                "memory_analysis": ma,
            }
    import jax

    manifest = {
        "description": "Protobuf fixtures made by gen.py beside this file with jax on CPU.",
        "memory_analysis_source": "jax.jit(f).lower(*args).compile().memory_analysis()",
        "jax_version": jax.__version__,
        "keys": "path of the after-optimizations .hlo.pb, or '<xplane path>#<module name>' for the profile",
        "entries": entries,
    }
    (HERE / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "compile":
        child_compile(sys.argv[2], sys.argv[3])
    elif len(sys.argv) > 1 and sys.argv[1] == "profile":
        child_profile(sys.argv[2], sys.argv[3])
    else:
        for sub in ("both", "proto_only", "profile", "profile_dump"):
            shutil.rmtree(HERE / sub, ignore_errors=True)
        main()
