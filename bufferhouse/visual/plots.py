"""Draw timelines and arenas with matplotlib (the optional `plot` extra).

Figures are built with matplotlib's object API (no pyplot, no global backend
switch), so importing this from a notebook changes nothing there. Every drawn
series carries a gid naming what it is, so tests can read the data back from
the figure.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import zlib
from pathlib import Path

from bufferhouse.errors import MissingExtraError, PlotError
from bufferhouse.render import human_bytes
from bufferhouse.visual.data import LAYERS as LAYERS_ORDER
from bufferhouse.visual.data import Arena, Envelope, Timeline

#: Pixel size of saved figures: inches x DPI.
TIMELINE_SIZE = (12.0, 6.0)
ARENA_SIZE = (12.0, 6.5)
DPI = 100
#: Envelope buckets per pixel column of a timeline's axes.
OVERSAMPLE = 1
FORMATS = ("png", "svg")

COLORS = {
    "parameter": "#4c78a8",
    "output": "#f58518",
    "constant": "#9d9d9d",
    "thread-local": "#b279a2",
    "temp": "#54a24b",
}
LABELS = {
    "parameter": "parameters",
    "output": "outputs",
    "constant": "constants",
    "thread-local": "thread-local",
    "temp": "temp",
}
_UNITS = (("B", 1), ("KiB", 1024), ("MiB", 1024**2), ("GiB", 1024**3), ("TiB", 1024**4))
_NICE = (1, 2, 2.5, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000)


def _matplotlib():
    try:
        import matplotlib  # deferred: the optional `plot` extra; a clear error without it
        from matplotlib.figure import Figure
    except ImportError:
        raise MissingExtraError("matplotlib", "plot", "drawing plots and reports") from None
    return matplotlib, Figure


def require_matplotlib() -> None:
    """Raise MissingExtraError now, before any work, when the `plot` extra is missing."""
    _matplotlib()


@contextlib.contextmanager
def _style(svg_text: bool = False):
    matplotlib, _ = _matplotlib()
    with matplotlib.rc_context(
        {
            "font.size": 9,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "svg.hashsalt": "bufferhouse",  # stable ids and identical files run to run
            "svg.fonttype": "none" if svg_text else "path",
            # Names are data: `jit_$$` or an op_name `$x$` is shown as written, never
            # parsed as mathtext (which fails on an odd `$` and typesets a pair).
            "text.parse_math": False,
            "text.usetex": False,
        }
    ):
        yield


def _byte_axis(axis, vmax: float) -> None:
    """Ticks at round binary multiples (256 KiB, 1 MiB, ...) labelled in human units."""
    # deferred: matplotlib is the optional `plot` extra
    from matplotlib.ticker import FuncFormatter, MultipleLocator

    vmax = max(float(vmax), 1.0)
    name, unit = next(((n, u) for n, u in reversed(_UNITS) if vmax >= u), _UNITS[0])
    raw = vmax / unit / 6
    step = next((s for s in _NICE if s >= raw), _NICE[-1]) * unit
    if unit == 1:
        step = max(step, 1)
    axis.set_major_locator(MultipleLocator(step))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v / unit:g} {name}" if v else "0"))


def _short_op(op_name: str | None, width: int = 42) -> str | None:
    if not op_name:
        return None
    parts = op_name.split("/")
    text = "/".join(parts[-3:])
    if len(parts) > 3:
        text = "…/" + text
    if len(text) > width:
        text = "…" + text[-(width - 1) :]
    return text


def _buffer_label(row: dict) -> str:
    where = row["instruction"] + ("" if row["shape_index"] in (None, "{}") else row["shape_index"])
    op = _short_op(row.get("op_name"))
    return f"{human_bytes(row['size'])}  {row['category']}  {where}" + (f"\n    {op}" if op else "")


def draw_timeline(tl: Timeline):
    """A matplotlib Figure: tl.layers() stacked over program order, the peak marked,
    the top peak buffers listed beside it."""
    with _style():
        return _draw_timeline(tl)


def _draw_timeline(tl: Timeline):
    _, Figure = _matplotlib()
    fig = Figure(figsize=TIMELINE_SIZE, dpi=DPI)
    grid = fig.add_gridspec(1, 2, width_ratios=(2.2, 1), wspace=0.04)
    ax = fig.add_subplot(grid[0, 0])
    side = fig.add_subplot(grid[0, 1])
    side.set_axis_off()
    fig.subplots_adjust(left=0.08, right=0.99, top=0.9, bottom=0.1)

    n = len(tl.steps)
    unit = "event" if tl.from_trace else "step"
    # More steps than the axes have pixel columns cannot be told apart: a long
    # series is drawn as its envelope, one bucket per column.
    columns = round(ax.get_position().width * fig.get_figwidth() * fig.dpi * OVERSAMPLE)
    if n > columns:
        _draw_envelope(ax, tl, tl.envelope(columns))
    else:
        _draw_steps(ax, tl)
    edges = [tl.steps[0], tl.steps[-1] + 1] if n else [0, 1]
    ymax = max(tl.live_bytes) if tl.live_bytes else 1
    ax.set_xlim(edges[0], edges[-1])
    ax.set_ylim(0, ymax * 1.12 or 1)
    _byte_axis(ax.yaxis, ymax * 1.12)
    ax.set_xlabel(
        "heap-simulator trace (event; what XProf's memory viewer draws)"
        if tl.from_trace
        else "program order (HloLiveRange step)"
    )
    ax.set_ylabel(f"live bytes, memory space {tl.space} ({tl.space_name})")
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)

    if tl.peak_time is not None:
        x = tl.peak_time + 0.5
        ax.axvline(x, color="#d62728", linestyle="--", linewidth=1, gid="peak-line")
        ax.plot([x], [tl.peak_bytes], marker="v", color="#d62728", gid="peak-marker")
        where = tl.peak_instruction or "end"
        ax.annotate(
            f"heap peak {human_bytes(tl.peak_bytes)}\n{unit} {tl.peak_time} ({where})",
            xy=(x, tl.peak_bytes),
            xytext=(6, 6),
            textcoords="offset points",
            ha="left" if tl.peak_time < 0.7 * n else "right",
            va="bottom",
            color="#d62728",
            fontsize=8,
        )
    reduced = f" (min and max per pixel column of {n / columns:.0f} {unit}s)" if n > columns else ""
    source = "heap-simulator trace" if tl.from_trace else "live ranges"
    fig.suptitle(
        f"{tl.module.module_name}  ·  {tl.module.hash_prefix}  ·  heap timeline from the"
        f" {source}, {n} {unit}s{reduced}",
        x=0.08,
        ha="left",
        fontsize=11,
    )

    title = f"largest buffers at the peak ({unit} {tl.peak_time})"
    side.text(0.02, 1.0, title, va="top", fontsize=9, fontweight="bold", transform=side.transAxes)
    if tl.peak_buffers:
        lines = [f"{i}. {_buffer_label(r)}" for i, r in enumerate(tl.peak_buffers, 1)]
    else:
        lines = ["(none)"]
    side.text(
        0.02,
        0.93,
        "\n".join(lines),
        va="top",
        fontsize=7.5,
        family="monospace",
        linespacing=1.5,
        transform=side.transAxes,
        gid="peak-buffers",
        wrap=False,
        clip_on=True,
    )
    handles, labels = ax.get_legend_handles_labels()
    side.legend(
        handles[::-1],
        labels[::-1],
        loc="lower left",
        fontsize=8,
        frameon=False,
        title="live bytes by category (top to bottom)",
        title_fontsize=8,
    )
    return fig


def _layer_label(category: str, peak: int) -> str:
    return f"{LABELS[category]}{' (peak)' if category == 'temp' else ''}: {human_bytes(peak)}"


def _draw_steps(ax, tl: Timeline) -> None:
    """Every step: each layer one stair per step, stacked."""
    n = len(tl.steps)
    edges = [*tl.steps, tl.steps[-1] + 1] if n else [0, 1]
    bottom = [0] * n
    for category, values in tl.layers().items():
        top = [b + v for b, v in zip(bottom, values)]
        ax.stairs(
            top,
            edges,
            baseline=bottom,
            fill=True,
            color=COLORS[category],
            alpha=0.9,
            label=_layer_label(category, max(values) if values else 0),
            gid=f"layer-{category}",
        )
        bottom = top


def _draw_envelope(ax, tl: Timeline, env: Envelope) -> None:
    """A long timeline as its envelope: each constant layer one block, temp as a
    solid area up to its least value in each bucket and a lighter band up to its
    most (the pixels the full series would cover only in part)."""
    base = 0
    for category, value in tl.indefinite.items():
        if value:
            ax.stairs(
                [base + value],
                [env.edges[0], env.edges[-1]],
                baseline=base,
                fill=True,
                color=COLORS[category],
                alpha=0.9,
                label=_layer_label(category, value),
                gid=f"layer-{category}",
            )
            base += value
    ax.stairs(
        [base + v for v in env.high],
        env.edges,
        baseline=base,
        fill=True,
        color=COLORS["temp"],
        alpha=0.4,
        label="temp, highest in a pixel column",
        gid="layer-temp",
    )
    ax.stairs(
        [base + v for v in env.low],
        env.edges,
        baseline=base,
        fill=True,
        color=COLORS["temp"],
        alpha=0.9,
        label=_layer_label("temp", max(env.high)),
        gid="layer-temp-low",
    )


def _color_for(name: str) -> str:
    from matplotlib import colormaps  # deferred: matplotlib is the optional `plot` extra

    rgba = colormaps["tab20"](zlib.crc32(name.encode()) % 20)
    return "#{:02x}{:02x}{:02x}".format(*(round(c * 255) for c in rgba[:3]))


def draw_arena(ar: Arena):
    """A matplotlib Figure: one rectangle per value, x = live steps, y = bytes."""
    with _style():
        return _draw_arena(ar)


def _draw_arena(ar: Arena):
    _, Figure = _matplotlib()
    from matplotlib.patches import Rectangle  # deferred: matplotlib is the optional `plot` extra

    fig = Figure(figsize=ARENA_SIZE, dpi=DPI)
    ax = fig.add_subplot()
    fig.subplots_adjust(left=0.09, right=0.98, top=0.88, bottom=0.1)
    # Step t spans [t, t+1); the timeline's last step is schedule_length.
    ends = [b["end_time"] + 1 for b in ar.blocks if b["end_time"] is not None]
    steps = max([(ar.schedule_length or 0) + 1, *ends])
    plot_h = ARENA_SIZE[1] * DPI * (0.88 - 0.1)  # pixels of the axes' height
    plot_w = ARENA_SIZE[0] * DPI * (0.98 - 0.09)
    for b in ar.blocks:
        start = b["start_time"] if b["start_time"] is not None else 0
        end = b["end_time"] if b["end_time"] is not None else steps - 1
        width = end - start + 1
        color = _color_for(b["instruction"])
        rect = Rectangle(
            (start, b["byte_offset"]),
            width,
            b["size"],
            facecolor=color,
            edgecolor="#333333",
            linewidth=0.6,
            alpha=0.85,
            hatch=None if b["has_live_range"] else "//",
            gid=f"value-{b['value_id']}",
        )
        ax.add_patch(rect)
        index = "" if b["shape_index"] in (None, "{}") else b["shape_index"]
        name = f"{b['instruction']}{index}"
        height_px = b["size"] / max(ar.size, 1) * plot_h
        fits = width / steps * plot_w >= 5.2 * (len(name) + 2)
        if fits and height_px >= 11:
            ax.text(
                start + width / 2,
                b["byte_offset"] + b["size"] / 2,
                name + (f"\n{human_bytes(b['size'])}" if height_px >= 24 else ""),
                ha="center",
                va="center",
                fontsize=7,
                clip_on=True,
            )
    ax.set_xlim(0, steps)
    ax.set_ylim(0, max(ar.size, 1))
    _byte_axis(ax.yaxis, ar.size)
    ax.set_xlabel("program order (HloLiveRange step); a block spans the steps its value is live")
    ax.set_ylabel("offset in the allocation")
    ax.grid(alpha=0.25)
    ax.set_axisbelow(True)
    live = (
        f"most in use at once {human_bytes(ar.max_live_bytes)}, "
        f"unused {human_bytes(ar.waste_bytes)} ({100 * ar.waste_bytes / ar.size:.1f}%)"
        if ar.max_live_bytes is not None and ar.size
        else "no live ranges"
    )
    fig.suptitle(
        f"{ar.module.module_name}  ·  {ar.module.hash_prefix}  ·  allocation "
        f"{ar.allocation_index} ({ar.category}, space {ar.color}): "
        f"{human_bytes(ar.size)}, {len(ar.blocks)} values",
        x=0.09,
        ha="left",
        fontsize=11,
    )
    fig.text(
        0.09,
        0.915,
        live + "; hatched: no live range in the dump (drawn live throughout)",
        fontsize=8,
        color="#555555",
    )
    return fig


def _name_bars(bars, prefix: str) -> None:
    # One id per bar: ids must stay unique once the SVG is inlined in HTML.
    for i, bar in enumerate(bars):
        bar.set_gid(f"{prefix}-{i}")


def draw_top_modules(rows: list[dict], layers: dict[int, dict[str, int]]):
    """Horizontal bars: each module's heap peak split into its layers (bottom = largest)."""
    with _style():
        _, Figure = _matplotlib()
        height = 1.2 + 0.32 * max(len(rows), 1)
        fig = Figure(figsize=(12.0, height), dpi=DPI)
        ax = fig.add_subplot()
        fig.subplots_adjust(left=0.3, right=0.97, top=1 - 0.45 / height, bottom=0.55 / height)
        names = [f"{r['module_name']} · {r['hash_prefix']}" for r in rows]
        y = list(range(len(rows)))[::-1]
        left = [0] * len(rows)
        for category in (*LAYERS_ORDER,):
            widths = [layers.get(r["module_id"], {}).get(category, 0) for r in rows]
            if not any(widths):
                continue
            bars = ax.barh(
                y,
                widths,
                left=left,
                color=COLORS[category],
                label=LABELS[category],
                height=0.7,
            )
            _name_bars(bars, f"bars-{category}")
            left = [a + b for a, b in zip(left, widths)]
        ax.set_yticks(y, names, fontsize=8)
        vmax = max(left) if left else 1
        ax.set_xlim(0, vmax * 1.02 or 1)
        _byte_axis(ax.xaxis, vmax)
        ax.set_xlabel("heap peak, memory space 0 (temp = temp bytes live at the peak)")
        ax.grid(axis="x", alpha=0.3)
        ax.set_axisbelow(True)
        ax.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), fontsize=8, ncols=5, frameon=False)
        return fig


def draw_changes(rows: list[dict]):
    """Horizontal bars of heap-peak deltas, base -> head: growth red, shrinkage green."""
    with _style():
        _, Figure = _matplotlib()
        height = 1.2 + 0.32 * max(len(rows), 1)
        fig = Figure(figsize=(12.0, height), dpi=DPI)
        ax = fig.add_subplot()
        fig.subplots_adjust(left=0.3, right=0.97, top=1 - 0.3 / height, bottom=0.55 / height)
        y = list(range(len(rows)))[::-1]
        deltas = [r["delta_bytes"] or 0 for r in rows]
        colors = ["#d62728" if d > 0 else "#2ca02c" for d in deltas]
        _name_bars(ax.barh(y, deltas, color=colors, height=0.7), "bars-delta")
        ax.set_yticks(y, [f"{r['module_name']} ({r['status']})" for r in rows], fontsize=8)
        ax.axvline(0, color="#333333", linewidth=0.8)
        span = max([abs(d) for d in deltas] + [1])
        ax.set_xlim(-span * 1.05, span * 1.05)
        _byte_axis(ax.xaxis, span)
        ax.set_xlabel("change in heap peak, baseline -> this run")
        ax.grid(axis="x", alpha=0.3)
        ax.set_axisbelow(True)
        return fig


def draw_devices(rows: list[dict]):
    """Horizontal bars: live buffer bytes per device of one snapshot."""
    with _style():
        _, Figure = _matplotlib()
        height = 1.0 + 0.32 * max(len(rows), 1)
        fig = Figure(figsize=(12.0, height), dpi=DPI)
        ax = fig.add_subplot()
        fig.subplots_adjust(left=0.2, right=0.97, top=1 - 0.2 / height, bottom=0.55 / height)
        y = list(range(len(rows)))[::-1]
        sizes = [r["live_bytes"] or 0 for r in rows]
        _name_bars(ax.barh(y, sizes, color="#1f77b4", height=0.7), "bars-device")
        ax.set_yticks(y, [str(r["device"]) for r in rows], fontsize=8)
        vmax = max([*sizes, 1])
        ax.set_xlim(0, vmax * 1.02)
        _byte_axis(ax.xaxis, vmax)
        ax.set_xlabel("live buffer bytes")
        ax.grid(axis="x", alpha=0.3)
        ax.set_axisbelow(True)
        return fig


def output_format(path: str | os.PathLike[str]) -> str:
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        raise PlotError(f"cannot tell the image format of {os.fspath(path)!r}: use .png or .svg")
    return suffix


def require_directory(path: str | os.PathLike[str]) -> None:
    """Fail before any work when the output's directory is not there (a typo), as
    `query -o` does, rather than with an OSError after the drawing."""
    parent = Path(path).parent
    if not parent.is_dir():
        raise PlotError(f"cannot write {os.fspath(path)}: no directory {os.fspath(parent)}")


def write_output(path: str | os.PathLike[str], write) -> Path:
    """Call `write(target)`; an OSError (a full disk, no permission) becomes a PlotError
    naming the file, and no partial file stays behind."""
    target = Path(path)
    try:
        write(target)
    except OSError as exc:
        target.unlink(missing_ok=True)
        raise PlotError(f"cannot write {os.fspath(path)}: {exc.strerror or exc}") from None
    return target


def save(fig, path: str | os.PathLike[str]) -> Path:
    """Write the figure as PNG or SVG, chosen by the file's suffix."""
    fmt = output_format(path)
    with _style():
        return write_output(
            path, lambda t: fig.savefig(t, format=fmt, dpi=DPI, metadata=_metadata(fmt))
        )


def _metadata(fmt: str) -> dict:
    # No dates or tool URLs: the same data gives the same file.
    if fmt == "svg":
        return {"Date": None, "Creator": None, "Format": None, "Type": None}
    return {"Software": None}


_ID = re.compile(r'\bid="([^"]+)"')
_REF = re.compile(r'(href="#|url\(#)([^")]+)')


def inline_svg(fig, prefix: str) -> str:
    """The figure as an <svg> element for embedding in HTML: text kept as text,
    no XML prolog, and every id prefixed so several charts can share a page."""
    buf = io.StringIO()
    with _style(svg_text=True):
        fig.savefig(buf, format="svg", metadata=_metadata("svg"))
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    text = _ID.sub(lambda m: f'id="{prefix}{m.group(1)}"', text)
    text = _REF.sub(lambda m: f"{m.group(1)}{prefix}{m.group(2)}", text)
    return re.sub(r'<svg ([^>]*?)width="[^"]*" height="[^"]*"', r"<svg \1", text, count=1)
