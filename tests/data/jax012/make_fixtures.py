"""Make the jax 0.12 fixtures under tests/data/jax012: real CPU, TPU and GPU compiles.

Needs Python >= 3.12 with jax[tpu]==0.12.0.1 (libtpu 0.0.50.1); for the GPU fixture
also jax-cuda12-plugin==0.12.0.1 and nvidia-cuda-nvcc-cu12. TPU and GPU compiles are
deviceless (jax.experimental.topologies): no accelerator is needed. The project never
imports jax: this script is run by hand, and what it writes is committed.

    python make_fixtures.py --stage cpu [--tpu-lock FILE] [--only NAME ...]

Each fixture is one compile in a fresh process (XLA_FLAGS are read once per process),
dumped with --xla_dump_to=DIR --xla_dump_hlo_as_text --xla_dump_hlo_as_proto and
--xla_dump_hlo_module_re (only the program, unless the fixture keeps jax's helper
modules), plus memory_analysis.json: every field of compiled.memory_analysis(), the jit
name and what was compiled. A compile that fails keeps its dump and the exception text
verbatim in compile-oom.log. libtpu allows one compile per machine at a time: with
--tpu-lock every TPU compile runs under `flock FILE`. Machine paths are cut (the
canonicalization regex, CUDA_ROOT=./cuda_sdk_lib, dumps written to a relative `dump`
from a scratch directory) and every written file is searched for them afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: name of the topology for jax.experimental.topologies -> TPU_ACCELERATOR_TYPE
TPU_TARGETS = {"v5e:1x1": "v5litepod-1", "v6e:1x1": "v6e-1", "v5p:2x2x1": "v5p-8"}


@dataclass(frozen=True)
class Fixture:
    """One compile: where it goes, for which target, which program with which knobs."""

    path: str  # under tests/data/jax012
    backend: str  # cpu | tpu | gpu
    target: str  # cpu:N (devices) | a TPU topology name | a GPU spec name
    program: str  # key of PROGRAMS
    params: dict = field(default_factory=dict)
    purpose: str = ""
    helpers: bool = False  # keep every module jax compiles (no --xla_dump_hlo_module_re)
    run: bool = False  # execute it (CPU), so jax compiles its helper programs too
    profile: bool = False  # run under jax.profiler.trace and save a device memory profile
    libtpu_log: bool = False  # keep libtpu's own stderr log (memory lines)
    expect_oom: bool = False
    full: bool = False  # keep every file XLA dumps (else only the memory-relevant ones)
    lean: str = ""  # "copies": also drop LEAN_DROP["copies"]; "pair": LEAN_DROP["pair"] (size)


# --------------------------------------------------------------------------- programs
# Each builder returns (function, abstract arguments, jit keyword arguments). It runs
# in the child, where jax is imported; `ctx` gives the mesh and shardings of the target.


def _mlp(ctx, batch=64, dtype="bfloat16", donate=True, width=256, hidden=512):
    import jax
    import jax.numpy as jnp

    dt = jnp.dtype(dtype)

    def mlp_step(params, x, y):
        def loss(p):
            h = jnp.tanh(x @ p["w1"])
            return jnp.mean((h @ p["w2"] - y).astype(jnp.float32) ** 2)

        g = jax.grad(loss)(params)
        return jax.tree.map(lambda p, d: p - (0.01 * d).astype(p.dtype), params, g), loss(params)

    params = {"w1": ctx.sds((width, hidden), dt), "w2": ctx.sds((hidden, width), dt)}
    args = (params, ctx.sds((batch, width), jnp.bfloat16), ctx.sds((batch, width), dt))
    return mlp_step, args, {"donate_argnums": (0,) if donate else ()}


def _block(ctx, layers=4, batch=4, seq=256, d=128, heads=4, policy="dots_saveable"):
    """A stack of transformer blocks (attention + MLP) scanned over its layers, each
    under jax.checkpoint with the policy; the step is the gradient."""
    import jax
    import jax.numpy as jnp
    from jax.ad_checkpoint import checkpoint_name

    policies = {
        "nothing_saveable": jax.checkpoint_policies.nothing_saveable,
        "dots_saveable": jax.checkpoint_policies.dots_saveable,
        "save_only_these_names": jax.checkpoint_policies.save_only_these_names("attn_out"),
        "offload_attn_out": jax.checkpoint_policies.save_and_offload_only_these_names(
            names_which_can_be_saved=[],
            names_which_can_be_offloaded=["attn_out"],
            offload_src="device",
            offload_dst="pinned_host",
        ),
    }

    def block(x, p):
        b, s, _ = x.shape
        q, k, v = (
            (x @ p[n]).reshape(b, s, heads, d // heads).transpose(0, 2, 1, 3)
            for n in ("wq", "wk", "wv")
        )
        a = jax.nn.softmax((q @ k.transpose(0, 1, 3, 2)).astype(jnp.float32), axis=-1)
        o = (a.astype(x.dtype) @ v).transpose(0, 2, 1, 3).reshape(b, s, d)
        x = x + checkpoint_name(o @ p["wo"], "attn_out")
        return x + jax.nn.gelu(x @ p["w1"]) @ p["w2"], None

    def block_step(p, x):
        body = jax.checkpoint(block, policy=policies[policy])

        def loss(p):
            h, _ = jax.lax.scan(body, x, p)
            return jnp.mean(h.astype(jnp.float32) ** 2)

        return jax.grad(loss)(p)

    bf = jnp.bfloat16
    shapes = {"wq": (d, d), "wk": (d, d), "wv": (d, d), "wo": (d, d)}
    shapes |= {"w1": (d, 4 * d), "w2": (4 * d, d)}
    params = {n: ctx.sds((layers, *s), bf) for n, s in shapes.items()}
    return block_step, (params, ctx.sds((batch, seq, d), bf)), {}


def _scan(ctx, layers=8, batch=32, width=256, unroll=1):
    """lax.scan over stacked layer weights, with its gradient (a while loop in HLO)."""
    import jax
    import jax.numpy as jnp

    def scan_step(ws, x):
        def loss(ws):
            def layer(h, w):
                return jnp.tanh(h @ w), None

            h, _ = jax.lax.scan(layer, x, ws, unroll=unroll)
            return jnp.mean(h.astype(jnp.float32) ** 2)

        return jax.grad(loss)(ws)

    bf = jnp.bfloat16
    return scan_step, (ctx.sds((layers, width, width), bf), ctx.sds((batch, width), bf)), {}


def _remat_mlp(ctx, layers=4, batch=256, width=256, hidden=1024, policy="dots_saveable"):
    """An MLP of `layers` layers scanned, each under jax.checkpoint with the policy; the
    step is the gradient. Activations (batch x hidden per layer) outweigh the weights,
    so the policy moves the peak. `hidden` is the checkpoint_name of the hidden layer."""
    import jax
    import jax.numpy as jnp
    from jax.ad_checkpoint import checkpoint_name

    policies = {
        "nothing_saveable": jax.checkpoint_policies.nothing_saveable,
        "dots_saveable": jax.checkpoint_policies.dots_saveable,
        "save_only_these_names": jax.checkpoint_policies.save_only_these_names("hidden"),
    }

    def layer(x, p):
        h = checkpoint_name(jnp.tanh(x @ p["w1"]), "hidden")
        return x + jnp.tanh(h @ p["w2"]), None

    def remat_step(p, x):
        body = jax.checkpoint(layer, policy=policies[policy])

        def loss(p):
            y, _ = jax.lax.scan(body, x, p)
            return jnp.mean(y.astype(jnp.float32) ** 2)

        return jax.grad(loss)(p)

    bf = jnp.bfloat16
    params = {
        "w1": ctx.sds((layers, width, hidden), bf),
        "w2": ctx.sds((layers, hidden, width), bf),
    }
    return remat_step, (params, ctx.sds((batch, width), bf)), {}


def _sharded(ctx, batch=64, d=512, mesh="1x4"):
    """x @ w with the contracting dimension sharded: an all-reduce (and a reduce-scatter
    or all-gather on a 2-D mesh)."""
    import jax.numpy as jnp

    m = ctx.mesh(mesh)
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    def sharded_step(w, x):
        h = jnp.tanh(x @ w)
        return h, jnp.sum(h.astype(jnp.float32))

    bf = jnp.bfloat16
    w = ctx.sds((d, d), bf, NamedSharding(m, P("model", None)))
    x = ctx.sds((batch, d), bf, NamedSharding(m, P("data", "model")))
    outs = (NamedSharding(m, P("data", None)), NamedSharding(m, P()))
    return sharded_step, (w, x), {"out_shardings": outs}


def _offload_out(ctx, batch=64, d=512, offload=True):
    """An output placed in host memory (memory_kind='pinned_host') or not."""
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    m = ctx.mesh("1")

    def offload_out_step(w, x):
        h = jnp.tanh(x @ w)
        return h, h @ w.T

    kind = "pinned_host" if offload else "device"
    outs = (NamedSharding(m, P(), memory_kind=kind), NamedSharding(m, P()))
    bf = jnp.bfloat16
    return offload_out_step, (ctx.sds((d, d), bf), ctx.sds((batch, d), bf)), {"out_shardings": outs}


def _padded(ctx, n=1000, batch=8):
    """A dimension that a TPU tile pads (1000 -> 1024 lanes)."""
    import jax.numpy as jnp

    def padded_step(w, x):
        return jnp.tanh(x @ w), w * 2

    bf = jnp.bfloat16
    return padded_step, (ctx.sds((n, n), bf), ctx.sds((batch, n), bf)), {}


def _oom(ctx, n=16384, copies=24):
    """Far too big for a v5e (16 GiB of HBM): copies of an n x n matmul kept for a sort."""
    import jax.numpy as jnp

    def oom_step(a):
        stacked = jnp.stack([(a * (i + 1)) @ a for i in range(copies)])
        return jnp.sort(stacked, axis=0)[0]

    return oom_step, (ctx.sds((n, n), jnp.bfloat16),), {}


PROGRAMS = {
    "mlp": _mlp,
    "block": _block,
    "remat": _remat_mlp,
    "scan": _scan,
    "sharded": _sharded,
    "offload_out": _offload_out,
    "padded": _padded,
    "oom": _oom,
}


# --------------------------------------------------------------------------- fixtures


def _cpu(path, program, purpose, devices=1, **kw):
    return Fixture(path, "cpu", f"cpu:{devices}", program, purpose=purpose, **kw)


def _tpu(path, target, program, purpose, **kw):
    kw.setdefault("libtpu_log", True)
    return Fixture(path, "tpu", target, program, purpose=purpose, **kw)


def _stage_cpu() -> list[Fixture]:
    return [
        _cpu("cpu/mlp_bf16_donate", "mlp", "bf16 MLP training step, parameters donated", full=True),
        _cpu(
            "cpu/block_remat",
            "block",
            "4 transformer blocks scanned + grad, jax.checkpoint(dots_saveable)",
        ),
        _cpu("cpu/scan_loop", "scan", "lax.scan over 8 layers + grad: a while loop"),
        _cpu(
            "cpu/sharded_4dev",
            "sharded",
            "4 host devices, mesh 2x2: all-reduce",
            devices=4,
            params={"mesh": "2x2"},
        ),
        _cpu(
            "cpu/mlp_run_helpers",
            "mlp",
            "the MLP step run on real arrays: every module jax compiles is kept (helpers)",
            helpers=True,
            run=True,
        ),
        _cpu(
            "cpu/profile_mlp",
            "mlp",
            "run under jax.profiler.trace (profile/…/host.xplane.pb) and"
            " save_device_memory_profile (memory.prof); its dump beside it",
            run=True,
            profile=True,
        ),
    ]


def _stage_tpu() -> list[Fixture]:
    out = []
    for target, tag in (("v5e:1x1", "v5e"), ("v6e:1x1", "v6e")):
        lean = "copies" if tag == "v6e" else ""
        out += [
            _tpu(
                f"tpu-{tag}/mlp_bf16_donate",
                target,
                "mlp",
                "bf16 MLP step, params donated",
                full=tag == "v5e",
                lean=lean,
            ),
            _tpu(
                f"tpu-{tag}/block_remat",
                target,
                "block",
                "4 transformer blocks scanned + grad, dots_saveable",
                lean=lean,
            ),
            _tpu(
                f"tpu-{tag}/scan_loop",
                target,
                "scan",
                "lax.scan + grad: a while loop",
                lean="copies",
            ),
            _tpu(
                f"tpu-{tag}/offload_out",
                target,
                "offload_out",
                "an output with memory_kind=pinned_host (host offload)",
                lean=lean,
            ),
        ]
    out += [
        _tpu(
            "tpu-v5e/offload_remat",
            "v5e:1x1",
            "block",
            "remat policy offloading attn_out to pinned_host",
            params={"policy": "offload_attn_out"},
            lean="copies",
        ),
        _tpu("tpu-v5e/padded_1000", "v5e:1x1", "padded", "a 1000 dimension padded by the tiles"),
        _tpu(
            "tpu-v5e/oom_e1000",
            "v5e:1x1",
            "oom",
            "too big for v5e HBM: the E1000 CompileTimeHbmOom (compile-oom.log)",
            expect_oom=True,
            full=True,
        ),
        _tpu(
            "tpu-v5p/sharded_2x2",
            "v5p:2x2x1",
            "sharded",
            "4 chips, mesh 2x2: collectives",
            params={"mesh": "2x2"},
        ),
        _tpu("tpu-v5p/mlp_bf16_donate", "v5p:2x2x1", "mlp", "bf16 MLP step on one v5p chip"),
    ]
    return out


GPU_SPEC = "gpu-h100/h100_target_config.txtpb"
GPU_DEVICE = b'device_description_str: "NVIDIA H100 80GB HBM3"'


def gpu_spec() -> None:
    """The H100's GpuTargetConfigProto text, as the CUDA plugin embeds it (XLA's
    gpu_specs/*.txtpb, NUL-terminated in the .so), into GPU_SPEC."""
    import jax_plugins.xla_cuda12 as plugin

    (so,) = Path(plugin.__file__).parent.glob("*.so")
    data = so.read_bytes()
    at = data.index(GPU_DEVICE)
    text = data[data.rindex(b"\0", 0, at) + 1 : data.index(b"\0", at)].decode()
    if "stream_executor.GpuTargetConfigProto" not in text:
        sys.exit(f"{so.name}: the text around {GPU_DEVICE!r} is no GpuTargetConfigProto")
    (HERE / GPU_SPEC).parent.mkdir(parents=True, exist_ok=True)
    (HERE / GPU_SPEC).write_text(text)


def _stage_gpu() -> list[Fixture]:
    return [
        Fixture(
            "gpu-h100/mlp_bf16_donate", "gpu", "h100", "mlp", purpose="bf16 MLP, H100", full=True
        ),
        Fixture("gpu-h100/block_remat", "gpu", "h100", "block", purpose="block, H100"),
        Fixture(
            "gpu-h100/sharded_2x2",
            "gpu",
            "h100:1x1x4",
            "sharded",
            {"mesh": "2x2"},
            purpose="4 H100s on one host, mesh 2x2: collectives",
        ),
        Fixture(
            "gpu-h100/past_capacity",
            "gpu",
            "h100",
            "oom",
            {"n": 32768, "copies": 48},
            purpose="temporaries far past the H100's 80 GB: XLA:GPU compiles it all the same",
        ),
    ]


def _pair(cause, backend, target, program, base, head, what, devices=1):
    tag = "cpu" if backend == "cpu" else target.split(":")[0]
    out = []
    for side, params in (("base", base), ("head", head)):
        path = f"pairs/{cause}-{tag}/{side}"
        if backend == "cpu":
            out.append(_cpu(path, program, what, devices=devices, params=params, lean="pair"))
        else:
            out.append(_tpu(path, target, program, what, params=params, lean="pair"))
    return out


def _stage_pairs() -> list[Fixture]:
    out = []
    for backend, target in (("cpu", "cpu"), ("tpu", "v5e:1x1")):
        out += _pair(
            "batch", backend, target, "mlp", {"batch": 64}, {"batch": 256}, "batch 64 -> 256"
        )
        out += _pair(
            "dtype",
            backend,
            target,
            "mlp",
            {"dtype": "bfloat16"},
            {"dtype": "float32"},
            "weights and the target y bf16 -> f32 (x stays bf16)",
        )
        for pol in ("nothing_saveable", "save_only_these_names"):
            out += _pair(
                f"remat-dots-vs-{pol.split('_')[0]}",
                backend,
                target,
                "remat",
                {"policy": "dots_saveable"},
                {"policy": pol},
                f"remat policy dots_saveable -> {pol}",
            )
        out += _pair(
            "donation",
            backend,
            target,
            "mlp",
            {"donate": True},
            {"donate": False},
            "donation on -> off",
        )
        out += _pair(
            "unroll", backend, target, "scan", {"unroll": 1}, {"unroll": 4}, "scan unroll 1 -> 4"
        )
        out += _pair("same", backend, target, "mlp", {}, {}, "the same program compiled twice")
    out += _pair(
        "padded",
        "tpu",
        "v5e:1x1",
        "padded",
        {"n": 1024},
        {"n": 1000},
        "dimension 1024 -> 1000 (the minor one padded back to 1024 by the tiles)",
    )
    out += _pair(
        "offload",
        "tpu",
        "v5e:1x1",
        "offload_out",
        {"offload": False},
        {"offload": True},
        "an output in device memory -> in pinned_host",
    )
    out += _pair(
        "mesh",
        "cpu",
        "cpu",
        "sharded",
        {"mesh": "1x4"},
        {"mesh": "2x2"},
        "mesh 1x4 -> 2x2 (4 host devices)",
        devices=4,
    )
    out += _pair(
        "mesh",
        "tpu",
        "v5p:2x2x1",
        "sharded",
        {"mesh": "1x4"},
        {"mesh": "2x2"},
        "mesh 1x4 -> 2x2 (4 v5p chips)",
    )
    return out


STAGES = {"cpu": _stage_cpu, "tpu": _stage_tpu, "gpu": _stage_gpu, "pairs": _stage_pairs}


# --------------------------------------------------------------------------- child


class Ctx:
    """The target as the builders see it: abstract arguments and meshes on its devices."""

    def __init__(self, devices):
        self.devices = devices

    def mesh(self, shape: str):
        import numpy as np
        from jax.sharding import Mesh

        dims = tuple(int(n) for n in shape.split("x"))
        names = ("data", "model")[: len(dims)] if len(dims) > 1 else ("d",)
        if len(dims) == 1 and dims[0] > 1:
            dims, names = (1, dims[0]), ("data", "model")
        n = int(np.prod(dims))
        return Mesh(np.array(self.devices[:n]).reshape(dims), names)

    def sds(self, shape, dtype, sharding=None):
        import jax
        from jax.sharding import NamedSharding
        from jax.sharding import PartitionSpec as P

        if sharding is None:
            sharding = NamedSharding(self.mesh("1"), P())
        return jax.ShapeDtypeStruct(shape, dtype, sharding=sharding)


def _devices(fx: Fixture):
    import jax
    from jax.experimental import topologies

    if fx.backend == "cpu":
        return jax.devices("cpu")
    if fx.backend == "tpu":
        return topologies.get_topology_desc(topology_name=fx.target, platform="tpu").devices
    spec = (HERE / GPU_SPEC).read_text()
    shape = fx.target.partition(":")[2] or "1x1x1"  # slices x hosts x devices
    return topologies.get_topology_desc(
        topology_name="cuda", platform="cuda", target_config=spec, topology=shape
    ).devices


def _analysis(compiled) -> dict:
    m = compiled.memory_analysis()
    out = {}
    for name in sorted(n for n in dir(m) if not n.startswith("_")):
        value = getattr(m, name)
        if isinstance(value, bytes):
            out[name + "_len"] = len(value)
            out[name + "_sha256"] = hashlib.sha256(value).hexdigest()
        else:
            out[name] = value
    return out


def child(fx: Fixture, out: Path) -> None:
    import jax

    jax.config.update("jax_hlo_source_file_canonicalization_regex", r".*/")
    fn, args, kw = PROGRAMS[fx.program](Ctx(_devices(fx)), **fx.params)
    record = {"fixture": asdict(fx), "jit_name": f"jit_{fn.__name__}", "module_name": None}
    inputs = _inputs(args) if fx.run else None
    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0  # no Python frames: small, and no machine paths
    trace = (
        jax.profiler.trace(str(out / "trace"), profiler_options=options)
        if fx.profile
        else contextlib.nullcontext()
    )
    with trace:
        try:
            compiled = jax.jit(fn, **kw).trace(*args).lower().compile()
        except Exception as e:  # the OOM fixture: the exception text verbatim
            (out / "compile-oom.log").write_text(f"{type(e).__name__}: {e}\n")
            record["memory_analysis"] = None
            record["error"] = "compile-oom.log"
            (out / "memory_analysis.json").write_text(json.dumps(record, indent=1) + "\n")
            return
        if fx.run:
            jax.block_until_ready(compiled(*inputs))
    if fx.profile:
        jax.profiler.save_device_memory_profile(str(out / "memory.prof"))
    record["module_name"] = compiled.as_text().split("\n", 1)[0].split()[1].rstrip(",")
    record["memory_analysis"] = _analysis(compiled)
    (out / "memory_analysis.json").write_text(json.dumps(record, indent=1) + "\n")


def _inputs(args):
    """Real CPU arrays for the abstract arguments; jnp.ones and astype compile jax's helper
    programs, as a real step's set-up does."""
    import jax
    import jax.numpy as jnp

    return jax.tree.map(lambda a: jnp.ones(a.shape, jnp.float32).astype(a.dtype) * 0.5, args)


# --------------------------------------------------------------------------- parent

LOG_RECORD = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [^ ]+:\d+\] ")
KEEP_LOG = re.compile(r"hbm|vmem|smem|sflag|memory|requirement|usage|bytes|oom|exceed", re.I)
#: dumped files that say nothing about memory, kept only in the `full` fixtures (size)
NOT_MEMORY = re.compile(
    r"\.(after_codegen\.(txt|hlo\.pb)|before_optimizations\.(txt|hlo\.pb)|flagfile"
    r"|hlo_module_config\.txt|after_optimizations_(before|after)_buffer_assignment\.txt"
    r"|oom_intermediate_module\.txt|before_config_assignment\.(txt|hlo\.pb)"
    r"|after_spmd_partitioner\.(txt|hlo\.pb))$|^module\.mlir$"
)
#: what lean fixtures also drop, for size: "copies" the two HLO protos without a
#: buffer assignment (libtpu's copies of the module), "pair" these and the TPU
#: compile environment. The fixtures that are not lean keep them.
_COPIES = r"after_optimizations_(before|after)_buffer_assignment\.hlo\.pb"
LEAN_DROP = {
    "copies": re.compile(rf"\.{_COPIES}$"),
    "pair": re.compile(rf"\.({_COPIES}|tpu_comp_env\.txt)$"),
}
PASS_DUMP = re.compile(r"^module_\d+\.[^/]*\.\d{4}\.[^/]*\.(after|before)_.*")


def _env(fx: Fixture, flags: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XLA_", "TPU_", "JAX_"))}
    env |= {"JAX_PLATFORMS": "cpu", "CUDA_ROOT": "./cuda_sdk_lib", "XLA_FLAGS": flags}
    if fx.backend == "tpu":
        env |= {
            "TPU_SKIP_MDS_QUERY": "1",
            "TPU_ACCELERATOR_TYPE": TPU_TARGETS[fx.target],
            "TPU_WORKER_HOSTNAMES": "localhost",
            "TPU_WORKER_ID": "0",
        }
        if fx.libtpu_log:
            env |= {"TPU_STDERR_LOG_LEVEL": "0", "TPU_MIN_LOG_LEVEL": "0"}
    return env


def _flags(fx: Fixture, jit_name: str) -> str:
    flags = "--xla_dump_to=dump --xla_dump_hlo_as_text --xla_dump_hlo_as_proto"
    if not fx.helpers:
        flags += f" --xla_dump_hlo_module_re={jit_name}"
    if fx.backend == "cpu" and fx.target != "cpu:1":
        flags += f" --xla_force_host_platform_device_count={fx.target.split(':')[1]}"
    return flags


def make(fx: Fixture, lock: str | None) -> None:
    dst = HERE / fx.path
    shutil.rmtree(dst, ignore_errors=True)
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        (scratch / "out").mkdir()
        jit_name = "jit_" + fx.program + "_step"
        flags = _flags(fx, jit_name)
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(asdict(fx))]
        if fx.backend == "tpu" and lock:
            cmd = ["flock", lock, *cmd]
        proc = subprocess.run(cmd, cwd=scratch, env=_env(fx, flags), capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"{fx.path}: child failed\n{proc.stderr[-4000:]}")
        out = scratch / "out"
        _collect(scratch / "dump", out, fx)
        if fx.libtpu_log:
            (out / "libtpu-stderr.log").write_text(_memory_records(proc.stderr))
        _scrub(out, scratch)
        rec = json.loads((out / "memory_analysis.json").read_text())
        rec["xla_flags"] = flags
        (out / "memory_analysis.json").write_text(json.dumps(rec, indent=1) + "\n")
        if fx.expect_oom != (rec["memory_analysis"] is None):
            sys.exit(f"{fx.path}: expected an OOM: {fx.expect_oom}, got {rec.get('error')}")
        shutil.copytree(out, dst)
    print(f"{fx.path}: {sum(f.stat().st_size for f in dst.rglob('*') if f.is_file())} bytes")


def _memory_records(log: str) -> str:
    """The records of a glog stderr (a record: its `I1207 08:00:00.000 …]` line and the
    lines that follow it) of which a line speaks of memory."""
    records: list[list[str]] = []
    for line in log.splitlines():
        if LOG_RECORD.match(line) or not records:
            records.append([])
        records[-1].append(line)
    kept = [r for r in records if any(KEEP_LOG.search(ln) for ln in r)]
    return "".join(ln + "\n" for r in kept for ln in r)


def _collect(dump: Path, out: Path, fx: Fixture) -> None:
    """The dump files into the fixture: pass-by-pass dumps and object files dropped."""
    if dump.exists():
        for f in dump.rglob("*"):
            rel = f.relative_to(dump)
            dropped = PASS_DUMP.match(f.name) or ".obj-file." in f.name
            dropped = dropped or (not fx.full and NOT_MEMORY.search(f.name))
            if f.is_dir() or dropped or (fx.lean and LEAN_DROP[fx.lean].search(f.name)):
                continue
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(f), out / rel)
    if fx.profile:
        (xplane,) = (out / "trace").rglob("*.xplane.pb")
        dst = out / "profile" / "plugins" / "profile" / "run1" / "host.xplane.pb"
        dst.parent.mkdir(parents=True)
        dst.write_bytes(_anonymous_xspace(xplane.read_bytes()))
        shutil.rmtree(out / "trace")
        _file_names_only(out / "memory.prof")


def _varint(data: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = data[i]
        value |= (b & 0x7F) << shift
        i, shift = i + 1, shift + 7
        if b < 0x80:
            return value, i


def _rewrite_strings(data: bytes, field_no: int, fix) -> bytes:
    """A message with the strings of one top-level field passed through `fix`; every
    other top-level field copied byte for byte."""
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
            if key >> 3 == field_no:
                text = fix(data[i : i + size].decode())
                out += bytes([key]) + _encode_varint(len(text.encode())) + text.encode()
                i += size
                continue
            i += size
        else:
            sys.exit(f"top-level field {key >> 3} of wire type {wire}")
        out += data[start:i]
    return bytes(out)


def _encode_varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _anonymous_xspace(data: bytes) -> bytes:
    """XSpace.hostnames (field 4, tsl/profiler/protobuf/xplane.proto) said as 'host'."""
    return _rewrite_strings(data, 4, lambda _: "host")


def _file_names_only(prof: Path) -> None:
    """A pprof Profile's string_table (field 6) with every path cut to its file name, as
    the canonicalization regex cuts them in HLO metadata."""
    data = gzip.decompress(prof.read_bytes())
    fixed = _rewrite_strings(data, 6, lambda s: re.sub(r"^/.*/", "", s))
    prof.write_bytes(gzip.compress(fixed, mtime=0))


#: libtpu's own defaults, the same on every machine (its flagfile lists every flag)
LIBTPU_DEFAULT_PATHS = re.compile(
    rb"--xla_tpu_impure_(diagnostic_artifacts_dir=/tmp|offloaded_lowering_files_dir="
    rb"/tmp/xla_tpu_offloaded_lowering)(?=\s)"
)


def _scrub(out: Path, scratch: Path) -> None:
    """Refuse to publish a machine path or the host name (libtpu's defaults excepted)."""
    # the checkout and the folder beside it that holds the others (worktrees), the home,
    # the scratch and temporary directories: whatever this machine calls them
    here = Path(__file__).resolve().parents[3]
    places = (scratch, here, here.parent, Path.home(), Path(tempfile.gettempdir()))
    bad = [f"{p}/".encode() for p in places]
    host = socket.gethostname().encode()
    for f in out.rglob("*"):
        if not f.is_file():
            continue
        data = f.read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        data = LIBTPU_DEFAULT_PATHS.sub(b"", data)
        for b in bad:
            if b in data:
                sys.exit(f"{f.relative_to(out)}: holds the machine path {b.decode()!r}")
        if re.search(rb"(?<![A-Za-z0-9_])" + re.escape(host) + rb"(?![A-Za-z0-9_])", data):
            print(f"warning: {f.relative_to(out)} holds the host name {host.decode()!r}")


def versions() -> None:
    from importlib import metadata

    found = {"python": sys.version.split()[0]}
    for dist in (
        "jax",
        "jaxlib",
        "libtpu",
        "jax-cuda12-plugin",
        "jax-cuda12-pjrt",
        "nvidia-cuda-nvcc-cu12",
    ):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = None
    (HERE / "VERSIONS.json").write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")


FIGURES = (
    ("argument", "argument_size_in_bytes"),
    ("output", "output_size_in_bytes"),
    ("alias", "alias_size_in_bytes"),
    ("temp", "temp_size_in_bytes"),
    ("peak", "peak_memory_in_bytes"),
    ("code", "generated_code_size_in_bytes"),
    ("host arg", "host_argument_size_in_bytes"),
    ("host out", "host_output_size_in_bytes"),
    ("host temp", "host_temp_size_in_bytes"),
)

INDEX_HEAD = """# jax 0.12 fixtures (real CPU, TPU and GPU compiles)

Made by `make_fixtures.py` (this directory; versions in `VERSIONS.json`). Each
directory below is the dump of ONE program compile (`--xla_dump_to=DIR
--xla_dump_hlo_as_text --xla_dump_hlo_as_proto`, `--xla_dump_hlo_module_re` = the
program unless the row says "helpers"), plus `memory_analysis.json`: every field of
`compiled.memory_analysis()`, the jit name, the fixture's spec and XLA_FLAGS. TPU and
GPU compiles are deviceless (`jax.experimental.topologies`). Kept: the dump files
that matter for memory; the rows marked "every dump file kept" also keep what
does not (`after_codegen`, `before_optimizations`, `flagfile`, `hlo_module_config`,
the `.txt` of libtpu's module copies, `oom_intermediate_module.txt`, GPU's
`before_config_assignment` and `after_spmd_partitioner`, `module.mlir`); rows marked "lean" drop libtpu's two copies of the module
without a buffer assignment (`*.after_optimizations_{{before,after}}_buffer_assignment.hlo.pb`);
none keeps pass-by-pass HLO dumps or CPU object files.
Machine paths cut: HLO source paths by the canonicalization regex, pprof paths to
file names, the profile's host name said as `host`, the dump directory `dump`
(relative). `compile-oom.log`: the compile's exception text, verbatim.
`libtpu-stderr.log` (every TPU fixture): libtpu's own stderr at `TPU_STDERR_LOG_LEVEL=0
TPU_MIN_LOG_LEVEL=0`, only the records (a glog line and its continuation lines) of which a line matches
`{keep}`.
Pairs for the diff-causes issue: `pairs/INDEX.md`. Figures in bytes.

Remake: `python make_fixtures.py --stage cpu|tpu|gpu|pairs [--only PATH]
[--tpu-lock FILE]` with Python >= 3.12 and jax[tpu]==0.12.0.1.

"""


def _records(root: Path) -> list[tuple[Path, dict]]:
    return sorted(
        (f.parent.relative_to(root), json.loads(f.read_text()))
        for f in root.rglob("memory_analysis.json")
    )


def _row(rec: dict) -> list[str]:
    ma = rec["memory_analysis"] or {}
    return [f"{ma[k]:,}" if k in ma else "—" for _, k in FIGURES]


def write_index() -> None:
    rows = []
    for rel, rec in _records(HERE):
        if rel.parts[0] == "pairs":
            continue
        fx = rec["fixture"]
        notes = [fx["purpose"]]
        notes += ["helpers kept"] if fx["helpers"] else []
        notes += ["every dump file kept"] if fx.get("full") else []
        notes += ["lean: no libtpu module copies"] if fx.get("lean") == "copies" else []
        notes += ["compile-oom.log"] if rec["memory_analysis"] is None else []
        params = ", ".join(f"{k}={v}" for k, v in fx["params"].items()) or "defaults"
        cells = [f"`{rel}`", fx["backend"], fx["target"], f"{fx['program']} ({params})"]
        rows.append("| " + " | ".join([*cells, rec["jit_name"], "; ".join(notes), *_row(rec)]))
    head = ["dir", "backend", "target", "program", "jit", "what it exercises"]
    head += [n for n, _ in FIGURES]
    text = INDEX_HEAD.format(keep=KEEP_LOG.pattern)
    text += "| " + " | ".join(head) + " |\n|" + "---|" * len(head) + "\n"
    (HERE / "INDEX.md").write_text(text + "".join(r + " |\n" for r in rows))
    _write_pairs_index()


def _write_pairs_index() -> None:
    root = HERE / "pairs"
    if not root.exists():
        return
    text = (
        "# Pairs for the diff-causes issue\n\nEach `<cause>-<backend>/` holds `base/` and"
        " `head/`, each one compile (a fixture directory as in `../INDEX.md`). Deltas are"
        " head − base of `memory_analysis()`, in bytes. To stay small the pairs also drop"
        " `*.after_optimizations_{before,after}_buffer_assignment.hlo.pb` and"
        " `tpu_comp_env.txt` (the fixtures outside pairs/ keep them).\n\n"
    )
    head = ["pair", "target", "program", "what changed"] + [f"Δ {n}" for n, _ in FIGURES]
    text += "| " + " | ".join(head) + " |\n|" + "---|" * len(head) + "\n"
    done = [p for p in root.iterdir() if (p / "base" / "memory_analysis.json").exists()]
    for pair in sorted(p for p in done if (p / "head" / "memory_analysis.json").exists()):
        base, head_ = (
            json.loads((pair / s / "memory_analysis.json").read_text()) for s in ("base", "head")
        )
        fx = base["fixture"]
        deltas = [
            f"{head_['memory_analysis'][k] - base['memory_analysis'][k]:+,}" for _, k in FIGURES
        ]
        changed = f"{fx['purpose']}: {fx['params'] or '{}'} -> {head_['fixture']['params'] or '{}'}"
        cells = [f"`{pair.name}`", fx["target"], fx["program"], changed, *deltas]
        text += "| " + " | ".join(cells) + " |\n"
    (root / "INDEX.md").write_text(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stage", action="append", choices=sorted(STAGES), default=[])
    ap.add_argument("--only", action="append", default=[], help="fixture path(s) to remake")
    ap.add_argument("--tpu-lock", help="flock this file around every TPU compile")
    ap.add_argument("--list", action="store_true", help="print the fixtures and stop")
    ap.add_argument("--index", action="store_true", help="only rewrite the INDEX.md files")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(Fixture(**json.loads(a.child)), Path("out"))
        return
    chosen = [fx for s in (a.stage or list(STAGES)) for fx in STAGES[s]()]
    if a.only:
        chosen = [fx for fx in chosen if fx.path in a.only]
    if a.list:
        for fx in chosen:
            print(fx.path, fx.backend, fx.target, fx.program, fx.params)
        return
    if not a.index:
        versions()
        if any(fx.backend == "gpu" for fx in chosen):
            gpu_spec()
        for fx in chosen:
            make(fx, a.tpu_lock)
            write_index()
    write_index()


if __name__ == "__main__":
    main()
