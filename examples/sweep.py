"""Will it fit? Compile one jitted step for several targets and sizes, without the hardware.

XLA compiles for a TPU or an NVIDIA GPU with none attached (deviceless ahead-of-time
compilation through `jax.experimental.topologies`): its buffer assignment and
`memory_analysis()` are those of the target chip, and a program too big for a TPU
fails its compile with `E1000: CompileTimeHbmOom`. This script compiles your step
once per (target, size), dumps each compile into a directory of its own, writes the
compile's exception text beside the dump when it fails, and ingests each directory
with labels (`topology=v5e:1x1 batch=64`) for `bufferhouse query fits`
(docs/fits.md).

    import examples.sweep as sweep  # or copy this file into your project
    results = sweep.sweep(
        step,                         # a jax.jit-ed function
        lambda batch, mesh: (params_spec(mesh), batch_spec(batch, mesh)),
        targets=["v5e:1x1", "v6e:1x1"],
        sizes={"batch": [64, 128, 256]},
        out="sweep",
        db="fleet.duckdb",
    )

`make_args(size, mesh)` returns the step's arguments as `jax.ShapeDtypeStruct`s
(with shardings over `mesh`, a one-axis `Mesh` named "data" over the target's
devices). Targets: a TPU topology name of `jax.experimental.topologies`
(`v5e:1x1`, `v6e:2x2`, `v5p:2x2x1`, ...), or `gpu:<spec>` where `<spec>` is a
GpuTargetConfigProto text file or a device the CUDA plugin embeds (`gpu:h100`,
`gpu:a100`, `gpu:b200`), optionally with `@SLICESxHOSTSxDEVICES`.

It needs Python >= 3.12 with `jax[tpu]` (libtpu) for TPU targets and
`jax-cuda12-plugin` + `nvidia-cuda-nvcc-cu12` for GPU targets, and these set before
jax starts: `JAX_PLATFORMS=cpu TPU_SKIP_MDS_QUERY=1 TPU_WORKER_HOSTNAMES=localhost
TPU_WORKER_ID=0` (`environment()` gives them; `python examples/sweep.py` sets them and
re-runs itself). libtpu compiles one program at a time per machine. Nothing of
bufferhouse imports jax: this file is an example, not part of the package.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

#: GPU names -> the device_description_str of the spec the CUDA plugin embeds.
GPU_DEVICES = {
    "h100": "NVIDIA H100 80GB HBM3",
    "a100": "NVIDIA A100-SXM4-80GB",
    "b200": "NVIDIA B200",
}
#: Dump files kept per compile (the rest of what XLA writes is deleted): what
#: bufferhouse reads for memory, and what names the target.
KEEP = (
    r"-buffer-assignment\.txt$",
    r"-buffer-assignment-values\.txt$",
    r"-live-range\.txt$",
    r"_after_optimizations\.txt$|\.after_optimizations\.txt$",
    r"\.target_arguments\.txt$",
    r"\.gpu_target_config\.pbtxt$",
    r"/topology\.pb$",
)


def environment() -> dict[str, str]:
    """The environment a deviceless compile needs (set before jax is imported)."""
    return {
        "JAX_PLATFORMS": "cpu",
        "TPU_SKIP_MDS_QUERY": "1",
        "TPU_WORKER_HOSTNAMES": "localhost",
        "TPU_WORKER_ID": "0",
        "CUDA_ROOT": "./cuda_sdk_lib",  # keeps the nvcc path out of compile_options
    }


@dataclass
class Compile:
    """One (target, size) compile: where it was dumped, its labels, and what came of it."""

    target: str
    labels: dict[str, str]
    directory: str
    seconds: float = 0.0
    #: memory_analysis() of a compile that succeeded, field by field.
    memory: dict[str, int] = field(default_factory=dict)
    #: The exception text of a compile that failed (also in DIR/compile-oom.log).
    error: str | None = None

    @property
    def fits_compiler(self) -> bool:
        return self.error is None


def target_slug(target: str) -> str:
    return re.sub(r"[^\w.-]+", "_", target).strip("_")


def devices(target: str):
    """The devices of a target: a TPU topology name, or gpu:<name or spec file>[@AxBxC]."""
    from jax.experimental import topologies

    if not target.startswith("gpu:"):
        return topologies.get_topology_desc(topology_name=target, platform="tpu").devices
    spec, _, shape = target[4:].partition("@")
    return topologies.get_topology_desc(
        topology_name="cuda",
        platform="cuda",
        target_config=gpu_spec(spec),
        topology=shape or "1x1x1",
    ).devices


def gpu_spec(name: str) -> str:
    """A GpuTargetConfigProto as text: a file, or the spec the CUDA plugin embeds for a
    device (XLA's gpu_specs/*.txtpb, NUL-terminated in the plugin's .so)."""
    if os.path.exists(name):
        return Path(name).read_text()
    import jax_plugins.xla_cuda12 as plugin

    wanted = f'device_description_str: "{GPU_DEVICES.get(name.lower(), name)}"'.encode()
    for so in Path(plugin.__file__).parent.glob("*.so"):
        data = so.read_bytes()
        at = data.find(wanted)
        if at >= 0:
            return data[data.rindex(b"\0", 0, at) + 1 : data.index(b"\0", at)].decode()
    raise SystemExit(f"no GPU spec for {name!r} in the CUDA plugin (known: {sorted(GPU_DEVICES)})")


def compile_one(step, args, directory: Path) -> tuple[dict[str, int], str | None]:
    """Compile `step` for `args` with its dump in `directory`: (memory_analysis, error)."""
    options = {
        "xla_dump_to": str(directory),
        "xla_dump_hlo_as_text": True,
        "xla_dump_hlo_as_proto": True,
    }
    try:
        compiled = step.trace(*args).lower().compile(options)
    except Exception as exc:  # the compile's own error: kept, the sweep goes on
        if "RESOURCE_EXHAUSTED" not in str(exc):
            raise
        return {}, f"{type(exc).__name__}: {exc}"
    m = compiled.memory_analysis()
    return {k: int(getattr(m, k)) for k in dir(m) if k.endswith("_in_bytes")}, None


def trim(directory: Path, keep: Iterable[str] = KEEP) -> None:
    """Delete the dump files no pattern of `keep` matches (and emptied folders)."""
    patterns = [re.compile(p) for p in keep]
    for path in sorted(directory.rglob("*"), reverse=True):
        rel = "/" + path.relative_to(directory).as_posix()
        if path.is_file() and not any(p.search(rel) for p in patterns):
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()


def sweep(
    step,
    make_args: Callable[..., tuple],
    *,
    targets: Iterable[str],
    sizes: Mapping[str, Iterable[object]],
    out: str | os.PathLike[str],
    db: str | os.PathLike[str] | None = None,
    labels: Mapping[str, str] | None = None,
    keep: Iterable[str] | None = KEEP,
) -> list[Compile]:
    """Compile `step` for every target and size; dump, keep the failures' text, ingest.

    `sizes` names one swept parameter and its values (`{"batch": [64, 128]}`);
    `make_args(value, mesh)` gives the arguments for one value. Each compile lands in
    OUT/<target>/<key>=<value>/ with `memory_analysis.json` (or `compile-oom.log`), and
    is ingested into `db` (when given) with the labels topology=<target>, <key>=<value>
    and `labels`.
    """
    import jax
    import numpy as np
    from jax.sharding import Mesh

    jax.config.update("jax_hlo_source_file_canonicalization_regex", r".*/")
    ((key, values),) = sizes.items()
    results: list[Compile] = []
    for target in targets:
        devs = devices(target)
        mesh = Mesh(np.array(devs).reshape(len(devs)), ("data",))
        for value in values:
            directory = Path(out) / target_slug(target) / f"{key}={value}"
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir(parents=True)
            tags = {"topology": target, key: str(value), **(labels or {})}
            started = time.monotonic()
            memory, error = compile_one(step, make_args(value, mesh), directory)
            result = Compile(target, tags, str(directory), time.monotonic() - started)
            result.memory, result.error = memory, error
            if keep is not None:  # a failed compile keeps its text only: its dump (if any) is
                # the assignment XLA gave up on, not a program that runs
                trim(directory, [*keep] if error is None else [])
            directory.mkdir(parents=True, exist_ok=True)
            if error is not None:
                (directory / "compile-oom.log").write_text(error + "\n")
            (directory / "memory_analysis.json").write_text(
                json.dumps({"labels": tags, "memory": memory, "error": error}, indent=1) + "\n"
            )
            results.append(result)
            print(_line(result), file=sys.stderr)
    if db is not None:
        ingest(results, db)
    return results


def ingest(results: Iterable[Compile], db: str | os.PathLike[str]) -> None:
    """Each compile's directory into `db` with its labels (bufferhouse's public API)."""
    import bufferhouse

    for r in results:
        bufferhouse.ingest([r.directory], db=db, labels=r.labels)


def _line(r: Compile) -> str:
    what = (
        f"peak {r.memory.get('peak_memory_in_bytes', 0):,} B"
        if r.error is None
        else r.error.splitlines()[0][:120]
    )
    return (
        f"{r.target} {' '.join(f'{k}={v}' for k, v in r.labels.items())}: {what} ({r.seconds:.1f}s)"
    )


def _mlp_example() -> tuple[Callable, Callable]:
    """The program of the committed sweep fixtures: a bf16 two-layer MLP training step."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    hidden, width = 8192, 1024

    def loss(params, x):
        w1, w2 = params
        return jnp.mean((jax.nn.relu(x @ w1) @ w2) ** 2)

    @jax.jit
    def step(params, x):
        grads = jax.grad(loss)(params, x)
        return jax.tree.map(lambda p, g: p - 0.01 * g, params, grads)

    def make_args(batch, mesh):
        rep = NamedSharding(mesh, P())
        params = (
            jax.ShapeDtypeStruct((width, hidden), jnp.bfloat16, sharding=rep),
            jax.ShapeDtypeStruct((hidden, width), jnp.bfloat16, sharding=rep),
        )
        return params, jax.ShapeDtypeStruct((int(batch), width), jnp.bfloat16, sharding=rep)

    return step, make_args


def main(argv: list[str]) -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", action="append", required=True, help="v5e:1x1, gpu:h100, ...")
    parser.add_argument("--size", required=True, help="KEY=V1,V2,... e.g. batch=64,128,256")
    parser.add_argument("--out", required=True)
    parser.add_argument("--db", default=None, help="warehouse to ingest into")
    parser.add_argument("--label", action="append", default=[], help="KEY=VALUE, added to each")
    args = parser.parse_args(argv)
    missing = {k: v for k, v in environment().items() if k not in os.environ}
    if missing:  # jax reads these once, at start: run again with them set
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **missing})
    key, _, values = args.size.partition("=")
    step, make_args = _mlp_example()
    sweep(
        step,
        make_args,
        targets=args.target,
        sizes={key: [int(v) for v in values.split(",")]},
        out=args.out,
        db=args.db,
        labels=dict(label.split("=", 1) for label in args.label),
    )


if __name__ == "__main__":
    main(sys.argv[1:])
