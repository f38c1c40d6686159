"""bufferhouse on a real Spark (local[2], one session for the module, small data).

The executors parse the fixture dumps with `parse_batches` / `ingest`, the
canned queries run as Spark SQL, and every row is compared with DuckDB's
answer on a warehouse ingested locally from the same files.
"""

from __future__ import annotations

import decimal
import gzip
import os

import duckdb
import pytest

import bufferhouse
from bufferhouse.errors import QueryError
from bufferhouse.export import attach
from tests.conftest import CORPUS, DATA, SAMPLES, hash_keyed, module_hashes

try:
    import pyspark  # noqa: F401
except ImportError:  # pragma: no cover
    if os.environ.get("CI"):
        raise  # CI installs the spark extra: a missing pyspark must fail, not skip
    pytest.skip("pyspark is not installed (pip install -e '.[spark]')", allow_module_level=True)

from bufferhouse import spark as bhs

pytestmark = pytest.mark.slow  # a Spark session in a JVM

#: Text dumps, a proto-only dump and an XProf profile (issue 16: the same files on executors).
INPUTS = [
    SAMPLES,
    CORPUS / "jax-0.10.2" / "random_small",
    DATA / "proto" / "proto_only" / "while_newton",
    DATA / "proto" / "profile",
]
MODULE = "003_186bba49641ec33a"
PARAMS = {"heap-timeline": {"module": MODULE}, "arena": {"module": MODULE}}


@pytest.fixture(scope="module")
def spark():
    session = bhs.session("local[2]", **{"spark.sql.shuffle.partitions": "2"})
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    db = tmp_path_factory.mktemp("spark") / "small.duckdb"
    report = bufferhouse.ingest(INPUTS, db=db, jobs=1)
    assert report.ok and len(report.loaded) == 18
    return db


def _norm(value):
    if isinstance(value, decimal.Decimal | float):
        return round(float(value), 6)
    if isinstance(value, dict):  # a MAP from DuckDB (pyarrow gives (key, value) pairs)
        value = list(value.items())
    if isinstance(value, list):
        if value and all(isinstance(v, tuple) for v in value):
            return tuple(sorted(value))
        return tuple(_norm(v) for v in value)
    return value


# Module ids are each sink's own (Spark executors, the local warehouse): rows are
# compared with ids replaced by content-hash prefixes (tests.conftest.hash_keyed).


def _spark_hashes(spark) -> dict[int, str]:
    rows = spark.sql("SELECT module_id, substr(content_hash, 1, 16) FROM modules").collect()
    return {r[0]: r[1] for r in rows}


def _spark_rows(df, hashes: dict[int, str]) -> list[tuple]:
    table = hash_keyed(df.toArrow(), hashes)
    return [tuple(_norm(v) for v in row.values()) for row in table.to_pylist()]


def _duckdb_rows(name: str, db, **params) -> list[tuple]:
    table = hash_keyed(bufferhouse.query(name, db=db, **params), module_hashes(db))
    return [tuple(_norm(v) for v in row.values()) for row in table.to_pylist()]


#: The queries whose Spark SQL needs a rewrite, plus the flagship: raise_error
#: (top-modules, by-source), slice/split (by-source), ordered list with NULLs
#: (recompiles), ordered string_agg (modules), lateral series (heap-timeline),
#: and the flagship (peak-buffers). test_export checks the others transpile.
SPARK_QUERIES = [
    "top-modules",
    "peak-buffers",
    "by-source",
    "recompiles",
    "modules",
    "heap-timeline",
]


def test_executors_parse_like_local_ingest_and_queries_agree(spark, warehouse):
    groups = bhs.module_groups(spark, INPUTS, partitions=2)
    parsed = groups.mapInArrow(bhs.parse_batches, bhs.PARSED_SCHEMA).localCheckpoint()
    # the executors' Arrow tables are the local ingest's rows, table by table
    decoded = bhs.decode_parsed(parsed.toArrow())
    parsed_hashes = dict(
        zip(
            decoded["modules"].column("module_id").to_pylist(),
            (h[:16] for h in decoded["modules"].column("content_hash").to_pylist()),
        )
    )
    local_hashes = module_hashes(warehouse)
    with duckdb.connect(str(warehouse), read_only=True) as con:
        for name, got in decoded.items():
            want = hash_keyed(con.sql(f'SELECT * FROM "{name}"').to_arrow_table(), local_hashes)
            want = [tuple(map(_norm, r.values())) for r in want.to_pylist()]
            rows = [
                tuple(map(_norm, r.values())) for r in hash_keyed(got, parsed_hashes).to_pylist()
            ]
            if name == "modules":  # the run is the ingest's, not the parser's
                want = [r[:2] + r[3:] for r in want]
                rows = [r[:2] + r[3:] for r in rows]
            assert sorted(rows, key=repr) == sorted(want, key=repr), name
    tables = {name: df.localCheckpoint() for name, df in bhs.parsed_tables(parsed).items()}
    bhs.register_tables(spark, tables)
    assert len(SPARK_QUERIES) >= 4
    hashes = _spark_hashes(spark)
    for name in SPARK_QUERIES:
        params = PARAMS.get(name, {})
        got = _spark_rows(bhs.query(spark, name, **params), hashes)
        assert got == _duckdb_rows(name, warehouse, **params), name


def test_spark_ingest_writes_a_dataset_attach_and_register_read(spark, warehouse, tmp_path):
    out = tmp_path / "dataset"
    groups = bhs.module_groups(spark, INPUTS, partitions=2)
    summary = bhs.ingest(groups, out, labels={"engine": "spark"})
    statuses = [r.status for r in summary.collect()]
    assert statuses.count("loaded") == 18
    assert len({r.run_id for r in summary.collect()}) == 2  # one run per task
    db = tmp_path / "views.duckdb"
    attach(out, db)
    for name in ("top-modules", "peak-buffers", "memory-spaces"):
        assert _duckdb_rows(name, db) == _duckdb_rows(name, warehouse), name
    again = bhs.ingest(groups, out)  # everything is there already
    assert {r.status for r in again.collect()} == {"present"}
    bhs.register(spark, out)
    hashes = _spark_hashes(spark)
    for name in ("top-modules", "categories", "recompiles"):
        assert _spark_rows(bhs.query(spark, name), hashes) == _duckdb_rows(name, warehouse), name
    labels = spark.sql("SELECT DISTINCT key, value FROM labels").collect()
    assert [tuple(r) for r in labels] == [("engine", "spark")]


def test_oom_tables_and_queries_on_spark(spark, oom_db, tmp_path):
    """OOM events exported to Parquet, read by Spark (one copy per event_hash): the oom-*
    queries answer as DuckDB does on the warehouse, the dump join included."""
    from bufferhouse.export import export_warehouse

    out = tmp_path / "ds"
    export_warehouse(out, db=oom_db)
    bhs.register(spark, out)
    assert spark.sql("SELECT count(*) FROM oom_events").collect()[0][0] == 16
    assert spark.sql("SELECT count(*) FROM oom_buffers").collect()[0][0] == 40
    hashes = _spark_hashes(spark)
    with pytest.raises(QueryError, match="cannot be expressed in spark"):
        bhs.query(spark, "oom-vs-peak")  # its analyzer runs out of heap on the pairing
    for name in ("oom-events", "oom-culprits", "oom-padding"):
        # event ids are the same in the export as in the warehouse (export copies them)
        got = _spark_rows(bhs.query(spark, name), hashes)
        want = _duckdb_rows(name, oom_db)
        assert want, name
        assert sorted(got, key=repr) == sorted(want, key=repr), name


def test_runtime_tables_and_queries_on_spark(spark, runtime_db, tmp_path):
    """Device memory profiles exported to Parquet, read by Spark (one copy per
    snapshot_hash): the runtime queries answer as DuckDB does on the warehouse."""
    from bufferhouse.export import export_warehouse
    from tests.conftest import event_keyed

    out = tmp_path / "ds"
    export_warehouse(out, db=runtime_db)
    bhs.register(spark, out)
    assert spark.sql("SELECT count(*) FROM runtime_snapshots").collect()[0][0] == 2
    params = {
        "live-memory": {},
        "live-by-source": {"key_by": "function"},
        "live-growth": {"before": "before.prof", "after": "after.prof"},
        "device-budget": {"snapshot": "after.prof", "capacity": "8KiB"},
    }
    for name, given in params.items():
        got = event_keyed(bhs.query(spark, name, **given).toArrow(), runtime_db)
        want = event_keyed(bufferhouse.query(name, db=runtime_db, **given), runtime_db)
        assert want.num_rows, name
        rows = [
            sorted((tuple(_norm(v) for v in r.values()) for r in t.to_pylist()), key=repr)
            for t in (got, want)
        ]
        assert rows[0] == rows[1], name


def test_read_dataset_puts_the_labels_of_every_copy_on_the_kept_one(spark, tmp_path):
    """Two runs stored a copy of module h1 and of event e1: read_dataset keeps the copy
    of the lowest run, and the labels of both copies on it, once each."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def put(table: str, run: int, id_: str, ids: list[int], **columns: list[str]) -> None:
        part = tmp_path / table / f"run_id={run}"
        part.mkdir(parents=True)
        pq.write_table(pa.table({id_: pa.array(ids, pa.int64()), **columns}), part / "p.parquet")

    put("modules", 1, "module_id", [10], content_hash=["h1"])
    put("modules", 2, "module_id", [20, 21], content_hash=["h1", "h2"])
    put("labels", 1, "module_id", [10, 10], key=["a", "x"], value=["1", "9"])
    put("labels", 2, "module_id", [20, 20, 21], key=["a", "b", "c"], value=["1", "2", "3"])
    put("oom_events", 1, "event_id", [5], event_hash=["e1"])
    put("oom_events", 2, "event_id", [7], event_hash=["e1"])
    put("oom_labels", 1, "event_id", [5], key=["k"], value=["v"])
    put("oom_labels", 2, "event_id", [7, 7], key=["k", "w"], value=["v", "u"])
    tables = bhs.read_dataset(spark, tmp_path)
    assert sorted(tuple(r) for r in tables["modules"].select("module_id").collect()) == [
        (10,),
        (21,),
    ]
    assert sorted(tuple(r) for r in tables["labels"].collect()) == [
        (10, "a", "1"),
        (10, "b", "2"),
        (10, "x", "9"),
        (21, "c", "3"),
    ]
    assert sorted(tuple(r) for r in tables["oom_labels"].collect()) == [
        (5, "k", "v"),
        (5, "w", "u"),
    ]


def test_spread_keeps_a_profiles_programs_in_one_slice_where_slices_stay_even():
    """Without profiles, spread slices as Spark's parallelize does; a profile's programs
    go to one slice unless there are more than a slice's share, then in even pieces."""
    from types import SimpleNamespace

    from bufferhouse.spark.driver import spread

    def groups(*kinds: str) -> list:
        """One group per letter: '-' a text dump, any other letter a program of that profile."""
        return [SimpleNamespace(xplane=None if k == "-" else k, n=i) for i, k in enumerate(kinds)]

    def shape(slices: list[list]) -> list[str]:
        return ["".join(g.xplane or "-" for g in s) for s in slices]

    for size in range(12):
        for n in (1, 2, 3, 5):
            plain = groups(*"-" * size)
            got = spread(plain, n)
            assert got == [plain[i * size // n : (i + 1) * size // n] for i in range(n)]
    # parallelize would cut profile a (4 | 4): it goes where its middle program would
    assert shape(spread(groups(*"---aaa--"), 2)) == ["---", "aaa--"]
    assert shape(spread(groups(*"--aaa---"), 2)) == ["--aaa", "---"]
    assert shape(spread(groups(*"-aab-bbb"), 2)) == ["-aab", "-bbb"]
    # more programs than a share (4): two even pieces, one per slice, not 7 | 1
    assert shape(spread(groups(*"aaaaaaa-"), 2)) == ["aaaa", "aaa-"]
    # every group once, in order
    mixed = groups(*"-aaaaaaaaaab--cc-dddd-")
    for n in range(1, 8):
        assert [g for s in spread(mixed, n) for g in s] == mixed


def _counting_opens(func, path, log):
    """A mapInArrow function: `func`, with every open of `path` in the Python worker that
    runs it appended to the file `log` (the workers are other processes)."""
    target, log = os.path.realpath(path), str(log)

    def counted(batches):
        import builtins

        real = builtins.open

        def counting(file, *args, **kwargs):
            if isinstance(file, str | os.PathLike) and os.path.realpath(file) == target:
                with real(log, "a") as f:
                    f.write(f"{file}\n")
            return real(file, *args, **kwargs)

        builtins.open = counting
        try:
            yield from func(batches)
        finally:
            builtins.open = real

    return counted


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gz"])
def test_spark_reads_a_profile_once_whatever_its_programs(spark, tmp_path, monkeypatch, gz):
    """A profile of 3 programs beside 5 text dumps in 2 partitions: discover (on the driver)
    lists its programs in one pass, the task that gets them reads their HloProtos in one
    more, in ingest and in parse_batches alike, not one pass per program."""
    from bufferhouse.spark import driver
    from bufferhouse.spark.executor import write_batches
    from tests.parse.proto.test_proto import _count_opens, _profile_of

    data, names = _profile_of(3)
    path = tmp_path / "p" / ("host.xplane.pb.gz" if gz else "host.xplane.pb")
    path.parent.mkdir()
    path.write_bytes(gzip.compress(data) if gz else data)
    log = tmp_path / "executor-opens.txt"
    log.touch()
    on_driver = _count_opens(monkeypatch, path)
    groups = bhs.module_groups(spark, [SAMPLES, path.parent], partitions=2)
    assert len(on_driver) == 1  # discover

    def counted_write(*args, **kwargs):
        return _counting_opens(write_batches(*args, **kwargs), path, log)

    monkeypatch.setattr(driver, "write_batches", counted_write)
    summary = bhs.ingest(groups, tmp_path / "dataset").collect()
    assert [r.status for r in summary].count("loaded") == 8
    loaded = sorted(r.stem for r in summary if r.status == "loaded" and "#" in r.stem)
    assert loaded == sorted(f"{path.name}#{n}" for n in names)
    opens = log.read_text().splitlines()
    assert len(opens) == 1, f"3 programs: the executors opened the profile {len(opens)} times"

    log.write_text("")
    parse = _counting_opens(bhs.parse_batches, path, log)
    parsed = groups.mapInArrow(parse, bhs.PARSED_SCHEMA).toArrow()
    decoded = bhs.decode_parsed(parsed)
    stems = decoded["modules"].column("file_stem").to_pylist()
    assert sorted(s for s in stems if "#" in s) == sorted(f"{path.name}#{n}" for n in names)
    opens = log.read_text().splitlines()
    assert len(opens) == 1, f"3 programs: the executors opened the profile {len(opens)} times"
    assert len(on_driver) == 1


def test_module_targets_on_spark_as_in_the_warehouse(spark, tmp_path):
    """The executors read each module's target files as ingest does (module_targets: the
    decoded rows, the dataset bhs.ingest writes), read_dataset keeps the kept copy's row
    only, and `fits` in Spark SQL answers as DuckDB on the warehouse (issue 38)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sweep = DATA / "jax012" / "sweep"
    inputs = {
        sweep / "v5e_1x1" / "batch=262144": "v5e:1x1",
        sweep / "gpu_h100" / "batch=262144": "gpu:h100",
    }
    db = tmp_path / "w.duckdb"
    out = tmp_path / "ds"
    for directory, target in inputs.items():
        labels = {"topology": target, "batch": "262144"}
        assert bufferhouse.ingest([directory], db=db, jobs=1, labels=labels).ok
        bhs.ingest(bhs.module_groups(spark, [directory], partitions=1), out, labels=labels)
    want = sorted(_duckdb_table_rows(db, "module_targets"), key=repr)
    assert len(want) == 2
    groups = bhs.module_groups(spark, list(inputs), partitions=2)
    parsed = groups.mapInArrow(bhs.parse_batches, bhs.PARSED_SCHEMA).localCheckpoint()
    decoded = bhs.decode_parsed(parsed.toArrow())
    hashes = dict(
        zip(
            decoded["modules"].column("module_id").to_pylist(),
            (h[:16] for h in decoded["modules"].column("content_hash").to_pylist()),
        )
    )
    got = hash_keyed(decoded["module_targets"], hashes).to_pylist()
    assert sorted((tuple(map(_norm, r.values())) for r in got), key=repr) == want
    bhs.register(spark, out)
    spark_rows = _spark_rows(spark.table("module_targets"), _spark_hashes(spark))
    assert sorted(spark_rows, key=repr) == want
    fits = _spark_rows(bhs.query(spark, "fits"), {})
    assert fits == _duckdb_rows("fits", db) and len(fits) == 2
    assert {r[6] for r in fits} == {"dump", "table"}  # capacity_source: each target's

    # two runs hold a copy of module h1: its target row is the kept copy's
    root = tmp_path / "copies"

    def put(table: str, run: int, ids: list[int], **columns: list) -> None:
        part = root / table / f"run_id={run}"
        part.mkdir(parents=True)
        data = pa.table({"module_id": pa.array(ids, pa.int64()), **columns})
        pq.write_table(data, part / "p.parquet")

    put("modules", 1, [10], content_hash=["h1"])
    put("modules", 2, [20], content_hash=["h1"])
    put("module_targets", 1, [10], device_kind=["TPU v5 lite"])
    put("module_targets", 2, [20], device_kind=["TPU v6 lite"])
    tables = bhs.read_dataset(spark, root)
    rows = tables["module_targets"].select("module_id", "device_kind").collect()
    assert [tuple(r) for r in rows] == [(10, "TPU v5 lite")]


def _duckdb_table_rows(db, name: str) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        table = hash_keyed(con.sql(f'SELECT * FROM "{name}"').to_arrow_table(), module_hashes(db))
    return [tuple(_norm(v) for v in r.values()) for r in table.to_pylist()]
