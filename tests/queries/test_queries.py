"""Canned queries: documented, valid SQL against the declared schema, runnable on
an empty warehouse, and stable on the fixtures (golden CSVs)."""

from __future__ import annotations

import re

import duckdb
import pytest
import sqlglot
from sqlglot.optimizer.qualify import qualify

import bufferhouse
from bufferhouse import queries
from bufferhouse.errors import QueryError, UnknownModuleError, UnknownSnapshotError
from bufferhouse.queries.sizes import size_macro_sql
from bufferhouse.render import render_to_string
from bufferhouse.schema import TABLES, sqlglot_schema
from bufferhouse.schema.warehouse import ensure_schema, open_connection
from tests.conftest import GOLDEN, ROOT, event_keyed, hash_keyed, module_hashes

ALL = queries.queries()
IDS = [q.name for q in ALL]
#: Parameters for the golden run of queries that need one.
GOLDEN_PARAMS = {
    "heap-timeline": {"module": "003_186bba49641ec33a", "space": 0},
    "arena": {"module": "003_186bba49641ec33a", "allocation": None},
    # text samples carry no trace: the golden is the header (tests/parse/proto/test_proto.py checks rows)
    "heap-trace": {"module": "003_186bba49641ec33a"},
    "live-growth": {"before": "before.prof", "after": "after.prof"},
    "device-budget": {"snapshot": "after.prof", "capacity": "8KiB"},
}
#: Queries over device memory profiles: their goldens read the jax run of tests/data/runtime.
RUNTIME_QUERIES = ("live-memory", "live-by-source", "live-growth", "device-budget")


def _golden_db(name: str, samples_db, oom_db, runtime_db):
    if name.startswith("oom-"):  # OOM events come from logs
        return oom_db
    return runtime_db if name in RUNTIME_QUERIES else samples_db


def _schema_with_views() -> dict[str, dict[str, str]]:
    schema = sqlglot_schema()
    for v in queries.views():
        schema[v.name] = {c: "VARCHAR" for c, _ in v.columns}
    return schema


def test_there_are_queries_and_views():
    assert len(ALL) >= 11
    assert {"module_keys", "value_facts", "heap_peak_values"} <= {v.name for v in queries.views()}


def test_a_stray_header_comment_is_an_error_and_an_indented_one_continues():
    head = "-- name: q\n-- description: One.\n-- note: Starts here\n"
    q = queries.parse_query_file(head + "--   and goes on.\nSELECT 1\n", "q.sql")
    assert q.notes == ("Starts here and goes on.",)
    with pytest.raises(QueryError, match=r"q.sql:4: header line is neither a field"):
        queries.parse_query_file(head + "-- derived: what it reads\nSELECT 1\n", "q.sql")


@pytest.mark.parametrize(
    "query", ALL + queries.views(), ids=IDS + [v.name for v in queries.views()]
)
def test_header_documents_everything(query):
    assert query.description.endswith("."), query.name
    assert query.columns, f"{query.name}: no '-- column' lines"
    for name, doc in query.columns:
        assert doc.strip(), f"{query.name}: column {name} undocumented"
    for p in query.params:
        assert p.doc.strip() and p.type in ("VARCHAR", "INTEGER", "BIGINT", "DOUBLE", "BOOLEAN")


@pytest.mark.parametrize(
    "query", ALL + queries.views(), ids=IDS + [v.name for v in queries.views()]
)
def test_parses_and_columns_resolve(query):
    """sqlglot parses the SQL as DuckDB and every column resolves against the declared schema."""
    tree = sqlglot.parse_one(query.sql, read="duckdb")
    qualify(tree, schema=_schema_with_views(), dialect="duckdb", validate_qualify_columns=True)


@pytest.mark.parametrize("query", ALL, ids=IDS)
def test_params_do_not_shadow_columns(query):
    """In a bh_* macro a parameter named like a column would silently replace it."""
    columns = {c.name for t in TABLES for c in t.columns}
    columns |= {c for v in queries.views() for c, _ in v.columns}
    columns |= {c for q in ALL for c, _ in q.columns}
    assert not {p.name for p in query.params} & columns


def test_sql_layout_is_mechanical():
    for q in ALL + queries.views():
        for n, line in enumerate(q.sql.splitlines(), 1):
            assert len(line) < 80, f"{q.source}:{n} is {len(line)} characters"


@pytest.fixture(scope="module")
def empty_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("empty") / "empty.duckdb"
    con = open_connection(path, read_only=False)
    ensure_schema(con, str(path))
    queries.install_macros(con)
    con.close()
    return path


@pytest.mark.parametrize("query", ALL, ids=IDS)
def test_runs_on_empty_warehouse(query, empty_db):
    params = GOLDEN_PARAMS.get(query.name, {})
    if "module" in params:  # no module to select: a typo as far as the query can tell
        with pytest.raises(UnknownModuleError, match="no module matches"):
            bufferhouse.query(query.name, db=empty_db, **params)
        params = {k: v for k, v in params.items() if k != "module"}
        if query.name in ("arena", "heap-timeline"):  # they need one
            return
    if set(params) & set(queries.SNAPSHOT_PARAMS):  # no snapshot to name either: a typo
        with pytest.raises(UnknownSnapshotError, match=r"no snapshot matches '\w+\.prof'"):
            bufferhouse.query(query.name, db=empty_db, **params)
        params = {k: v for k, v in params.items() if k not in queries.SNAPSHOT_PARAMS}
    table = bufferhouse.query(query.name, db=empty_db, **params)
    assert table.num_rows == 0
    assert table.column_names == [c for c, _ in query.columns]


@pytest.mark.parametrize("query", ALL, ids=IDS)
def test_golden(query, samples_db, oom_db, runtime_db, update_golden):
    """A change of any canned query's output shows up as a diff of tests/golden/.

    A golden is the code's own output, so it guards against change, not error:
    `pytest --update-golden` rewrites it, and the reviewer reads `git diff
    tests/golden/` before committing, row by row, with the reason for every
    changed figure in the commit message. Whether the figures are right is
    checked elsewhere against numbers the code did not compute: XLA's printed
    totals and peak lists (test_ingest_oracles), memory_analysis()
    (test_xla_peak, test_proto), recomputations in SQL from the raw rows
    (test_check, test_derived), and the numbers printed in the OOM fixtures
    (test_oom)."""
    db = _golden_db(query.name, samples_db, oom_db, runtime_db)
    table = bufferhouse.query(query.name, db=db, **GOLDEN_PARAMS.get(query.name, {}))
    assert table.column_names == [c for c, _ in query.columns]
    text = render_to_string(event_keyed(hash_keyed(table, module_hashes(db)), db), "csv")
    path = GOLDEN / f"{query.name}.csv"
    if update_golden:
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no golden file {path}; run pytest --update-golden and read the diff"
    assert text == path.read_text(), (
        f"{query.name} output changed; see git diff after --update-golden"
    )


@pytest.mark.parametrize("query", ALL, ids=IDS)
def test_macro_equals_python(query, samples_db, oom_db, runtime_db):
    """The bh_* macro installed in the file returns the rows `bufferhouse query` returns."""
    params = GOLDEN_PARAMS.get(query.name, {})
    db = _golden_db(query.name, samples_db, oom_db, runtime_db)
    expected = bufferhouse.query(query.name, db=db, **params)
    args = ", ".join(f"{k} := ?" for k in params)
    with duckdb.connect(str(db), read_only=True) as con:
        got = con.execute(f"FROM {query.macro_name}({args})", list(params.values())).fetchall()
    assert got == [tuple(r.values()) for r in expected.to_pylist()]


def test_unknown_query_lists_valid_ones():
    with pytest.raises(QueryError, match=r"valid queries: .*peak-buffers"):
        queries.get("peak-buffer")


def test_unknown_parameter_lists_valid_ones(samples_db):
    with pytest.raises(QueryError, match="valid parameters: module, label"):
        bufferhouse.query("modules", db=samples_db, modul="x")


def test_bad_parameter_value(samples_db):
    with pytest.raises(QueryError, match="wants an integer"):
        bufferhouse.query("top-modules", db=samples_db, top="ten")
    with pytest.raises(QueryError, match="peak wants one of heap, logical, total, xla, got 'nope'"):
        bufferhouse.query("top-modules", db=samples_db, peak="nope")


#: A value each declared parameter refuses, as text (--param) and as a Python value,
#: with what the message must say. Every parameter of every canned query is here.
_REFUSED = {
    ("INTEGER", ">= 0"): [
        ("99999999999999999999", "from 0 to 2147483647, got 99999999999999999999"),
        ("-5", "from 0 to 2147483647, got -5"),
        ("2147483648", "from 0 to 2147483647"),
        ("1.5", "wants an integer, got '1.5'"),
    ],
    ("INTEGER", ">= 1"): [("0", "from 1 to 2147483647, got 0"), ("x", "wants an integer")],
    ("VARCHAR", ""): [],
    ("BOOLEAN", ""): [("maybe", "wants true or false")],
    ("DOUBLE", ">= 0"): [
        ("-5", "wants a finite number at least 0, got -5.0"),
        ("nan", "wants a finite number at least 0, got nan"),
        ("1e999", "wants a finite number at least 0, got inf"),
        ("x", "wants a number, got 'x'"),
    ],
    ("VARCHAR", "in"): [("nope", "wants one of")],
}


def _refused(p: queries.Param) -> list[tuple[str, str]]:
    return _REFUSED[(p.type, "in" if p.choices else p.constraint)]


_PARAMS = [(q, p) for q in ALL for p in q.params]


@pytest.mark.parametrize(
    ("query", "param"), _PARAMS, ids=[f"{q.name}:{p.name}" for q, p in _PARAMS]
)
def test_every_parameter_is_validated_with_the_tools_message(query, param):
    """No engine error (Conversion Error, LIMIT cannot be negative) reaches the user."""
    for text, message in _refused(param):
        with pytest.raises(
            QueryError, match=re.escape(f"parameter {param.name} ") + ".*" + re.escape(message)
        ):
            query.bind({param.name: text})
        if param.type != "VARCHAR":
            try:
                value = int(text)
            except ValueError:
                continue
            with pytest.raises(QueryError, match=re.escape(message.split(", got")[0])):
                query.bind({param.name: value})
    query.bind({param.name: None})  # NULL is every parameter's "not given"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["top-modules", "-p", "top=99999999999999999999"], "from 0 to 2147483647"),
        (["top-modules", "-p", "top=-5"], "parameter top wants an integer from 0"),
        (["peak-buffers", "-p", "space=-1"], "parameter space wants an integer from 0"),
        (["by-source", "-p", "key_by=file"], "parameter key_by wants one of source, op_name"),
        (["recompiles", "-p", "min_modules=0"], "parameter min_modules wants an integer from 1"),
    ],
)
def test_cli_parameter_errors_are_usage_errors(args, message, samples_db):
    from click.testing import CliRunner

    from bufferhouse.cli import main

    result = CliRunner().invoke(main, ["query", *args, "--db", str(samples_db)])
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert "Error:" not in result.stderr.replace("bufferhouse: error:", "")  # no engine error


def test_parameters_are_data_not_sql(samples_db):
    hostile = "x'); DROP TABLE modules; --"
    with pytest.raises(UnknownModuleError, match="no module matches"):
        bufferhouse.query("modules", db=samples_db, module=hostile)
    assert bufferhouse.query("modules", db=samples_db).num_rows == 5


def test_module_selector_forms(samples_db):
    full = bufferhouse.query("modules", db=samples_db, module="003_186bba49641ec33a")
    module_id = full.column("module_id")[0].as_py()
    by_id = bufferhouse.query("modules", db=samples_db, module=str(module_id))
    assert by_id.to_pylist() == full.to_pylist()


# --- the module selector: module_keys' rule, as each query writes it ----------

MODULE_SELECTOR = queries.MODULE_SELECTOR
MODULE_QUERIES = [q for q in ALL if "module" in {p.name for p in q.params}]


def _squeezed(sql: str) -> str:
    """Without whitespace and table aliases; the NULL check of queries that need a module
    (coalesce($module, error(...))) read as $module."""
    sql = re.sub(r"coalesce\(\s*\$module,\s*error\('[^']*'\)\s*\)", "$module", sql)
    sql = re.sub(r"\b\w+\.(module_name|file_stem|module_id|content_hash)\b", r"\1", sql)
    return re.sub(r"\s+", "", sql)


@pytest.mark.parametrize("query", MODULE_QUERIES, ids=[q.name for q in MODULE_QUERIES])
def test_module_parameter_goes_through_the_selector(query):
    assert _squeezed(MODULE_SELECTOR) in _squeezed(query.sql)
    assert "module_keys" not in query.sql


def _selector_against_module_keys(con: duckdb.DuckDBPyConnection, keys: list) -> None:
    for key in keys:
        params = {"module": key}
        want = con.execute(
            "SELECT module_id FROM module_keys WHERE key = $module ORDER BY 1", params
        ).fetchall()
        got = con.execute(
            f"SELECT module_id FROM modules WHERE {MODULE_SELECTOR} ORDER BY 1", params
        ).fetchall()
        assert got == want, key


def test_the_selector_selects_what_module_keys_does(fleet_db):
    with duckdb.connect(str(fleet_db), read_only=True) as con:
        queries.use_package_views(con)
        keys = [r[0] for r in con.execute("SELECT DISTINCT key FROM module_keys").fetchall()]
        module_id, content_hash = con.execute(
            "SELECT module_id, content_hash FROM modules ORDER BY module_id LIMIT 1"
        ).fetchone()
        text = str(module_id)
        near = [" " + text, "+" + text, "0" + text, text + "0", "9" * 25, "", "nope"]
        near += [content_hash, content_hash[:11], content_hash[:12].upper()]
        _selector_against_module_keys(con, [*keys, None, *near])


def test_the_selector_where_keys_collide():
    """A name that is another module's id or hash prefix selects both; negative ids."""
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE modules (module_id BIGINT, module_name VARCHAR, file_stem VARCHAR,"
        " content_hash VARCHAR)"
    )
    con.execute(
        "INSERT INTO modules VALUES (42, 'jit_a', 'module_1.jit_a', 'a85b023784df0123'),"
        " (-7, '42', 'a85b023784df', 'ffffffffffff9999'), (9, NULL, NULL, '000000000000'),"
        " (10, 'jit_a', 'jit_a', '0123456789ab')"
    )
    con.execute(next(v for v in queries.views() if v.name == "module_keys").view_sql())
    con.execute(queries.selector_macro_sql())
    keys = ["42", "-7", "a85b023784df", "jit_a", "000000000000", "9", "10", "x", None]
    _selector_against_module_keys(con, keys)


@pytest.mark.parametrize("query", MODULE_QUERIES, ids=[q.name for q in MODULE_QUERIES])
def test_every_key_form_selects_the_module(query, samples_db):
    """The module's file stem, id and hash prefix give the same rows."""
    stem = GOLDEN_PARAMS["heap-timeline"]["module"]
    with duckdb.connect(str(samples_db), read_only=True) as con:
        module_id, content_hash = con.execute(
            "SELECT module_id, content_hash FROM modules WHERE file_stem = ?", [stem]
        ).fetchone()
    results = [
        bufferhouse.query(query.name, db=samples_db, module=key).to_pylist()
        for key in (stem, str(module_id), content_hash[:12])
    ]
    assert results[0] == results[1] == results[2]
    # samples: no trace, no device memory profile, no OOM message (oom-vs-peak's key
    # forms: tests/queries/test_oom_pairing.py)
    assert results[0] or query.name in ("padding", "heap-trace", "device-budget", "oom-vs-peak")


def test_top_modules_ranks_by_chosen_peak(samples_db):
    heap = bufferhouse.query("top-modules", db=samples_db, top=2)
    logical = bufferhouse.query("top-modules", db=samples_db, top=5, peak="logical")
    assert heap.num_rows == 2
    values = logical.column("peak_bytes").to_pylist()
    assert values == sorted(values, reverse=True)
    assert values == sorted(logical.column("logical_peak_bytes").to_pylist(), reverse=True)


def test_docs_are_current():

    from bufferhouse.docs import generated

    docs = ROOT / "docs"
    for name, text in generated().items():
        assert (docs / name).read_text() == text, (
            f"docs/{name} is stale: python -m bufferhouse.docs"
        )


# --- the queries read scoped base tables; the views define the same rows -------

_MODULE_FILTER = (
    "($module IS NULL OR module_id IN (SELECT module_id FROM module_keys WHERE key = $module))"
)
_SOURCE = "source_file || ':' || CAST(source_line AS VARCHAR)"
#: Each query that reads base tables through per-module CTEs, as the plain
#: filter over its view (what it computed before it was scoped for speed).
THROUGH_VIEWS = {
    "largest-values": f"""
        SELECT module_id, module_name, value_id, instruction, shape_index, category, color,
          size, logical_bytes, shape, opcode, op_name, {_SOURCE} AS source
        FROM value_facts WHERE {_MODULE_FILTER}
        ORDER BY size DESC, module_name, module_id, value_id LIMIT $top""",
    "padding": f"""
        SELECT module_id, module_name, value_id, instruction, shape_index, category, color,
          shape, size, logical_bytes, padding_bytes,
          round(size / nullif(logical_bytes, 0), 2) AS expansion, op_name
        FROM value_facts WHERE padding_bytes > 0 AND {_MODULE_FILTER}
        ORDER BY padding_bytes DESC, module_name, module_id, value_id LIMIT $top""",
    "padding-by-module": f"""
        WITH slices AS (
          SELECT module_id, module_name, color, allocation_index, byte_offset, size,
            max(logical_bytes) AS logical_bytes
          FROM value_facts WHERE {_MODULE_FILTER}
          GROUP BY module_id, module_name, color, allocation_index, byte_offset, size)
        SELECT module_id, module_name, color, count(*) AS slices,
          CAST(sum(size) AS BIGINT) AS assigned_bytes,
          CAST(sum(logical_bytes) AS BIGINT) AS logical_bytes,
          CAST(sum(size) - sum(logical_bytes) AS BIGINT) AS padding_bytes,
          round(100.0 * (sum(size) - sum(logical_bytes)) / nullif(sum(size), 0), 2)
            AS padding_pct
        FROM slices GROUP BY module_id, module_name, color
        ORDER BY padding_bytes DESC, module_name, module_id, color""",
    "peak-buffers": """
        SELECT h.module_id, h.module_name, h.peak_time, h.value_id, h.instruction,
          h.shape_index, h.allocation_index, h.category, h.size, h.logical_bytes,
          h.padding_bytes, h.shape, h.opcode, h.op_name,
          h.source_file || ':' || CAST(h.source_line AS VARCHAR) AS source, h.live_at_peak,
          p.peak_source
        FROM heap_peak_values AS h
        JOIN heap_peaks AS p USING (module_id, color)
        WHERE color = $space AND ($module IS NULL
          OR h.module_id IN (SELECT module_id FROM module_keys WHERE key = $module))
        ORDER BY size DESC, module_name, module_id, value_id LIMIT $top""",
    "by-source": f"""
        SELECT coalesce(key, '(unknown)') AS key, count(DISTINCT module_id) AS modules,
          count(*) AS buffers, CAST(sum(size) AS BIGINT) AS bytes,
          CAST(sum(logical_bytes) AS BIGINT) AS logical_bytes
        FROM (
          SELECT module_id, size, logical_bytes,
            CASE $key_by WHEN 'source' THEN {_SOURCE}
              ELSE array_to_string(list_slice(string_split(op_name, '/'), 1, 2), '/') END AS key
          FROM heap_peak_values WHERE color = $space AND {_MODULE_FILTER})
        GROUP BY coalesce(key, '(unknown)') ORDER BY bytes DESC, key""",
}


@pytest.mark.parametrize("name", sorted(THROUGH_VIEWS))
@pytest.mark.slow
def test_scoped_queries_return_the_rows_of_the_views(name, fleet_db):
    """Every module name (names select several modules), every module id, and the
    fleet: the query and its view formulation return the same rows in the same order."""
    with duckdb.connect(str(fleet_db), read_only=True) as con:
        queries.use_package_views(con)
        names = con.execute("SELECT DISTINCT module_name FROM modules ORDER BY 1").fetchall()
        ids = con.execute("SELECT module_id FROM modules ORDER BY module_id").fetchall()
        keys = [None] + [r[0] for r in names] + [str(r[0]) for r in ids[::15]]
        q = queries.get(name)
        view_sql = THROUGH_VIEWS[name]
        for n, key in enumerate(keys):
            for space in (0, 1) if "space" in view_sql else (0,):
                given = {"module": key, "space": space, "top": 10**6}
                if name == "by-source":
                    given |= {"key_by": ("source", "op_name")[n % 2], "name_depth": 2}
                values = q.bind({k: v for k, v in given.items() if k in q.used_params()})
                want = con.execute(
                    view_sql,
                    {
                        k: given[k]
                        for k in ("module", "space", "top", "key_by")
                        if f"${k}" in view_sql
                    },
                ).fetchall()
                got = con.execute(q.sql, {k: values[k] for k in q.used_params()}).fetchall()
                assert got == want, (name, key, space)


@pytest.mark.slow
def test_largest_values_cut_through_ties_like_the_view(fleet_db):
    """Small `top`s cut through runs of equal sizes spread over several modules
    (one shape compiled into many modules), where module names decide which
    rows stay: the query keeps the rows the view's plain ORDER BY ... LIMIT keeps,
    fleet-wide and for the name that selects the most modules."""
    with duckdb.connect(str(fleet_db), read_only=True) as con:
        queries.use_package_views(con)
        (shared_name,) = con.execute(
            "SELECT module_name FROM modules GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1"
        ).fetchone()
        q = queries.get("largest-values")
        cut_ties = 0
        for key in (None, shared_name):
            for top in range(0, 121):
                params = {"module": key, "top": top}
                want = con.execute(THROUGH_VIEWS["largest-values"], params).fetchall()
                got = con.execute(q.sql, params).fetchall()
                assert got == want, (key, top)
                longer = con.execute(
                    THROUGH_VIEWS["largest-values"], {"module": key, "top": top + 1}
                ).fetchall()
                # the next row ties with the last one kept, from another module
                if want and len(longer) > top and longer[top][7] == want[-1][7]:
                    cut_ties += longer[top][0] != want[-1][0]
        assert cut_ties > 10


def test_fragmentation_top_keeps_the_first_rows_of_all(fleet_db):
    """`top` cuts the list where the full list (top NULL) has those rows, ties included."""
    everything = bufferhouse.query("fragmentation", db=fleet_db, top=None).to_pylist()
    assert len(everything) > 120  # more than the default keeps
    default = bufferhouse.query("fragmentation", db=fleet_db).to_pylist()
    assert default == everything[:100]
    for top in (0, 1, 7, 40):
        got = bufferhouse.query("fragmentation", db=fleet_db, top=top).to_pylist()
        assert got == everything[:top], top


def test_null_as_text_is_null_for_numbers_only(samples_db):
    """`--param top=NULL` asks for every row; a module named NULL stays a name."""
    q = queries.get("fragmentation")
    assert q.bind({"top": "NULL"})["top"] is None
    assert q.bind({"top": " null "})["top"] is None
    assert q.bind({"module": "NULL"})["module"] == "NULL"
    everything = bufferhouse.query("fragmentation", db=samples_db, top=None)
    assert bufferhouse.query("fragmentation", db=samples_db, top="NULL") == everything
    with pytest.raises(UnknownModuleError, match="no module matches 'NULL'"):
        bufferhouse.query("fragmentation", db=samples_db, module="NULL")


@pytest.mark.parametrize("name", ["arena", "heap-timeline"])
def test_a_query_that_needs_a_module_says_so(name, samples_db):
    with pytest.raises(QueryError, match=f"{name} needs a module"):
        bufferhouse.query(name, db=samples_db)


@pytest.mark.parametrize("query", MODULE_QUERIES, ids=[q.name for q in MODULE_QUERIES])
def test_an_unknown_module_is_an_error_with_suggestions(query, samples_db):
    """A typo is not an empty result: every query with a module parameter says so."""
    with pytest.raises(UnknownModuleError, match=r"did you mean 003_186bba49641ec33a\?"):
        bufferhouse.query(query.name, db=samples_db, module="003_186bba49641ec33b")


@pytest.mark.parametrize("name", ["arena", "heap-timeline"])
def test_a_macro_that_needs_a_module_rejects_an_unknown_one(name, samples_db):
    """In the duckdb shell too, for the queries that need a module."""
    macro = queries.get(name).macro_name
    with duckdb.connect(str(samples_db), read_only=True) as con:
        with pytest.raises(duckdb.Error, match=f"{name}: no module matches 'jit_trian'"):
            con.sql(f"FROM {macro}(module := 'jit_trian')").fetchall()
        assert con.sql(f"FROM {macro}(module := '003_186bba49641ec33a')").fetchall()


def test_every_size_parameter_is_read_by_the_one_macro():
    """A size with units (16GiB) has one rule, bh_size_bytes (queries/sizes.py): every
    query's capacity parameter goes through it, and no query spells a unit's bytes."""
    from bufferhouse.queries.sizes import SIZE_NAME

    sized = [q for q in ALL if any(p.name == "capacity" for p in q.params)]
    assert {q.name for q in sized} >= {"fits", "device-budget"}
    for q in ALL:
        calls = q.sql.count(f"{SIZE_NAME}(")
        assert calls == (1 if q in sized else 0), q.name
        if q in sized:
            assert f"{SIZE_NAME}($capacity, 'capacity')" in q.sql, q.name
        assert "1073741824" not in q.sql and "1048576" not in q.sql, q.name


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("16GiB", 16 << 30),
        ("16Gi", 16 << 30),
        ("16 g", 16 << 30),
        ("80GB", 80 * 10**9),
        ("1.5 TiB", 3 << 39),
        ("1000", 1000),
        ("512B", 512),
        ("8KiB", 8192),
        (None, None),
    ],
)
def test_the_size_macro(text, expected):
    con = duckdb.connect()
    con.execute(size_macro_sql(temp=True))
    assert con.execute("SELECT bh_size_bytes(?, 'capacity')", [text]).fetchall() == [(expected,)]


@pytest.mark.parametrize("text", ["", " ", "lots", "16 GiBs", "1.2.3GB", "-1GB", "GiB"])
def test_the_size_macro_refuses_what_is_no_size(text):
    con = duckdb.connect()
    con.execute(size_macro_sql(temp=True))
    with pytest.raises(duckdb.Error, match="parameter capacity wants a size like 16GiB"):
        con.execute("SELECT bh_size_bytes(?, 'capacity')", [text]).fetchall()
