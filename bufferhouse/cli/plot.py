"""`bufferhouse plot` (timeline, arena) and `report`: pictures of the warehouse.

bufferhouse.visual imports matplotlib only when it draws, so these commands
load without the plot extra and say which extra to install when it is missing.
"""

from __future__ import annotations

import click

from bufferhouse import visual
from bufferhouse.cli.options import db_option, handle_errors, wait_option
from bufferhouse.render import human_bytes

image_option = click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False),
    help="Image file; .png or .svg chooses the format.",
)


@click.group("plot")
def plot() -> None:
    """Draw one module's memory as PNG or SVG (needs: pip install 'bufferhouse[plot]').

    MODULE is a module name, file stem, module_id or 12-digit hash prefix. A
    name compiled into several modules draws the most recently ingested one and
    says on stderr which others matched.

    Example: bufferhouse plot timeline jit_train_step -o timeline.png
    """


def _plotted(result) -> None:
    note = result.choice.note()
    if note:
        click.echo(f"note: {note}", err=True)
    click.echo(f"wrote {result.path}", err=True)


@plot.command("timeline")
@click.argument("module")
@image_option
@db_option()
@click.option("--space", type=int, default=0, show_default=True, help="Memory space (color).")
@click.option(
    "--top",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    help="Largest buffers at the peak to list.",
)
@wait_option
@handle_errors
def plot_timeline(module, output, db, space, top, wait) -> None:
    """Live bytes over program order, stacked by category, with the heap peak marked.

    Parameters, outputs, constants and thread-local allocations hold their bytes
    throughout; temp bytes rise and fall. Beside the chart: the largest buffers
    live at the peak, with their op_name and size.

    Example: bufferhouse plot timeline jit_train_step -o timeline.svg --space 0
    """
    _plotted(visual.plot_timeline(module, output, db=db, space=space, top=top, wait=wait))


@plot.command("arena")
@click.argument("module")
@image_option
@db_option()
@click.option(
    "--allocation",
    type=int,
    default=None,
    help="Allocation index (default: the module's largest temp allocation).",
)
@wait_option
@handle_errors
def plot_arena(module, output, db, allocation, wait) -> None:
    """One allocation as blocks of byte offset x live range: how a temp arena is reused.

    Each value is a rectangle over the steps it is live and the bytes it
    occupies; gaps are fragmentation (see `bufferhouse query fragmentation`).

    Example: bufferhouse plot arena jit_train_step --allocation 4 -o arena.svg
    """
    _plotted(visual.plot_arena(module, output, db=db, allocation=allocation, wait=wait))


@click.command("report")
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False),
    help="HTML file to write.",
)
@db_option()
@click.option("--label", metavar="KEY=VALUE", default=None, help="Only modules with this label.")
@click.option(
    "--baseline",
    metavar="LABEL|FILE|DIR",
    default=None,
    help="Compare with this run (a label, a warehouse file or a dump tree): changes first.",
)
@click.option(
    "--top", type=click.IntRange(min=1), default=10, show_default=True, help="Modules ranked."
)
@click.option(
    "--modules",
    "sections",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    help="Top modules that get a section with their timeline.",
)
@click.option(
    "--rows", type=click.IntRange(min=1), default=15, show_default=True, help="Rows per table."
)
@wait_option
@handle_errors
def report_command(output, db, label, baseline, top, sections, rows, wait) -> None:
    """Write one self-contained HTML report: fleet overview, then the top modules.

    The file opens from disk in any browser, needs no server and makes no
    network requests. Tables sort on a header click; hover a size for its
    exact bytes. Needs: pip install 'bufferhouse[plot]'.

    Example: bufferhouse report -o report.html --label run=nightly --baseline run=previous
    """
    written = visual.write_report(
        output,
        db=db,
        label=label,
        baseline=baseline,
        top=top,
        sections=sections,
        rows=rows,
        wait=wait,
    )
    changes = "" if written.data.changes is None else f", {len(written.data.changes)} changes"
    click.echo(
        f"wrote {written.path} ({human_bytes(written.bytes)}): {written.data.compile_count} "
        f"compiles ({written.data.module_count} modules), "
        f"{len(written.data.sections)} module sections{changes}",
        err=True,
    )
