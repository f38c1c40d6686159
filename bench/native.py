"""Issue 28's targets in one run: ingest CPU per 100 MB, against the peer parser and DuckDB's
line scan, a 200 MB module against an earlier commit, and the peak RSS of a 500 MB module.

    python bench/native.py [--base-rev 6dc8edb] [--peer EXE] [--turns 2] [--quick]
                           [--skip-500] [--json FILE]

Every ingest is the installed CLI (`bufferhouse ingest`, default --jobs) into a fresh
warehouse. CPU is the whole process tree's, parser workers included, read from a
cpuacct cgroup made for the run (a worker started by a fork server is not a child the
command waits for, so rusage misses it); without cgroup access it falls back to
sampling /proc (bench/ingest.py), which misses each process's last 20 ms. RSS is the
tree's, sampled from /proc every 20 ms. The earlier commit runs from a worktree of
this repository on the same venv (PYTHONPATH first), in turn with this tree: A B A B.

Inputs are bench/ingest.py's (generated once under bench/_work/): the ten-module 21 MB
fleet (`--ten`), one 200 MB and one 500 MB tests/synth module. MB is 10**6 bytes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import ingest as bench

ROOT = Path(__file__).resolve().parent.parent
CGROUP = Path("/sys/fs/cgroup/cpuacct")


@dataclass
class Measure:
    label: str
    wall: float
    cpu: float
    rss_peak: int
    text_bytes: int
    returncode: int

    @property
    def cpu_per_100mb(self) -> float:
        return self.cpu / (self.text_bytes / 1e8)

    @property
    def mb_s(self) -> float:
        return self.text_bytes / 1e6 / self.wall


def _cgroup() -> Path | None:
    """A fresh cpuacct cgroup, None where this process may not make one."""
    try:
        group = Path(tempfile.mkdtemp(prefix="bufferhouse-bench-", dir=CGROUP))
    except OSError:
        return None
    return group


def run(label: str, cmd: list[str], text_bytes: int, env: dict | None = None) -> Measure:
    """Run `cmd` to its end: wall seconds, CPU of its whole tree, peak RSS of the tree."""
    group = _cgroup()

    def enter() -> None:
        if group is not None:
            (group / "cgroup.procs").write_text(str(os.getpid()))

    started = time.monotonic()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=enter, env=env
    )
    peak, ticks = 0, {}
    while proc.poll() is None:
        processes = bench._processes()
        tree = bench._tree(proc.pid, processes)
        for p in tree:
            if p in processes:
                ticks[p] = max(ticks.get(p, 0), processes[p][1])
        peak = max(peak, sum(bench._rss(p) for p in tree))
        time.sleep(0.02)
    _, err = proc.communicate()
    wall = time.monotonic() - started
    if group is not None:
        cpu = int((group / "cpuacct.usage").read_text()) / 1e9
        with contextlib.suppress(OSError):
            group.rmdir()
    else:
        cpu = sum(ticks.values()) / bench._TICK
    if proc.returncode:
        bench.log(f"{label}: exit {proc.returncode}: {err[-2000:].decode(errors='replace')}")
    m = Measure(label, wall, cpu, peak, text_bytes, proc.returncode)
    bench.log(
        f"{label}: {wall:.1f}s wall, {cpu:.2f} CPU-s ({m.cpu_per_100mb:.2f} per 100 MB), "
        f"{m.mb_s:.1f} MB/s, RSS {peak / 2**20:.0f} MiB"
    )
    return m


def ours(label: str, paths: list[Path], text_bytes: int, tree: Path | None = None) -> Measure:
    """`bufferhouse ingest` into a fresh warehouse; from `tree` (another checkout) if given."""
    db = Path(tempfile.mkdtemp(prefix="bufferhouse-bench-")) / "w.duckdb"
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    try:
        cmd = [bench.CLI, "ingest", *map(str, paths), "--db", str(db), "--quiet"]
        return run(label, cmd, text_bytes, env)
    finally:
        for p in db.parent.iterdir():
            p.unlink()
        db.parent.rmdir()


def worktree(rev: str) -> Path:
    """A checkout of `rev` under bench/_work (made once)."""
    path = bench.WORK / f"rev-{rev}"
    if not path.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), rev],
                       check=True, capture_output=True)  # fmt: skip
    return path


def text_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in bench.dump_files(root))


def fleet_turns(args: argparse.Namespace, results: dict) -> None:
    ten = bench.build_ten(10, 2.0 if args.quick else 21.0)
    size = text_bytes(ten)
    for turn in range(args.turns):
        mine = ours(f"fleet ours (turn {turn + 1})", [ten], size)
        row = {"ours": asdict(mine), "ours_cpu_per_100mb": mine.cpu_per_100mb}
        if args.peer:
            other = run(
                f"fleet peer (turn {turn + 1})", [args.peer, "list-modules", str(ten)], size
            )
            row |= {"peer": asdict(other), "vs_peer": other.wall / mine.wall}
        duck = bench.duckdb_read(bench.dump_files(ten))
        row |= {"duckdb_read_s": duck, "vs_duckdb": duck / mine.wall}
        bench.log(f"turn {turn + 1}: {row.get('vs_peer', 0):.2f}x the peer, "
                  f"{row['vs_duckdb']:.3f} of DuckDB's line scan ({duck:.2f} s)")  # fmt: skip
        results.setdefault("fleet", []).append(row)


def module_turns(args: argparse.Namespace, results: dict) -> None:
    module = bench.build_module(20.0 if args.quick else 200.0, "stacktrace")
    size = text_bytes(module)
    base = worktree(args.base_rev)
    for turn in range(args.turns):
        new = ours(f"200 MB ours (turn {turn + 1})", [module], size)
        old = ours(f"200 MB {args.base_rev} (turn {turn + 1})", [module], size, tree=base)
        row = {"ours": asdict(new), "base": asdict(old), "wall_ratio": new.wall / old.wall,
               "ours_cpu_per_100mb": new.cpu_per_100mb}  # fmt: skip
        bench.log(f"turn {turn + 1}: wall {new.wall / old.wall:.2f}x of {args.base_rev}")
        results.setdefault("module", []).append(row)


def big_module(args: argparse.Namespace, results: dict) -> None:
    module = bench.build_module(50.0 if args.quick else 500.0, "stacktrace")
    m = ours("500 MB ours", [module], text_bytes(module))
    results["module_500"] = asdict(m) | {"cpu_per_100mb": m.cpu_per_100mb}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-rev", default="6dc8edb")
    parser.add_argument("--peer", help="xla_memory_analyzer's executable (list-modules DIR)")
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="small inputs, a smoke run")
    parser.add_argument("--skip-500", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    results: dict = {"machine": bench.machine(), "commit": bench._git_commit(),
                     "cgroup_cpu": _cgroup_usable()}  # fmt: skip
    fleet_turns(args, results)
    module_turns(args, results)
    if not args.skip_500:
        big_module(args, results)
    text = json.dumps(results, indent=1)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    return 0


def _cgroup_usable() -> bool:
    group = _cgroup()
    if group is None:
        return False
    group.rmdir()
    return True


if __name__ == "__main__":
    sys.exit(main())
