"""The `bufferhouse` command: parse options, call one library function, render.

No SQL and no parsing here. One module per command group (ingest, query,
export, plot, diff, check); options.py holds what they share: the options,
the output formats and how library errors become messages and exit codes.
"""

from __future__ import annotations

import click

from bufferhouse.cli.check import check_command
from bufferhouse.cli.diff import diff_command
from bufferhouse.cli.export import attach_command, export_command
from bufferhouse.cli.ingest import ingest_command
from bufferhouse.cli.options import show_notices
from bufferhouse.cli.plot import plot, report_command
from bufferhouse.cli.query import queries_group, query_command, sql_command
from bufferhouse.parse.text import native
from bufferhouse.version import __version__

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    __version__,
    prog_name="bufferhouse",
    # Whether ingest reads dumps with the compiled reader (docs/native.md).
    message="%(prog)s, version %(version)s\ncompiled reader: "
    + ("yes" if native.MISSING is None else "no: " + native.MISSING.replace("%", "%%")),
)
def main() -> None:
    """An SQL warehouse for XLA memory data.

    It reads buffer-assignment text dumps (--xla_dump_to), HloProto dumps
    (*.hlo.pb, --xla_dump_hlo_as_proto), XProf profiles (*.xplane.pb) and the
    RESOURCE_EXHAUSTED out-of-memory messages in job logs into one DuckDB file,
    and answers memory questions with canned SQL.

    Example: bufferhouse ingest dumps/ --db fleet.duckdb && bufferhouse query top-modules --db fleet.duckdb
    """
    show_notices()


for command in (
    ingest_command,
    query_command,
    queries_group,
    sql_command,
    plot,
    report_command,
    export_command,
    attach_command,
    check_command,
    diff_command,
):
    main.add_command(command)
