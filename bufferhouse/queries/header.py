"""The documented .sql files: the header parser and the one loader of the project's SQL.

A file's leading comment block is its documentation and its contract:

    -- name: peak-buffers
    -- description: One sentence.
    -- param module VARCHAR = NULL: what it selects
    -- column module_name: what it holds
    -- note: free text (definitions, caveats), may repeat

Parameters appear in the SQL as `$name` and are always bound, never spliced.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from bufferhouse.errors import QueryError
from bufferhouse.queries.params import Param
from bufferhouse.schema import quote_identifier, sql_string

_HEADER = re.compile(r"--\s?(name|description|param|column|note|example)(?::\s?|\s+)(.*)$")
_PARAM = re.compile(r"(\w+) (\w+(?:\[\])?)(?: >= (-?\d+)| in \(([^)]*)\))? = (.+?): (.+)$")
_COLUMN = re.compile(r"(\w+): (.+)$")
_PLACEHOLDER = re.compile(r"\$(\w+)")


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
