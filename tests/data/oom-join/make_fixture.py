"""Make the OOM join fixture: a real JAX module's dump, and the OOM message XLA would
print for it, rendered from the dump's own figures.

Run with the JAX environment (the project never imports jax):

    JAXENV/bin/python tests/data/oom-join/make_fixture.py

It compiles `train_step` (a two-layer MLP update) on CPU with
--xla_dump_to, copies the module's cpu_after_optimizations files into dump/,
records memory_analysis() in manifest.json, and writes train.log: a training
log whose OOM message is BufferAssignment::ToVerboseString's text (the
GPU/CPU form, docs/format.md §14 family A) for this module. The figures come from
the dump text, read here with regexes of this script's own (not bufferhouse):
the stats are the allocation sums by flag, the request is the largest
allocation, and the peak buffers are HloLiveRange's printed peak list, largest
first, each with its defining instruction's metadata, opcode and shape as
XLA prints them (sizes in tsl HumanReadableNumBytes: KiB with one decimal,
larger units with two).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
ROLES = (
    "-buffer-assignment.txt",
    "-buffer-assignment-values.txt",
    "-live-range.txt",
    "-memory-usage-report.txt",
    ".txt",
)


def human(n: int) -> str:
    """tsl::strings::HumanReadableNumBytes."""
    if n < 1024:
        return f"{n}B"
    value, units = float(n) / 1024, "KMGTPE"
    while value >= 1024 and len(units) > 1:
        value, units = value / 1024, units[1:]
    unit = units[0]
    return f"{value:.1f}{unit}iB" if unit == "K" else f"{value:.2f}{unit}iB"


def compile_module(out: Path) -> dict:
    os.environ["XLA_FLAGS"] = f"--xla_dump_to={out}"
    os.environ["JAX_PLATFORMS"] = "cpu"
    import jax
    import jax.numpy as jnp

    def loss(params, x, y):
        h = jnp.tanh(x @ params["w1"] + params["b1"])
        return jnp.mean((h @ params["w2"] - y) ** 2)

    @jax.jit
    def train_step(params, x, y):
        g = jax.grad(loss)(params, x, y)
        return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, g)

    params = {
        "w1": jnp.zeros((512, 1024)),
        "b1": jnp.zeros((1024,)),
        "w2": jnp.zeros((1024, 256)),
    }
    x, y = jnp.zeros((256, 512)), jnp.zeros((256, 256))
    m = train_step.lower(params, x, y).compile().memory_analysis()
    return {
        "jax": jax.__version__,
        "argument_size_in_bytes": m.argument_size_in_bytes,
        "output_size_in_bytes": m.output_size_in_bytes,
        "alias_size_in_bytes": m.alias_size_in_bytes,
        "temp_size_in_bytes": m.temp_size_in_bytes,
    }


def render(stem: Path) -> str:
    ba = Path(f"{stem}-buffer-assignment.txt").read_text()
    values = Path(f"{stem}-buffer-assignment-values.txt").read_text()
    live = Path(f"{stem}-live-range.txt").read_text()
    sums = {"parameter": 0, "constant": 0, "maybe-live-out": 0, "preallocated-temp": 0}
    sizes = []
    for m in re.finditer(r"^allocation \d+: size (\d+),(.*):$", ba, re.M):
        size, flags = int(m.group(1)), m.group(2)
        sizes.append(size)
        for flag in sums:
            if re.search(rf"(^|, ){flag}\b", flags.strip()):
                sums[flag] += size
    total = int(re.search(r"Total bytes used: (\d+)", ba + values).group(1))
    assert total == sum(sizes), (total, sum(sizes))
    shapes = {
        m.group(1): m.group(2)
        for m in re.finditer(
            r"^ value: <\d+ (\S+?)(?:\{\})? @\d+> \(size=\d+,offset=\d+\): (.*)$", ba, re.M
        )
    }
    instr = {}
    for m in re.finditer(r"^ from instruction: %(\S+) = \S+ ([\w-]+)\((.*)$", values, re.M):
        meta = re.search(r"metadata=\{(.*?)\}", m.group(3))
        instr[m.group(1)] = (m.group(2), meta.group(1) if meta else "")
    peak = re.search(r"Live ranges at \d+ \(peak\):\n((?:    .*\n)+)", live).group(1)
    buffers = []
    for m in re.finditer(r"^    (\S+?)\{[\d,]*\}: (\d+) bytes", peak, re.M):
        buffers.append((int(m.group(2)), m.group(1)))
    buffers.sort(key=lambda b: -b[0])
    lines = [
        "I1125 13:50:00.000001 4101 train.py:40] compiling train_step",
        "step 0 loss=1.0000",
        "Traceback (most recent call last):",
        '  File "train.py", line 61, in <module>',
        "    params = train_step(params, x, y)",
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying"
        f" to allocate {max(sizes)} bytes.",
        "BufferAssignment OOM Debugging.",
        "BufferAssignment stats:",
        f"             parameter allocation: {human(sums['parameter']):>10}",
        f"              constant allocation: {human(sums['constant']):>10}",
        f"        maybe_live_out allocation: {human(sums['maybe-live-out']):>10}",
        f"     preallocated temp allocation: {human(sums['preallocated-temp']):>10}",
        f"                 total allocation: {human(total):>10}",
        "Peak buffers:",
    ]
    for rank, (size, name) in enumerate(buffers[:15], 1):
        opcode, meta = instr[name]
        shape = re.sub(r"\{[^{}]*\}$", "", shapes[name])
        lines += [f"\tBuffer {rank}:", f"\t\tSize: {human(size)}"]
        if opcode == "parameter":
            lines.append(f"\t\tEntry Parameter Subshape: {shape}")
        else:
            fields = re.findall(
                r'(op_type|op_name|source_file)="((?:[^"\\]|\\.)*)"|(source_line)=(\d+)', meta
            )
            shown = " ".join(f'{a}="{b}"' if a else f"{c}={d}" for a, b, c, d in fields)
            if shown:
                lines.append(f"\t\tOperator: {shown}")
            lines += [f"\t\tXLA Label: {opcode}", f"\t\tShape: {shape}"]
        lines += ["\t\t==========================", ""]
    lines += ["", "I1125 13:50:01.000000 4101 train.py:99] exiting"]
    return "\n".join(lines) + "\n"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        manifest = compile_module(Path(tmp))
        (stem,) = {
            p.name.split("-buffer-assignment.txt")[0]
            for p in Path(tmp).glob("*jit_train_step*cpu_after_optimizations-buffer-assignment.txt")
        }
        dump = HERE / "dump"
        shutil.rmtree(dump, ignore_errors=True)
        dump.mkdir()
        for role in ROLES:
            shutil.copy(Path(tmp) / f"{stem}{role}", dump / f"{stem}{role}")
        (HERE / "train.log").write_text(render(dump / stem))
        manifest["module"] = stem
        (HERE / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print("wrote", HERE / "train.log", file=sys.stderr)


if __name__ == "__main__":
    main()
