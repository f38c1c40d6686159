"""Canned queries in the SQL of other engines: Spark, Trino, BigQuery, Postgres.

A canned query is DuckDB SQL over the warehouse tables and the package's
views, with `$name` parameters. For another engine it becomes one
self-contained statement:

- the views it uses (and the views they use) are inlined as CTEs in front of
  the query's own, with the views' inner CTEs renamed `<view>__<cte>`, and
  the module selector macro is written out where it is called; no
  CREATE VIEW or macro is needed, so it runs with read-only rights on a catalog that
  holds only the tables (a Parquet export registered as tables);
- parameters stay parameters, in the engine's own marker: Spark `:name`
  (`spark.sql(text, args={...})`), BigQuery `@name` (query parameters),
  Postgres `%(name)s` (psycopg; cast to the declared type), Trino `?`
  (positional: `EXECUTE ... USING`, in the order `Transpiled.params` lists,
  repeats included);
- DuckDB functions sqlglot passes through untouched are rewritten where the
  engine has an equivalent (error -> raise_error / fail, list_slice -> slice,
  range -> an unnested series, TRY_CAST -> a guarded CAST in Postgres, ...).
  Where it has none, `transpile` raises
  QueryError naming the construct instead of returning SQL that would fail.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ErrorLevel, ParseError, UnsupportedError

from bufferhouse import queries
from bufferhouse.errors import QueryError
from bufferhouse.queries.helpers import HELPER_NAME, HELPER_PARAMS, helper_body
from bufferhouse.queries.sizes import SIZE_NAME, SIZE_PARAMS, size_body
from bufferhouse.schema.macros import MACROS, PEAK_FIRST

DIALECTS: tuple[str, ...] = ("spark", "trino", "bigquery", "postgres")

#: How each engine binds the parameters of the printed SQL.
BINDING: dict[str, str] = {
    "spark": "named markers :name; bind with spark.sql(text, args={'name': value})",
    "trino": "positional markers ?; PREPARE q FROM <text>; EXECUTE q USING <values in order>",
    "bigquery": "named query parameters @name",
    "postgres": "psycopg named parameters %(name)s; cursor.execute(text, {'name': value})",
}

#: Functions each engine has (ours to emit, or DuckDB's of the same name and meaning).
_KNOWN_FUNCTIONS: dict[str, set[str]] = {
    "spark": {"raise_error", "slice", "array_repeat"},
    "trino": {"fail", "slice"},
    "bigquery": {"error"},
    "postgres": set(),
}


@dataclass(frozen=True)
class Transpiled:
    name: str
    dialect: str
    sql: str
    params: tuple[str, ...]  # marker order (positional dialects repeat names)

    def text(self) -> str:
        """The SQL with a comment header saying how to bind the parameters."""
        q = queries.get(self.name)
        lines = [f"-- {q.name} ({self.dialect}): {q.description}"]
        if q.params:
            lines.append(f"-- parameters: {BINDING[self.dialect]}")
            for p in q.params:
                lines.append(f"--   {p.name} {p.type} (default {p.default}): {p.doc}")
            if self.dialect == "trino":
                lines.append(f"--   order of ?: {', '.join(self.params)}")
        return "\n".join(lines) + "\n" + self.sql.rstrip().rstrip(";") + ";\n"


def _unsupported(name: str, dialect: str, construct: str, why: str) -> QueryError:
    return QueryError(f"query {name} cannot be expressed in {dialect} SQL: {construct} -- {why}")


def _inline_views(name: str, tree: exp.Expression) -> exp.Expression:
    """Prefix the query with its views as CTEs, dependencies first."""
    views = {v.name: v for v in queries.views()}
    order: list[str] = []

    def visit(node: exp.Expression, stack: tuple[str, ...]) -> None:
        ctes = {c.alias_or_name for c in node.find_all(exp.CTE)}
        for table in node.find_all(exp.Table):
            ref = table.name
            if ref in views and ref not in ctes and not table.db and ref not in order:
                if ref in stack:
                    raise QueryError(f"views {' -> '.join((*stack, ref))} form a cycle")
                visit(sqlglot.parse_one(views[ref].sql, read="duckdb"), (*stack, ref))
                order.append(ref)

    visit(tree, ())
    if not order:
        return tree
    own = {c.alias_or_name for c in tree.find_all(exp.CTE)}
    clash = own & set(order)
    if clash:
        raise QueryError(f"query {name} names a CTE like a view: {', '.join(sorted(clash))}")
    inlined: list[exp.CTE] = []
    for view_name in order:
        body = sqlglot.parse_one(views[view_name].sql, read="duckdb")
        with_ = body.args.get("with_") or body.args.get("with")
        if with_ is not None:
            renames = {
                c.alias_or_name: f"{view_name}__{c.alias_or_name}" for c in with_.expressions
            }
            for table in body.find_all(exp.Table):
                if table.name in renames and not table.db:
                    table.set("this", exp.to_identifier(renames[table.name]))
            for cte in with_.expressions:
                cte.set("alias", exp.TableAlias(this=exp.to_identifier(renames[cte.alias_or_name])))
                inlined.append(cte)
            body.set("with_" if "with_" in body.args else "with", None)
        inlined.append(exp.CTE(this=body, alias=exp.TableAlias(this=exp.to_identifier(view_name))))
    key = "with_" if "with_" in tree.arg_types else "with"
    existing = tree.args.get(key)
    ctes = inlined + (list(existing.expressions) if existing is not None else [])
    tree.set(key, exp.With(expressions=ctes))
    return tree


#: bh_peak_first where sqlglot cannot carry DuckDB's STRUCT key over: Trino orders a
#: ROW; BigQuery has no MIN_BY over a STRUCT, so an ordered ARRAY_AGG (an aggregate
#: only, not a window).
_PEAK_FIRST_IN = {
    "trino": "MIN_BY(pos, ROW(-heap_bytes, pos))",
    "bigquery": "ARRAY_AGG(pos ORDER BY heap_bytes DESC, pos LIMIT 1)[OFFSET(0)]",
}


def _expand(
    tree: exp.Expression, macro: str, params: tuple[str, ...], body: exp.Expression
) -> exp.Expression:
    """Each call of the scalar macro `macro`, written out as `body` with its arguments
    put in for `params`: the other engines have no such macro."""

    def fn(node: exp.Expression) -> exp.Expression:
        if not (isinstance(node, exp.Anonymous) and node.name.lower() == macro):
            return node
        args = dict(zip(params, node.expressions))

        def argument(part: exp.Expression) -> exp.Expression:
            if isinstance(part, exp.Column) and not part.table and part.name in args:
                return args[part.name].copy()
            return part

        out = body.copy().transform(argument)
        return out if isinstance(out, (exp.Func, exp.Paren, exp.Bracket)) else exp.Paren(this=out)

    return tree.transform(fn)


def _inline_macros(name: str, dialect: str, tree: exp.Expression) -> exp.Expression:
    """The module selector, the helper rule, the size with units and the shared macros
    (schema/macros.py),
    written out where they are called."""
    tree = _expand(
        tree,
        queries.SELECTOR_NAME,
        queries.SELECTOR_PARAMS,
        sqlglot.parse_one(queries.SELECTOR_BODY, read="duckdb"),
    )
    tree = _expand(
        tree, HELPER_NAME, HELPER_PARAMS, sqlglot.parse_one(helper_body(), read="duckdb")
    )
    tree = _expand(tree, SIZE_NAME, SIZE_PARAMS, sqlglot.parse_one(size_body(), read="duckdb"))
    for macro in MACROS:
        body = sqlglot.parse_one(macro.body, read="duckdb")
        if macro is PEAK_FIRST and dialect in _PEAK_FIRST_IN:
            for call in tree.find_all(exp.Anonymous):
                in_window = isinstance(call.parent, exp.Window)
                if call.name.lower() == macro.name and in_window and dialect == "bigquery":
                    raise _unsupported(
                        name, dialect, f"{macro.name}() OVER", "no ordered aggregate as a window"
                    )
            body = sqlglot.parse_one(_PEAK_FIRST_IN[dialect], read=dialect)
        tree = _expand(tree, macro.name, macro.params, body)
    return tree


def _rewrite(name: str, dialect: str, tree: exp.Expression) -> exp.Expression:
    """Replace DuckDB-only constructs by the engine's equivalent, or refuse."""

    def fn(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Anonymous):
            fname = node.name.lower()
            args = node.expressions
            if fname == "error":
                if dialect == "spark":
                    return exp.Anonymous(this="raise_error", expressions=args)
                if dialect == "trino":
                    return exp.Anonymous(this="fail", expressions=args)
                if dialect == "bigquery":
                    return exp.Anonymous(this="error", expressions=args)
                raise _unsupported(
                    name,
                    dialect,
                    "error()",
                    "Postgres cannot raise an error from inside an expression "
                    "(only PL/pgSQL can), so invalid parameters would pass silently",
                )
            if fname == "list_slice" and len(args) == 3:
                arr, begin, end = args
                if dialect in ("spark", "trino"):
                    length = exp.Add(
                        this=exp.Sub(this=end.copy(), expression=begin.copy()),
                        expression=exp.Literal.number(1),
                    )
                    return exp.Anonymous(this="slice", expressions=[arr, begin, length])
                if dialect == "postgres":
                    return exp.Bracket(
                        this=exp.Paren(this=arr),
                        expressions=[exp.Slice(this=begin, expression=end)],
                    )
                raise _unsupported(
                    name, dialect, "list_slice()", "BigQuery has no array slice function"
                )
        if isinstance(node, exp.Table) and isinstance(node.this, exp.GenerateSeries):
            series = node.this
            end = series.args["end"]
            if series.args.get("is_end_exclusive"):
                end = exp.Sub(this=end.copy(), expression=exp.Literal.number(1))
            return exp.Unnest(
                expressions=[exp.GenerateSeries(start=series.args["start"], end=end)],
                alias=node.args.get("alias"),
            )
        if dialect == "postgres" and isinstance(node, exp.TryCast):
            return _postgres_try_cast(name, node)
        if dialect == "postgres" and isinstance(node, exp.Split):
            return exp.StringToArray(this=node.this, expression=node.expression)
        if dialect == "postgres" and isinstance(node, exp.Round) and node.args.get("decimals"):
            # Postgres rounds to N places only numerics, not double precision
            return exp.Round(
                this=exp.Cast(this=node.this, to=exp.DataType.build("DECIMAL")),
                decimals=node.args["decimals"],
            )
        if dialect == "spark" and isinstance(node, exp.ArrayAgg):
            return _spark_ordered_list(name, node)
        return node

    return tree.transform(fn)


#: Integer types TRY_CAST may target in Postgres, with their ranges.
_PG_INTEGER_RANGES = {
    "bigint": (-(2**63), 2**63 - 1),
    "int": (-(2**31), 2**31 - 1),
    "smallint": (-(2**15), 2**15 - 1),
}


def _postgres_try_cast(name: str, node: exp.TryCast) -> exp.Expression:
    """TRY_CAST(x AS <integer>): Postgres has no TRY_CAST, and sqlglot prints a plain
    CAST, which raises on text that is not a number (the module selector casts any
    module name). The same NULL-or-integer, as a CASE that casts only digits in range;
    a CASE drops a branch whose constant condition is false before it folds the branch.
    """
    to = node.args["to"]
    kind = next((k for k in _PG_INTEGER_RANGES if to.is_type(k)), None)
    if kind is None:
        raise _unsupported(
            name, "postgres", f"TRY_CAST(... AS {to.sql('duckdb')})", "only integer types"
        )
    low, high = _PG_INTEGER_RANGES[kind]
    value = node.this

    def when(condition: exp.Expression, then: exp.Expression) -> exp.Case:
        return exp.Case(ifs=[exp.If(this=condition, true=then)])

    digits = exp.RegexpLike(
        this=value.copy(), expression=exp.Literal.string(r"\A\s*[-+]?[0-9]+\s*\Z")
    )
    in_range = exp.Between(
        this=exp.Cast(this=value.copy(), to=exp.DataType.build("DECIMAL")),
        low=exp.Literal.number(low),
        high=exp.Literal.number(high),
    )
    return when(digits, when(in_range, exp.Cast(this=value.copy(), to=to.copy())))


def _spark_ordered_list(name: str, node: exp.ArrayAgg) -> exp.Expression:
    """list(x ORDER BY x): Spark's collect_list keeps no order and drops NULLs.

    Sorted non-NULL values followed by one NULL per NULL input is the same list
    as DuckDB's (ascending, NULLS LAST).
    """
    order = node.this
    if not isinstance(order, exp.Order):
        return node
    keys = order.expressions
    value = order.this
    if (
        len(keys) != 1
        or keys[0].this != value
        or keys[0].args.get("desc")
        or keys[0].args.get("nulls_first")
    ):
        raise _unsupported(
            name,
            "spark",
            "list(x ORDER BY y)",
            "Spark's collect_list has no ORDER BY; only list(x ORDER BY x) is rewritten",
        )
    nulls = exp.Sub(this=exp.Count(this=exp.Star()), expression=exp.Count(this=value.copy()))
    return exp.Anonymous(
        this="concat",
        expressions=[
            exp.Anonymous(
                this="array_sort",
                expressions=[exp.Anonymous(this="collect_list", expressions=[value.copy()])],
            ),
            exp.Anonymous(
                this="array_repeat",
                expressions=[exp.Null(), exp.Cast(this=nulls, to=exp.DataType.build("INT"))],
            ),
        ],
    )


def _mark_params(dialect: str, tree: exp.Expression, types: dict[str, str]) -> exp.Expression:
    """Give every parameter marker a unique name, so its place in the output can be found.

    Postgres infers a parameter's type from its context and fails on
    `$1 IS NULL` when the value is NULL, so there each marker is cast to the
    parameter's declared type.
    """
    count = 0

    def fn(node: exp.Expression) -> exp.Expression:
        nonlocal count
        if isinstance(node, exp.Placeholder) and node.name:
            count += 1
            marker = exp.Placeholder(this=f"{_SENTINEL}{count}_{node.name}")
            if dialect == "postgres" and node.name in types:
                return exp.Cast(this=marker, to=exp.DataType.build(types[node.name]))
            return marker
        return node

    return tree.transform(fn)


_SENTINEL = "bhparam"
_SENTINEL_RE = re.compile(r"(?P<pre>[:@]|%\()" + _SENTINEL + r"\d+_(?P<name>\w+?)(?P<post>\)s)?\b")


def _unmark_params(dialect: str, sql: str) -> tuple[str, list[str]]:
    """Marker names in text order; positional dialects get `?`."""
    names: list[str] = []

    def fn(m: re.Match) -> str:
        names.append(m.group("name"))
        if dialect == "trino":
            return "?"
        return m.group("pre") + m.group("name") + (m.group("post") or "")

    return _SENTINEL_RE.sub(fn, sql), names


def _check_functions(name: str, dialect: str, tree: exp.Expression) -> None:
    known = _KNOWN_FUNCTIONS[dialect] | {"concat", "array_sort", "collect_list"}
    for node in tree.find_all(exp.Anonymous):
        if node.name.lower() not in known:
            raise _unsupported(
                name,
                dialect,
                f"{node.name}()",
                "a DuckDB function with no known equivalent in this engine",
            )


#: Queries an engine accepts in form but cannot plan: (construct, why).
_TOO_LARGE = {
    ("oom-vs-peak", "spark"): (
        "the six pairing tiers",
        "Spark 4's analyzer (DeduplicateRelations) runs out of heap on the self-joins of "
        "its one-to-one pairing; run it in DuckDB over the dataset (docs/export.md)",
    ),
}


def transpile(name: str, dialect: str, *, pretty: bool = True) -> Transpiled:
    """The canned query `name` as one statement of `dialect` SQL (see the module doc)."""
    dialect = dialect.lower()
    if dialect not in DIALECTS:
        raise QueryError(f"no dialect {dialect!r}; valid dialects: {', '.join(DIALECTS)}")
    q = queries.get(name)
    if (q.name, dialect) in _TOO_LARGE:
        raise _unsupported(q.name, dialect, *_TOO_LARGE[(q.name, dialect)])
    tree = sqlglot.parse_one(q.sql, read="duckdb")
    tree = _inline_views(q.name, tree)
    tree = _inline_macros(name, dialect, tree)
    tree = _rewrite(q.name, dialect, tree)
    tree = _mark_params(dialect, tree, {p.name: p.type for p in q.params})
    _check_functions(q.name, dialect, tree)
    try:
        sql = tree.sql(dialect=dialect, pretty=pretty, unsupported_level=ErrorLevel.RAISE)
    except UnsupportedError as exc:
        construct = str(exc).strip().splitlines()[0]
        raise _unsupported(q.name, dialect, construct, "reported by sqlglot") from None
    sql, params = _unmark_params(dialect, sql)
    try:
        sqlglot.parse_one(sql, read=dialect)
    except ParseError as exc:  # our rewrite produced something the dialect cannot read
        raise QueryError(
            f"query {q.name}: the {dialect} SQL does not parse back (please report): {exc}"
        ) from None
    return Transpiled(q.name, dialect, sql, tuple(params))


def support_matrix() -> dict[str, dict[str, str | None]]:
    """{query: {dialect: None if it transpiles, else the reason it cannot}}."""
    out: dict[str, dict[str, str | None]] = {}
    for q in queries.queries():
        row: dict[str, str | None] = {}
        for dialect in DIALECTS:
            try:
                transpile(q.name, dialect)
                row[dialect] = None
            except QueryError as exc:
                row[dialect] = str(exc)
        out[q.name] = row
    return out
