"""`bufferhouse query`, `queries` and `sql`: canned and ad-hoc SQL, rendered."""

from __future__ import annotations

import click

import bufferhouse
from bufferhouse import api
from bufferhouse import queries as canned
from bufferhouse.cli.options import (
    db_option,
    emit,
    format_option,
    handle_errors,
    human_option,
    limit_option,
    output_option,
    params_option,
    parse_pairs,
    wait_option,
    wide_option,
)


@click.group("queries", invoke_without_command=True)
@click.pass_context
def queries_group(ctx) -> None:
    """List the canned queries, or show one with `queries show NAME`.

    Example: bufferhouse queries show peak-buffers
    """
    if ctx.invoked_subcommand is None:
        width = max(len(x.name) for x in canned.queries())
        for x in canned.queries():
            click.echo(f"{x.name:<{width}}  {x.description}")


@queries_group.command("show")
@click.argument("name")
@handle_errors
def queries_show(name: str) -> None:
    """Describe a canned query: parameters, columns, notes and its SQL.

    Example: bufferhouse queries show heap-timeline
    """
    x = canned.get(name)
    click.echo(f"{x.name}: {x.description}\n")
    click.echo("parameters:" if x.params else "parameters: none")
    for p in x.params:
        click.echo(f"  {p.name} {' '.join([p.type, p.constraint]).strip()} = {p.default}: {p.doc}")
    click.echo("\ncolumns:")
    for c, doc in x.columns:
        click.echo(f"  {c}: {doc}")
    for note in x.notes:
        click.echo(f"\nnote: {note}")
    args = ", ".join(f"{p.name} := {p.default}" for p in x.params)
    click.echo(f"\nin the duckdb shell: FROM {x.macro_name}({args})\n")
    click.echo(x.sql)


@click.command("query")
@click.argument("name")
@params_option
@db_option()
@click.option(
    "--dialect",
    type=click.Choice(["spark", "trino", "bigquery", "postgres"]),
    default=None,
    help="Print the query as SQL for this engine (views inlined, parameters as markers).",
)
@click.option(
    "--top",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help="Rows to rank, for the queries with a top parameter: the same as --param top=N.",
)
@format_option
@output_option
@limit_option
@human_option
@wide_option
@wait_option
@handle_errors
def query_command(name, params, db, dialect, top, fmt, output, limit, human, wide, wait) -> None:
    """Run a canned query (see `bufferhouse queries`).

    With --dialect, print the query for another engine instead of running it:
    the views it uses become CTEs and parameters stay markers to bind there.

    Example: bufferhouse query peak-buffers --param module=jit_train_step --format csv -o peak.csv
    """
    if dialect is not None:
        if params or top is not None:
            raise click.UsageError("--dialect prints the SQL; bind parameters in the engine")
        from bufferhouse.export import transpile  # sqlglot: only when asked

        click.echo(transpile(name, dialect).text(), nl=False)
        return
    q = canned.get(name)
    values = parse_pairs(params, "--param")
    if top is not None:
        values = {**values, **top_param(q, top, values)}
    result = api.run_query(q, values, db, wait=wait)
    note_matches(values.get("module"), result.matches)
    emit(result.table, fmt, output, limit, human=human, wide=wide)


def top_param(q: canned.Query, top: int, values: dict[str, str]) -> dict[str, str]:
    """--top N as the query's `top` parameter; a usage error for a query without one,
    or with --param top given too."""
    if "top" in values:
        raise click.UsageError("give --top or --param top=N, not both")
    if not any(p.name == "top" for p in q.params):
        raise click.UsageError(
            f"query {q.name} has no top parameter (bufferhouse queries show {q.name})"
        )
    return {"top": str(top)}


def note_matches(key: str | None, matches: list[canned.ModuleMatch]) -> None:
    """On stderr, when `key` selects several modules: which, and what tells them apart."""
    if len(matches) < 2:
        return
    click.echo(
        f"note: {key!r} matches {len(matches)} modules; the rows of all are shown:", err=True
    )
    shown = canned.describe_matches(matches)
    for line in shown[:10]:
        click.echo(f"  {line}", err=True)
    if len(shown) > 10:
        click.echo(f"  ... and {len(shown) - 10} more", err=True)
    click.echo("pass a 12-digit hash prefix or module_id to pick one", err=True)


@click.command("sql")
@click.argument("text")
@click.option(
    "-p",
    "--param",
    "params",
    multiple=True,
    metavar="KEY=VALUE",
    help="Bind $KEY in the SQL to VALUE, as text (repeatable); cast where a number is "
    "needed: $top::INTEGER.",
)
@db_option()
@click.option(
    "--allow-files",
    is_flag=True,
    help="Let the SQL read and write files (read_parquet, read_csv, COPY TO), reach the "
    "network and load extensions, as the duckdb shell does. Off by default.",
)
@format_option
@output_option
@limit_option
@human_option
@wide_option
@wait_option
@handle_errors
def sql_command(text, params, db, allow_files, fmt, output, limit, human, wide, wait) -> None:
    """Run one ad-hoc SQL statement on the warehouse, read-only, with the same renderers.

    The SQL sees only the warehouse: reading or writing other files (COPY TO,
    read_text, read_parquet), the network and INSTALL/LOAD fail unless
    --allow-files is given.

    Values given with --param are bound, never spliced into the SQL.

    Example: bufferhouse sql 'FROM modules WHERE module_name = $name' -p name=jit_train_step
    """
    values = parse_pairs(params, "--param") or None
    table = bufferhouse.sql(text, db, values, allow_files=allow_files, wait=wait)
    emit(table, fmt, output, limit, human=human, wide=wide)
