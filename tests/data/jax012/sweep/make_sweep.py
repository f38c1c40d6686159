"""Make the capacity-planning fixtures of this directory (docs/fits.md, issue 38).

One program (examples/sweep.py's bf16 MLP training step: x bf16[batch,1024],
weights bf16[1024,8192] and bf16[8192,1024]) compiled deviceless for TPU v5e and
v6e (one chip each) and an NVIDIA H100, over batch sizes on both sides of each
chip's limit: TPU sizes past it fail with E1000 CompileTimeHbmOom (compile-oom.log);
the H100 compiles everything (XLA:GPU has no compile-time OOM) and its last size is
past the device's memory.

Then the held-out check (`limit.json`): per target, peak + generated code fitted
as a line in batch over the sizes that compiled, the largest batch (a multiple of
8192) predicted to fit the capacity XLA states (E1000's available HBM on TPU,
the GPU target config's device_memory_size), compiled, and its memory_analysis()
beside the prediction.

Pinned: Python 3.12, jax==0.12.0.1, jaxlib==0.12.0.1, libtpu==0.0.50.1,
jax-cuda12-plugin==0.12.0.1, nvidia-cuda-nvcc-cu12==12.9.86. Run from the
repository root, one libtpu compile at a time per machine:

    flock /tmp/tpu.lock python3.12 tests/data/jax012/sweep/make_sweep.py
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[3]
sys.path.insert(0, str(ROOT / "examples"))
import sweep  # noqa: E402

SIZES = {
    "v5e:1x1": [65536, 131072, 262144, 524288, 1048576],
    "v6e:1x1": [131072, 262144, 524288, 1048576, 2097152],
    "gpu:h100": [262144, 1048576, 2097152, 4194304],
}
STEP = 8192


def capacity(target: str, results: list[sweep.Compile]) -> int:
    """The capacity XLA states for the target: E1000's available HBM, or the GPU
    target config's device_memory_size."""
    for r in results:
        m = r.error and re.search(r"exceeds available HBM \(([\d.]+)G\)", r.error)
        if m:
            return round(float(m.group(1)) * (1 << 30))
    spec = sweep.gpu_spec(target[4:])
    return int(re.search(r"device_memory_size: (\d+)", spec).group(1))


def need(memory: dict[str, int]) -> int:
    return memory["peak_memory_in_bytes"] + memory["generated_code_size_in_bytes"]


def held_out(step, make_args, target: str, results: list[sweep.Compile]) -> dict:
    import numpy as np

    fitted = [r for r in results if r.error is None]
    cap = capacity(target, results)
    if [r for r in results if r.error is None and need(r.memory) > cap]:
        fitted = [r for r in fitted if need(r.memory) <= cap]
    xs = np.array([int(r.labels["batch"]) for r in fitted], dtype=float)
    ys = np.array([need(r.memory) for r in fitted], dtype=float)
    slope, intercept = np.polyfit(xs, ys, 1)
    limit = int((cap - intercept) / slope) // STEP * STEP
    (check,) = sweep.sweep(
        step,
        make_args,
        targets=[target],
        sizes={"batch": [limit]},
        out=HERE / "limit",
    )
    predicted = round(slope * limit + intercept)
    return {
        "target": target,
        "capacity_bytes": cap,
        "fitted_batches": [int(x) for x in xs],
        "slope_bytes_per_batch": slope,
        "intercept_bytes": intercept,
        "predicted_limit_batch": limit,
        "predicted_need_bytes": predicted,
        "compiled_need_bytes": need(check.memory) if check.error is None else None,
        "compile_error": check.error,
        "memory": check.memory,
    }


def main() -> None:
    missing = {k: v for k, v in sweep.environment().items() if k not in os.environ}
    if missing:
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **missing})
    os.chdir(HERE)
    step, make_args = sweep._mlp_example()
    only = sys.argv[1:] or list(SIZES)
    checks = []
    for target in only:
        results = sweep.sweep(
            step, make_args, targets=[target], sizes={"batch": SIZES[target]}, out=HERE
        )
        checks.append(held_out(step, make_args, target, results))
    old = json.loads((HERE / "limit.json").read_text()) if (HERE / "limit.json").exists() else []
    keep = [c for c in old if c["target"] not in only]
    (HERE / "limit.json").write_text(json.dumps(keep + checks, indent=1) + "\n")


if __name__ == "__main__":
    main()
