"""Canned queries: one documented .sql file each, shipped as package data.

Files under views/ define documented views installed into the warehouse; the
queries build on them. Every query is also installed as a table macro
`bh_<name>` so the plain duckdb shell can run it. Why the SQL is written as it
is (row-group skipping, the module selector macro): docs/query-planning.md.

The package is a face: header.py parses and loads the .sql files, params.py
types their parameters, install.py puts views and macros into a warehouse,
run.py runs them, reference.py writes docs/queries.md; selector.py and
helpers.py hold the module selector and the helper-program rule.
"""

from __future__ import annotations

from bufferhouse.queries.header import Query, get, parse_query_file, queries, sql_files, views
from bufferhouse.queries.install import install_macros, installed_names, use_package_views
from bufferhouse.queries.params import INTEGER_RANGES, Param
from bufferhouse.queries.reference import markdown_reference
from bufferhouse.queries.run import arrow_result, execute, run, run_sql
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
    "execute",
    "get",
    "install_macros",
    "installed_names",
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
