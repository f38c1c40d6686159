"""`bufferhouse check`: verify a warehouse."""

from __future__ import annotations

import sys

import click

from bufferhouse.check import check_warehouse
from bufferhouse.cli.options import db_option, handle_errors, wait_option


@click.command("check")
@db_option()
@wait_option
@handle_errors
def check_command(db, wait) -> None:
    """Verify the warehouse: schema version, whole modules, the dumps' own
    invariants recomputed from the tables, orphan rows. Opens it read-only;
    exits 1 when anything is off.

    Example: bufferhouse check --db fleet.duckdb
    """
    report = check_warehouse(db, wait=wait)
    for line in report.lines():
        click.echo(line)
    sys.exit(0 if report.ok else 1)
