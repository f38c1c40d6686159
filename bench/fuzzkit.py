"""What the mutation fuzzers of bench/ share: the per-input bounds and the tally.

Each fuzzer (fuzz_pprof.py, oom_fuzz.py, fuzz_pairing.py) runs its inputs in this
process, one after another, each under two bounds: at most `seconds` of CPU time
(ITIMER_PROF: wall time on a machine shared by many jobs says more about them than
about the input; a run at load 17 on two cores saw 1 MB inputs of 0.3 s CPU take 10 s)
and no rise of the process's peak RSS past `rss_mb` above what it was before the first
input (ru_maxrss is a high-water mark, so a rise is the input's).
An input that breaks a bound, or raises anything but the project's located error,
is a failure, kept with its number (rerun it with the same seed).
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import resource
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa


class Hang(BaseException):
    """An input ran past its time bound. Not an Exception: the readers' last-resort
    handlers (`except Exception`, "internal error") must not take it for a bug of theirs."""


def _alarm(*_: object) -> None:
    raise Hang


def one_thread() -> None:
    """Arrow on one thread, for a fuzzer run as a script: the machine is shared, and
    getrusage sums over every thread (3 ms an input with Arrow's pool up, a third of a
    pairing input). Not on import: the seeded tier runs in the test process."""
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)


def max_rss_mb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


@dataclass
class Tally:
    """Outcomes by name, the first example of each failure, the slowest input."""

    name: str
    seed: int
    seconds: float = 5.0
    rss_mb: int = 512
    outcomes: collections.Counter[str] = field(default_factory=collections.Counter)
    failures: dict[str, str] = field(default_factory=dict)
    failed: int = 0
    slowest: tuple[float, int] = (0.0, -1)
    started: float = field(default_factory=time.perf_counter)
    rss_before: int = field(default_factory=max_rss_mb)

    def run(self, n: int, fn: Callable[[], str | list[str]]) -> None:
        """Run input `n`: `fn` returns its outcome, or a list of what it broke."""
        signal.signal(signal.SIGPROF, _alarm)
        t = time.process_time()
        signal.setitimer(signal.ITIMER_PROF, self.seconds)
        try:
            got = fn()
        except Hang:
            got = [f"ran past {self.seconds} s of CPU"]
        except Exception:
            got = [traceback.format_exc(limit=4)[-600:]]
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
        took = time.process_time() - t
        if n and took > self.slowest[0]:  # the first input pays for compiling regexes
            self.slowest = (took, n)
        rise = max_rss_mb() - self.rss_before
        if isinstance(got, str) and rise > self.rss_mb:
            got = [f"peak RSS rose {rise} MB (bound {self.rss_mb} MB)"]
        if isinstance(got, str):
            self.outcomes[got] += 1
            return
        self.failed += 1
        self.outcomes["FAILED"] += 1
        self.failures.setdefault(got[0][:120], f"input {n}: " + "; ".join(got)[:900])

    def report(self, inputs: int, extra: dict | None = None, json_path: Path | None = None) -> dict:
        result = {
            "fuzzer": self.name,
            "inputs": inputs,
            "seed": self.seed,
            "seconds": round(time.perf_counter() - self.started, 1),
            "failed": self.failed,
            "outcomes": dict(self.outcomes.most_common()),
            "slowest_input_cpu_ms": round(self.slowest[0] * 1e3, 1),
            "slowest_input": self.slowest[1],
            "peak_rss_mb": max_rss_mb(),
            "rss_rise_mb": max_rss_mb() - self.rss_before,
            **(extra or {}),
            "first_failures": list(self.failures.values())[:20],
        }
        text = json.dumps(result, indent=1)
        print(text)
        if json_path:
            json_path.write_text(text + "\n")
        return result


def progress(i: int, tally: Tally, every: int = 5000) -> None:
    if (i + 1) % every == 0:
        print(
            f"{tally.name}: {i + 1} inputs, {time.perf_counter() - tally.started:.0f} s,"
            f" {tally.failed} failed",
            file=sys.stderr,
        )


Check = Callable[[], "str | list[str]"]


def arguments(doc: str | None, seed: int) -> argparse.ArgumentParser:
    """The options every fuzzer takes: how many inputs, the seed, where the report goes."""
    ap = argparse.ArgumentParser(description=(doc or "").split("\n")[0])
    ap.add_argument("--inputs", type=int, default=50_000)
    ap.add_argument("--seed", type=int, default=seed)
    ap.add_argument("--json", type=Path)
    return ap


def fuzz(
    name: str,
    args: argparse.Namespace,
    checks: Iterable[Check],
    extra: Callable[[], dict] | None = None,
    every: int = 5000,
) -> dict:
    """The loop of every fuzzer: the first --inputs of `checks` (each input's check, made
    as it comes up), each under the bounds, progress every `every` inputs, then the
    report, with `extra()` (figures the inputs gave) in it."""
    tally = Tally(name, args.seed)
    for i, check in enumerate(itertools.islice(checks, args.inputs)):
        tally.run(i, check)
        progress(i, tally, every)
    return tally.report(args.inputs, extra() if extra else None, args.json)
