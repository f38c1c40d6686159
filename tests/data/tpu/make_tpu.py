"""Deviceless TPU compiles for tests/data/tpu: text + proto dumps, memory_analysis()
and libtpu's own memory log, one fresh process per program (XLA_FLAGS are read once).

Pinned: Python 3.12, jax 0.12.0.1, jaxlib 0.12.0.1, libtpu 0.0.50.1.
Run (libtpu allows one compile per machine at a time):

    flock /tmp/tpu.lock VENV312/bin/python tests/data/tpu/make_tpu.py [NAME...]

(VENV312: a Python 3.12 venv with `pip install "jax[tpu]==0.12.0.1"`.)

Each program writes tests/data/tpu/NAME/: the dump files a test reads (the
buffer assignment text, its live range, the after-optimizations .hlo.pb),
memory_analysis.json (compiled.memory_analysis() and the versions) and
libtpu-stderr.log (the compile's stderr at TPU_STDERR_LOG_LEVEL=0, cut to the
memory lines).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

#: name -> (topology, TPU_ACCELERATOR_TYPE, mesh shape)
PROGRAMS = {
    "v5e_mlp": ("v5e:1x1", "v5litepod-1", (1,)),
    "v6e_scan_remat": ("v6e:1x1", "v6e-1", (1,)),
    "v5p_mesh_allreduce": ("v5p:2x2x1", "v5p-8", (4,)),
    "v5p_chain": ("v5p:2x2x1", "v5p-8", (4,)),
    "v5e_sort": ("v5e:1x1", "v5litepod-1", (1,)),
}

#: the dump files kept (the rest of a TPU dump is large and not read by the tests)
KEEP = re.compile(
    r"(buffer-assignment(-values)?\.txt|live-range\.txt|after_optimizations\.hlo\.pb|memory-usage-report\.pb)$"
)
#: libtpu's glog line header; the memory summary comes from these sources
GLOG = re.compile(r"^[IWEF]\d{4} ")
LOG_SOURCES = ("deepsea_compiler_backend.cc", "memory_space_assignment")


def child(name: str, out: str) -> None:
    """In the fresh process: compile one program, write memory_analysis.json."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import topologies
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    jax.config.update("jax_hlo_source_file_canonicalization_regex", r".*/")
    topology, _, shape = PROGRAMS[name]
    topo = topologies.get_topology_desc(topology_name=topology, platform="tpu")
    n = int(np.prod(shape))
    mesh = Mesh(np.array(topo.devices[:n]).reshape(shape), ("d",))

    def spec(shape_, dtype, part=None):
        sharding = NamedSharding(mesh, part if part is not None else P())
        return jax.ShapeDtypeStruct(shape_, dtype, sharding=sharding)

    bf16, f32 = jnp.bfloat16, jnp.float32
    if name == "v5e_mlp":

        def f(w1, w2, b, x):
            h = jax.nn.relu(x @ w1 + b)
            return (h @ w2).astype(f32).sum(axis=0), jnp.tanh(h)

        args = (
            spec((1024, 2048), bf16),
            spec((2048, 512), bf16),
            spec((2048,), bf16),
            spec((256, 1024), bf16),
        )
        jitted = jax.jit(f, donate_argnums=(3,))
    elif name == "v6e_scan_remat":

        def layer(c, w):
            return jnp.tanh(c @ w), None

        def loss(ws, x):
            y, _ = jax.lax.scan(jax.checkpoint(layer), x, ws)
            return (y.astype(f32) ** 2).mean()

        args = (spec((6, 512, 512), bf16), spec((128, 512), bf16))
        jitted = jax.jit(jax.grad(loss))
    elif name == "v5p_chain":

        def f(x, w):  # temporaries in HBM beside VMEM: memory_analysis() temp > 0
            a = jnp.sin(x) @ w
            b = jnp.cos(a) @ w.T
            return (a * (jnp.tanh(b) @ w)).sum(), b.mean()

        args = (spec((256, 256), f32), spec((256, 256), f32))
        jitted = jax.jit(f)
    elif name == "v5e_sort":

        def f(x):  # tuple-shaped sort results: pointer tables in the temp allocation
            return jnp.sort(x, axis=0), jnp.argsort(x, axis=1)

        args = (spec((1024, 512), f32),)
        jitted = jax.jit(f)
    else:

        def f(w, x):
            y = x @ w
            return jax.lax.with_sharding_constraint(y.sum(axis=0), NamedSharding(mesh, P()))

        args = (spec((1024, 1024), bf16, P(None, None)), spec((2048, 1024), f32, P("d", None)))
        jitted = jax.jit(lambda w, x: f(w, x.astype(bf16)))
    compiled = jitted.trace(*args).lower().compile()
    m = compiled.memory_analysis()
    fields = [a for a in dir(m) if a.endswith("_in_bytes") or a.endswith("_size_in_bytes")]
    record = {a: int(getattr(m, a)) for a in sorted(fields)}
    import jaxlib
    import libtpu

    record["versions"] = {
        "python": sys.version.split()[0],
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "libtpu": getattr(libtpu, "__version__", "0.0.50.1"),
    }
    record["topology"] = topology
    with open(os.path.join(out, "memory_analysis.json"), "w") as fh:
        json.dump(record, fh, indent=1, sort_keys=True)
        fh.write("\n")


def run(name: str) -> None:
    _, accel, _ = PROGRAMS[name]
    out = os.path.join(HERE, name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    with tempfile.TemporaryDirectory() as dump:
        env = dict(
            os.environ,
            JAX_PLATFORMS="cpu",
            TPU_SKIP_MDS_QUERY="1",
            TPU_ACCELERATOR_TYPE=accel,
            TPU_WORKER_HOSTNAMES="localhost",
            TPU_WORKER_ID="0",
            TPU_STDERR_LOG_LEVEL="0",
            TPU_MIN_LOG_LEVEL="0",
            CUDA_ROOT="./cuda_sdk_lib",
            XLA_FLAGS=f"--xla_dump_to={dump} --xla_dump_hlo_as_text --xla_dump_hlo_as_proto",
        )
        proc = subprocess.run(
            [sys.executable, __file__, "--child", name, out],
            env=env,
            capture_output=True,
            text=True,
        )
        if proc.returncode:
            sys.exit(f"{name}: compile failed:\n{proc.stderr[-4000:]}")
        for f in sorted(os.listdir(dump)):
            if KEEP.search(f) and "jit_" in f:
                shutil.copy(os.path.join(dump, f), out)
    lines, keep = [], False
    for ln in proc.stderr.splitlines():
        if GLOG.match(ln):
            keep = any(s in ln for s in LOG_SOURCES)
        if keep:
            lines.append(ln)
    with open(os.path.join(out, "libtpu-stderr.log"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print(name, sorted(os.listdir(out)))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], sys.argv[3])
    else:
        for program in sys.argv[1:] or list(PROGRAMS):
            run(program)
