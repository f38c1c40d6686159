"""`bufferhouse diff` of two device memory snapshots (issue 40 item 6): the rows by
allocating line against the oracle of the script that made the profiles, their sums
against the totals decoded from the pprof samples here, the gate, the output shapes,
the three kinds of side (profile, directory, snapshot of a warehouse) and the errors."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from click.testing import CliRunner

import bufferhouse
from bufferhouse.cli import main
from bufferhouse.compare import SnapshotDiffResult
from bufferhouse.errors import DiffError, ParseError, UnknownSnapshotError
from bufferhouse.parse.proto import profile_pb2
from tests.conftest import DATA, GOLDEN

PAIR = DATA / "runtime-diff"
BASE, HEAD = PAIR / "base", PAIR / "head"
MANIFEST = json.loads((PAIR / "manifest.json").read_text())
RUN = DATA / "runtime" / "run"  # the other real pair: a cache grown between two snapshots
#: Every real pair: (base profile, head profile).
PAIRS = [
    (BASE / "end.prof", HEAD / "end.prof"),
    (BASE / "start.prof", HEAD / "start.prof"),
    (HEAD / "end.prof", BASE / "end.prof"),
    (BASE / "start.prof", BASE / "end.prof"),
    (RUN / "before.prof", RUN / "after.prof"),
    (RUN / "after.prof", RUN / "before.prof"),
]
SOURCE_COLUMNS = [
    "pair",
    "device",
    "function",
    "source",
    "status",
    "base_bytes",
    "head_bytes",
    "delta_bytes",
    "base_count",
    "head_count",
    "count_delta",
    "change_pct",
]
DEVICE_COLUMNS = [
    "pair",
    "base_snapshot",
    "head_snapshot",
    "device",
    "status",
    "base_bytes",
    "head_bytes",
    "delta_bytes",
    "change_pct",
    "base_count",
    "head_count",
    "count_delta",
]


def run(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def pprof_totals(path: Path) -> dict[str, tuple[int, int]]:
    """device -> (bytes, buffers), summed from the profile's own samples: the `kind` and
    `device` labels and the allocations/count and space/bytes values, read here with the
    pprof message alone (not bufferhouse's reader)."""
    profile = profile_pb2.Profile()
    profile.ParseFromString(gzip.decompress(path.read_bytes()))
    strings = profile.string_table
    types = [strings[t.type] for t in profile.sample_type]
    count_at, bytes_at = types.index("allocations"), types.index("space")
    totals: dict[str, tuple[int, int]] = {}
    for sample in profile.sample:
        labels = {strings[label.key]: strings[label.str] for label in sample.label}
        if labels.get("kind") != "buffer":
            continue
        size, count = totals.get(labels["device"], (0, 0))
        totals[labels["device"]] = (
            size + sample.value[bytes_at],
            count + sample.value[count_at],
        )
    return totals


def line_of(tag: str) -> str:
    return f"{MANIFEST['source_file']}:{MANIFEST['lines'][tag]}"


def test_rows_are_the_allocations_the_program_changed():
    """end.prof of base against head: per device, each changed line's delta is the one
    the script computed from its arrays' shapes and shardings, with its status and
    function; the unchanged line (params) is a `same` row."""
    r = bufferhouse.diff_snapshots(BASE / "end.prof", HEAD / "end.prof")
    assert isinstance(r, SnapshotDiffResult)
    base = MANIFEST["variants"]["base"]["end.prof"]["lines"]
    head = MANIFEST["variants"]["head"]["end.prof"]["lines"]
    expected = {}
    for tag in sorted(set(base) | set(head)):
        for device in sorted(set(base.get(tag, {})) | set(head.get(tag, {}))):
            b = base.get(tag, {}).get(device, {"bytes": 0, "count": 0})
            h = head.get(tag, {}).get(device, {"bytes": 0, "count": 0})
            expected[(device, line_of(tag))] = (h["bytes"] - b["bytes"], h["count"] - b["count"])
    rows = r.sources.to_pylist()
    got = {(x["device"], x["source"]): (x["delta_bytes"], x["count_delta"]) for x in rows}
    assert got == expected
    by_line = {(x["device"], x["source"]): x for x in rows}
    assert by_line[("cpu:0", line_of("scratch"))]["status"] == "gone"
    assert by_line[("cpu:0", line_of("extra"))]["function"] == "extra_buffers"
    assert by_line[("cpu:1", line_of("extra"))]["status"] == "new"
    split = by_line[("cpu:1", line_of("split"))]
    assert (split["status"], split["delta_bytes"], split["count_delta"]) == ("same", 0, 1)
    assert by_line[("cpu:0", line_of("params"))]["status"] == "same"
    assert by_line[("cpu:0", line_of("cache"))]["function"] == "run"
    # within a device, by absolute change: cache (+1.5 KiB), scratch (-1 KiB), extra
    cpu0 = [x["source"] for x in rows if x["device"] == "cpu:0"]
    assert cpu0[:3] == [line_of("cache"), line_of("scratch"), line_of("extra")]


@pytest.mark.parametrize("base, head", PAIRS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_rows_sum_to_the_change_of_each_devices_live_bytes(base, head):
    """The rows of each device sum exactly to the change of its live bytes and buffers,
    and the device totals are those of the pprof samples themselves."""
    r = bufferhouse.diff_snapshots(base, head)
    b, h = pprof_totals(base), pprof_totals(head)
    devices = {x["device"]: x for x in r.devices.to_pylist()}
    assert set(devices) == set(b) | set(h)
    for device, d in devices.items():
        assert (d["base_bytes"], d["base_count"]) == b.get(device, (0, 0))
        assert (d["head_bytes"], d["head_count"]) == h.get(device, (0, 0))
        rows = [x for x in r.sources.to_pylist() if x["device"] == device]
        assert sum(x["delta_bytes"] for x in rows) == d["delta_bytes"]
        assert sum(x["count_delta"] for x in rows) == d["count_delta"]
        assert sum(x["head_bytes"] for x in rows) == d["head_bytes"]
        deltas = [abs(x["delta_bytes"]) for x in rows]
        assert deltas == sorted(deltas, reverse=True)


def test_totals_are_the_oracles():
    """And the totals are the script's, computed from the arrays (not from the profile)."""
    for variant in ("base", "head"):
        for name in ("start.prof", "end.prof"):
            oracle = MANIFEST["variants"][variant][name]["devices"]
            got = pprof_totals(PAIR / variant / name)
            assert got == {d: (v["bytes"], v["count"]) for d, v in oracle.items()}


def test_gate_passes_and_trips_by_device():
    """cpu:0 grows by 640 B (10.4%), cpu:1 by 1664 B (12.5%): 11% trips only cpu:1, 15%
    passes; in bytes, 1KiB trips only cpu:1; a bare number says it is bytes."""
    pair = (BASE / "end.prof", HEAD / "end.prof")
    passed = bufferhouse.diff_snapshots(*pair, fail_above="15%")
    assert not passed.failed
    assert passed.gate.describe() == (
        "gate passed: no device grew more than 15% in live buffer bytes"
    )
    tripped = bufferhouse.diff_snapshots(*pair, fail_above="11%")
    assert tripped.failed
    assert tripped.gate.failures.column("device").to_pylist() == ["cpu:1"]
    assert tripped.gate.describe() == (
        "gate failed: 1 device grew more than 11% in live buffer bytes: cpu:1 +1.6 KiB (+12.5%)"
    )
    in_bytes = bufferhouse.diff_snapshots(*pair, fail_above="1KiB")
    assert in_bytes.gate.failures.column("device").to_pylist() == ["cpu:1"]
    assert "more than 1 KiB (1,024 bytes)" in in_bytes.gate.describe()
    assert not bufferhouse.diff_snapshots(*pair, fail_above=1664).failed
    bare = bufferhouse.diff_snapshots(*pair, fail_above="5")
    assert "more than 5 bytes in live buffer bytes: cpu:0 +640 B" in bare.gate.describe()
    # shrinking never trips
    assert not bufferhouse.diff_snapshots(*reversed(pair), fail_above="0").failed


def test_cli_gate_exit_status_and_message():
    args = ["diff", "--base", BASE / "end.prof", "--head", HEAD / "end.prof", "--format"]
    ok = run(*args, "markdown", "--fail-above", "15%")
    assert ok.exit_code == 0
    assert "**Gate passed:** no device grew more than 15% in live buffer bytes." in ok.stdout
    tripped = run(*args, "markdown", "--fail-above", "11%")
    assert tripped.exit_code == 1
    assert "gate failed: 1 device grew more than 11% in live buffer bytes: cpu:1" in (
        tripped.stderr
    )
    assert "#### cpu:1: 13.0 KiB → 14.6 KiB (+1.6 KiB, +12.5%), 4 → 9 buffers" in tripped.stdout
    assert f"| `extra_buffers` | `{line_of('extra')}` | 0 B | 128 B | +128 B |" in tripped.stdout
    table = run(*args, "table")
    assert table.exit_code == 0 and "cpu:0: 6.0 KiB -> 6.6 KiB" in table.stdout
    bad = run(*args, "table", "--fail-above", "5 parsecs")
    assert bad.exit_code == 2 and "threshold '5 parsecs'" in bad.stderr


def test_json_output_shape():
    """One JSON object per line, the columns of the result table in order."""
    args = ["diff", "--base", BASE / "end.prof", "--head", HEAD / "end.prof", "--format", "json"]
    out = run(*args)
    assert out.exit_code == 0
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert rows and all(list(x) == SOURCE_COLUMNS for x in rows)
    r = bufferhouse.diff_snapshots(BASE / "end.prof", HEAD / "end.prof")
    assert rows == r.sources.to_pylist()
    devices = [json.loads(line) for line in run(*args, "--show", "devices").stdout.splitlines()]
    assert [list(x) for x in devices] == [DEVICE_COLUMNS, DEVICE_COLUMNS]
    assert [(x["device"], x["delta_bytes"]) for x in devices] == [("cpu:0", 640), ("cpu:1", 1664)]
    assert devices[0]["base_snapshot"] == devices[0]["head_snapshot"] == "end.prof"


def test_directories_pair_their_profiles_by_name(tmp_path):
    r = bufferhouse.diff(BASE, HEAD)  # diff() recognises snapshot sides
    assert isinstance(r, SnapshotDiffResult)
    assert r.base.kind == "profiles" and r.base.snapshots == ("end.prof", "start.prof")
    pairs = {(x["pair"], x["head_snapshot"]) for x in r.devices.to_pylist()}
    assert pairs == {(0, "end.prof"), (1, "start.prof")}
    one = bufferhouse.diff_snapshots(BASE / "start.prof", HEAD / "start.prof")
    start = [{**x, "pair": 0} for x in r.sources.to_pylist() if x["pair"] == 1]
    assert start == one.sources.to_pylist()
    assert r.summary()["pairs"] == 2
    assert "end.prof, cpu:0:" in r.report("table")
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    shutil.copy(HEAD / "end.prof", lonely / "end.prof")
    shutil.copy(HEAD / "start.prof", lonely / "later.prof")
    with pytest.raises(DiffError, match=r"2 are on one side only: later\.prof \(head\), start"):
        bufferhouse.diff_snapshots(BASE, lonely)
    with pytest.raises(DiffError, match=r"holds 2 profiles and .* one"):
        bufferhouse.diff_snapshots(BASE, HEAD / "end.prof")


@pytest.fixture(scope="module")
def pair_db(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("snapdiff") / "w.duckdb"
    report = bufferhouse.ingest([PAIR], db=db, jobs=1)
    assert report.ok and report.snapshots_loaded == 4
    return db


def test_warehouse_snapshots_by_selector(pair_db):
    """Snapshots of a warehouse, by path or hash prefix, diff as the files do."""
    con = bufferhouse.connect(pair_db)
    keys = dict(
        con.execute("SELECT path, substr(snapshot_hash, 1, 12) FROM runtime_snapshots").fetchall()
    )
    con.close()
    base = next(p for p in keys if p.endswith("base/end.prof"))
    head = next(p for p in keys if p.endswith("head/end.prof"))
    files = bufferhouse.diff_snapshots(BASE / "end.prof", HEAD / "end.prof")
    # a path that exists is read as the file (the same content); a hash prefix, from --db
    for b, h, kind in ((base, head, "profile"), (keys[base], keys[head], "snapshot")):
        r = bufferhouse.diff(b, h, db=pair_db)
        assert r.base.kind == kind
        assert r.sources == files.sources
    out = run("diff", "--db", pair_db, "--base", keys[base], "--head", keys[head])
    assert out.exit_code == 0 and f"base: {keys[base]} (snapshot, 1 snapshot)" in out.stderr


def test_selector_errors(pair_db):
    base = str(BASE / "end.prof")
    with pytest.raises(
        UnknownSnapshotError, match=r"no snapshot matches 'edn\.prof'.*did you mean end\.prof"
    ):
        bufferhouse.diff(base, "edn.prof", db=pair_db)
    with pytest.raises(DiffError, match=r"'end\.prof' selects 2 snapshots"):
        bufferhouse.diff_snapshots(base, "end.prof", db=pair_db)
    out = run("diff", "--db", pair_db, "--base", base, "--head", "edn.prof")
    assert out.exit_code == 2 and "did you mean end.prof" in out.stderr
    # two names of no snapshot, in a warehouse of snapshots
    with pytest.raises(UnknownSnapshotError, match="'nope'"):
        bufferhouse.diff("nope", "nada", db=pair_db)


def test_a_module_against_a_snapshot_names_both(pair_db):
    profile = str(RUN / "before.prof")
    dumps = str(RUN / "dumps")
    with pytest.raises(DiffError) as info:
        bufferhouse.diff(profile, dumps)
    message = str(info.value)
    assert f"base {profile!r} is a device memory profile" in message
    assert f"head {dumps!r} is a dump tree" in message
    with pytest.raises(DiffError, match=r"head 'jax=0\.7' is a label"):
        bufferhouse.diff(profile, "jax=0.7", db=pair_db)
    with pytest.raises(DiffError, match=r"base .* is a warehouse and head .* profile"):
        bufferhouse.diff(pair_db, profile)
    out = run("diff", "--base", dumps, "--head", profile)
    assert out.exit_code == 2 and "a diff compares modules with modules" in out.stderr


def test_module_options_are_refused_for_snapshots():
    pair = (BASE / "end.prof", HEAD / "end.prof")
    with pytest.raises(DiffError, match=r"module='jit_f', causes=True: for modules"):
        bufferhouse.diff(*pair, module="jit_f", causes=True)
    with pytest.raises(DiffError, match=r"peak='total'"):
        bufferhouse.diff(*pair, peak="total")
    out = run("diff", "--base", pair[0], "--head", pair[1], "--show", "causes")
    assert out.exit_code == 2 and "causes=True: for modules" in out.stderr
    with pytest.raises(DiffError, match="no table 'modules' in a diff of device memory"):
        bufferhouse.diff_snapshots(*pair).table("modules")


def test_a_damaged_profile_is_a_located_error():
    with pytest.raises(ParseError) as info:
        bufferhouse.diff_snapshots(DATA / "runtime-bad" / "truncated.prof", HEAD / "end.prof")
    assert "truncated.prof" in str(info.value)


def test_a_module_diff_is_unchanged_by_a_directory_of_profiles_and_dumps():
    """A directory holding dumps and profiles against another such: still a module diff
    (what it was); against a profile it is the snapshot side."""
    r = bufferhouse.diff(RUN, RUN)
    assert not isinstance(r, SnapshotDiffResult) and r.base.modules == 1
    with pytest.raises(DiffError, match="holds 2 profiles"):
        bufferhouse.diff(RUN, HEAD / "end.prof")


def test_a_device_on_one_side_only(tmp_path):
    """head's cpu:1 renamed cpu:7 (a profile rewritten here): cpu:7 is new, cpu:1 gone,
    each line of theirs new or gone; a new device grows from 0, past any percentage."""
    profile = profile_pb2.Profile()
    profile.ParseFromString(gzip.decompress((HEAD / "end.prof").read_bytes()))
    profile.string_table.append("cpu:7")
    renamed = len(profile.string_table) - 1
    for sample in profile.sample:
        for label in sample.label:
            if profile.string_table[label.str] == "cpu:1":
                label.str = renamed
    moved = tmp_path / "moved.prof"
    moved.write_bytes(gzip.compress(profile.SerializeToString()))
    r = bufferhouse.diff_snapshots(BASE / "end.prof", moved, fail_above="5%")
    devices = {x["device"]: x for x in r.devices.to_pylist()}
    assert devices["cpu:7"]["status"] == "new" and devices["cpu:7"]["change_pct"] is None
    assert devices["cpu:1"]["status"] == "gone" and devices["cpu:1"]["head_bytes"] == 0
    assert {x["status"] for x in r.sources.to_pylist() if x["device"] == "cpu:7"} == {"new"}
    assert {x["status"] for x in r.sources.to_pylist() if x["device"] == "cpu:1"} == {"gone"}
    assert r.gate.failures.column("device").to_pylist() == ["cpu:0", "cpu:7"]
    assert "cpu:7 +14.6 KiB (new)" in r.gate.describe()


def test_lines_without_a_user_frame():
    """The SQL's keys on hand-made samples: a stack all in jax is `(jax)`, no stack is
    `(no stack)`, executables are not device memory; the rows still sum to the totals."""
    from bufferhouse.compare.statements import run as statement

    names = ["pair", "kind", "device", "count", "bytes", "stack_id", "source_file"]
    names += ["source_line", "source_function"]

    def samples(rows):
        return pa.table({n: [r[i] for r in rows] for i, n in enumerate(names)})

    base = samples(
        [
            (0, "buffer", "TPU_0", 1, 100, 0, "a.py", 3, "f"),
            (0, "buffer", "TPU_0", 2, 64, 1, None, None, None),
            (0, "executable", None, 1, 9999, 2, "a.py", 9, "g"),
        ]
    )
    head = samples(
        [
            (0, "buffer", "TPU_0", 1, 100, 0, "a.py", 3, "f"),
            (0, "buffer", "TPU_0", 1, 300, 5, "a.py", 3, "f"),
            (0, "buffer", "TPU_0", 1, 8, None, None, None, None),
        ]
    )
    con = duckdb.connect()
    con.register("base_samples", base)
    con.register("head_samples", head)
    con.register(
        "snapshot_pairs", pa.table({"pair": [0], "base_snapshot": ["a"], "head_snapshot": ["b"]})
    )
    rows = statement(con, "snapshot-sources").to_pylist()
    got = [
        (x["function"], x["source"], x["status"], x["delta_bytes"], x["count_delta"]) for x in rows
    ]
    assert got == [
        ("f", "a.py:3", "grown", 300, 1),
        (None, "(jax)", "gone", -64, -2),
        (None, "(no stack)", "new", 8, 1),
    ]
    (device,) = statement(con, "snapshot-devices").to_pylist()
    assert (device["device"], device["delta_bytes"], device["count_delta"]) == ("TPU_0", 244, 0)


def test_golden_markdown(update_golden, monkeypatch):
    """The report of the directory pair with a tripped gate, as a pull request shows it."""
    monkeypatch.chdir(DATA)  # sides as a user types them: no machine path in the report
    result = run(
        "diff", "--base", "runtime-diff/base", "--head", "runtime-diff/head",
        "--format", "markdown", "--fail-above", "11%",
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    path = GOLDEN / "diff-snapshots.md"
    if update_golden:
        path.write_text(result.stdout)
    assert path.exists(), f"no golden file {path}; run pytest --update-golden and read the diff"
    assert result.stdout == path.read_text(), "changed; see git diff after --update-golden"


@pytest.mark.parametrize(
    "profile",
    [DATA / "jax012" / "cpu" / "profile_mlp" / "memory.prof", RUN / "after.prof"],
    ids=lambda p: p.parent.name,
)
def test_a_snapshot_against_itself_changes_nothing(profile, tmp_path):
    """The same profile on both sides (one a copy): every row `same`, a gate at 0 bytes
    passes, and the report says no line changed."""
    copy = tmp_path / "copy.prof"
    shutil.copy(profile, copy)
    r = bufferhouse.diff_snapshots(profile, copy, fail_above=0)
    assert r.sources.num_rows and set(r.sources.column("status").to_pylist()) == {"same"}
    assert set(r.devices.column("delta_bytes").to_pylist()) == {0}
    assert not r.failed
    assert "No allocating line holds more or less than before." in r.report("table")
