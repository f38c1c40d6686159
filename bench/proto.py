"""Ingest of one large module from its `.hlo.pb` vs its text, and a 1 GB profile.

    python bench/proto.py [--layers 400] [--jax-python PATH/TO/venv/bin/python] [--repeat 2]

1. A large real module: an unrolled MLP of `--layers` layers with its gradient
   (jax on CPU, AOT compile) dumped with text and proto side by side, once,
   under bench/_work/proto/ (gitignored). The jax interpreter is a separate one:
   the project never imports jax.
2. Its text files alone and its `.hlo.pb` alone are each ingested by the CLI
   (`python -m bufferhouse.cli ingest`, a subprocess, fresh warehouse, one
   process): best wall time of `--repeat` runs; ratio = text / proto.
3. A 1 GB XProf profile (`*.xplane.pb`): two planes of filler trace events
   around a `/host:metadata` plane holding that module's HloProto under three
   program names, ingested by the CLI; peak RSS of the process (ru_maxrss of
   the child) against the file size.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "bench" / "_work" / "proto"


def generate(layers: int, jax_python: str) -> Path:
    out = WORK / f"mlp{layers}"
    if any(out.glob("*.hlo.pb")):
        return out
    shutil.rmtree(out, ignore_errors=True)
    script = textwrap.dedent(
        f"""
        import jax, jax.numpy as jnp
        def mlp_grad(ws, x):
            def loss(ws):
                h = x
                for i, w in enumerate(ws):
                    h = jnp.tanh(h @ w) + 0.01 * i
                return jnp.sum(h ** 2)
            return jax.grad(loss)(ws)
        ws = [jax.ShapeDtypeStruct((32, 32), jnp.float32)] * {layers}
        x = jax.ShapeDtypeStruct((8, 32), jnp.float32)
        jax.jit(mlp_grad).lower(ws, x).compile()
        """
    )
    env = dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        XLA_FLAGS=f"--xla_dump_to={out} --xla_dump_hlo_as_proto --xla_dump_hlo_as_text",
    )
    subprocess.run([jax_python, "-c", script], check=True, env=env)
    return out


def split(dump: Path) -> tuple[Path, Path, int, int]:
    """Copies of the after-optimizations text files alone and of the .hlo.pb alone."""
    text, proto = WORK / "text", WORK / "proto"
    for d in (text, proto):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    text_bytes = proto_bytes = 0
    for f in dump.iterdir():
        if "after_optimizations" not in f.name:
            continue
        if f.name.endswith("after_optimizations.hlo.pb"):
            shutil.copy(f, proto / f.name)
            proto_bytes += f.stat().st_size
        elif f.name.endswith(".txt"):
            shutil.copy(f, text / f.name)
            text_bytes += f.stat().st_size
    return text, proto, text_bytes, proto_bytes


_RUN = (
    "import resource, sys\n"
    "from bufferhouse.cli import main\n"
    "try:\n"
    "    main(sys.argv[1:])\n"
    "except SystemExit as e:\n"
    "    code = e.code\n"
    "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, code)\n"
)


def timed_ingest(
    path: Path, db: Path, jobs: int = 1, cwd: Path = ROOT, env: dict | None = None
) -> tuple[float, int]:
    """Wall seconds and peak RSS (MiB, the ingest process) of one CLI ingest of `path`
    into `db` (a subprocess, `env` its environment)."""
    start = time.perf_counter()
    out = (
        subprocess.run(
            [sys.executable, "-c", _RUN, "ingest", str(path), "--db", str(db), "--jobs", str(jobs)],
            check=True,
            cwd=cwd,
            env=env,
            stderr=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
        )
        .stdout.splitlines()[-1]
        .split()
    )  # DuckDB may draw a progress bar on stdout first
    seconds = time.perf_counter() - start
    assert out[1] in ("0", "None"), f"ingest of {path} failed"
    return seconds, int(out[0])


def ingest(path: Path) -> tuple[float, int]:
    """Wall seconds and peak RSS (MiB) of one CLI ingest (one process) into a fresh file."""
    db = WORK / "bench.duckdb"
    db.unlink(missing_ok=True)
    return timed_ingest(path, db)


def big_profile(pb: Path, gb: float) -> Path:
    """A profile of `gb` GB: filler events, then the metadata plane, then more filler."""
    sys.path.insert(0, str(ROOT))
    from bufferhouse.parse.proto import xplane_pb2
    from bufferhouse.parse.proto.wire import encode_varint

    path = WORK / "profile" / "host.xplane.pb"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = pb.read_bytes()
    meta = xplane_pb2.XPlane(id=0, name="/host:metadata")
    meta.stat_metadata[1].id, meta.stat_metadata[1].name = 1, "Hlo Proto"
    for k in range(3):
        em = meta.event_metadata[k + 1]
        em.id, em.name = k + 1, f"jit_mlp_grad({k})"
        em.stats.add(metadata_id=1, bytes_value=data)
    event = bytes(200)
    line = encode_varint(3 << 3 | 2) + encode_varint(len(event)) + event
    per_plane = int(gb * 1e9 / 2)
    n = per_plane // len(line)
    block = line * 5000
    with open(path, "wb") as f:
        for which in ("/host:CPU", None, "/host:CPU"):
            if which is None:
                body = meta.SerializeToString()
                f.write(encode_varint(1 << 3 | 2) + encode_varint(len(body)) + body)
                continue
            head = xplane_pb2.XPlane(id=1, name=which).SerializeToString()
            f.write(encode_varint(1 << 3 | 2) + encode_varint(len(head) + n * len(line)) + head)
            for _ in range(n // 5000):
                f.write(block)
            f.write(line * (n % 5000))
    return path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=400)
    ap.add_argument("--jax-python", default=os.environ.get("JAX_PYTHON", "python3"))
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--profile-gb", type=float, default=1.0)
    args = ap.parse_args()
    dump = generate(args.layers, args.jax_python)
    text, proto, text_bytes, proto_bytes = split(dump)
    rows = []
    for name, path, size in (("text", text, text_bytes), ("proto", proto, proto_bytes)):
        runs = [ingest(path) for _ in range(args.repeat)]
        best = min(r[0] for r in runs)
        rows.append((name, size, best, max(r[1] for r in runs)))
        print(
            f"{name:6} {size / 1e6:8.1f} MB  best of {args.repeat}: {best:6.2f} s  "
            f"peak RSS {rows[-1][3]} MiB",
            flush=True,
        )
    print(f"ratio text/proto: {rows[0][2] / rows[1][2]:.2f}x")
    pb = next(proto.glob("*.hlo.pb"))
    profile = big_profile(pb, args.profile_gb)
    seconds, rss = ingest(profile.parent)
    print(
        f"profile {profile.stat().st_size / 1e9:.2f} GB, 3 programs: {seconds:.2f} s, "
        f"peak RSS {rss} MiB"
    )
    profile.unlink()


if __name__ == "__main__":
    main()
