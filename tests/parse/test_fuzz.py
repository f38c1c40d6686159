"""Fuzzing: real dumps, mutated (lines deleted, duplicated, swapped; bytes
flipped; files truncated; numbers replaced), must either parse into rows whose
invariants hold or fail with our DumpError naming a real line of a real file.
Never another exception, never "internal error", never a partly loaded module.

Profiles (environment variable BUFFERHOUSE_FUZZ): `ci` (default, 2,000
examples, derandomized so CI is repeatable), `sanitizers` (200 of them, for the
run under ASan and UBSan: tests/parse/text/test_native_sanitizers.py) and `long` (50,000
examples, a new random seed each run):

    BUFFERHOUSE_FUZZ=long python -m pytest tests/parse/test_fuzz.py -q
"""

from __future__ import annotations

import gzip
import itertools
import os
import random
import re
import shutil
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bufferhouse.check import check_warehouse
from bufferhouse.errors import DumpError
from bufferhouse.load import ingest_paths
from bufferhouse.parse import parse_files
from bufferhouse.parse.discover import discover
from bufferhouse.parse.results import Failed, ParsedModule
from bufferhouse.schema import MODULE_TABLES
from tests.conftest import CORPUS, SAMPLES

pytestmark = pytest.mark.slow  # hypothesis over mutated dumps

_COMMON = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}
settings.register_profile("ci", max_examples=2_000, derandomize=True, **_COMMON)
settings.register_profile("sanitizers", max_examples=200, derandomize=True, **_COMMON)
settings.register_profile("long", max_examples=50_000, **_COMMON)
PROFILE = os.environ.get("BUFFERHOUSE_FUZZ", "ci")
#: Full ingests into a warehouse are slower: an eightieth of the parse examples.
INGEST_EXAMPLES = max(settings.get_profile(PROFILE).max_examples // 80, 20)


@dataclass(frozen=True)
class Seed:
    stem: str
    files: tuple[tuple[str, bytes], ...]  # (file name suffix, content)


def _seeds() -> list[Seed]:
    seeds = [
        Seed(p.stem, (("-buffer-assignment.txt", p.read_bytes()),))
        for p in sorted(SAMPLES.glob("*.txt"))
    ]
    split = CORPUS / "jax-0.10.2" / "custom_vjp_clip"
    stem = "module_0000.jit_custom_vjp_loss_grad.cpu_after_optimizations"
    files = []
    for suffix in (
        "-buffer-assignment.txt",
        "-buffer-assignment-values.txt",
        "-live-range.txt",
        "-memory-usage-report.txt",
    ):
        files.append((suffix, gzip.decompress((split / f"{stem}{suffix}.gz").read_bytes())))
    seeds.append(Seed("split", tuple(files)))
    return seeds


SEEDS = _seeds()
_NUMBER = re.compile(rb"\d+")


@st.composite
def mutants(draw) -> tuple[Seed, dict[str, bytes], list[str]]:
    """A seed module with 1-4 mutations applied to its files; returns what was done."""
    seed = draw(st.sampled_from(SEEDS))
    files = dict(seed.files)
    done = []
    for _ in range(draw(st.integers(1, 4))):
        suffix = draw(st.sampled_from(sorted(files)))
        data = files[suffix]
        lines = data.split(b"\n")
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(
            st.sampled_from(
                ["delete", "duplicate", "swap", "truncate", "flip", "number", "cut line"]
            )
        )
        if op == "delete":
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "cut line":
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
        elif op == "number":
            found = list(_NUMBER.finditer(lines[i]))
            if found:
                m = draw(st.sampled_from(found))
                value = draw(
                    st.one_of(
                        st.integers(-(2**70), 2**70),
                        st.sampled_from([0, 1, -1, 2**31, 2**63 - 1, 2**63, 2**64]),
                    )
                )
                lines[i] = lines[i][: m.start()] + str(value).encode() + lines[i][m.end() :]
        data = b"\n".join(lines)
        if op == "truncate":
            data = data[: draw(st.integers(0, len(data)))]
        elif op == "flip" and data:
            pos = draw(st.integers(0, len(data) - 1))
            data = data[:pos] + bytes([data[pos] ^ draw(st.integers(1, 255))]) + data[pos + 1 :]
        files[suffix] = data
        done.append(f"{op} {suffix} line {i + 1}")
    return seed, files, done


_WORK = Path(tempfile.mkdtemp(prefix="bufferhouse-fuzz-"))
_EXAMPLE = itertools.count()


def teardown_module() -> None:
    shutil.rmtree(_WORK, ignore_errors=True)


def _write(directory: Path, stem: str, files: dict[str, bytes]) -> None:
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    for suffix, data in files.items():
        (directory / f"{stem}{suffix}").write_bytes(data)


def _line_count(data: bytes) -> int:
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def _assert_error_points_at_input(error: DumpError, directory: Path, stem: str, files) -> None:
    assert "internal error" not in error.message, error.describe()
    names = {f"{stem}{suffix}": data for suffix, data in files.items()}
    name = os.path.basename(error.path)
    assert os.path.dirname(error.path) == str(directory), error.describe()
    assert name in names, error.describe()
    assert 0 <= error.line <= _line_count(names[name]), error.describe()
    assert error.message and len(error.message) <= 500


def _assert_invariants(row: dict, tables: dict) -> None:
    """What XLA's printer guarantees, recomputed from the rows we would load."""
    t = {name: table.to_pylist() for name, table in tables.items()}
    assert {m.name for m in MODULE_TABLES} == set(t)
    allocs = {a["allocation_index"]: a for a in t["allocations"]}
    assert len(allocs) == len(t["allocations"]) == row["allocation_count"]
    assert len(t["hlo_values"]) == row["value_count"]
    assert len({v["value_id"] for v in t["hlo_values"]}) == row["value_count"]
    if row["total_bytes"] is not None:
        assert row["total_bytes"] == sum(a["size"] for a in allocs.values())
    for a in allocs.values():
        assert 0 <= a["size"] < 2**63
    for s in t["assignments"]:
        alloc = allocs[s["allocation_index"]]
        assert s["byte_offset"] >= 0
        assert s["byte_offset"] + s["size"] <= alloc["size"]
    if row["schedule_length"] is not None:
        assert len(t["sequence"]) == row["schedule_length"]
        assert [s["time"] for s in t["sequence"]] == list(range(row["schedule_length"]))
    for lr in t["live_ranges"]:
        assert 0 <= lr["start_time"] <= lr["end_time"]
        if row["schedule_length"] is not None:
            assert lr["end_time"] <= row["schedule_length"]
    running = 0
    for p in sorted(t["peak_values"], key=lambda p: p["ordinal"]):
        running += p["bytes"]
        assert p["cumulative_bytes"] in (None, running)
    if row["logical_peak_time"] is not None:
        assert row["logical_peak_bytes"] == running
    by_color = defaultdict(int)
    for a in allocs.values():
        by_color[a["color"]] += a["size"]
    assert {h["color"]: h["total_bytes"] for h in t["heap_peaks"]} == by_color
    for h in t["heap_peaks"]:
        if h["temp_peak_bytes"] is not None:
            assert 0 <= h["temp_peak_bytes"] <= h["temp_allocation_bytes"]
            assert h["heap_peak_bytes"] == h["indefinite_bytes"] + h["temp_peak_bytes"]


@settings(settings.get_profile(PROFILE))
@given(mutant=mutants())
def test_mutated_dumps_parse_or_fail_with_a_line(mutant):
    seed, files, _done = mutant
    directory = _WORK / "parse"
    _write(directory, seed.stem, files)
    groups = discover([directory])
    assert len(groups) == 1
    result = parse_files(groups[0])  # never raises: errors come back as results
    if isinstance(result, Failed):
        _assert_error_points_at_input(result.error, directory, seed.stem, files)
    else:
        assert isinstance(result, ParsedModule), result
        _assert_invariants(result.row, result.tables)
        for warning in result.warnings:
            assert "internal error" not in warning.message


@pytest.fixture(scope="module")
def fuzz_db() -> Path:
    return _WORK / "fuzz.duckdb"


@settings(settings.get_profile(PROFILE), max_examples=INGEST_EXAMPLES)
@given(mutant=mutants())
def test_mutated_modules_land_whole_or_not_at_all(fuzz_db, mutant):
    """One warehouse takes every mutant beside a good module: the good one always
    lands, the mutant lands whole (check passes) or leaves no row at all."""
    seed, files, _done = mutant
    n = next(_EXAMPLE)
    directory = _WORK / f"ingest-{n}"
    stem = f"{seed.stem}.fuzz{n}"  # unique names: every example is a new module
    _write(directory, stem, files)
    good = SAMPLES / "000_3ae9b34c349c690e.txt"
    shutil.copy(good, directory / f"good.fuzz{n}-buffer-assignment.txt")
    before = _counts(fuzz_db)
    report = ingest_paths([directory], db=fuzz_db, jobs=1)
    by_stem = {o.files.stem: o for o in report.outcomes}
    assert by_stem[f"good.fuzz{n}"].status == "loaded"
    mutant_outcome = by_stem[stem]
    after = _counts(fuzz_db)
    if mutant_outcome.status == "failed":
        _assert_error_points_at_input(mutant_outcome.error, directory, stem, files)
        with duckdb.connect(str(fuzz_db), read_only=True) as con:
            assert con.execute(
                "SELECT count(*) FROM modules WHERE file_stem = ?", [stem]
            ).fetchone() == (0,)
        assert after["modules"] == before.get("modules", 0) + 1
    else:
        assert mutant_outcome.status == "loaded"
        assert after["modules"] == before.get("modules", 0) + 2
    report = check_warehouse(fuzz_db)
    assert report.ok, report.lines()
    shutil.rmtree(directory)


def _counts(db: Path) -> dict[str, int]:
    if not db.exists():
        return {}
    with duckdb.connect(str(db), read_only=True) as con:
        return {"modules": con.execute("SELECT count(*) FROM modules").fetchone()[0]}


#: Line mutants per run of the test below (issue 21: duplicated, swapped and moved lines).
LINE_MUTANTS = 400


def _line_mutant(rng, seed: Seed) -> tuple[dict[str, bytes], str]:
    """`seed` with one or two lines duplicated, swapped with another or moved elsewhere."""
    files = dict(seed.files)
    done = []
    for _ in range(rng.randint(1, 2)):
        suffix = rng.choice(sorted(s for s in files if s != "-memory-usage-report.txt"))
        lines = files[suffix].split(b"\n")
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        op = rng.choice(["duplicate", "swap", "swap next", "move"])
        if op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "swap":
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "swap next" and i + 1 < len(lines):
            lines[i], lines[i + 1] = lines[i + 1], lines[i]
        else:
            lines.insert(j, lines.pop(i))
        files[suffix] = b"\n".join(lines)
        done.append(f"{op} {suffix} line {i + 1} ({j + 1})")
    return files, "; ".join(done)


def test_duplicated_swapped_and_moved_lines_fail_at_a_line_or_load_consistently(tmp_path):
    """Every line mutant is refused with an error that names a line of its file, or
    loads into a warehouse that `bufferhouse check` passes (all accepted ones at once)."""
    rng = random.Random(21)
    accepted = tmp_path / "accepted"
    refused = 0
    for n in range(LINE_MUTANTS):
        seed = SEEDS[n % len(SEEDS)]
        files, done = _line_mutant(rng, seed)
        directory = tmp_path / "one"
        _write(directory, seed.stem, files)
        (group,) = discover([directory])
        result = parse_files(group)
        if isinstance(result, Failed):
            refused += 1
            _assert_error_points_at_input(result.error, directory, seed.stem, files)
            assert result.error.line >= 1, (done, result.error.describe())
        else:
            assert isinstance(result, ParsedModule), (done, result)
            _write(accepted / str(n), f"{seed.stem}.m{n}", files)
    assert 0 < refused < LINE_MUTANTS
    db = tmp_path / "accepted.duckdb"
    report = ingest_paths([accepted], db=db, jobs=1)
    assert all(o.status == "loaded" for o in report.outcomes), [
        o.error.describe() for o in report.outcomes if o.error
    ]
    checked = check_warehouse(db)
    assert checked.ok, checked.lines()
