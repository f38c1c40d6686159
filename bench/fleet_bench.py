"""Issue 39's targets in one run, alternated against a base commit: a real-shaped fleet.

    python bench/fleet_bench.py --peer EXE [--base-rev 5697635] [--ours-rev REV] [--small 8400]
                                [--turns 2] [--ten] [--json FILE]

The fleet is bench/fleet.py's (thousands of one-copy helper modules in eight dump
directories beside four large synth modules). In each turn, A B A B: this tree's
`bufferhouse ingest` (the installed CLI, default --jobs, fresh warehouse), the base
commit's (its worktree first on PYTHONPATH, its compiled reader built in place), and
the peer parser's `list-modules DIR` on every dump directory one after another (it does
not descend into subdirectories): wall and CPU of the whole process tree (cpuacct cgroup,
bench/native.py). Then on this tree's warehouse: a no-op re-ingest (every file known by
its stats), the same with --rehash, and `bufferhouse --version` of both trees, five
alternated each. With --ten, the ten 21 MB modules of bench/ingest.py too, A B A B.
--ours-rev: "this tree" is that commit's worktree (as the base's is), not the working tree:
the tree measured stays fixed while the working tree changes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import fleet, native
from bench import ingest as bench


def _build_in_place(tree: Path) -> None:
    """The base worktree's compiled reader (a fresh worktree has none: it would read every
    dump with the line reader)."""
    native_dir = tree / "bufferhouse" / "parse" / "text" / "native"
    if not list(native_dir.glob("_lines*.so")):
        import subprocess

        subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=tree,
                       check=True, capture_output=True)  # fmt: skip


def _cli(db: Path, paths: list[Path], *extra: str) -> list[str]:
    return [bench.CLI, "ingest", *map(str, paths), "--db", str(db), "--quiet", *extra]


def _env(tree: Path | None) -> dict:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    return env


def peer_all(label: str, exe: str, dirs: list[Path], size: int) -> dict:
    """The peer on every directory in turn, summed."""
    wall = cpu = 0.0
    for d in dirs:
        m = native.run(f"{label} {d.name}", [exe, "list-modules", str(d)], size)
        wall, cpu = wall + m.wall, cpu + m.cpu
    return {"wall": wall, "cpu": cpu}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peer", required=True)
    ap.add_argument("--base-rev", default="5697635")
    ap.add_argument("--ours-rev", default=None)
    ap.add_argument("--small", type=int, default=8400)
    ap.add_argument("--turns", type=int, default=2)
    ap.add_argument("--ten", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    root = fleet.default_fleet(args.small)
    spec = json.loads((root / "FLEET.json").read_text())
    modules, size = spec["modules"], spec["text_bytes"]
    dirs = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    files = sum(len(names) for _, _, names in os.walk(root)) - 2  # SPEC.json, FLEET.json
    base = native.worktree(args.base_rev)
    _build_in_place(base)
    mine = native.worktree(args.ours_rev) if args.ours_rev else None
    if mine is not None:
        _build_in_place(mine)
    results: dict = {"machine": bench.machine(), "commit": args.ours_rev or bench._git_commit(),
                     "base": args.base_rev, "fleet": {"modules": modules, "text_bytes": size,
                     "files": files, "directories": len(dirs)}, "turns": []}  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix="bufferhouse-fleet-"))
    try:
        ours_db = work / "ours.duckdb"
        for turn in range(args.turns):
            row = {}
            for name, tree in (("ours", mine), ("base", base)):
                db = work / f"{name}.duckdb"
                for p in (db, db.with_name(db.name + ".wal")):
                    p.unlink(missing_ok=True)
                m = native.run(f"fleet {name} (turn {turn + 1})", _cli(db, [root]), size,
                               _env(tree))  # fmt: skip
                row[name] = asdict(m) | {"modules_s": modules / m.wall}
            row["peer"] = peer_all(f"peer (turn {turn + 1})", args.peer, dirs, size)
            row["peer"]["modules_s"] = modules / row["peer"]["wall"]
            row["vs_peer"] = row["peer"]["wall"] / row["ours"]["wall"]
            row["base_vs_peer"] = row["peer"]["wall"] / row["base"]["wall"]
            bench.log(f"turn {turn + 1}: ours {row['ours']['modules_s']:.0f} modules/s, "
                      f"{row['vs_peer']:.2f}x the peer; base {row['base_vs_peer']:.2f}x")  # fmt: skip
            results["turns"].append(row)
        noop = {"ours": [], "ours_rehash": [], "base": []}
        base_db = work / "base.duckdb"
        for i in range(3):
            noop["ours"].append(asdict(native.run(f"no-op ours {i}", _cli(ours_db, [root]), size,
                                                  _env(mine))))  # fmt: skip
            noop["base"].append(asdict(native.run(f"no-op base {i}", _cli(base_db, [root]), size,
                                                  _env(base))))  # fmt: skip
            rehash = _cli(ours_db, [root], "--rehash")
            noop["ours_rehash"].append(asdict(native.run(f"no-op ours --rehash {i}", rehash, size,
                                                         _env(mine))))  # fmt: skip
        results["noop"] = noop
        version = {"ours": [], "base": []}
        for i in range(5):
            version["ours"].append(asdict(native.run(f"--version ours {i}",
                                                     [bench.CLI, "--version"], 1, _env(mine))))  # fmt: skip
            version["base"].append(asdict(native.run(f"--version base {i}",
                                                     [bench.CLI, "--version"], 1, _env(base))))  # fmt: skip
        results["version"] = version
        if args.ten:
            ten = bench.build_ten(10, 21.0)
            tsize = native.text_bytes(ten)
            rows = []
            for turn in range(args.turns):
                a = native.ours(f"ten ours (turn {turn + 1})", [ten], tsize, tree=mine)
                b = native.ours(f"ten base (turn {turn + 1})", [ten], tsize, tree=base)
                rows.append({"ours": asdict(a), "base": asdict(b)})
            results["ten"] = rows
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(results, indent=1)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
