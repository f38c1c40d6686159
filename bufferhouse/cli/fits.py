"""`bufferhouse fits`: will the labelled programs fit their targets, as a CI gate."""

from __future__ import annotations

import sys

import click

import bufferhouse
from bufferhouse.cli.options import db_option, emit, format_option, handle_errors, output_option
from bufferhouse.errors import QueryError
from bufferhouse.render import human_bytes


def parse_headroom(text: str) -> float:
    """`10%` or `10` -> 10.0 (percent of the capacity that must stay free)."""
    body = text.strip().removesuffix("%")
    try:
        value = float(body)
    except ValueError:
        raise QueryError(f"--min-headroom wants a percentage like 10%, got {text!r}") from None
    if not 0 <= value < 100:
        raise QueryError(f"--min-headroom wants 0% to 99%, got {text!r}")
    return value


def failures(rows: list[dict]) -> list[dict]:
    """The rows that fail the gate: an OOM, or a compile that does not fit (or cannot be
    judged: no capacity or no peak, which a gate never passes)."""
    return [r for r in rows if not r["fits"]]


def describe(row: dict) -> str:
    where = f"{row['program_name']} [{row['labels']}] {row['size_value']}"
    if row["kind"] == "oom":
        return f"{where}: compile-time OOM (required {human_bytes(row['peak_bytes'])})"
    if row["capacity_bytes"] is None or row["peak_bytes"] is None:
        return f"{where}: no capacity or peak known (give --capacity)"
    return f"{where}: headroom {row['headroom_pct']}% of {human_bytes(row['capacity_bytes'])}"


@click.command("fits")
@db_option()
@click.option("--size", default="batch", show_default=True, help="The swept label key.")
@click.option("--label", default=None, metavar="KEY=VALUE", help="Only this label's compiles.")
@click.option("--capacity", default=None, help="Judge by this capacity (16GiB, 80GB, bytes).")
@click.option(
    "--min-headroom",
    default="0%",
    show_default=True,
    metavar="PCT",
    help="Exit 1 unless every compile chosen leaves this much of its capacity free.",
)
@format_option
@output_option
@handle_errors
def fits_command(db, size, label, capacity, min_headroom, fmt, output) -> None:
    """Will it fit: each labelled compile's peak against its target's capacity.

    Prints `query fits` for the compiles chosen and exits 1 when one of them is a
    compile-time OOM or leaves less than --min-headroom of its capacity free (0 when
    all fit; 2 for usage errors), as `diff --fail-above` does (docs/fits.md).

    Example: bufferhouse fits --label topology=v5e:1x1 --min-headroom 10%
    """
    headroom = parse_headroom(min_headroom)
    table = bufferhouse.query(
        "fits", db, swept=size, label=label, capacity=capacity, min_headroom=headroom
    )
    emit(table, fmt, output)
    rows = table.to_pylist()
    bad = failures(rows)
    if not rows:
        click.echo(f"gate failed: no compile carries a {size}= label", err=True)
        sys.exit(1)
    for row in bad[:10]:
        click.echo(f"  {describe(row)}", err=True)
    verdict = "failed" if bad else "passed"
    click.echo(
        f"gate {verdict}: {len(rows) - len(bad)} of {len(rows)} fit with {headroom:g}% headroom",
        err=True,
    )
    sys.exit(1 if bad else 0)
