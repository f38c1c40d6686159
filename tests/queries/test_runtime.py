"""Device memory profiles (issue 30): a real jax run on 4 CPU devices, read against the
oracle its script computed from the arrays' shapes and shardings (manifest.json), the
queries over it, damaged profiles, re-ingest, the upgrade, export and attach."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import shutil

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bufferhouse
from bufferhouse.errors import ParseError, QueryError, UnknownSnapshotError
from bufferhouse.parse.discover import discover_logs, discover_profiles
from bufferhouse.parse.pprof import looks_like_profile, read_file, read_snapshot
from bufferhouse.parse.proto import profile_pb2
from bufferhouse.schema import SCHEMA_VERSION
from tests.conftest import DATA

RUNTIME = DATA / "runtime"
RUN = RUNTIME / "run"
BAD = DATA / "runtime-bad"
MANIFEST = json.loads((RUNTIME / "manifest.json").read_text())
RUNTIME_TABLES = ("runtime_snapshots", "runtime_samples", "runtime_frames", "runtime_labels")


def _per_device(rows: list[dict]) -> dict[str, dict]:
    return {
        r["device"]: {"bytes": r["live_bytes"], "count": r["array_count"]}
        for r in rows
        if r["kind"] == "buffer"
    }


@pytest.mark.parametrize("name", ["before.prof", "after.prof"])
def test_live_memory_equals_the_arrays_shardings(runtime_db, name):
    """Per device, the bytes and buffers the profile holds are those the script computed
    from each live array's shape, dtype and sharding (one buffer per shard; a replicated
    array on every device, the single-device array on cpu:1 only)."""
    rows = bufferhouse.query("live-memory", db=runtime_db, snapshot=name).to_pylist()
    assert _per_device(rows) == MANIFEST["snapshots"][name]
    executables = [r for r in rows if r["kind"] == "executable"]
    assert len(executables) == 1 and executables[0]["device"] is None
    assert sum(r["share_pct"] for r in rows if r["kind"] == "buffer") == pytest.approx(100, 0.01)


def test_live_growth_is_the_arrays_added(runtime_db):
    """The leak view: between the snapshots, exactly the cache arrays grew, at the one line
    of the script that made them, on every device, and nothing else changed."""
    rows = bufferhouse.query(
        "live-growth", db=runtime_db, before="before.prof", after="after.prof"
    ).to_pylist()
    growth = MANIFEST["growth"]
    assert {
        r["device"]: {"bytes": r["growth_bytes"], "count": r["growth_count"]} for r in rows
    } == (growth["per_device"])
    assert {r["source"].rsplit("/", 1)[1] for r in rows} == {
        f"{growth['source_file']}:{growth['source_line']}"
    }
    assert all(r["before_bytes"] == 0 for r in rows)
    # the other way round, all of it is freed
    back = bufferhouse.query(
        "live-growth", db=runtime_db, before="after.prof", after="before.prof"
    ).to_pylist()
    assert sorted(-r["growth_bytes"] for r in back) == sorted(r["growth_bytes"] for r in rows)


def test_live_growth_names_a_snapshot_or_says_why(runtime_db, tmp_path):
    with pytest.raises(QueryError, match=r"no snapshot matches 'befor\.prof'"):
        bufferhouse.query("live-growth", db=runtime_db, before="befor.prof", after="after.prof")
    db = tmp_path / "two.duckdb"  # after.prof in two directories, of different content:
    other = tmp_path / "other"  # the same samples, taken at a time the profile records
    other.mkdir()
    profile = profile_pb2.Profile()
    profile.ParseFromString(gzip.decompress((RUN / "after.prof").read_bytes()))
    profile.time_nanos = 1_700_000_000 * 10**9
    (other / "after.prof").write_bytes(gzip.compress(profile.SerializeToString()))
    bufferhouse.ingest([RUN, other], db=db, jobs=1)
    with duckdb.connect(str(db), read_only=True) as con:
        times = con.sql("SELECT time_source, taken_at FROM runtime_snapshots").fetchall()
    assert ("profile", dt.datetime(2023, 11, 14, 22, 13, 20)) in times
    with pytest.raises(QueryError, match=r"after\.prof selects 2 snapshots; give its path"):
        bufferhouse.query("live-growth", db=db, before="before.prof", after="after.prof")
    rows = bufferhouse.query(
        "live-growth", db=db, before="before.prof", after=str(RUN / "after.prof")
    )
    assert rows.num_rows == 4


@pytest.mark.parametrize(
    ("query", "param"),
    [("live-memory", "snapshot"), ("live-by-source", "snapshot"), ("device-budget", "snapshot"),
     ("live-growth", "before"), ("live-growth", "after")],
)  # fmt: skip
def test_a_snapshot_typo_is_an_error_with_the_nearest_names(runtime_db, query, param):
    """Every snapshot parameter, not only live-growth's: a typo was an empty result."""
    with pytest.raises(UnknownSnapshotError, match=r"'aftr\.prof'.*holds 2.*mean after\.prof"):
        bufferhouse.query(query, db=runtime_db, **{param: "aftr.prof"})


def test_a_snapshot_is_named_by_a_path_relative_to_here(runtime_db, monkeypatch):
    """Ingest stores absolute paths; the path a user typed, relative, selects the same."""
    monkeypatch.chdir(RUN.parent)
    relative = bufferhouse.query("live-memory", db=runtime_db, snapshot="run/after.prof")
    absolute = bufferhouse.query("live-memory", db=runtime_db, snapshot=str(RUN / "after.prof"))
    assert relative.num_rows > 0 and relative == absolute


def test_live_by_source_keys_by_the_allocating_line_outside_jax(runtime_db):
    rows = bufferhouse.query("live-by-source", db=runtime_db, top=None).to_pylist()
    assert all("/jax/" not in r["source"] for r in rows)
    assert {r["source"].rsplit("/", 1)[1].split(":")[0] for r in rows} == {"make_profiles.py"}
    by_device: dict[str, int] = {}
    for r in rows:  # every buffer is under some line: per device, the lines' peaks hold
        by_device[r["device"]] = by_device.get(r["device"], 0) + r["total_bytes"]
    for device, total in by_device.items():
        assert total == sum(
            MANIFEST["snapshots"][s][device]["bytes"] for s in MANIFEST["snapshots"]
        )
    functions = bufferhouse.query("live-by-source", db=runtime_db, key_by="function").to_pylist()
    assert {r["source"].rsplit(":", 1)[1] for r in functions} <= {"main", "<listcomp>"}


def test_device_budget_adds_the_steps_transient(runtime_db):
    """transient_bytes is what memory_analysis() says one more step allocates besides its
    arguments: temp plus output not aliased with a parameter."""
    analysis = MANIFEST["step_memory_analysis"]
    transient = (
        analysis["temp_size_in_bytes"]
        + analysis["output_size_in_bytes"]
        - analysis["alias_size_in_bytes"]
    )
    rows = bufferhouse.query(
        "device-budget", db=runtime_db, snapshot="after.prof", capacity="8KiB"
    ).to_pylist()
    after = MANIFEST["snapshots"]["after.prof"]
    assert {r["device"] for r in rows} == set(after)
    for r in rows:
        assert r["live_bytes"] == after[r["device"]]["bytes"]
        assert (r["transient_bytes"], r["transient_module"]) == (transient, "jit_step")
        assert r["need_bytes"] == r["live_bytes"] + transient
        assert r["capacity_bytes"] == 8192
        assert r["headroom_bytes"] == 8192 - r["need_bytes"] and r["fits"] is False
    roomy = bufferhouse.query(
        "device-budget", db=runtime_db, snapshot="before.prof", capacity="1.5 GB"
    )
    assert {(r["capacity_bytes"], r["fits"]) for r in roomy.to_pylist()} == {(1_500_000_000, True)}
    bare = bufferhouse.query("device-budget", db=runtime_db, snapshot="after.prof").to_pylist()
    assert {(r["capacity_bytes"], r["fits"], r["headroom_bytes"]) for r in bare} == {
        (None, None, None)
    }
    by_name = bufferhouse.query(
        "device-budget", db=runtime_db, snapshot="after.prof", module="jit_step"
    )
    assert by_name.to_pylist() == bare
    with pytest.raises(QueryError, match="capacity wants a size like 16GiB"):
        bufferhouse.query("device-budget", db=runtime_db, capacity="lots")


def test_the_typed_reading_of_a_profile():
    snapshot = read_file(str(RUN / "before.prof"))
    assert snapshot.sample_types == ("allocations/count", "space/bytes")
    assert snapshot.time_nanos is None  # jax records none: taken_at is the file's time
    kinds = {s.kind for s in snapshot.samples}
    assert kinds == {"buffer", "executable"}
    for sample in snapshot.samples:
        assert (sample.device is None) == (sample.kind == "executable")
        stack = snapshot.stacks[sample.stack]
        source = snapshot.source_of(sample.stack)
        assert stack[0].in_jax and not source.in_jax  # jax made it, the script asked
        assert source.file.endswith("make_profiles.py")


def test_profiles_are_found_by_content_whatever_their_name(tmp_path):
    shutil.copy(RUN / "after.prof", tmp_path / "snapshot-7")
    shutil.copy(RUN / "before.prof", tmp_path / "mem.log")  # a log's name: still a profile
    gz_dump = tmp_path / "dump-buffer-assignment.txt.gz"
    gz_dump.write_bytes(gzip.compress(b"BufferAssignment:\nallocation 0: size 4\n"))
    (tmp_path / "plain.gz").write_bytes(gzip.compress(b"hello world\n"))
    (tmp_path / "cprofile.prof").write_bytes(b"{\xe9\x00\x00\x00\x00")  # cProfile's, not ours
    found = [p.path for p in discover_profiles([tmp_path])]
    assert found == [str(tmp_path / "mem.log"), str(tmp_path / "snapshot-7")]
    assert not discover_logs([tmp_path / "mem.log"])  # not scanned for OOM messages too
    assert not looks_like_profile(str(tmp_path / "plain.gz"))


#: Each damaged profile of tests/data/runtime-bad (make_bad.py): what its error says.
BAD_CASES = {
    "truncated.prof": "gzip stream cut short at byte 464 (after 947 uncompressed bytes)",
    "not-gzip.prof": "expected gzip data (bytes 1f 8b) at byte 0",
    "not-a-message.pb.gz": "not a pprof Profile: at byte 6: varint longer than 10 bytes",
    "cut-message.prof": "at byte 1936: field 6 needs 53 bytes but 46 remain (truncated?)",
    "negative-bytes.prof": "at byte 102 of the uncompressed Profile: sample 3 has count 1 and"
    " bytes -4096; expected counts and sizes from 0",
    "string-past-table.prof": "at byte 73 of the uncompressed Profile: sample 2's label kind is"
    " string 47, past the string table's 42 entries",
    "unknown-location.prof": "at byte 43 of the uncompressed Profile: sample 1 names location"
    " 999999, which is not listed",
    "cpu-profile.prof": "a pprof profile but not a device memory profile: sample types"
    " samples/count, cpu/nanoseconds; expected allocations/count and space/bytes",
}


def test_every_damaged_profile_has_a_case():
    assert {p.name for p in BAD.iterdir() if p.suffix != ".py"} == set(BAD_CASES)


@pytest.mark.parametrize("name", sorted(BAD_CASES))
def test_a_damaged_profile_fails_located_and_the_rest_lands(name, tmp_path):
    db = tmp_path / "w.duckdb"
    report = bufferhouse.ingest([BAD / name, RUN / "before.prof"], db=db, jobs=1)
    (failed,) = report.failed
    assert failed.error.path == str(BAD / name)
    assert BAD_CASES[name] in failed.error.message
    assert report.snapshots_loaded == 1
    with duckdb.connect(str(db), read_only=True) as con:
        paths = con.sql("SELECT path FROM runtime_snapshots").fetchall()
        assert paths == [(str(RUN / "before.prof"),)]
        for table in ("runtime_samples", "runtime_frames"):  # nothing of the damaged one
            (orphans,) = con.execute(
                f"SELECT count(*) FROM {table} WHERE snapshot_id NOT IN "
                "(SELECT snapshot_id FROM runtime_snapshots)"
            ).fetchall()[0]
            assert orphans == 0
        (error,) = con.execute(
            "SELECT message FROM diagnostics WHERE severity = 'error'"
        ).fetchall()[0]
        assert BAD_CASES[name] in error


def test_a_cpu_profile_in_a_tree_is_skipped_quietly(tmp_path):
    shutil.copy(BAD / "cpu-profile.prof", tmp_path)
    report = bufferhouse.ingest([tmp_path], db=tmp_path / "w.duckdb", jobs=1)
    assert report.ok and [o.status for o in report.outcomes] == ["skipped"]


def test_reingest_adds_nothing_and_labels_what_it_holds(tmp_path):
    db = tmp_path / "w.duckdb"
    first = bufferhouse.ingest([RUNTIME], db=db, jobs=2)  # parsed in worker processes
    with duckdb.connect(str(db), read_only=True) as con:
        counts = [con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in RUNTIME_TABLES]
    moved = tmp_path / "moved"
    shutil.copytree(RUN, moved)  # the same snapshots elsewhere are the same snapshots
    again = bufferhouse.ingest([RUNTIME, moved], db=db, jobs=1, labels={"step": "9"})
    assert (first.snapshots_loaded, again.snapshots_loaded) == (2, 0)
    assert [o.status for o in again.outcomes].count("present") == 6  # 2 x (2 profiles, 1 dump)
    with duckdb.connect(str(db), read_only=True) as con:
        again_counts = [
            con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in RUNTIME_TABLES
        ]
    assert again_counts[:3] == counts[:3] and counts[3] == 0 and again_counts[3] == 2
    labelled = bufferhouse.query("live-memory", db=db, label="step=9")
    assert labelled.num_rows == 10


def test_a_version_6_warehouse_gains_the_runtime_tables(tmp_path):
    from bufferhouse.schema.warehouse import connect, schema_version

    db = tmp_path / "old.duckdb"
    bufferhouse.ingest([RUN / "dumps"], db=db, jobs=1)
    with duckdb.connect(str(db)) as con:  # what schema 6 had: no runtime tables
        for name in RUNTIME_TABLES:
            con.execute(f"DROP TABLE {name}")
        con.execute("UPDATE schema_info SET value = '6' WHERE key = 'schema_version'")
    report = bufferhouse.ingest([RUN], db=db, jobs=1)
    assert report.snapshots_loaded == 2
    con = connect(db)
    try:
        assert schema_version(con) == SCHEMA_VERSION
        assert con.execute("SELECT count(*) FROM runtime_snapshots").fetchall()[0][0] == 2
    finally:
        con.close()


RUNTIME_QUERIES = {
    "live-memory": {},
    "live-by-source": {},
    "live-growth": {"before": "before.prof", "after": "after.prof"},
    "device-budget": {"snapshot": "after.prof", "capacity": "8KiB"},
}


def test_export_and_attach_keep_the_snapshots(runtime_db, tmp_path):
    from bufferhouse.export import attach, export_warehouse, read_table

    export_warehouse(tmp_path / "ds", db=runtime_db)
    with duckdb.connect(str(runtime_db), read_only=True) as con:
        for name in RUNTIME_TABLES:
            want = con.sql(f"SELECT * FROM {name}").to_arrow_table()
            got = read_table(tmp_path / "ds", name, dedup=True)
            key = [(c, "ascending") for c in want.column_names[:3]]
            assert got.sort_by(key).to_pylist() == want.sort_by(key).to_pylist(), name
    attach(tmp_path / "ds", db=tmp_path / "views.duckdb")
    for name, params in RUNTIME_QUERIES.items():
        assert (
            bufferhouse.query(name, db=tmp_path / "views.duckdb", **params).to_pylist()
            == bufferhouse.query(name, db=runtime_db, **params).to_pylist()
        ), name


def test_two_exports_of_one_snapshot_read_as_one(tmp_path):
    """Two warehouses that each loaded the run, exported side by side and attached as one
    glob: each snapshot once (the copy of the lower run), labels of both copies on it."""
    from bufferhouse.export import attach, export_warehouse

    for side in ("a", "b"):
        bufferhouse.ingest([RUNTIME], db=tmp_path / f"{side}.duckdb", jobs=1, labels={"w": side})
        export_warehouse(tmp_path / "ds" / side, db=tmp_path / f"{side}.duckdb")
    attach(str(tmp_path / "ds" / "*"), db=tmp_path / "views.duckdb")
    one = bufferhouse.query("live-memory", db=tmp_path / "a.duckdb")
    both = bufferhouse.query("live-memory", db=tmp_path / "views.duckdb")
    assert both.num_rows == one.num_rows == 10
    assert (
        bufferhouse.query("live-memory", db=tmp_path / "views.duckdb", label="w=b").num_rows == 10
    )


def test_the_report_shows_the_snapshot_loaded_last(runtime_db, tmp_path):
    pytest.importorskip("matplotlib", reason="the plot extra is not installed")
    from bufferhouse import visual

    with duckdb.connect(str(runtime_db), read_only=True) as con:
        (newest, path) = con.execute(
            "SELECT snapshot_id, path FROM runtime_snapshots ORDER BY snapshot_id DESC LIMIT 1"
        ).fetchall()[0]
    written = visual.write_report(tmp_path / "r.html", db=runtime_db, rows=5)
    data = written.data
    assert (data.snapshot_count, data.snapshot_path) == (2, path)
    want = MANIFEST["snapshots"][path.rsplit("/", 1)[1]]
    assert {
        r["device"]: {"bytes": r["live_bytes"], "count": r["array_count"]}
        for r in data.snapshot_devices
    } == want
    lines = bufferhouse.query("live-by-source", db=runtime_db, snapshot=str(newest), top=5)
    assert data.snapshot_sources == lines.to_pylist()
    html = written.path.read_text()
    assert '<section id="runtime">' in html and 'data-chart="runtime-devices"' in html
    assert html.count('id="runtime-devices-bars-device-') == len(want)


def test_check_finds_a_snapshot_that_is_not_whole(runtime_db, tmp_path):
    from bufferhouse.check import check_warehouse

    assert check_warehouse(runtime_db).checks["snapshots"] == 0
    damaged = tmp_path / "damaged.duckdb"
    shutil.copy(runtime_db, damaged)
    with duckdb.connect(str(damaged)) as con:
        con.execute("DELETE FROM runtime_samples WHERE sample_index = 0")
        con.execute("INSERT INTO runtime_labels VALUES (7, 'k', 'v')")
    messages = [p.message for p in check_warehouse(damaged).problems if p.check == "snapshots"]
    assert any("records buffer_bytes" in m for m in messages), messages
    assert "1 runtime_labels rows of missing snapshot 7" in messages


_MESSAGE = gzip.decompress((RUN / "after.prof").read_bytes())


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, len(_MESSAGE) - 1), st.integers(0, 255)), min_size=1, max_size=6
    ),
    st.integers(1, len(_MESSAGE)),
)
def test_a_damaged_profile_raises_only_a_located_parse_error(edits, keep):
    """Bytes of a real profile changed and cut anywhere: a Snapshot, or a ParseError that
    names the file; never another exception."""
    message = bytearray(_MESSAGE[:keep])
    for at, value in edits:
        if at < len(message):
            message[at] = value
    try:
        snapshot = read_snapshot(gzip.compress(bytes(message), mtime=0), "x.prof")
    except ParseError as exc:
        assert exc.path == "x.prof" and exc.message
    else:
        assert all(s.bytes >= 0 and s.count >= 0 for s in snapshot.samples)


def test_the_cli_summary_counts_snapshots(tmp_path):
    from click.testing import CliRunner

    from bufferhouse.cli import main

    result = CliRunner().invoke(main, ["ingest", str(RUN), "--db", str(tmp_path / "w.duckdb")])
    assert result.exit_code == 0, result.output
    assert "device memory snapshots: 2 loaded" in result.stderr


def test_live_growth_of_a_single_snapshot_is_an_error_not_all_of_it_grown(tmp_path):
    """With one snapshot and no `before`, there is nothing to compare: an error that says
    so, not the whole snapshot as growth."""
    one = tmp_path / "one"
    one.mkdir()
    shutil.copy(RUN / "after.prof", one / "after.prof")
    db = tmp_path / "one.duckdb"
    assert bufferhouse.ingest(one, db=db, jobs=1).snapshots_loaded == 1
    with pytest.raises(QueryError, match="holds one snapshot, so there is no earlier one"):
        bufferhouse.query("live-growth", db=db)
    # naming the same snapshot on both sides is allowed, and shows no change
    assert (
        bufferhouse.query("live-growth", db=db, before="after.prof", after="after.prof").num_rows
        == 0
    )
