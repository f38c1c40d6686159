"""Regenerate the `diff --show causes` fixtures: pairs of real jax compiles on CPU,
each differing by one cause known by construction (two in `multi`).

    JAX_PLATFORMS=cpu /path/to/venv-with-jax/bin/python tests/data/causes/make_pairs.py

Every side of every pair compiles AOT in a process of its own (XLA_FLAGS are read
once per process) with the text buffer assignment and the HloProto dumped; only the
after-optimizations files bufferhouse reads are kept (gzipped over 32 KiB). The
layout is <pair>/<side>/ with side base or head. manifest.json records, per side,
memory_analysis() and, per pair, the cause the pair was built to show (`expect`),
and for `multi` the split of the change computed here from shapes and dtypes
(`split`: bytes per cause, not from bufferhouse). The project never imports jax.
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
KEEP_SUFFIXES = (
    "_after_optimizations.hlo.pb",
    "_after_optimizations-buffer-assignment.txt",
    "_after_optimizations-buffer-assignment-values.txt",
    "_after_optimizations-live-range.txt",
    "_after_optimizations.txt",
)

#: sizes of the multi pair: a donated update of P floats loses its donation, and
#: the head returns one more output of Q floats
MULTI_P = (512, 512)
MULTI_Q = (256, 256)

#: pair -> (the cause built in, {side: variant}); see build()
PAIRS = {
    "donation": ("aliasing-lost", {"base": "donate", "head": "no-donate"}),
    "dtype": ("dtype", {"base": "bf16", "head": "f32"}),
    "batch": ("shape", {"base": "batch64", "head": "batch256"}),
    "extra_output": ("new-buffer", {"base": "one-output", "head": "two-outputs"}),
    "scan_unroll": ("longer-live", {"base": "unroll1", "head": "unroll8"}),
    "same": (None, {"base": "same", "head": "same"}),
    "multi": ("aliasing-lost", {"base": "multi-base", "head": "multi-head"}),
}


def build(pair, variant):
    """(function, argument ShapeDtypeStructs, jit kwargs) of one side."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    sds = jax.ShapeDtypeStruct
    f32, bf16 = jnp.float32, jnp.bfloat16
    if pair == "donation":

        def sgd_update(w, g):
            return w - 0.01 * g

        kw = {"donate_argnums": (0,)} if variant == "donate" else {}
        return sgd_update, (sds((512, 512), f32), sds((512, 512), f32)), kw
    if pair == "dtype":
        dt = bf16 if variant == "bf16" else f32

        def stack(x, y):  # data movement only: no arithmetic the CPU would do in f32
            return jnp.concatenate([x, y]), x.T[::-1]

        return stack, (sds((512, 512), dt), sds((512, 512), dt)), {}
    if pair == "batch":
        n = 64 if variant == "batch64" else 256

        def mlp(x, w1, w2):
            return jnp.tanh(jnp.tanh(x @ w1) @ w2)

        return mlp, (sds((n, 256), f32), sds((256, 512), f32), sds((512, 256), f32)), {}
    if pair == "extra_output":

        def head_fn(x, w):
            h = jnp.tanh(x @ w)
            if variant == "two-outputs":
                return h.sum(axis=0), jnp.exp(h)
            return (h.sum(axis=0),)

        return head_fn, (sds((256, 512), f32), sds((512, 512), f32)), {}
    if pair == "scan_unroll":
        unroll = 1 if variant == "unroll1" else 8

        def rnn(xs, w):
            def body(h, x):
                h = jnp.tanh(h @ w + x)
                return h, jnp.exp(h)

            return lax.scan(body, jnp.zeros((64, 256), f32), xs, unroll=unroll)

        return rnn, (sds((16, 64, 256), f32), sds((256, 256), f32)), {}
    if pair == "same":

        def mlp(x, w1, w2):
            return jnp.tanh(jnp.tanh(x @ w1) @ w2)

        return mlp, (sds((64, 256), f32), sds((256, 512), f32), sds((512, 256), f32)), {}
    if pair == "multi":

        def update(w, g, x):  # x is kept unused on the base (keep_unused)
            w = w - 0.01 * g
            if variant == "multi-head":
                return w, jnp.exp(x)
            return (w,)

        kw = {"keep_unused": True}
        if variant == "multi-base":
            kw["donate_argnums"] = (0,)
        return update, (sds(MULTI_P, f32), sds(MULTI_P, f32), sds(MULTI_Q, f32)), kw
    raise KeyError(pair)


def expected_split():
    """The multi pair's change in total bytes by cause, from shapes and dtypes alone:
    the undonated update needs its own f32[P] output; the extra output is f32[Q],
    and a result of two arrays is a tuple, a table of two 8-byte pointers on CPU."""
    p = MULTI_P[0] * MULTI_P[1] * 4
    q = MULTI_Q[0] * MULTI_Q[1] * 4
    return {"aliasing-lost": p, "new-buffer": q + 2 * 8}


def memory_dict(compiled):
    m = compiled.memory_analysis()
    keys = (
        "argument_size_in_bytes",
        "output_size_in_bytes",
        "alias_size_in_bytes",
        "temp_size_in_bytes",
        "peak_memory_in_bytes",
    )
    return {k: int(getattr(m, k)) for k in keys}


def child_compile(pair, variant, out_json):
    """In a child process: compile one side AOT; write its memory_analysis()."""
    import jax

    # source paths in the HLO metadata cut to file names: no machine path in a fixture
    jax.config.update("jax_hlo_source_file_canonicalization_regex", r".*/")
    fn, args, kw = build(pair, variant)
    compiled = jax.jit(fn, **kw).lower(*args).compile()
    Path(out_json).write_text(json.dumps(memory_dict(compiled)))


def keep(src_dir: Path, dst_dir: Path) -> list[Path]:
    """Copy the files bufferhouse reads (gzipping big ones); return the kept paths."""
    dst_dir.mkdir(parents=True, exist_ok=True)
    kept = []
    for src in sorted(src_dir.rglob("*")):
        if not (src.is_file() and src.name.endswith(KEEP_SUFFIXES)):
            continue
        data = src.read_bytes()
        dst = dst_dir / (src.name + (".gz" if len(data) > GZIP_OVER else ""))
        dst.write_bytes(gzip.compress(data, mtime=0) if len(data) > GZIP_OVER else data)
        kept.append(dst)
    return kept


def main():
    pairs = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for pair, (cause, variants) in PAIRS.items():
            shutil.rmtree(HERE / pair, ignore_errors=True)
            sides = {}
            for side, variant in variants.items():
                dump, info = tmp / pair / side, tmp / f"{pair}-{side}.json"
                flags = f"--xla_dump_to={dump} --xla_dump_hlo_as_proto --xla_dump_hlo_as_text"
                env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=flags)
                cmd = [sys.executable, __file__, "compile", pair, variant, str(info)]
                subprocess.run(cmd, check=True, env=env)
                kept = keep(dump, HERE / pair / side)
                sides[side] = {
                    "variant": variant,
                    "files": [str(p.relative_to(HERE)) for p in kept],
                    "memory_analysis": json.loads(info.read_text()),
                }
            pairs[pair] = {"expect": cause, **sides}
        pairs["multi"]["split"] = {"total_bytes": expected_split()}
    import jax

    manifest = {
        "description": "diff --show causes fixtures made by make_pairs.py with jax on CPU.",
        "memory_analysis_source": "jax.jit(f).lower(*args).compile().memory_analysis()",
        "jax_version": jax.__version__,
        "pairs": pairs,
    }
    (HERE / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "compile":
        child_compile(*sys.argv[2:5])
    else:
        main()
