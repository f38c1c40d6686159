"""Make the one-to-one pairing fixture of oom-vs-peak (issue 41 item 13).

Run with the jax 0.12 environment (the project never imports jax):

    VENV312/bin/python tests/data/oom-pair/make_fixture.py   # a Python 3.12 venv with jax 0.12

It compiles `decode_step` (a KV-cache update: two same-shaped cache parameters,
cache['k'] and cache['v'], each updated by a dynamic_update_slice of the same
op_name on its own source line) on CPU twice, with caches of 512 and of 256
positions: two modules named jit_decode_step, as two configurations of one program
are. Both modules' text files go to dump/, memory_analysis() of each to
manifest.json, and decode.log holds the OOM message XLA's
BufferAssignment::ToVerboseString would print for the FIRST compile (512), the
older of the two modules: the GPU/CPU form of docs/format.md §14 family A,
rendered from the dump with this script's own regexes (not bufferhouse), as
tests/data/oom-join/make_fixture.py does: the stats are the allocation sums by
flag, the peak buffers HloLiveRange's printed peak list, largest first (stable),
each with its defining instruction's opcode, shape and metadata. jax 0.12 writes
an instruction's source position as a stack_frame_id, which today's
OpMetadataToString does not print; the message of the issue carried
`source_file=... source_line=...` (metadata's own fields, as older XLA and other
front ends fill them), so the renderer writes them from the module's stack frame
table (innermost frame).

What the message then holds: ranks 2 and 3 are `Entry Parameter Subshape:
f32[2,4,512,4,64]` (cache['k'] and cache['v']), ranks 1 and 7 the two updates, with
one op_name and shape but each its own source line, and rank 4 the copy of
cache['v'] with the same shape again.
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
LENGTHS = (512, 256)  # the first compile is the one that ran out of memory


def human(n: int) -> str:
    """tsl::strings::HumanReadableNumBytes."""
    if n < 1024:
        return f"{n}B"
    value, units = float(n) / 1024, "KMGTPE"
    while value >= 1024 and len(units) > 1:
        value, units = value / 1024, units[1:]
    unit = units[0]
    return f"{value:.1f}{unit}iB" if unit == "K" else f"{value:.2f}{unit}iB"


def compile_modules(out: Path) -> list[dict]:
    os.environ["XLA_FLAGS"] = f"--xla_dump_to={out} --xla_dump_hlo_module_re=decode_step"
    os.environ["JAX_PLATFORMS"] = "cpu"
    os.environ["CUDA_ROOT"] = "./cuda_sdk_lib"
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_hlo_source_file_canonicalization_regex", r".*/")

    def decode_step(params, cache, x, pos):
        q = x @ params["wq"]
        k = x @ params["wk"]
        h = jnp.tanh(q) * jnp.tanh(k)
        kv = h.reshape(2, 1, 4, 64 * 4)[..., :64]
        kv = jnp.broadcast_to(kv[:, :, None], (2, 4, 1, 4, 64))
        new_k = jax.lax.dynamic_update_slice(cache["k"], kv, (0, 0, pos, 0, 0))
        new_v = jax.lax.dynamic_update_slice(cache["v"], kv * 2, (0, 0, pos, 0, 0))
        out = (new_k.sum() + new_v.sum()) * h
        return out, {"k": new_k, "v": new_v}

    stats = []
    for length in LENGTHS:
        params = {"wq": jnp.zeros((1024, 1024)), "wk": jnp.zeros((1024, 1024))}
        shape = (2, 4, length, 4, 64)
        cache = {"k": jnp.zeros(shape), "v": jnp.zeros(shape)}
        compiled = jax.jit(decode_step).lower(params, cache, jnp.zeros((2, 1024)), 3).compile()
        m = compiled.memory_analysis()
        stats.append(
            {
                "cache_length": length,
                "argument_size_in_bytes": m.argument_size_in_bytes,
                "output_size_in_bytes": m.output_size_in_bytes,
                "alias_size_in_bytes": m.alias_size_in_bytes,
                "temp_size_in_bytes": m.temp_size_in_bytes,
            }
        )
    return [{"jax": jax.__version__, **s} for s in stats]


def source_lines(hlo: str) -> dict[int, tuple[str, int]]:
    """stack_frame_id -> (file, line) of its innermost frame, from the HLO text's tables."""
    files = dict(re.findall(r'^(\d+) "(.*)"$', hlo.split("FunctionNames")[0], re.M))
    locations = {
        a: (files[f], int(line))
        for a, f, line in re.findall(
            r"^(\d+) \{file_name_id=(\d+) function_name_id=\d+ line=(\d+)", hlo, re.M
        )
    }
    return {
        int(frame): locations[loc]
        for frame, loc in re.findall(r"^(\d+) \{file_location_id=(\d+) parent_frame_id", hlo, re.M)
    }


def render(stem: Path) -> str:
    ba = Path(f"{stem}-buffer-assignment.txt").read_text()
    values = Path(f"{stem}-buffer-assignment-values.txt").read_text()
    live = Path(f"{stem}-live-range.txt").read_text()
    frames = source_lines(Path(f"{stem}.txt").read_text())
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
    buffers = [
        (int(m.group(2)), m.group(1))
        for m in re.finditer(r"^    (\S+?)\{[\d,]*\}: (\d+) bytes", peak, re.M)
    ]
    buffers.sort(key=lambda b: -b[0])
    lines = [
        "I1207 10:00:00.000001 4101 serve.py:40] decoding with cache length 512",
        "Traceback (most recent call last):",
        '  File "/srv/serve.py", line 88, in <module>',
        "    out, cache = decode_step(params, cache, x, pos)",
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
            shown = " ".join(re.findall(r'op_(?:type|name)="(?:[^"\\]|\\.)*"', meta))
            frame = re.search(r"stack_frame_id=(\d+)", meta)
            if frame:
                file, line = frames[int(frame.group(1))]
                shown += f' source_file="{file}" source_line={line}'
            if shown:
                lines.append(f"\t\tOperator: {shown.strip()}")
            lines += [f"\t\tXLA Label: {opcode}", f"\t\tShape: {shape}"]
        lines += ["\t\t==========================", ""]
    lines += ["", "I1207 10:00:01.000000 4101 serve.py:99] exiting"]
    return "\n".join(lines) + "\n"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        stats = compile_modules(Path(tmp))
        stems = sorted(
            p.name.split("-buffer-assignment.txt")[0]
            for p in Path(tmp).glob(
                "*jit_decode_step*cpu_after_optimizations-buffer-assignment.txt"
            )
        )
        assert len(stems) == len(LENGTHS), stems  # compiled in this order: module numbers grow
        dump = HERE / "dump"
        shutil.rmtree(dump, ignore_errors=True)
        dump.mkdir()
        for stem in stems:
            for role in ROLES:
                shutil.copy(Path(tmp) / f"{stem}{role}", dump / f"{stem}{role}")
        (HERE / "decode.log").write_text(render(dump / stems[0]))
        manifest = {"modules": [{"module": s, **st} for s, st in zip(stems, stats, strict=True)]}
        manifest["oom_module"] = stems[0]
        (HERE / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print("wrote", HERE / "decode.log", file=sys.stderr)


if __name__ == "__main__":
    main()
