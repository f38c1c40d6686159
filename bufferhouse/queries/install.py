"""Putting the views and bh_* macros into a warehouse (or shadowing them for one session)."""

from __future__ import annotations

import contextlib

import duckdb

from bufferhouse.queries.header import queries, views
from bufferhouse.queries.helpers import HELPER_NAME, helper_macro_sql
from bufferhouse.queries.selector import SELECTOR_NAME, selector_macro_sql
from bufferhouse.queries.sizes import SIZE_COMMENT, SIZE_NAME, size_macro_sql
from bufferhouse.schema import macros, quote_identifier, sql_string


def installed_names() -> dict[str, set[str]]:
    """The views and macros install_macros puts in a warehouse, by kind: what `check`
    holds a file's own against (anything else was put there by someone else)."""
    names = {SELECTOR_NAME, HELPER_NAME, SIZE_NAME, *(m.name for m in macros.MACROS)}
    return {"view": {v.name for v in views()}, "macro": names | {q.macro_name for q in queries()}}


def install_macros(con: duckdb.DuckDBPyConnection) -> None:
    """Install (or replace) every view and bh_* macro, with COMMENT ON, in one transaction."""
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(selector_macro_sql())
        con.execute(helper_macro_sql())
        con.execute(size_macro_sql())
        con.execute(f"COMMENT ON MACRO {SIZE_NAME} IS {sql_string(SIZE_COMMENT)}")
        macros.install(con)
        con.execute(
            f"COMMENT ON MACRO {HELPER_NAME} IS "
            + sql_string(
                "True when module_name is one of jax's helper programs: jit__<private "
                "function> or jit_<lax primitive> (eager op-by-op dispatch); the rule is "
                "bufferhouse/queries/helpers.py's. Usage: SELECT * FROM modules WHERE "
                f"NOT {HELPER_NAME}(module_name)"
            )
        )
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
    macros.install(con, temp=True)
    for v in views():
        con.execute(
            v.view_sql().replace("CREATE OR REPLACE VIEW", "CREATE OR REPLACE TEMP VIEW", 1)
        )
