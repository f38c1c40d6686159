"""A fleet of the real shape: thousands of tiny helper modules beside a few large ones.

    python bench/fleet.py OUT_DIR [--small 8400] [--dirs 8] [--large 20,10,5,2] [--seed 39]

jax writes a module for every helper it compiles (`jit_convert_element_type`,
`jit_broadcast_in_dim`, ...) beside a few large programs: issue 39's public fleet held
25,430 A100 modules, 4.6 KB of buffer-assignment text a module on average. This makes
one like it from the committed test dumps (tests/data/corpus, tests/data/samples):

- `--small` tiny modules, each ONE copy of a usable tests/synth seed of at most
  `--max-small-bytes` (default 8,000) bytes of text, the three dump formats in turn,
  spread over `--dirs` dump directories (`dump-00/` ...) numbered from 0 in each, as
  jax numbers a process's modules. Every one has content of its own: the copy's
  instruction and computation names carry a suffix (`.h<i>`, through tests/synth's
  renaming, so every file of the module agrees), so no two are one module by content;
  the seed's module name is kept (the fleet repeats helper names, as real ones do).
- `--large` tests/synth modules of those sizes (MB of text), in the formats in turn,
  one to a directory.

Every module is rendered by tests/synth, which checks each seed reproduces its own
files byte for byte before it is used, so every module is as consistent as XLA's. The
fleet is made once under OUT_DIR (a SPEC.json marks it done) and reused. MB is 10**6
bytes.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests import synth

WORK = Path(__file__).resolve().parent / "_work"


def _small_seeds(max_bytes: int, check_dir: Path) -> list[synth.Seed]:
    """Usable seeds of every format with at most `max_bytes` of text, smallest first."""
    out = []
    for fmt in sorted(synth.FORMATS):
        seeds = synth.usable_seeds(synth.find_seeds(fmt), check_dir)
        out += [s for s in seeds if s.base_bytes <= max_bytes]
    return sorted(out, key=lambda s: (s.base_bytes, s.id))


def _stem(seed: synth.Seed, number: int) -> str:
    """`module_NNNN.<seed's module name>.<seed's tail>`: XLA's file-name form."""
    parts = seed.stem.split(".")
    name = parts[1] if len(parts) > 2 else "jit_helper"
    tail = parts[-1] if len(parts) > 2 else "cpu_after_optimizations"
    return f"module_{number:04d}.{name}.{tail}"


def write_small(seed: synth.Seed, out_dir: Path, number: int, suffix: str) -> int:
    """One copy of `seed`, its names suffixed, as module `number` in out_dir: bytes of text."""
    plan = synth.plan([seed], 0)
    plan.copies[0] = replace(plan.copies[0], sfx=suffix)
    paths = synth.write_module(plan, out_dir, _stem(seed, number))
    return sum(p.stat().st_size for k, p in paths.items() if k != ".txt")


def build(
    out: Path,
    small: int = 8400,
    dirs: int = 8,
    large: tuple[float, ...] = (20.0, 10.0, 5.0, 2.0),
    seed: int = 39,
    max_small_bytes: int = 8000,
    log=print,
) -> Path:
    """Make the fleet under `out` once (SPEC.json marks it done); returns `out`."""
    spec = {"small": small, "dirs": dirs, "large": list(large), "seed": seed,
            "max_small_bytes": max_small_bytes, "version": 1}  # fmt: skip
    marker = out / "SPEC.json"
    if marker.exists() and json.loads(marker.read_text()) == spec:
        return out
    shutil.rmtree(out, ignore_errors=True)
    started = time.monotonic()
    check = out / ".seedcheck"
    pool = _small_seeds(max_small_bytes, check)
    rng = random.Random(seed)
    # Helpers are mostly the smallest programs: draw seeds with weight 1/size.
    weights = [1.0 / s.base_bytes for s in pool]
    numbers = [0] * dirs
    text = 0
    for i in range(small):
        d = i % dirs
        s = rng.choices(pool, weights)[0]
        text += write_small(s, out / f"dump-{d:02d}", numbers[d], f".h{i}")
        numbers[d] += 1
    log(f"fleet: {small} small modules, {text / 1e6:.1f} MB, {time.monotonic() - started:.0f}s")
    formats = sorted(synth.FORMATS)
    for j, mb in enumerate(large):
        fmt = formats[j % len(formats)]
        seeds = synth.usable_seeds(synth.find_seeds(fmt), check)
        res = synth.synthesize(
            out / f"large-{j:02d}", mb, fmt, seeds=seeds[j:] + seeds[:j], name=f"jit_train_{j}"
        )
        text += res.bytes
        log(f"fleet: large module {j}: {res.bytes / 1e6:.1f} MB ({fmt})")
    shutil.rmtree(check, ignore_errors=True)
    spec_out = dict(spec, text_bytes=text, modules=small + len(large))
    marker.write_text(json.dumps(spec))
    (out / "FLEET.json").write_text(json.dumps(spec_out))
    log(f"fleet: {small + len(large)} modules, {text / 1e6:.1f} MB in "
        f"{time.monotonic() - started:.0f}s -> {out}")  # fmt: skip
    return out


def default_fleet(small: int = 8400) -> Path:
    """The bench's fleet under bench/_work (made once)."""
    return build(WORK / f"realfleet-{small}", small=small, log=lambda m: print(m, file=sys.stderr))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--small", type=int, default=8400)
    ap.add_argument("--dirs", type=int, default=8)
    ap.add_argument("--large", default="20,10,5,2", help="MB of each large module, comma-separated")
    ap.add_argument("--seed", type=int, default=39)
    ap.add_argument("--max-small-bytes", type=int, default=8000)
    args = ap.parse_args(argv)
    large = tuple(float(x) for x in args.large.split(",") if x)
    build(args.out_dir, args.small, args.dirs, large, args.seed, args.max_small_bytes,
          log=lambda m: print(m, file=sys.stderr))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
