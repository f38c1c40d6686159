"""Pictures of a large module against the query that feeds them (issue 18 item 5).

    python bench/plots.py [--mb 100 200] [--tree DIR] [--repeat 1] [--only png,svg,report]

For each size: one `tests/synth` module of that many MB (jax 0.7.2 format with
the stack trace, generated once under bench/_work/ and reused), ingested once
into its own warehouse, then timed as users run it, each a CLI subprocess:

- `query heap-timeline --param module=NAME --format csv` (the picture's data);
- `plot timeline NAME -o timeline.png` and `-o timeline.svg`;
- `report -o report.html` (one module: one section with its timeline).

Printed per command: wall seconds, CPU seconds of the process (user + system),
the output's size, and wall and CPU as a multiple of the query's. The commands
run in the order above, `--repeat` times, alternating. `--tree DIR` runs the
package of another checkout (e.g. `git archive OLD bufferhouse | tar -x -C DIR`:
the before of a before/after); the default is the checkout holding this script. CPU seconds
move far less with a shared machine's load than wall seconds; the host probe
(bench/ingest.py) is printed before and after.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.ingest import WORK, build_module, host_probe, log, machine

ROOT = Path(__file__).resolve().parent.parent
NAME = "jit_synth_stacktrace"


def _cli(tree: Path, *args: str, stdout=subprocess.DEVNULL) -> tuple[float, float]:
    """Run the CLI of `tree` with `args`: (wall seconds, CPU seconds of the child)."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    cmd = [sys.executable, "-m", "bufferhouse.cli", *args]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    # In the tree: `python -m` puts the working directory first on sys.path.
    proc = subprocess.run(cmd, env=env, cwd=tree, stdout=stdout, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(f"{' '.join(args)}: exit {proc.returncode}: {proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _warehouse(mb: float, tree: Path) -> Path:
    dumps = build_module(mb, "stacktrace")
    db = WORK / f"plots-{mb:g}mb.duckdb"
    if not db.exists():
        wall, cpu = _cli(tree, "ingest", str(dumps), "--db", str(db), "--quiet")
        log(f"{mb:g} MB: ingested in {wall:.1f}s (CPU {cpu:.1f}s)")
    return db


def _size(path: Path) -> str:
    n = path.stat().st_size
    return f"{n / 2**20:.2f} MiB" if n >= 2**20 else f"{n / 2**10:.0f} KiB"


def bench(mb: float, tree: Path, repeat: int, only: set[str]) -> list[str]:
    db = _warehouse(mb, tree)
    out = WORK / f"plots-{mb:g}mb"
    out.mkdir(exist_ok=True)
    csv = out / "heap-timeline.csv"
    steps = None
    rows: list[tuple[str, float, float, str]] = []
    commands = [
        ("query heap-timeline", csv, ["query", "heap-timeline", "--param", f"module={NAME}"]),
        ("plot timeline (PNG)", out / "timeline.png", ["plot", "timeline", NAME, "-o"]),
        ("plot timeline (SVG)", out / "timeline.svg", ["plot", "timeline", NAME, "-o"]),
        ("report", out / "report.html", ["report", "-o"]),
    ]
    keys = ("query", "png", "svg", "report")
    commands = [c for k, c in zip(keys, commands) if k == "query" or k in only]
    for _ in range(repeat):
        for label, target, args in commands:
            if label.startswith("query"):
                with open(target, "w") as f:
                    wall, cpu = _cli(tree, *args, "--db", str(db), "--format", "csv", stdout=f)
                steps = sum(f",{NAME}," in line for line in target.read_text().splitlines())
            else:
                wall, cpu = _cli(tree, *args, str(target), "--db", str(db))
            log(f"{mb:g} MB: {label}: {wall:.1f}s wall, {cpu:.1f}s CPU, {_size(target)}")
            rows.append((label, wall, cpu, _size(target)))
    query = [r for r in rows if r[0].startswith("query")]
    q_wall = min(r[1] for r in query)
    q_cpu = min(r[2] for r in query)
    lines = [
        f"{mb:g} MB module ({steps:,} steps), `{db.name}`:",
        "",
        "| command | wall s | CPU s | x query (wall) | x query (CPU) | output |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, wall, cpu, size in rows:
        lines.append(
            f"| {label} | {wall:.1f} | {cpu:.1f} | {wall / q_wall:.1f} | {cpu / q_cpu:.1f} | {size} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, nargs="+", default=[100, 200])
    ap.add_argument("--tree", type=Path, default=ROOT, help="checkout whose package runs")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument(
        "--only",
        default="png,svg,report",
        help="what to time beside the query: png, svg, report (comma-separated)",
    )
    args = ap.parse_args(argv)
    WORK.mkdir(exist_ok=True)
    info = machine()
    print(
        f"{info['date']}: {info['cores']} cores ({info['cpu']}), {info['memory_gib']} GiB, "
        f"Python {info['python']}, DuckDB {info['duckdb']}, tree {args.tree} "
        f"(this checkout: {info['commit']}), load {info['load_before'][0]:.2f}"
    )
    print(f"host probe before: {host_probe():.2f}s")
    for mb in args.mb:
        print()
        print("\n".join(bench(mb, args.tree.resolve(), args.repeat, set(args.only.split(",")))))
    print()
    print(f"host probe after: {host_probe():.2f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
