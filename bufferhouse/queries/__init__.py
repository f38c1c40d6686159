"""Canned queries: one documented .sql file each, shipped as package data.

A file's leading comment block is its documentation and its contract:

    -- name: peak-buffers
    -- description: One sentence.
    -- param module VARCHAR = NULL: what it selects
    -- column module_name: what it holds
    -- note: free text (definitions, caveats), may repeat

Parameters appear in the SQL as `$name` and are always bound, never spliced.
Files under views/ define documented views installed into the warehouse; the
queries build on them. Every query is also installed as a table macro
`bh_<name>` so the plain duckdb shell can run it.

Why the SQL reads each large table through its own CTE: module ids grow with
insertion order, so one module's rows sit in a few row groups, and a query
scoped to one module should read only those. DuckDB folds the bound `$module`,
so a table read as

    SELECT ... FROM t WHERE $module IS NULL
    UNION ALL
    SELECT ... FROM t WHERE module_id IN (SELECT module_id FROM wanted)

(`wanted`: the modules `$module` selects) is a plain scan fleet-wide
and, for a module, a semi-join whose min/max filter skips every other row
group. That filter reaches only the scan below its own join: not through a
LEFT JOIN's build side, a window function or a view's joins, and not past a
join order the planner picks from poor estimates, so each large table gets
such a CTE (or a semi-join on the modules already chosen) instead of being
filtered after the joins. A CTE used twice is materialized, so large ones are
used once. Queries that rank values pick their rows on integer columns first
and join the text columns of those rows only. The views (value_facts,
heap_peak_values, heap_trace_steps) define the same rows;
tests hold the queries to them.

The module selector. A `module` parameter selects the modules whose name,
file stem, module_id or 12-digit content-hash prefix equals it: the rows the
view module_keys gives for it. The queries do not read that view: a filter on
its computed keys (CAST(module_id AS VARCHAR), substr(content_hash, 1, 12))
is evaluated for every module, and hashes them into a set, which took 4-9 ms
on 23,104 modules, more than the rest of most one-module queries. Instead each
query tests `modules` with the macro bh_is_module (SELECTOR_BODY, in selector.py), which
DuckDB expands where it is called and folds for the bound value: the hash
prefix is compared only for a value of 12 characters, and an id's text only
for the module with that id (the TRY_CAST of a name is NULL). It means what
module_keys means; tests hold every query to the call and the macro to the
view. It is installed with the views (in the warehouse, or for the session
by use_package_views), and `export.transpile` writes it out for engines
without macros. The planner estimates an OR at a
fifth of the modules, so joins after it may build their hash tables on a
module's whole text tables; where a query needs a few rows of them (arena),
it reads them through EXISTS semi-joins on those rows, which always build on
the subquery.
"""

from __future__ import annotations

import contextlib
import math
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

import duckdb
import pyarrow as pa

from bufferhouse.errors import QueryError
from bufferhouse.queries.helpers import HELPER_NAME, helper_macro_sql
from bufferhouse.queries.selector import (
    MODULE_SELECTOR,
    SELECTOR_BODY,
    SELECTOR_NAME,
    SELECTOR_PARAMS,
    SNAPSHOT_PARAMS,
    ModuleMatch,
    describe_matches,
    module_matches,
    require_event,
    require_label,
    require_module,
    require_snapshot,
    selector_macro_sql,
)
from bufferhouse.queries.sizes import SIZE_COMMENT, SIZE_DOC, SIZE_NAME, SIZE_PARAMS, size_macro_sql
from bufferhouse.schema import quote_identifier, sql_string
from bufferhouse.schema.warehouse import require_query

__all__ = [
    "INTEGER_RANGES",
    "MODULE_SELECTOR",
    "SELECTOR_BODY",
    "SELECTOR_NAME",
    "SELECTOR_PARAMS",
    "SNAPSHOT_PARAMS",
    "ModuleMatch",
    "Param",
    "Query",
    "arrow_result",
    "describe_matches",
    "get",
    "install_macros",
    "markdown_reference",
    "module_matches",
    "parse_query_file",
    "queries",
    "require_event",
    "require_label",
    "require_module",
    "require_snapshot",
    "run",
    "run_sql",
    "selector_macro_sql",
    "sql_files",
    "use_package_views",
    "views",
]

_HEADER = re.compile(r"--\s?(name|description|param|column|note|example)(?::\s?|\s+)(.*)$")
_PARAM = re.compile(r"(\w+) (\w+(?:\[\])?)(?: >= (-?\d+)| in \(([^)]*)\))? = (.+?): (.+)$")
_COLUMN = re.compile(r"(\w+): (.+)$")
_PLACEHOLDER = re.compile(r"\$(\w+)")


#: The values DuckDB's integer types hold: a --param outside them is the tool's
#: error, not DuckDB's Conversion Error.
INTEGER_RANGES = {"INTEGER": (-(2**31), 2**31 - 1), "BIGINT": (-(2**63), 2**63 - 1)}


@dataclass(frozen=True)
class Param:
    """A declared parameter: `-- param NAME TYPE [>= MIN | in (A, B)] = DEFAULT: doc`."""

    name: str
    type: str
    default: str  # SQL literal
    doc: str
    minimum: int | None = None  # numbers: the least value accepted
    choices: tuple[str, ...] = ()  # VARCHAR: the values accepted (NULL aside)

    @property
    def constraint(self) -> str:
        """The declared range or choices as the docs show them ('' when none)."""
        if self.minimum is not None:
            return f">= {self.minimum}"
        if self.choices:
            return f"in ({', '.join(self.choices)})"
        return ""

    def check(self, value: object) -> object:
        """`value` when the parameter accepts it; otherwise a QueryError that says what
        it accepts (the value's type, its range, the choices)."""
        if value is None or self.type.endswith("[]"):
            return value
        if self.type in INTEGER_RANGES:
            low, high = INTEGER_RANGES[self.type]
            if self.minimum is not None:
                low = max(low, self.minimum)
            if isinstance(value, bool) or not isinstance(value, int):
                raise QueryError(f"parameter {self.name} wants an integer, got {value!r}")
            if not low <= value <= high:
                raise QueryError(
                    f"parameter {self.name} wants an integer from {low} to {high}, got {value}"
                )
        elif self.type == "DOUBLE":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise QueryError(f"parameter {self.name} wants a number, got {value!r}")
            if not math.isfinite(value) or (self.minimum is not None and value < self.minimum):
                at_least = f" at least {self.minimum}" if self.minimum is not None else ""
                raise QueryError(
                    f"parameter {self.name} wants a finite number{at_least}, got {value}"
                )
        elif self.type == "BOOLEAN":
            if not isinstance(value, bool):
                raise QueryError(f"parameter {self.name} wants true or false, got {value!r}")
        elif self.type == "VARCHAR":
            if not isinstance(value, str):
                raise QueryError(f"parameter {self.name} wants text, got {value!r}")
            if self.choices and value not in self.choices:
                raise QueryError(
                    f"parameter {self.name} wants one of {', '.join(self.choices)}, got {value!r}"
                )
        return value

    def convert(self, text: str) -> object:
        """A --param value given, converted to the declared type.

        `NULL` (any case) gives NULL for a number or boolean, which no such value spells:
        how a shell user asks for `top` NULL (all rows) or resets a parameter to NULL.
        """
        if self.type != "VARCHAR" and text.strip().upper() == "NULL":
            return None
        if self.type in ("INTEGER", "BIGINT"):
            try:
                return int(text)
            except ValueError:
                raise QueryError(f"parameter {self.name} wants an integer, got {text!r}") from None
        if self.type == "DOUBLE":
            try:
                return float(text)
            except ValueError:
                raise QueryError(f"parameter {self.name} wants a number, got {text!r}") from None
        if self.type == "BOOLEAN":
            if text.lower() in ("true", "1", "yes"):
                return True
            if text.lower() in ("false", "0", "no"):
                return False
            raise QueryError(f"parameter {self.name} wants true or false, got {text!r}")
        return text

    @property
    def default_value(self) -> object:
        d = self.default.strip()
        if d.upper() == "NULL":
            return None
        if d.startswith("'") and d.endswith("'"):
            return d[1:-1].replace("''", "'")
        if d.upper() in ("TRUE", "FALSE"):
            return d.upper() == "TRUE"
        try:
            return int(d)
        except ValueError:
            return float(d)


@dataclass(frozen=True)
class Query:
    name: str
    description: str
    sql: str  # the body, with $param placeholders
    params: tuple[Param, ...] = ()
    columns: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()
    kind: str = "query"  # query | view
    source: str = ""

    @property
    def macro_name(self) -> str:
        return "bh_" + self.name.replace("-", "_")

    def bind(self, given: dict[str, object]) -> dict[str, object]:
        """Parameter values for execution: given ones converted, the rest defaulted."""
        known = {p.name: p for p in self.params}
        unknown = sorted(set(given) - set(known))
        if unknown:
            valid = ", ".join(known) or "none"
            raise QueryError(
                f"query {self.name} has no parameter {', '.join(unknown)}; valid parameters: {valid}"
            )
        out = {}
        for p in self.params:
            if p.name in given:
                value = given[p.name]
                if p.type == "VARCHAR" and isinstance(value, int) and not isinstance(value, bool):
                    value = str(value)  # a module_id from a notebook selects its module
                out[p.name] = p.check(p.convert(value) if isinstance(value, str) else value)
            else:
                out[p.name] = p.default_value
        return out

    def used_params(self) -> list[str]:
        return list(dict.fromkeys(_PLACEHOLDER.findall(self.sql)))

    def macro_sql(self) -> str:
        """CREATE MACRO statement: $param becomes the macro parameter of that name."""
        body = _PLACEHOLDER.sub(lambda m: m.group(1), self.sql.strip().rstrip(";"))
        args = ", ".join(f"{p.name} := {p.default}" for p in self.params)
        return f"CREATE OR REPLACE MACRO {self.macro_name}({args}) AS TABLE\n{body}"

    def shell_example(self) -> str:
        """The macro call of the first example, arguments by name: DuckDB 1.2 and 1.3
        bind a macro's defaulted parameters only by name (positional from 1.4 on)."""
        given = {}
        for example in self.examples[:1]:
            for pair in re.findall(r"(?:--param|-p) (\S+)", example):
                key, _, value = pair.partition("=")
                given[key] = value
        args = []
        for p in self.params:
            if p.name in given:
                value = p.convert(given[p.name])
                literal = sql_string(value) if isinstance(value, str) else str(value)
                args.append(f"{p.name} := {literal}")
        return f"FROM {self.macro_name}({', '.join(args)})"

    def view_sql(self) -> str:
        return f"CREATE OR REPLACE VIEW {quote_identifier(self.name)} AS\n{self.sql.strip().rstrip(';')}"


def parse_query_file(text: str, source: str, kind: str = "query") -> Query:
    """A documented .sql file (header + body) as a Query; raises QueryError when malformed."""
    return _parse(text, source, kind)


def _parse(text: str, source: str, kind: str) -> Query:
    lines = text.splitlines()
    fields: dict[str, list[str]] = {}
    body_start = 0
    for i, line in enumerate(lines):
        if not line.startswith("--"):
            body_start = i
            break
        m = _HEADER.match(line)
        if m:
            fields.setdefault(m.group(1), []).append(m.group(2).strip())
        elif line.startswith("--  ") and line.strip("- ") and fields:
            # continuation of the previous field: indented under it
            last = list(fields)[-1]
            fields[last][-1] += " " + line.lstrip("- ").strip()
        elif line.strip("- "):
            # A plain comment here would silently become part of the last field's doc.
            raise QueryError(
                f"{source}:{i + 1}: header line is neither a field ('-- name:', "
                "'-- description:', '-- param', '-- column', '-- note:', '-- example:') "
                "nor an indented continuation ('--   more'); put SQL comments below "
                f"the header's first SQL line: {line!r}"
            )
    else:
        body_start = len(lines)
    if "name" not in fields or "description" not in fields:
        raise QueryError(f"{source}: header needs '-- name:' and '-- description:'")
    params = []
    for spec in fields.get("param", []):
        m = _PARAM.match(spec)
        if not m:
            raise QueryError(
                f"{source}: bad param line {spec!r} "
                "(want 'NAME TYPE [>= MIN | in (A, B)] = DEFAULT: doc')"
            )
        name, type_, minimum, choices, default, doc = m.groups()
        params.append(
            Param(
                name,
                type_,
                default,
                doc,
                minimum=None if minimum is None else int(minimum),
                choices=tuple(c.strip() for c in choices.split(",")) if choices else (),
            )
        )
    columns = []
    for spec in fields.get("column", []):
        m = _COLUMN.match(spec)
        if not m:
            raise QueryError(f"{source}: bad column line {spec!r} (want 'NAME: doc')")
        columns.append((m.group(1), m.group(2)))
    body = "\n".join(lines[body_start:]).strip() + "\n"
    declared = {p.name for p in params}
    used = set(_PLACEHOLDER.findall(body))
    if used != declared:
        raise QueryError(
            f"{source}: parameters used in the SQL ({', '.join(sorted(used)) or 'none'}) "
            f"differ from those declared ({', '.join(sorted(declared)) or 'none'})"
        )
    return Query(
        name=fields["name"][0],
        description=fields["description"][0],
        sql=body,
        params=tuple(params),
        columns=tuple(columns),
        notes=tuple(fields.get("note", [])),
        examples=tuple(fields.get("example", [])),
        kind=kind,
        source=source,
    )


@cache
def sql_files(package: str, folder: str = "", kind: str = "query") -> dict[str, Query]:
    """The documented `.sql` files in a folder of a package, by name, in file-name order.

    The one loader of the project's SQL: canned queries and views here, and the
    statements of other stages (compare's, check's) kept in their own packages.
    """
    root = resources.files(package)
    if folder:
        root = root.joinpath(folder)
    found: dict[str, Query] = {}
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql"):
            source = f"{folder}/{entry.name}" if folder else entry.name
            q = _parse(entry.read_text(encoding="utf-8"), source, kind)
            found[q.name] = q
    return found


def _load_all() -> tuple[dict[str, Query], dict[str, Query]]:
    return sql_files(__package__, "views", "view"), sql_files(__package__)


def views() -> list[Query]:
    """The documented views, in install order (file name order)."""
    return list(_load_all()[0].values())


def queries() -> list[Query]:
    return list(_load_all()[1].values())


def get(name: str) -> Query:
    found = _load_all()[1].get(name) or _load_all()[1].get(name.replace("_", "-"))
    if found is None:
        valid = ", ".join(q.name for q in queries())
        raise QueryError(f"no canned query {name!r}; valid queries: {valid}")
    return found


def installed_names() -> dict[str, set[str]]:
    """The views and macros install_macros puts in a warehouse, by kind: what `check`
    holds a file's own against (anything else was put there by someone else)."""
    macros = {SELECTOR_NAME, HELPER_NAME, SIZE_NAME, *(q.macro_name for q in queries())}
    return {"view": {v.name for v in views()}, "macro": macros}


def install_macros(con: duckdb.DuckDBPyConnection) -> None:
    """Install (or replace) every view and bh_* macro, with COMMENT ON, in one transaction."""
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(selector_macro_sql())
        con.execute(helper_macro_sql())
        con.execute(size_macro_sql())
        con.execute(f"COMMENT ON MACRO {SIZE_NAME} IS {sql_string(SIZE_COMMENT)}")
        con.execute(
            f"COMMENT ON MACRO {SELECTOR_NAME} IS "
            + sql_string(
                "True when key is the module's name, file stem, module_id or 12-digit "
                "content-hash prefix, as a query's module parameter selects. Usage: "
                f"SELECT * FROM modules WHERE {SELECTOR_NAME}('jit_train_step', "
                "module_name, file_stem, module_id, content_hash)"
            )
        )
        for v in views():
            con.execute(v.view_sql())
            con.execute(
                f"COMMENT ON VIEW {quote_identifier(v.name)} IS {sql_string(v.description)}"
            )
            for column, doc in v.columns:
                con.execute(
                    f"COMMENT ON COLUMN {quote_identifier(v.name)}.{quote_identifier(column)} "
                    f"IS {sql_string(doc)}"
                )
        for q in queries():
            con.execute(q.macro_sql())
            usage = ", ".join(f"{p.name} := {p.default}" for p in q.params)
            con.execute(
                f"COMMENT ON MACRO TABLE {q.macro_name} IS "
                f"{sql_string(q.description + f' Usage: FROM {q.macro_name}({usage})')}"
            )
        con.execute("COMMIT")
    except Exception:
        with contextlib.suppress(duckdb.Error):  # a failed COMMIT has ended it already
            con.execute("ROLLBACK")
        raise


def use_package_views(con: duckdb.DuckDBPyConnection) -> None:
    """Shadow the warehouse's views with this release's, for this session only.

    Works on read-only connections, so a query always runs against the view
    definitions it was written for, whichever release installed the file's.
    """
    con.execute(selector_macro_sql(temp=True))
    con.execute(helper_macro_sql(temp=True))
    con.execute(size_macro_sql(temp=True))
    for v in views():
        con.execute(
            v.view_sql().replace("CREATE OR REPLACE VIEW", "CREATE OR REPLACE TEMP VIEW", 1)
        )


def run(
    con: duckdb.DuckDBPyConnection, name: str, params: dict[str, object] | None = None
) -> pa.Table:
    """Run a canned query with bound parameters; returns an Arrow table.

    A `module` no module matches gives an empty table here (compare asks each side
    whether it holds a module); the public API checks with require_module first.
    """
    q = get(name)
    values = q.bind(params or {})
    used = q.used_params()
    try:
        return arrow_result(con.sql(q.sql, params={k: values[k] for k in used}))
    except duckdb.Error as exc:
        raise QueryError(f"query {name}: {exc}") from None


def run_sql(
    con: duckdb.DuckDBPyConnection, sql: str, params: list | dict | None = None
) -> pa.Table:
    """Run one SQL statement; several (`SELECT 1; SELECT 2`) or none is a QueryError,
    rather than the last one's result alone."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(str(exc)) from None
    if not statements:
        raise QueryError("no SQL statement given (the text is empty or only comments)")
    if len(statements) > 1:
        raise QueryError(
            f"the SQL holds {len(statements)} statements; give one at a time (a result "
            "is one table, and only the last would be shown)"
        )
    require_query(con, statements[0])
    try:
        relation = con.sql(sql, params=params) if params else con.sql(sql)
        if relation is None:  # a statement without a result
            return pa.table({})
        return arrow_result(relation)
    except duckdb.PermissionException as exc:
        raise QueryError(
            f"{exc}\nThe warehouse is opened with external access off: SQL reads only the "
            "warehouse (no other files, no network, no extensions). To read or write your "
            "own files, allow it: `bufferhouse sql --allow-files`, or "
            "bufferhouse.sql(..., allow_files=True)."
        ) from None
    except duckdb.Error as exc:
        raise QueryError(str(exc)) from None


def arrow_result(relation: duckdb.DuckDBPyRelation) -> pa.Table:
    """The relation as an Arrow table (the method name differs across DuckDB releases)."""
    fetch = getattr(relation, "to_arrow_table", None)
    if fetch is None:
        return relation.arrow()
    return fetch()


def markdown_reference() -> str:
    """docs/queries.md, generated from the query headers."""
    out = [
        "# Canned queries",
        "",
        "Generated from the headers of `bufferhouse/queries/*.sql` "
        "(`python -m bufferhouse.docs` rewrites it; a test checks it is current).",
        "Run one with `bufferhouse query NAME [--param k=v]`, from Python with "
        "`bufferhouse.query(NAME, db=..., k=v)`, or in the duckdb shell as "
        "`FROM bh_NAME(k := v)` (by name: DuckDB 1.2 and 1.3 shells bind the macros' "
        "parameters only by name; from 1.4 on they may also be given in order).",
        "",
    ]
    for q in queries():
        out += [f"## `{q.name}`", "", q.description, ""]
        if q.params:
            out += ["| parameter | type | default | meaning |", "| --- | --- | --- | --- |"]
            out += [
                f"| `{p.name}` | {' '.join([p.type, p.constraint]).strip()} | `{p.default}` "
                f"| {p.doc} |"
                for p in q.params
            ]
            out.append("")
        out += ["| column | meaning |", "| --- | --- |"]
        out += [f"| `{c}` | {d} |" for c, d in q.columns]
        out.append("")
        out += [n + "\n" for n in q.notes]
        out += ["```sh", *(q.examples or (f"bufferhouse query {q.name}",))]
        out += [f'duckdb fleet.duckdb -c "{q.shell_example()}"', "```", ""]
    out.append("## Views\n")
    out.append("Installed into the warehouse beside the tables; the queries build on them.\n")
    for v in views():
        out += [f"### `{v.name}`", "", v.description, "", "| column | meaning |", "| --- | --- |"]
        out += [f"| `{c}` | {d} |" for c, d in v.columns]
        out.append("")
    out += [
        "## Macros\n",
        f"`{SELECTOR_NAME}({', '.join(SELECTOR_PARAMS)})`: true when `key` is the module's "
        "name, file stem, module_id or 12-digit content-hash prefix, the keys `module_keys` "
        "lists; every `module` parameter selects modules with it. Installed beside the views:",
        "",
        "```sql",
        f"SELECT * FROM modules WHERE {SELECTOR_NAME}('jit_train_step', module_name, file_stem,"
        " module_id, content_hash)",
        "```",
        "",
        f"`{HELPER_NAME}(module_name)`: true when the module is one of jax's helper programs "
        "(`jit__<private function>` such as `jit__normal`, or `jit_<lax primitive>` from eager "
        "op-by-op dispatch such as `jit_convert_element_type`; the rule and its limits: "
        "`bufferhouse/queries/helpers.py`, docs/pictures.md). `top-modules` and `recompiles` "
        "leave them out with `helpers := false`; the report does:",
        "",
        "```sql",
        f"SELECT module_name, heap_peak_bytes FROM modules WHERE NOT {HELPER_NAME}(module_name)",
        "```",
        "",
        f"`{SIZE_NAME}({', '.join(SIZE_PARAMS)})`: {SIZE_DOC}:",
        "",
        "```sql",
        f"SELECT {SIZE_NAME}('16GiB', 'capacity')  -- 17179869184",
        "```",
        "",
    ]
    return "\n".join(out)
