"""Module ids grow in ingest order, so one module's rows sit in their own row groups.

With ids taken from content hashes, every row group's min/max spanned all of
int64 and a query for one module read the whole table; these tests fail that way.
"""

from __future__ import annotations

import hashlib
import shutil
import threading
from itertools import pairwise

import duckdb
import pyarrow as pa
import pytest
from click.testing import CliRunner

import bufferhouse
from bufferhouse.check import check_warehouse
from bufferhouse.cli import main
from bufferhouse.errors import SchemaVersionError, WarehouseError
from bufferhouse.load import IngestReport, run_batches, run_record, schedule
from bufferhouse.load.writer import Batch, ModuleBuffer, ModuleWriter
from bufferhouse.parse.discover import discover
from bufferhouse.schema import DERIVED_TABLES, MODULE_TABLES, SCHEMA_VERSION
from bufferhouse.schema.ids import LOW_BITS, ModuleIds
from bufferhouse.schema.warehouse import STORAGE_VERSION, ensure_schema, schema_version
from tests.conftest import CORPUS, DATA, SAMPLES, drop_version_7

#: Rows per DuckDB row group for the storage test: small, so the fixtures span many.
ROW_GROUP_SIZE = 2048


def test_allocator_strictly_increases_even_when_the_clock_steps_back():
    now = [1_700_000_000_000]
    ids = ModuleIds(clock=lambda: now[0])
    taken = [ids.next() for _ in range(1000)]  # many in one millisecond
    now[0] -= 60_000  # the clock goes back a minute
    taken += [ids.next() for _ in range(10)]
    now[0] += 3_600_000
    taken.append(ids.next())
    assert all(b > a for a, b in pairwise(taken))
    assert taken[0] >> LOW_BITS == 1_700_000_000_000
    assert taken[-1] >> LOW_BITS == now[0]  # a later clock is taken up again
    assert ModuleIds(after=taken[-1] + 10**9, clock=lambda: now[0]).next() == taken[-1] + 10**9 + 1


def test_ids_fit_bigint_until_2248():
    year_2248_ms = (2248 - 1970) * 365 * 24 * 3600 * 1000
    assert ModuleIds(clock=lambda: year_2248_ms).next() < 2**63
    assert ModuleIds().next() > 0


@pytest.fixture(scope="module")
def small_groups_db(tmp_path_factory):
    """Samples then one corpus version, in two runs, through the warehouse writer, with
    small row groups (DuckDB takes the size when the file is attached, not from the file)."""
    path = tmp_path_factory.mktemp("ids") / "small-groups.duckdb"
    order = []
    for run, tree in enumerate([SAMPLES, CORPUS / "jax-0.6.2"]):
        con = duckdb.connect()
        con.execute(
            f"ATTACH '{path}' AS w "
            f"(ROW_GROUP_SIZE {ROW_GROUP_SIZE}, STORAGE_VERSION '{STORAGE_VERSION}')"
        )
        con.execute("USE w")
        ensure_schema(con, str(path))
        report = IngestReport(str(path), run_id=run + 1)
        writer = ModuleWriter(
            con, run + 1, [], max_modules=8, run_row=run_record(run + 1, [str(tree)], [])
        )
        run_batches(discover([str(tree)]), writer, report, jobs=1)
        con.close()
        assert report.ok and report.loaded
        order += [o.module_id for o in report.loaded]
    return path, order


@pytest.mark.slow
def test_ids_strictly_increase_in_ingest_order(small_groups_db):
    path, order = small_groups_db
    assert order == sorted(order) and len(set(order)) == len(order)
    with duckdb.connect(str(path), read_only=True) as con:
        stored = [
            r[0] for r in con.execute("SELECT module_id FROM modules ORDER BY rowid").fetchall()
        ]
    assert stored == order  # the second run's ids are above the first run's


@pytest.mark.slow
def test_row_groups_hold_disjoint_id_ranges(small_groups_db):
    """Each row group's module_id min/max lies above the previous one's: zone maps prune."""
    path, _ = small_groups_db
    spanning = 0
    with duckdb.connect(str(path), read_only=True) as con:
        for table in MODULE_TABLES:
            groups = con.execute(
                "SELECT row_group_id, stats FROM pragma_storage_info(?) "
                "WHERE column_name = 'module_id' AND segment_type <> 'VALIDITY' "
                "ORDER BY row_group_id, start",
                [table.name],
            ).fetchall()
            ranges: dict[int, tuple[int, int]] = {}
            for group, stats in groups:
                low, high = int(stats["min"]), int(stats["max"])
                seen = ranges.get(group, (low, high))
                ranges[group] = (min(seen[0], low), max(seen[1], high))
            spans = [ranges[g] for g in sorted(ranges)]
            if len(spans) > 1:
                spanning += 1
            for (_, high), (low, _) in pairwise(spans):
                assert high <= low, (table.name, spans)
    assert spanning >= 4  # the property was tested on tables of several row groups


@pytest.mark.slow
def test_check_passes_on_many_row_groups(small_groups_db):
    """`bufferhouse check` agrees (the damage it finds is in test_check)."""
    path, _ = small_groups_db
    report = check_warehouse(path)
    assert report.ok, report.lines()
    assert report.checks["module ids"] == 0


# --- upgrading a version-1 warehouse -------------------------------------------------


def _hash_id(content_hash: str) -> int:
    """How schema version 1 named a module: the hash's first 8 bytes, signed."""
    return int.from_bytes(bytes.fromhex(content_hash[:16]), "big", signed=True)


def _as_version_1(db) -> dict[str, int]:
    """Turn a warehouse back into what version 1 wrote (hash ids, version 1, with a
    warning of a loaded module); returns content_hash -> its version-1 id."""
    with duckdb.connect(str(db)) as con:
        pairs = con.execute("SELECT module_id, content_hash FROM modules").fetchall()
        old = {h: _hash_id(h) for _, h in pairs}
        con.register(
            "v1_ids",
            pa.table(
                {
                    "new_id": [m for m, _ in pairs],
                    "old_id": [old[h] for _, h in pairs],
                }
            ),
        )
        for table in ("modules", "labels", *(t.name for t in MODULE_TABLES), "diagnostics"):
            con.execute(
                f'UPDATE "{table}" SET module_id = v1_ids.old_id FROM v1_ids '
                f'WHERE "{table}".module_id = v1_ids.new_id'
            )
        first = pairs[0][1]
        con.execute(
            "INSERT INTO diagnostics (run_id, module_id, path, line, severity, message)"
            " VALUES (1, ?, 'x.txt', 3, 'warning', 'a v1 warning')",
            [old[first]],
        )
        for table in DERIVED_TABLES:  # version 1 had none (added in 3)
            con.execute(f'DROP TABLE "{table.name}"')
        drop_version_7(con)
        con.execute("UPDATE schema_info SET value = '1' WHERE key = 'schema_version'")
        con.execute("CHECKPOINT")
    return old


def _excluded(table: str) -> str:
    """Columns left out of the before/after comparison: the id, and those a later
    upgrade step adds as NULL for what was loaded before (hlo_values.tiled_bytes, 10 -> 11:
    re-ingest for it, CHANGELOG.md)."""
    return "module_id, tiled_bytes" if table == "hlo_values" else "module_id"


@pytest.fixture
def version_1_db(tmp_path):
    db = tmp_path / "v1.duckdb"
    assert bufferhouse.ingest([SAMPLES, CORPUS / "jax-0.7.2"], db=db, labels=["k=v"], jobs=1).ok
    with duckdb.connect(str(db), read_only=True) as con:
        before = {
            name: sorted(
                con.execute(
                    f'SELECT m.content_hash, t.* EXCLUDE ({_excluded(name)}) FROM "{name}" t '
                    "JOIN modules m USING (module_id)"
                ).fetchall(),
                key=repr,
            )
            for name in ("labels", *(t.name for t in (*MODULE_TABLES, *DERIVED_TABLES)))
        }
    _as_version_1(db)
    return db, before


@pytest.mark.slow
def test_readers_of_version_1_are_told_how_to_upgrade(version_1_db):
    db, _ = version_1_db
    with pytest.raises(SchemaVersionError, match="Open it for writing once to upgrade it in place"):
        bufferhouse.query("modules", db=db)
    result = CliRunner().invoke(main, ["query", "modules", "--db", str(db)])
    assert result.exit_code != 0 and "bufferhouse ingest DUMPS --db" in result.stderr


@pytest.mark.slow
def test_a_writer_upgrades_version_1_in_place(version_1_db):
    db, before = version_1_db
    report = bufferhouse.ingest([SAMPLES], db=db, labels=["again=yes"], jobs=1)
    assert report.ok and not report.loaded and len(report.present) == 5
    with duckdb.connect(str(db), read_only=True) as con:
        assert schema_version(con) == SCHEMA_VERSION
        ids = [r[0] for r in con.execute("SELECT module_id FROM modules ORDER BY rowid").fetchall()]
        assert ids == sorted(ids) and ids[0] > 0  # renumbered in insertion order
        for name, rows in before.items():  # every row kept, under its module's new id
            after = con.execute(
                f'SELECT m.content_hash, t.* EXCLUDE ({_excluded(name)}) FROM "{name}" t '
                "JOIN modules m USING (module_id)"
            ).fetchall()
            if name == "labels":
                after = [r for r in after if r[1] != "again"]
            assert sorted(after, key=repr) == rows, name
        warning = con.execute(
            "SELECT count(*) FROM diagnostics d JOIN modules m USING (module_id) "
            "WHERE d.message = 'a v1 warning'"
        ).fetchall()[0][0]
        assert warning == 1
        relabelled = con.execute(
            "SELECT count(DISTINCT module_id) FROM labels WHERE key = 'again'"
        ).fetchall()[0][0]
        assert relabelled == 5  # present modules found by content hash after the upgrade
        doc = con.execute(
            "SELECT comment FROM duckdb_columns() "
            "WHERE table_name = 'modules' AND column_name = 'module_id'"
        ).fetchall()[0][0]
        assert "ingest order" in doc
    assert check_warehouse(db).ok, check_warehouse(db).lines()


@pytest.mark.slow
def test_a_failed_upgrade_leaves_version_1(version_1_db, monkeypatch):
    from bufferhouse.schema import warehouse

    db, _ = version_1_db

    def broken(con):
        con.execute("UPDATE modules SET module_id = module_id + 1")
        con.execute("SELECT * FROM no_such_table")

    monkeypatch.setitem(warehouse.UPGRADES, 1, broken)
    with pytest.raises(WarehouseError, match="It is unchanged"):
        bufferhouse.connect(db, read_only=False)
    with duckdb.connect(str(db), read_only=True) as con:
        assert schema_version(con) == 1
        ids = {r[0] for r in con.execute("SELECT module_id FROM modules").fetchall()}
        hashes = [r[0] for r in con.execute("SELECT content_hash FROM modules").fetchall()]
    assert ids == {_hash_id(h) for h in hashes}


# --- datasets: ids per writer, content_hash as identity ---------------------------------


@pytest.mark.slow
def test_attach_refuses_one_id_for_two_modules(tmp_path):
    """Datasets merged by a glob: an id naming two content hashes is an error, not a mix."""
    import pyarrow.parquet as pq

    from bufferhouse.errors import ExportError
    from bufferhouse.export import attach, ingest_to_parquet

    first = ingest_to_parquet([SAMPLES], tmp_path / "sets" / "a", jobs=1)
    second = ingest_to_parquet([CORPUS / "jax-0.6.2" / "fft_ops"], tmp_path / "sets" / "b", jobs=1)
    assert first.loaded and second.loaded
    assert {o.module_id for o in first.loaded}.isdisjoint(o.module_id for o in second.loaded)
    attach(tmp_path / "sets" / "*", tmp_path / "both.duckdb")  # two datasets, no clash
    (part,) = (tmp_path / "sets" / "b" / "modules").rglob("*.parquet")
    modules = pq.read_table(part)
    ids = modules.column("module_id").to_pylist()
    ids[0] = first.loaded[0].module_id
    pq.write_table(modules.set_column(0, "module_id", pa.array(ids, pa.int64())), part)
    with pytest.raises(ExportError, match=f"module_id {ids[0]} names two different modules"):
        attach(tmp_path / "sets" / "*", tmp_path / "clash.duckdb")
    assert not (tmp_path / "clash.duckdb").exists()


class _SlowSink(ModuleBuffer):
    """A sink whose write waits until the loop has staged a module of the next batch."""

    def __init__(self, expected: int, fail_on: int | None = None) -> None:
        super().__init__(1, [], max_modules=1)
        self.expected = expected
        self.staged = threading.Event()
        self.overlapped: list[bool] = []
        self.written: list[int] = []
        self.fail_on = fail_on

    def add(self, module_row, tables, warnings):
        self.staged.set()
        return super().add(module_row, tables, warnings)

    def write(self, batch: Batch) -> int:
        if batch.empty:
            return 0
        self.staged.clear()
        # The last batch has no successor: do not wait for one.
        last = len(self.written) + 1 == self.expected
        self.overlapped.append(last or self.staged.wait(10))
        if len(self.written) == self.fail_on:
            raise WarehouseError("disk full (simulated)")
        self.written += [m["module_id"] for m in batch.modules]
        return len(batch.modules)


def test_the_warehouse_takes_only_full_batches_another_sink_an_eighth(tmp_path):
    """An idle warehouse writer waits for a full batch: a smaller transaction goes through
    DuckDB's write-ahead log and is compressed again at the checkpoint."""
    from bufferhouse.parse import parse_files

    parsed = parse_files(discover([str(CORPUS / "jax-0.6.2")])[0])
    rows = sum(t.num_rows for t in parsed.tables.values())
    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    ensure_schema(con, str(tmp_path / "w.duckdb"))
    sinks = [ModuleWriter(con, 1, [], max_rows=2 * rows), ModuleBuffer(1, [], max_rows=2 * rows)]
    for copy in ("a", "b"):
        for sink in sinks:
            row = dict(parsed.row, content_hash=parsed.row["content_hash"] + copy)
            sink.add(row, dict(parsed.tables), [])
        if copy == "a":
            assert [s.worth_writing for s in sinks] == [False, True]
    assert [s.worth_writing for s in sinks] == [True, True]
    con.close()


def test_the_next_batch_fills_while_the_last_is_written(monkeypatch):
    # Each module parsed alone, so that each is staged after its parse: small modules
    # parsed as one batch (load/schedule.py units) are staged together once it is parsed.
    monkeypatch.setattr(schedule, "BATCH_MAX_BYTES", 0)
    groups = discover([str(CORPUS / "jax-0.6.2")])[:6]
    sink = _SlowSink(len(groups))
    report = IngestReport("sink", run_id=1)
    run_batches(groups, sink, report, jobs=1)
    assert len(sink.written) == 6 and all(sink.overlapped)
    assert [o.module_id for o in report.loaded] == sink.written  # reported once written


def test_a_failed_background_write_stops_the_run_and_reports_no_module_of_it():
    groups = discover([str(CORPUS / "jax-0.6.2")])[:6]
    sink = _SlowSink(len(groups), fail_on=2)
    report = IngestReport("sink", run_id=1)
    with pytest.raises(WarehouseError, match="simulated"):
        run_batches(groups, sink, report, jobs=1)
    assert [o.module_id for o in report.loaded] == sink.written and len(sink.written) == 2


@pytest.mark.slow
def test_a_batch_is_stored_sorted(tmp_path, monkeypatch):
    """Each module's instructions stored sorted by name, nothing lost, however the sorted
    rows are cut into the batches DuckDB reads."""
    from bufferhouse.load import insert as load

    monkeypatch.setattr(load, "INSERT_BATCH_ROWS", 100)  # batches that cut across modules
    db = tmp_path / "w.duckdb"
    assert bufferhouse.ingest([CORPUS / "jax-0.6.2"], db=db, jobs=1).ok
    with duckdb.connect(str(db), read_only=True) as con:
        stored = con.execute(
            "SELECT module_id, instruction FROM instructions ORDER BY rowid"
        ).fetchall()
        modules = con.execute("SELECT count(*) FROM modules").fetchone()[0]
    assert modules > 5 and len(stored) > 300
    assert stored == sorted(stored)


def test_batches_gather_rows_across_chunks_in_sorted_order():
    """One module's rows in several chunks (a large module's pieces), the sort interleaving
    them; every column follows the same order."""
    from bufferhouse.load import insert as load

    names = [f"n.{i}" for i in (5, 1, 9, 3, 7, 0, 8, 2, 6, 4, 11, 10)]
    pieces = [names[0:4], names[4:5], names[5:12]]
    data = pa.Table.from_batches(
        [
            pa.record_batch(
                {"module_id": [7] * len(p), "instruction": p, "text": [f"{n} = t" for n in p]}
            )
            for p in pieces
        ]
    )
    assert data["instruction"].num_chunks == 3
    order = load.stored_order("instructions", data)
    got = pa.Table.from_batches(list(load._batches(data, order, 5)))
    assert got["instruction"].to_pylist() == sorted(names)
    assert got["text"].to_pylist() == [f"{n} = t" for n in sorted(names)]
    assert [b.num_rows for b in load._batches(data, order, 5)] == [5, 5, 2]


@pytest.mark.parametrize("ids", [[3, 3, 5, 5, 5, 9, 9], [9, 3, 5, 9, 3, 5, 5]])
def test_stored_order_sorts_module_by_module(ids):
    """Modules in id order are sorted one by one, others as a whole: the same stable
    order either way (equal names keep their order)."""
    from bufferhouse.load import insert as load

    names = ["b", "a", "c", "a", "b", "b", "a"]
    data = pa.table({"module_id": pa.array(ids, pa.int64()), "instruction": names})
    order = load.stored_order("instructions", data)
    assert order.tolist() == sorted(range(len(ids)), key=lambda i: (ids[i], names[i], i))


# --- identity: every file whose content lands in the warehouse ------------------------

EDGE_GPU = DATA / "edge" / "gpu_split_2026"
HLO_NAME = "module_0042.jit_step.sm_9.0_gpu_after_optimizations.txt"


def _sources(db, module_id: int) -> set:
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT DISTINCT source_file FROM instructions "
            "WHERE module_id = ? AND source_file IS NOT NULL",
            [module_id],
        ).fetchall()
    return {r[0] for r in rows}


def _dump_only_hash(directory) -> str:
    """The identity earlier releases gave a module: SHA-256 over (name NUL content NUL)
    of its dump files in parse order, computed here from the files themselves."""
    suffixes = ("-buffer-assignment.txt", "-buffer-assignment-values.txt", "-live-range.txt")
    suffixes += ("-memory-usage-report.txt",)
    h = hashlib.sha256()
    for suffix in suffixes:
        (path,) = directory.glob(f"*{suffix}")
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def test_a_changed_hlo_beside_an_unchanged_dump_is_a_new_module(tmp_path):
    """The HLO text supplies the stack-frame source locations: changing it changes the
    module, whose new locations are loaded (it was 'already present', locations dropped)."""
    tree = tmp_path / "tree"
    shutil.copytree(EDGE_GPU, tree)
    db = tmp_path / "w.duckdb"
    first = bufferhouse.ingest(tree, db=db)
    assert first.ok and len(first.loaded) == 1
    assert _sources(db, first.loaded[0].module_id) == {"step.py"}

    again = bufferhouse.ingest(tree, db=db)  # nothing changed: a no-op
    assert (len(again.loaded), len(again.present)) == (0, 1) and not again.present[0].warnings

    hlo = tree / HLO_NAME
    hlo.write_text(hlo.read_text().replace('"step.py"', '"train.py"'))
    changed = bufferhouse.ingest(tree, db=db)
    assert changed.ok and (len(changed.loaded), len(changed.present)) == (1, 0)
    assert _sources(db, changed.loaded[0].module_id) == {"train.py"}
    assert check_warehouse(db).ok


def test_a_module_without_hlo_keeps_the_identity_of_earlier_releases(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(EDGE_GPU, tree)
    (tree / HLO_NAME).unlink()
    db = tmp_path / "w.duckdb"
    assert bufferhouse.ingest(tree, db=db).ok
    with duckdb.connect(str(db), read_only=True) as con:
        (held,) = con.execute("SELECT content_hash FROM modules").fetchone()
    assert held == _dump_only_hash(tree)


def test_a_module_held_under_its_dump_files_alone_stays_present(tmp_path):
    """A warehouse written by an earlier release identified the module by its dump files
    only: re-ingesting the same tree (HLO changed or not) loads no second copy; the
    labels go to the module held, and a warning names the HLO file not compared."""
    tree = tmp_path / "tree"
    shutil.copytree(EDGE_GPU, tree)
    db = tmp_path / "old.duckdb"
    (loaded,) = bufferhouse.ingest(tree, db=db).loaded
    with duckdb.connect(str(db)) as con:  # as an earlier release stored it
        con.execute("UPDATE modules SET content_hash = ?", [_dump_only_hash(tree)])

    hlo = tree / HLO_NAME
    hlo.write_text(hlo.read_text().replace('"step.py"', '"train.py"'))
    again = bufferhouse.ingest(tree, db=db, labels={"seen": "again"})
    assert again.ok and (len(again.loaded), len(again.present)) == (0, 1)
    (present,) = again.present
    assert present.module_id == loaded.module_id
    (warning,) = present.warnings
    assert warning.path == str(hlo) and "without this HLO text in its identity" in warning.message
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM modules").fetchone() == (1,)
        labels = con.execute("SELECT module_id, key, value FROM labels").fetchall()
    assert labels == [(loaded.module_id, "seen", "again")]
    assert check_warehouse(db).ok
