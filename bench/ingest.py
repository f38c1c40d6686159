"""Ingest throughput, memory and warehouse size, next to DuckDB reading the same lines.

    python bench/ingest.py [--fleet-mb 1000] [--fleet-modules 1000] [--module-mb 500]
                           [--module-format stacktrace] [--quick] [--skip-fleet]
                           [--skip-module] [--ten] [--peer EXE] [--rss-limit-gb 12]
                           [--json FILE]

(a) A fleet: the committed corpus copied into renamed directories (module
numbers changed, so every copy is a new module) until there are at least
--fleet-modules modules, topped up with tests/synth modules of 1-30 MB in all
three formats until the fleet holds --fleet-mb MB of dump text.
(b) One tests/synth module of --module-mb MB.
(c) With --ten, issue 20's fleet: ten tests/synth modules of 21 MB, ingested with
--jobs 1 and --jobs 2 in turn, twice, and with --peer EXE the public peer parser
(`EXE list-modules DIR`, xla_memory_analyzer: it parses and stores nothing) on
the same fleet in each turn, so its ratio to ours is taken in one run.

Each is ingested by the installed CLI (`bufferhouse ingest`, a subprocess: what
users run) into a fresh warehouse. Reported: MB/s and modules/s end to end
(process start to exit: discovery, hashing, parsing, loading, commits), the
peak RSS of the ingest process tree (parent + parser workers, sampled from
/proc every 20 ms, summed), the CPU seconds of that tree (user + system, read
at the same samples) and how many cores it kept busy on average (CPU / wall:
on a shared machine CPU time moves far less with the load than wall time),
the host probe (a fixed Python loop timed before and after the run: the VM's
host changes its speed by up to 2x within minutes, which no load average
shows), warehouse bytes per MB of text, and in the same
run DuckDB's rate for merely reading the same files' lines (read_csv with one
VARCHAR column) and the ratio of the two. The fleet is ingested with default
settings, with --jobs 1 and --jobs 2, and a quarter of it again, to show that
RSS does not grow with the number of modules.

Inputs are generated once under bench/_work/ (gitignored) and reused. MB is
10**6 bytes. --quick makes every size small enough to finish in seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import platform
import random
import re
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import duckdb
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests import synth

BENCH = Path(__file__).resolve().parent
WORK = BENCH / "_work"
CORPUS = synth.DATA / "corpus"
CLI = str(Path(sys.executable).with_name("bufferhouse"))
DUMP_SUFFIXES = tuple(s for s, _ in synth._ROLES)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- inputs ---------------------------------------------------------------------
def dump_files(root: Path | list[Path]) -> list[Path]:
    """The files whose bytes the ingest counts (not the HLO beside them)."""
    roots = root if isinstance(root, list) else [root]
    out = []
    for r in roots:
        for dirpath, _dirs, names in os.walk(r):
            out.extend(Path(dirpath) / n for n in names if n.endswith(DUMP_SUFFIXES))
    return sorted(out)


def _ready(path: Path, spec: dict) -> bool:
    marker = path / "SPEC.json"
    return marker.exists() and json.loads(marker.read_text()) == spec


def build_fleet(fleet_mb: float, n_modules: int, seed: int = 5) -> Path:
    """Corpus copies (renamed) under corpus/copy-<i>/, synth modules under synth/."""
    spec = {"fleet_mb": fleet_mb, "modules": n_modules, "seed": seed, "version": 3}
    root = WORK / f"fleet-{fleet_mb:g}mb-{n_modules}"
    if _ready(root, spec):
        return root
    shutil.rmtree(root, ignore_errors=True)
    started = time.monotonic()
    sources = sorted(CORPUS.glob("*/*/*.txt.gz"))
    groups: dict[tuple[Path, str], list[Path]] = {}
    for src in sources:
        m = re.match(r"(module_\d+)\.(.*)$", src.name)
        if m:
            groups.setdefault((src.parent, m.group(1)), []).append(src)
    copies = -(-n_modules // len(groups))
    text = 0
    for i in range(copies):
        for (parent, mod), files in sorted(groups.items()):
            rel = parent.relative_to(CORPUS)
            number = int(mod[len("module_") :]) + 10000 * (i + 1)
            dest = root / "corpus" / f"copy-{i}" / rel
            dest.mkdir(parents=True, exist_ok=True)
            for src in files:
                name = src.name[:-3].replace(mod, f"module_{number:05d}", 1)
                with gzip.open(src, "rb") as f:
                    data = f.read()
                (dest / name).write_bytes(data)
                if name.endswith(DUMP_SUFFIXES):
                    text += len(data)
    log(f"fleet: {copies} corpus copies, {text / 1e6:.1f} MB")
    rng = random.Random(seed)
    seeds = {
        fmt: synth.usable_seeds(synth.find_seeds(fmt), WORK / ".seedcheck") for fmt in synth.FORMATS
    }
    number = 0
    budget = fleet_mb * 1e6
    while text < budget:
        fmt = sorted(synth.FORMATS)[number % 3]
        mb = min(10 ** rng.uniform(0, 1.5), (budget - text) / 1e6 + 0.1)
        pool = seeds[fmt]
        start = rng.randrange(len(pool))
        res = synth.synthesize(
            root / "synth",
            mb,
            fmt,
            seeds=pool[start:] + pool[:start],
            name=f"jit_synth_{fmt}",
            number=number,
        )
        text += res.bytes
        number += 1
    elapsed = time.monotonic() - started
    log(f"fleet: + {number} synth modules -> {text / 1e6:.1f} MB in {elapsed:.0f}s")
    (root / "SPEC.json").write_text(json.dumps(spec))
    return root


def build_ten(n: int = 10, mb: float = 21.0, fmt: str = "stacktrace") -> Path:
    """The issue-20 fleet: `n` tests/synth modules of `mb` MB each (module numbers differ,
    so each is a new module), in one directory."""
    spec = {"n": n, "mb": mb, "format": fmt, "version": 1}
    root = WORK / f"ten-{n}x{mb:g}mb-{fmt}"
    if _ready(root, spec):
        return root
    shutil.rmtree(root, ignore_errors=True)
    pool = synth.usable_seeds(synth.find_seeds(fmt), WORK / ".seedcheck")
    for number in range(n):
        start = number % len(pool)
        synth.synthesize(
            root, mb, fmt, seeds=pool[start:] + pool[:start], name=f"jit_ten_{fmt}", number=number
        )
    (root / "SPEC.json").write_text(json.dumps(spec))
    return root


def build_module(mb: float, fmt: str) -> Path:
    spec = {"mb": mb, "format": fmt, "version": 2}
    root = WORK / f"module-{mb:g}mb-{fmt}"
    if _ready(root, spec):
        return root
    shutil.rmtree(root, ignore_errors=True)
    res = synth.synthesize(root, mb, fmt, name=f"jit_synth_{fmt}", log=log)
    log(f"module: {res.bytes / 1e6:.1f} MB, {res.copies} copies, {res.seconds:.0f}s")
    (root / "SPEC.json").write_text(json.dumps(spec))
    return root


# -- measuring ------------------------------------------------------------------
_PAGE = os.sysconf("SC_PAGE_SIZE")
_TICK = os.sysconf("SC_CLK_TCK")


def _processes() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, CPU ticks used so far, user + system) of every process."""
    out: dict[int, tuple[int, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2 :].split()
        out[int(entry)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
    return out


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _) in _processes().items():
        kids.setdefault(ppid, []).append(pid)
    return kids


def _tree(pid: int, processes: dict[int, tuple[int, int]]) -> list[int]:
    """`pid` and its descendants."""
    kids: dict[int, list[int]] = {}
    for p, (ppid, _) in processes.items():
        kids.setdefault(ppid, []).append(p)
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * _PAGE
    except OSError:
        return 0


def _tree_rss(pid: int) -> int:
    return sum(_rss(p) for p in _tree(pid, _processes()))


@dataclass
class Run:
    label: str
    seconds: float
    text_bytes: int
    modules: int
    rss_peak: int  # summed over the process tree
    db_bytes: int
    returncode: int
    killed: bool = False
    #: CPU seconds (user + system) of the process tree: the last reading of each
    #: process, sampled with RSS, so each misses at most its last 20 ms.
    cpu_seconds: float = 0.0
    #: Seconds of the host probe (a fixed loop), mean of before and after the run.
    probe_seconds: float = 0.0

    @property
    def mb_s(self) -> float:
        return self.text_bytes / 1e6 / self.seconds

    @property
    def modules_s(self) -> float:
        return self.modules / self.seconds

    @property
    def cores_busy(self) -> float:
        return self.cpu_seconds / self.seconds


def host_probe() -> float:
    """Seconds of a fixed single-threaded workload: a Python loop (CPU) and 1 GB of
    array copies (memory), about 0.5 s on a quiet host.

    The bench machine is a VM on a shared host: the loop alone took 0.58-1.12 s
    within minutes, with nothing else running in the VM and no steal time, and
    an ingest's CPU seconds moved with it. Each run carries the probe taken
    around it, so runs are compared on equal hosts (or scaled by the probe).
    """
    started = time.perf_counter()
    total = 0
    for k in range(3_000_000):
        total += k * k
    block = np.ones(32 << 20, dtype=np.int64)  # 256 MB
    for _ in range(4):
        block.copy()
    return time.perf_counter() - started


def ingest(
    label: str,
    paths: list[Path],
    db: Path,
    text_bytes: int,
    modules: int,
    jobs: int | None,
    rss_limit: int,
) -> Run:
    """Run `bufferhouse ingest` on paths into a fresh db; sample the RSS and CPU time
    of its process tree."""
    for p in (db, db.with_name(db.name + ".wal")):
        if p.exists():
            p.unlink()
    cmd = [CLI, "ingest", *map(str, paths), "--db", str(db), "--quiet"]
    if jobs is not None:
        cmd += ["--jobs", str(jobs)]
    log(f"{label}: {' '.join(cmd[:2])} ... ({text_bytes / 1e6:.0f} MB, {modules} modules)")
    probe_before = host_probe()
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak, killed = 0, False
    ticks: dict[int, int] = {}  # pid -> CPU ticks at its last reading
    while proc.poll() is None:
        processes = _processes()
        tree = _tree(proc.pid, processes)
        for p in tree:
            if p in processes:
                ticks[p] = max(ticks.get(p, 0), processes[p][1])
        rss = sum(_rss(p) for p in tree)
        peak = max(peak, rss)
        if rss > rss_limit:
            killed = True
            for pid in _descendants(proc.pid):
                with contextlib.suppress(OSError):
                    os.kill(pid, 9)
            proc.kill()
            break
        time.sleep(0.02)
    _out, err = proc.communicate()
    seconds = time.monotonic() - started
    if proc.returncode and not killed:
        log(f"{label}: exit {proc.returncode}: {err[-2000:]}")
    db_bytes = sum(p.stat().st_size for p in (db, db.with_name(db.name + ".wal")) if p.exists())
    cpu = sum(ticks.values()) / _TICK
    probe = (probe_before + host_probe()) / 2
    run = Run(
        label, seconds, text_bytes, modules, peak, db_bytes, proc.returncode, killed, cpu, probe
    )
    log(
        f"{label}: {seconds:.1f}s, {run.mb_s:.1f} MB/s, {run.modules_s:.1f} modules/s, "
        f"RSS {peak / 2**20:.0f} MiB, CPU {cpu:.1f}s ({run.cores_busy:.2f} cores busy), "
        f"host probe {probe:.2f}s" + (" (killed at the RSS limit)" if killed else "")
    )
    return run


def peer(label: str, cmd: list[str], text_bytes: int, modules: int) -> Run:
    """Time another tool on the same input: wall, and CPU from the children's rusage."""
    log(f"{label}: {' '.join(cmd)}")
    probe_before = host_probe()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode:
        log(f"{label}: exit {proc.returncode}: {proc.stderr[-2000:]}")
    rss = after.ru_maxrss * 1024
    probe = (probe_before + host_probe()) / 2
    run = Run(label, seconds, text_bytes, modules, rss, 0, proc.returncode, False, cpu, probe)
    log(f"{label}: {seconds:.1f}s, {run.mb_s:.1f} MB/s, CPU {cpu:.1f}s")
    return run


def _descendants(pid: int) -> list[int]:
    kids = _children()
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for k in kids.get(p, []):
            out.append(k)
            todo.append(k)
    return out


def duckdb_read(files: list[Path], repeat: int = 2) -> float:
    """Seconds for DuckDB to read every line of files (best of `repeat`)."""
    con = duckdb.connect()
    best = float("inf")
    for _ in range(repeat):
        t = time.monotonic()
        con.execute(
            """
            SELECT count(*) FROM read_csv(?, columns = {'line': 'VARCHAR'}, delim = E'\\x01',
              quote = '', escape = '', header = false, auto_detect = false,
              max_line_size = 1000000000, strict_mode = false)
            """,
            [[str(f) for f in files]],
        ).fetchall()
        best = min(best, time.monotonic() - t)
    con.close()
    return best


def count_modules(files: list[Path]) -> int:
    return sum(1 for f in files if f.name.endswith("-buffer-assignment.txt"))


# -- the report ---------------------------------------------------------------------
def machine() -> dict:
    cpu = "unknown"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    mem = 0
    with contextlib.suppress(OSError), open("/proc/meminfo") as f:
        mem = next((int(ln.split()[1]) * 1024 for ln in f if ln.startswith("MemTotal:")), 0)
    import bufferhouse

    return {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "cores": os.cpu_count(),
        "memory_gib": round(mem / 2**30, 1),
        "cpu": cpu,
        "python": platform.python_version(),
        "duckdb": duckdb.__version__,
        "bufferhouse": bufferhouse.__version__,
        "commit": _git_commit(),
        "load_before": os.getloadavg(),
    }


def _git_commit() -> str:
    """HEAD, plus '+dirty' when the package has uncommitted changes (what actually ran)."""
    try:
        head = subprocess.run(
            ["git", "-C", str(BENCH.parent), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(BENCH.parent), "status", "--porcelain", "--", "bufferhouse"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except OSError:
        return "?"


def _row(run: Run, duck_s: float | None) -> str:
    duck = run.text_bytes / 1e6 / duck_s if duck_s else None
    ratio = f"1/{duck / run.mb_s:.0f}" if duck and run.mb_s else "-"
    status = " (killed: RSS limit)" if run.killed else (" (FAILED)" if run.returncode else "")
    return (
        f"| {run.label}{status} | {run.text_bytes / 1e6:,.0f} | {run.modules:,} | "
        f"{run.seconds:,.1f} | {run.mb_s:,.1f} | {run.modules_s:,.3g} | "
        f"{run.cpu_seconds:,.1f} | {run.cores_busy:.2f} | {run.probe_seconds:.2f} | "
        f"{run.rss_peak / 2**20:,.0f} | {run.db_bytes / run.text_bytes * 1e6 / 1e6:,.3f} "
        f"({100 * run.db_bytes / run.text_bytes:.1f}%) | "
        + (f"{duck:,.0f} | {ratio} |" if duck else "- | - |")
    )


HEADER = (
    "| run | MB text | modules | seconds | MB/s | modules/s | CPU s | cores busy | host probe s | "
    "peak RSS MiB | warehouse MB per MB text | DuckDB line read MB/s | ingest / DuckDB |\n"
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fleet-mb", type=float, default=1000.0)
    ap.add_argument("--fleet-modules", type=int, default=1000)
    ap.add_argument("--module-mb", type=float, default=500.0)
    ap.add_argument("--module-format", choices=sorted(synth.FORMATS), default="stacktrace")
    ap.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run in seconds")
    ap.add_argument("--skip-fleet", action="store_true")
    ap.add_argument("--skip-module", action="store_true")
    ap.add_argument(
        "--no-jobs-compare",
        action="store_true",
        help="skip --jobs 1 / --jobs 2 (fleet and module)",
    )
    ap.add_argument(
        "--rss-limit-gb",
        type=float,
        default=12.0,
        help="kill an ingest whose process tree exceeds this (the machine is shared)",
    )
    ap.add_argument(
        "--ten",
        action="store_true",
        help="issue 20's fleet: ten 21 MB modules, --jobs 1 and --jobs 2 in turn, twice",
    )
    ap.add_argument(
        "--peer",
        metavar="EXE",
        help="the public peer parser's command (xla_memory_analyzer), timed on the --ten "
        "fleet in the same run (`EXE list-modules DIR`: it parses, it does not store)",
    )
    ap.add_argument("--json", type=Path, default=WORK / "ingest-results.json")
    args = ap.parse_args(argv)
    if args.quick:
        args.fleet_mb, args.fleet_modules, args.module_mb = 8.0, 200, 5.0
    WORK.mkdir(exist_ok=True)
    limit = int(args.rss_limit_gb * 2**30)
    info = machine()
    host_probe()  # warm: the first run pays numpy's first large allocation
    results: dict = {"machine": info, "runs": []}
    rows = []

    def record(run: Run, duck_s: float | None) -> None:
        results["runs"].append(
            {**asdict(run), "duckdb_seconds": duck_s, "mb_s": run.mb_s, "modules_s": run.modules_s}
        )
        rows.append(_row(run, duck_s))

    if not args.skip_fleet:
        fleet = build_fleet(args.fleet_mb, args.fleet_modules)
        parts = [fleet / "corpus", fleet / "synth"]
        files = dump_files(parts)
        nbytes = sum(f.stat().st_size for f in files)
        nmod = count_modules(files)
        duck_s = duckdb_read(files)
        db = WORK / "bench-fleet.duckdb"
        default = ingest("fleet, default settings", parts, db, nbytes, nmod, None, limit)
        record(default, duck_s)
        if not args.no_jobs_compare:
            one = ingest("fleet, --jobs 1", parts, db, nbytes, nmod, 1, limit)
            two = ingest("fleet, --jobs 2", parts, db, nbytes, nmod, 2, limit)
            record(one, duck_s)
            record(two, duck_s)
            results["jobs_speedup"] = one.seconds / two.seconds
            results["jobs_cpu"] = [one.cpu_seconds, two.cpu_seconds]
        # RSS against the number of modules: same module sizes, 1 copy vs all copies,
        # both with one parser process per core (by default 1 copy would get one
        # process and all copies several: the RSS of different process trees).
        copies = sorted((fleet / "corpus").iterdir())
        cores = os.cpu_count() or 1
        for subset, label in (
            (copies[:1], f"corpus, 1 copy, --jobs {cores} (RSS vs module count)"),
            (copies, f"corpus, {len(copies)} copies, --jobs {cores} (RSS vs module count)"),
        ):
            sfiles = dump_files(subset)
            run = ingest(
                label,
                subset,
                db,
                sum(f.stat().st_size for f in sfiles),
                count_modules(sfiles),
                cores,
                limit,
            )
            record(run, duckdb_read(sfiles))
        db.unlink(missing_ok=True)
    if args.ten:
        ten = build_ten()
        files = dump_files(ten)
        nbytes = sum(f.stat().st_size for f in files)
        db = WORK / "bench-ten.duckdb"
        pairs = []
        for turn in (1, 2):
            one = ingest(
                f"ten 21 MB modules, --jobs 1 (turn {turn})", [ten], db, nbytes, 10, 1, limit
            )
            two = ingest(
                f"ten 21 MB modules, --jobs 2 (turn {turn})", [ten], db, nbytes, 10, 2, limit
            )
            record(one, None)
            record(two, None)
            pairs.append((one, two))
            if args.peer:
                other = peer(
                    f"peer parser (turn {turn})", [args.peer, "list-modules", str(ten)], nbytes, 10
                )
                record(other, None)
                results.setdefault("peer_ratios", []).append(other.seconds / two.seconds)
        results["ten_jobs_speedup"] = [one.seconds / two.seconds for one, two in pairs]
        results["ten_cpu_per_100mb"] = [one.cpu_seconds / (nbytes / 1e8) for one, _ in pairs]
        db.unlink(missing_ok=True)
    if not args.skip_module:
        module = build_module(args.module_mb, args.module_format)
        files = dump_files(module)
        nbytes = sum(f.stat().st_size for f in files)
        duck_s = duckdb_read(files)
        db = WORK / "bench-module.duckdb"
        run = ingest(f"one {args.module_format} module", [module], db, nbytes, 1, None, limit)
        record(run, duck_s)
        if not args.no_jobs_compare:  # issue 20: does one module use a second core?
            one = ingest("one module, --jobs 1", [module], db, nbytes, 1, 1, limit)
            two = ingest("one module, --jobs 2", [module], db, nbytes, 1, 2, limit)
            record(one, duck_s)
            record(two, duck_s)
            results["module_jobs_speedup"] = one.seconds / two.seconds
            results["module_jobs_cpu"] = [one.cpu_seconds, two.cpu_seconds]
            results["module_cpu_per_100mb"] = one.cpu_seconds / (nbytes / 1e8)
        db.unlink(missing_ok=True)
    info["load_after"] = os.getloadavg()
    args.json.write_text(json.dumps(results, indent=2))
    print(
        f"Machine: {info['cores']} cores, {info['memory_gib']} GiB, {info['cpu']}; "
        f"Python {info['python']}, DuckDB {info['duckdb']}, bufferhouse {info['bufferhouse']} "
        f"({info['commit']}); {info['date']}; load average before "
        f"{info['load_before'][0]:.2f}, after {info['load_after'][0]:.2f}"
    )
    print()
    print(HEADER)
    print("\n".join(rows))
    if "jobs_speedup" in results:
        one_cpu, two_cpu = results["jobs_cpu"]
        print(
            f"\n--jobs 2 vs --jobs 1 on the fleet: {results['jobs_speedup']:.2f}x "
            f"(CPU {one_cpu:.1f}s vs {two_cpu:.1f}s)"
        )
    if "ten_jobs_speedup" in results:
        print(
            "\nten 21 MB modules, --jobs 2 vs --jobs 1: "
            + ", ".join(f"{r:.2f}x" for r in results["ten_jobs_speedup"])
            + "; CPU-s per 100 MB at --jobs 1: "
            + ", ".join(f"{c:.2f}" for c in results["ten_cpu_per_100mb"])
        )
    if "peer_ratios" in results:
        print(
            "peer parser's wall / ours at --jobs 2 (same fleet, same turn): "
            + ", ".join(f"{r:.2f}x" for r in results["peer_ratios"])
        )
    if "module_jobs_speedup" in results:
        one_cpu, two_cpu = results["module_jobs_cpu"]
        print(
            f"--jobs 2 vs --jobs 1 on one module: {results['module_jobs_speedup']:.2f}x "
            f"(CPU {one_cpu:.1f}s vs {two_cpu:.1f}s; "
            f"{results['module_cpu_per_100mb']:.2f} CPU-s per 100 MB at --jobs 1)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
