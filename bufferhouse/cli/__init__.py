"""The `bufferhouse` command: parse options, call one library function, render.

No SQL and no parsing here. One module per command group (ingest, query,
export, plot, diff, check); options.py holds what they share: the options,
the output formats and how library errors become messages and exit codes.
"""

from __future__ import annotations

import importlib

import click

from bufferhouse.version import __version__

__all__ = ["main"]

#: Each command and where it lives, imported when it runs: an ingest need not import
#: check, compare and visual, nor --version the parser and DuckDB (measured below).
COMMANDS = {
    "ingest": "ingest:ingest_command",
    "query": "query:query_command",
    "queries": "query:queries_group",
    "sql": "query:sql_command",
    "plot": "plot:plot",
    "report": "plot:report_command",
    "export": "export:export_command",
    "attach": "export:attach_command",
    "check": "check:check_command",
    "diff": "diff:diff_command",
    "fits": "fits:fits_command",
}


class LazyGroup(click.Group):
    """A group whose commands are imported by name when needed (click's documented
    pattern for lazily loaded subcommands). Importing every command at start cost
    `bufferhouse --version` 0.46 s of imports, warm."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = COMMANDS.get(cmd_name)
        if where is None:
            return None
        module, attr = where.split(":")
        return getattr(importlib.import_module(f"bufferhouse.cli.{module}"), attr)


def show_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    """--version, and whether ingest reads dumps with the compiled reader (docs/native.md)."""
    if not value or ctx.resilient_parsing:
        return
    from bufferhouse.version import compiled_reader_missing  # not the parser: 0.8 s

    missing = compiled_reader_missing()
    reader = "yes" if missing is None else "no: " + missing
    click.echo(f"bufferhouse, version {__version__}\ncompiled reader: {reader}")
    ctx.exit()


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=show_version,
    help="Show the version and exit.",
)
def main() -> None:
    """An SQL warehouse for XLA memory data.

    It reads buffer-assignment text dumps (--xla_dump_to), HloProto dumps
    (*.hlo.pb, --xla_dump_hlo_as_proto), XProf profiles (*.xplane.pb) and the
    RESOURCE_EXHAUSTED out-of-memory messages in job logs into one DuckDB file,
    and answers memory questions with canned SQL.

    Example: bufferhouse ingest dumps/ --db fleet.duckdb && bufferhouse query top-modules --db fleet.duckdb
    """
    from bufferhouse.cli.options import show_notices  # pyarrow and DuckDB: not for --help

    show_notices()
