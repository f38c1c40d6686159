"""`bufferhouse query`, `queries` and `sql`: canned and ad-hoc SQL, rendered."""

from __future__ import annotations

import click

import bufferhouse
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
    wide_option,
)
from bufferhouse.export import transpile


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
@format_option
@output_option
@limit_option
@human_option
@wide_option
@handle_errors
def query_command(name, params, db, dialect, fmt, output, limit, human, wide) -> None:
    """Run a canned query (see `bufferhouse queries`).

    With --dialect, print the query for another engine instead of running it:
    the views it uses become CTEs and parameters stay markers to bind there.

    Example: bufferhouse query peak-buffers --param module=jit_train_step --format csv -o peak.csv
    """
    if dialect is not None:
        if params:
            raise click.UsageError("--dialect prints the SQL; bind parameters in the engine")
        click.echo(transpile(name, dialect).text(), nl=False)
        return
    table = bufferhouse.query(name, db, **parse_pairs(params, "--param"))
    emit(table, fmt, output, limit, human=human, wide=wide)


@click.command("sql")
@click.argument("text")
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
@handle_errors
def sql_command(text, db, allow_files, fmt, output, limit, human, wide) -> None:
    """Run one ad-hoc SQL statement on the warehouse, read-only, with the same renderers.

    The SQL sees only the warehouse: reading or writing other files (COPY TO,
    read_text, read_parquet), the network and INSTALL/LOAD fail unless
    --allow-files is given.

    Example: bufferhouse sql "SELECT module_name, total_bytes FROM modules ORDER BY 2 DESC"
    """
    table = bufferhouse.sql(text, db, allow_files=allow_files)
    emit(table, fmt, output, limit, human=human, wide=wide)
