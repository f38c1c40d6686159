"""Plots and the HTML report: the series behind each chart equal the canned query
results (data, not pixels), the files are valid images of the promised size, and
the report opens in a real headless Chromium without errors or network requests."""

from __future__ import annotations

import os
import re
import shutil
import struct
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import bufferhouse
from bufferhouse.cli import main
from bufferhouse.errors import MissingExtraError, PlotError, UnknownModuleError
from tests.conftest import CORPUS, DATA, ROOT

pytest.importorskip("matplotlib", reason="the plot extra is not installed")

from bufferhouse import queries, visual
from bufferhouse.render import human_bytes
from bufferhouse.schema.warehouse import ensure_schema, open_connection
from bufferhouse.visual import plots, report
from bufferhouse.visual.data import ModuleRef, Timeline, envelope

SAMPLE = "003_186bba49641ec33a"
ARTIFACTS = ROOT / "test-artifacts"


def _corpus_module(db: Path, name: str = "jit_convnet_train", run: str = "jax-0.7.2") -> str:
    """The module_id (as text) of one corpus module, found by its file path."""
    rows = bufferhouse.sql(
        "SELECT module_id FROM modules WHERE module_name = $name "
        "AND array_to_string(paths, ' ') LIKE '%/' || $run || '/%'",
        db,
        {"name": name, "run": run},
    ).to_pylist()
    assert len(rows) == 1, rows
    return str(rows[0]["module_id"])


@pytest.fixture(scope="module")
def modules(samples_db, fleet_db) -> list[tuple[Path, str]]:
    """(warehouse, module key): a TPU sample and a CPU corpus module with 131 steps."""
    return [(samples_db, SAMPLE), (fleet_db, _corpus_module(fleet_db))]


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR", "not a PNG"
    return struct.unpack(">II", head[16:24])


# ------------------------------------------------------------------ timeline


@pytest.mark.parametrize("which", [0, 1], ids=["sample", "corpus"])
def test_timeline_series_equal_the_queries(modules, which):
    db, key = modules[which]
    choice, tl = visual.timeline(key, db=db, top=5)
    query = bufferhouse.query("heap-timeline", db, module=key).to_pylist()
    assert tl.steps == [r["time"] for r in query]
    assert tl.temp_bytes == [r["temp_bytes"] for r in query]
    layers = tl.layers()
    assert list(layers)[-1] == "temp"
    assert [sum(v[i] for v in layers.values()) for i in range(len(tl.steps))] == [
        r["live_bytes"] for r in query
    ]
    assert sum(tl.indefinite.values()) == query[0]["indefinite_bytes"]
    assert tl.peak_time == next(r["time"] for r in query if r["is_peak"])
    # Oracles beyond heap-timeline: the module's stored heap peak, XLA's categories.
    module = bufferhouse.query("modules", db, module=key).to_pylist()[0]
    assert tl.peak_bytes == max(tl.live_bytes) == module["heap_peak_bytes"]
    cats = bufferhouse.query("categories", db, module=key).to_pylist()
    space0 = next(c for c in cats if c["color"] == 0)
    assert tl.indefinite["parameter"] == space0["parameter_bytes"]
    assert tl.indefinite["output"] == space0["output_bytes"] - space0["alias_bytes"]
    peak = bufferhouse.query("peak-buffers", db, module=key, top=5).to_pylist()
    assert tl.peak_buffers == peak
    assert choice.chosen.module_id == int(module["module_id"])
    assert tl.source == "live_ranges" == query[0]["source"]  # text dumps carry no trace


@pytest.mark.parametrize("which", [0, 1], ids=["sample", "corpus"])
def test_timeline_figure_draws_those_series(modules, which):
    db, key = modules[which]
    _, tl = visual.timeline(key, db=db)
    fig = plots.draw_timeline(tl)
    ax = fig.axes[0]
    drawn = {a.get_gid(): a for a in ax.patches if (a.get_gid() or "").startswith("layer-")}
    assert list(drawn) == [f"layer-{c}" for c in tl.layers()]
    bottom = [0] * len(tl.steps)
    for category, values in tl.layers().items():
        top, edges, baseline = drawn[f"layer-{category}"].get_data()
        assert list(baseline) == bottom
        assert list(top) == [b + v for b, v in zip(bottom, values)]
        assert list(edges) == [*tl.steps, tl.steps[-1] + 1]
        bottom = list(top)
    assert bottom == tl.live_bytes
    (line,) = [a for a in ax.lines if a.get_gid() == "peak-line"]
    assert list(line.get_xdata()) == [tl.peak_time + 0.5] * 2
    assert ("trace" in ax.get_xlabel()) == tl.from_trace
    source = "heap-simulator trace" if tl.from_trace else "live ranges"
    assert f"heap timeline from the {source}" in fig.texts[0].get_text()
    (listing,) = [t for t in fig.axes[1].texts if t.get_gid() == "peak-buffers"]
    for row in tl.peak_buffers:
        assert human_bytes(row["size"]) in listing.get_text()
        assert row["instruction"] in listing.get_text()


@pytest.fixture(scope="module")
def proto_modules(tmp_path_factory) -> tuple[Path, list[tuple[str, int]]]:
    """One compile read from its proto alone and from text beside its proto (both have
    a heap-simulator trace): (warehouse, [(module_id, heap_peak_bytes)]); one compile,
    one peak."""
    proto = DATA / "proto"
    db = tmp_path_factory.mktemp("visual-proto") / "proto.duckdb"
    trees = [proto / "proto_only" / "while_newton", proto / "both" / "while_newton"]
    assert bufferhouse.ingest(trees, db=db, jobs=1).ok
    rows = bufferhouse.sql(
        "SELECT module_id, heap_peak_bytes FROM modules ORDER BY source_kind", db
    ).to_pylist()
    assert len(rows) == 2 and rows[0]["heap_peak_bytes"] == rows[1]["heap_peak_bytes"] > 0
    return db, [(str(r["module_id"]), r["heap_peak_bytes"]) for r in rows]


@pytest.mark.parametrize("which", [0, 1], ids=["proto", "text+proto"])
def test_timeline_of_a_module_with_a_trace_draws_the_trace(proto_modules, which):
    """The trace wins: one step per heap-simulator event, the layers (the indefinite
    allocations by category, then the trace's bytes) add up to heap-timeline's
    live_bytes, the peak is the module's heap_peak_bytes (as from its text dump), and
    the figure says where it comes from."""
    db, keys = proto_modules
    key, heap_peak = keys[which]
    _, tl = visual.timeline(key, db=db, top=5)
    query = bufferhouse.query("heap-timeline", db, module=key).to_pylist()
    assert tl.source == "trace" and tl.from_trace
    assert tl.steps == [r["time"] for r in query]
    layers = tl.layers()
    assert [sum(v[i] for v in layers.values()) for i in range(len(tl.steps))] == [
        r["live_bytes"] for r in query
    ]
    assert sum(tl.indefinite.values()) == query[0]["indefinite_bytes"]
    assert tl.peak_bytes == max(tl.live_bytes) == heap_peak
    assert {r["peak_source"] for r in tl.peak_buffers} == {"trace"}
    fig = plots.draw_timeline(tl)
    assert "heap-simulator trace" in fig.axes[0].get_xlabel()
    assert "heap timeline from the heap-simulator trace" in fig.texts[0].get_text()
    assert f"event {tl.peak_time}" in fig.axes[1].texts[0].get_text()


@pytest.mark.parametrize("fmt", ["png", "svg"])
def test_timeline_files_are_valid_images_of_the_promised_size(modules, tmp_path, fmt):
    db, key = modules[1]
    out = tmp_path / f"timeline.{fmt}"
    result = visual.plot_timeline(key, out, db=db)
    assert result.path == out
    width, height = (int(x * plots.DPI) for x in plots.TIMELINE_SIZE)
    if fmt == "png":
        assert _png_size(out) == (width, height)
    else:
        root = ET.parse(out).getroot()
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        assert (root.get("width"), root.get("height")) == (
            f"{width * 0.72:g}pt",
            f"{height * 0.72:g}pt",
        )
        ids = {e.get("id") for e in root.iter()}
        assert {"layer-temp", "layer-parameter", "peak-line"} <= ids


# ------------------------------------------------- long timelines: envelopes


@st.composite
def _series(draw):
    values = draw(st.lists(st.integers(0, 2**40), min_size=1, max_size=400))
    columns = draw(st.integers(3, 60))
    keep = draw(st.none() | st.integers(0, len(values) - 1))
    first = draw(st.integers(0, 5))
    return list(range(first, first + len(values))), values, columns, keep


@settings(max_examples=300, deadline=None)
@given(_series())
def test_envelope_bounds_the_series_and_keeps_the_peak_exact(case):
    steps, values, columns, keep = case
    env = envelope(steps, values, columns, keep)
    assert len(env.low) == len(env.high) == len(env.edges) - 1 <= max(columns, 1)
    assert env.edges[0] == steps[0] and env.edges[-1] == steps[-1] + 1
    assert all(a < b for a, b in zip(env.edges, env.edges[1:]))
    # Each bucket's low and high are the least and most of the original values in it.
    for i, (lo, hi) in enumerate(zip(env.low, env.high)):
        inside = [v for t, v in zip(steps, values) if env.edges[i] <= t < env.edges[i + 1]]
        assert (lo, hi) == (min(inside), max(inside))
    if len(values) <= columns:
        assert env.low == env.high == values  # short series: step by step
    if keep is not None:
        b = env.bucket_of(steps[keep])
        assert (env.edges[b], env.edges[b + 1]) == (steps[keep], steps[keep] + 1)
        assert env.low[b] == env.high[b] == values[keep]
    assert max(env.high) == max(values)


def _long_timeline(n: int = 200_000) -> Timeline:
    """A synthetic timeline of n steps: a noisy random walk of temp bytes with one
    sharp single-step peak, over constant parameters and outputs."""
    rng = np.random.default_rng(7)
    temp = np.cumsum(rng.integers(-(2**20), 2**20, n))
    temp = temp - temp.min() + rng.integers(0, 2**22, n)
    peak_time = int(n * 0.37)
    temp[peak_time] = temp.max() + 2**26
    indefinite = {"parameter": 3 * 2**30, "output": 2**29, "constant": 0, "thread-local": 0}
    live = temp + sum(indefinite.values())
    ref = ModuleRef(1, "jit_long", "module_0001.jit_long", "0123456789ab", "cpu", None,
                    int(live.max()), None, None)  # fmt: skip
    return Timeline(
        module=ref,
        space=0,
        space_name="host",
        steps=list(range(n)),
        instructions=[f"fusion.{i}" for i in range(n)],
        temp_bytes=temp.tolist(),
        live_bytes=live.tolist(),
        indefinite=indefinite,
        peak_time=peak_time,
        peak_bytes=int(live[peak_time]),
    )


def test_a_long_timeline_is_drawn_as_its_envelope_and_stays_small(tmp_path):
    tl = _long_timeline()
    assert tl.peak_bytes == max(tl.live_bytes)
    fig = plots.draw_timeline(tl)
    ax = fig.axes[0]
    drawn = {a.get_gid(): a for a in ax.patches if (a.get_gid() or "").startswith("layer-")}
    assert list(drawn) == ["layer-parameter", "layer-output", "layer-temp", "layer-temp-low"]
    base = sum(tl.indefinite.values())
    (param_top,), _, param_base = drawn["layer-parameter"].get_data()
    assert (param_top, param_base) == (tl.indefinite["parameter"], 0)
    high, edges, baseline = drawn["layer-temp"].get_data()
    low, low_edges, _ = drawn["layer-temp-low"].get_data()
    assert list(edges) == list(low_edges) and baseline == base
    assert len(edges) - 1 <= ax.get_window_extent().width + 1  # one bucket per pixel column
    # The drawn band bounds every step of the original series ...
    bucket = np.searchsorted(edges, tl.steps, side="right") - 1
    live = np.asarray(tl.live_bytes)
    assert (np.asarray(low)[bucket] <= live).all() and (live <= np.asarray(high)[bucket]).all()
    # ... and the peak is a bucket of its own, at its exact time and value.
    b = bucket[tl.peak_time]
    assert (edges[b], edges[b + 1]) == (tl.peak_time, tl.peak_time + 1)
    assert high[b] == low[b] == tl.peak_bytes == max(high)
    (marker,) = [a for a in ax.lines if a.get_gid() == "peak-marker"]
    assert list(marker.get_xdata()) == [tl.peak_time + 0.5]
    assert list(marker.get_ydata()) == [tl.peak_bytes]
    # What a file or the report holds stays small: the full series as SVG is megabytes.
    out = plots.save(fig, tmp_path / "long.svg")
    assert out.stat().st_size < 400_000, out.stat().st_size
    assert len(plots.inline_svg(fig, prefix="t-")) < 400_000
    png = plots.save(fig, tmp_path / "long.png")
    assert _png_size(png) == tuple(int(x * plots.DPI) for x in plots.TIMELINE_SIZE)


# --------------------------------------------------------------------- arena


def _union_max(rows: list[dict]) -> int:
    """Most bytes covered at once by the rectangles (an oracle independent of SQL), tuples
    (pointer tables XLA never heap-simulates, docs/metrics.md) drawn but not counted."""
    best = 0
    for t in {t for r in rows for t in range(r["start_time"], r["end_time"] + 1)}:
        spans = sorted(
            (r["byte_offset"], r["byte_offset"] + r["size"])
            for r in rows
            if r["start_time"] <= t <= r["end_time"]
            and r["size"] > 0
            and not r["shape"].startswith("(")
        )
        total, lo, hi = 0, None, None
        for a, b in spans:
            if hi is None or a > hi:
                total += 0 if hi is None else hi - lo
                lo, hi = a, b
            else:
                hi = max(hi, b)
        total += 0 if hi is None else hi - lo
        best = max(best, total)
    return best


@pytest.mark.parametrize("which", [0, 1], ids=["sample", "corpus"])
def test_arena_blocks_equal_the_query_and_the_stored_fragmentation(modules, which, tmp_path):
    db, key = modules[which]
    result = visual.plot_arena(key, tmp_path / "arena.png", db=db)
    ar = result.data
    rows = bufferhouse.query("arena", db, module=key).to_pylist()
    assert ar.blocks == rows
    # Default: the module's largest temp allocation.
    temps = [
        r
        for r in bufferhouse.query("fragmentation", db, module=key).to_pylist()
        if r["color"] is not None
    ]
    biggest = max(temps, key=lambda r: (r["size"], -r["allocation_index"]))
    assert ar.allocation_index == biggest["allocation_index"]
    assert _union_max(rows) == ar.max_live_bytes == biggest["max_live_bytes"]
    assert ar.waste_bytes == biggest["waste_bytes"]

    fig = plots.draw_arena(ar)
    rects = {p.get_gid(): p for p in fig.axes[0].patches}
    assert len(rects) == len(rows)
    for r in rows:
        rect = rects[f"value-{r['value_id']}"]
        assert rect.get_xy() == (r["start_time"], r["byte_offset"])
        assert rect.get_width() == r["end_time"] - r["start_time"] + 1
        assert rect.get_height() == r["size"]
    width, height = (int(x * plots.DPI) for x in plots.ARENA_SIZE)
    assert _png_size(result.path) == (width, height)


def test_arena_of_a_chosen_allocation(samples_db, tmp_path):
    result = visual.plot_arena(SAMPLE, tmp_path / "a.svg", db=samples_db, allocation=3)
    assert result.data.allocation_index == 3
    assert result.data.color == 1
    assert ET.parse(result.path).getroot().tag.endswith("svg")
    with pytest.raises(PlotError, match=r"no allocation 99 holding values; allocations: 4 \(temp"):
        visual.plot_arena(SAMPLE, tmp_path / "b.svg", db=samples_db, allocation=99)


# --------------------------------------------------------- module selection


def test_an_ambiguous_name_picks_deterministically_and_says_so(fleet_db):
    first = visual.timeline("jit_convnet_train", db=fleet_db)[0]
    again = visual.timeline("jit_convnet_train", db=fleet_db)[0]
    assert first.chosen == again.chosen
    assert len(first.others) == 2
    note = first.note()
    assert "matches 3 modules" in note
    for other in first.others:
        assert other.hash_prefix in note
    by_hash = visual.timeline(first.others[0].hash_prefix, db=fleet_db)[0]
    assert by_hash.chosen == first.others[0] and by_hash.note() is None


@pytest.mark.slow
def test_an_ambiguous_name_draws_the_most_recently_ingested(tmp_path):
    """README: a name compiled into several modules draws the most recently ingested
    one. The older release is ingested last here, so ingest order, not the release
    or the module number, decides."""
    db = tmp_path / "w.duckdb"
    for version in ("0.7.2", "0.10.2", "0.6.2"):
        report = bufferhouse.ingest(
            CORPUS / f"jax-{version}", db=db, labels={"jax": version}, jobs=1
        )
        assert report.ok
    chosen = visual.timeline("jit_convnet_train", db=db)[0]
    assert len(chosen.others) == 2
    assert chosen.chosen.labels == "jax=0.6.2"
    assert chosen.chosen.module_id > max(o.module_id for o in chosen.others)


def test_errors_name_what_is_wrong(samples_db, tmp_path):
    with pytest.raises(UnknownModuleError, match="no module matches 'nope'"):
        visual.plot_timeline("nope", tmp_path / "t.png", db=samples_db)
    with pytest.raises(PlotError, match=r"use \.png or \.svg"):
        visual.plot_timeline(SAMPLE, tmp_path / "t.gif", db=samples_db)
    with pytest.raises(PlotError, match="no allocations in memory space 3; its spaces: 0, 1, 6"):
        visual.plot_timeline(SAMPLE, tmp_path / "t.png", db=samples_db, space=3)


def test_missing_matplotlib_is_a_clear_error(monkeypatch, samples_db, tmp_path):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import raises ImportError
    with pytest.raises(MissingExtraError, match=r"pip install 'bufferhouse\[plot\]'"):
        visual.plot_timeline(SAMPLE, tmp_path / "t.png", db=samples_db)
    result = CliRunner().invoke(
        main, ["report", "-o", str(tmp_path / "r.html"), "--db", str(samples_db)]
    )
    assert result.exit_code == 2
    assert "needs matplotlib" in result.stderr


def test_cli_plots_and_report(fleet_db, tmp_path):
    runner = CliRunner()
    out = tmp_path / "t.png"
    result = runner.invoke(
        main, ["plot", "timeline", "jit_convnet_train", "-o", str(out), "--db", str(fleet_db)]
    )
    assert result.exit_code == 0, result.output
    assert "note: 'jit_convnet_train' matches 3 modules" in result.stderr
    assert f"wrote {out}" in result.stderr and result.stdout == ""
    assert _png_size(out) == (1200, 600)
    result = runner.invoke(
        main,
        [
            "plot",
            "arena",
            SAMPLE,
            "--allocation",
            "4",
            "-o",
            str(tmp_path / "a.svg"),
            "--db",
            str(fleet_db),
        ],
    )
    assert result.exit_code == 0, result.output
    result = runner.invoke(
        main, ["report", "-o", str(tmp_path / "r.html"), "--db", str(fleet_db), "--modules", "1"]
    )
    assert result.exit_code == 0, result.output
    assert re.search(
        r"wrote .*r\.html \(.*\): \d+ compiles \(\d+ modules\), 1 module sections", result.stderr
    )


# -------------------------------------------------------------------- report


@pytest.fixture(scope="module")
def labelled_db(tmp_path_factory) -> Path:
    """Two corpus runs in one warehouse, labelled run=previous and run=nightly."""
    db = tmp_path_factory.mktemp("labelled") / "runs.duckdb"
    for sub, run in (("jax-0.6.2", "previous"), ("jax-0.7.2", "nightly")):
        assert bufferhouse.ingest(CORPUS / sub, db=db, labels={"run": run}, jobs=2).ok
    return db


def test_report_data_equals_the_queries(fleet_db):
    with visual.open_warehouse(fleet_db) as con:
        data = report.gather(con, str(fleet_db), top=10, sections=2, rows=15)
    top = bufferhouse.query("top-modules", fleet_db, top=10).to_pylist()
    assert [r["module_id"] for r in data.top_modules] == [r["module_id"] for r in top]
    for r in data.top_modules:
        layers = data.top_layers[r["module_id"]]
        assert sum(layers.values()) == r["heap_peak_bytes"]
    bars = {
        p.get_gid(): p
        for p in plots.draw_top_modules(data.top_modules, data.top_layers).axes[0].patches
    }
    for i, r in enumerate(data.top_modules):  # bar i of each layer is module i, stacked in order
        left = 0
        for category, size in data.top_layers[r["module_id"]].items():
            bar = bars.get(f"bars-{category}-{i}")
            if bar is not None:
                assert (bar.get_x(), bar.get_width()) == (left, size)
            left += size
    fleet = [
        r for r in bufferhouse.query("memory-spaces", fleet_db).to_pylist() if r["scope"] == "fleet"
    ]
    keys = (
        "backend",
        "color",
        "space_name",
        "modules",
        "total_bytes",
        "indefinite_bytes",
        "temp_allocation_bytes",
        "heap_peak_bytes",
    )
    assert [{k: r[k] for k in keys} for r in data.memory_spaces] == [
        {k: r[k] for k in keys} for r in fleet
    ]
    assert data.recompiles == bufferhouse.query("recompiles", fleet_db).to_pylist()[:15]
    assert [s.module.module_id for s in data.sections] == [r["module_id"] for r in top[:2]]
    for s in data.sections:
        key = str(s.module.module_id)
        assert (
            s.peak_buffers
            == bufferhouse.query("peak-buffers", fleet_db, module=key, top=15).to_pylist()
        )
        assert s.by_source == bufferhouse.query("by-source", fleet_db, module=key).to_pylist()[:15]
        assert s.timeline.live_bytes == [
            r["live_bytes"]
            for r in bufferhouse.query("heap-timeline", fleet_db, module=key).to_pylist()
        ]


@pytest.mark.slow
def test_report_label_scope_and_baseline(labelled_db):
    with visual.open_warehouse(labelled_db) as con:
        data = report.gather(
            con, str(labelled_db), label="run=nightly", baseline="run=previous", sections=1
        )
    nightly = {
        r["module_id"]
        for r in bufferhouse.query("modules", labelled_db, label="run=nightly").to_pylist()
    }
    assert data.module_count == len(nightly) == 63
    assert {r["module_id"] for r in data.top_modules} <= nightly
    assert {r["module_id"] for r in data.padding + data.fragmentation} <= nightly
    assert sum(r["modules"] for r in data.memory_spaces) == len(nightly)
    assert data.changes, "the two jax releases differ in some heap peaks"
    deltas = [abs(r["delta_bytes"]) for r in data.changes]
    assert deltas == sorted(deltas, reverse=True)
    for r in data.changes:
        assert r["delta_bytes"] == (r["head_bytes"] or 0) - (r["base_bytes"] or 0)
    with pytest.raises(PlotError, match="pass --label"), visual.open_warehouse(labelled_db) as con:
        report.gather(con, str(labelled_db), baseline="run=previous")
    with (
        pytest.raises(
            PlotError, match="no module carries the label 'run=none'; labels: run=nightly"
        ),
        visual.open_warehouse(labelled_db) as con,
    ):
        report.gather(con, str(labelled_db), label="run=none")


def test_report_of_an_empty_warehouse(tmp_path):
    db = tmp_path / "empty.duckdb"  # a warehouse with its schema and no module
    with open_connection(db, read_only=False) as con:
        ensure_schema(con, str(db))
        queries.install_macros(con)
    written = visual.write_report(tmp_path / "e.html", db=db)
    assert written.data.module_count == 0 and written.data.sections == []
    assert "Nothing to show." in written.path.read_text()


@pytest.mark.slow
def test_report_baseline_without_the_diff_stage(labelled_db, monkeypatch):
    """Without bufferhouse.compare the report falls back to a per-name heap-peak delta."""
    monkeypatch.setitem(sys.modules, "bufferhouse.compare", None)  # import raises ImportError
    with visual.open_warehouse(labelled_db) as con:
        data = report.gather(
            con, str(labelled_db), label="run=nightly", baseline="run=previous", sections=0
        )
        with pytest.raises(PlotError, match=r"needs bufferhouse\.diff"):
            report.gather(con, str(labelled_db), label="run=nightly", baseline=str(labelled_db))

    def peaks(label: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in bufferhouse.query("modules", labelled_db, label=label).to_pylist():
            out[r["module_name"]] = max(out.get(r["module_name"], 0), r["heap_peak_bytes"])
        return out

    base, head = peaks("run=previous"), peaks("run=nightly")
    changed = {n for n in base.keys() | head.keys() if base.get(n) != head.get(n)}
    assert {r["module_name"] for r in data.changes} == changed
    for r in data.changes:
        assert (r["base_bytes"], r["head_bytes"]) == (
            base.get(r["module_name"]),
            head.get(r["module_name"]),
        )
    deltas = [abs(r["delta_bytes"]) for r in data.changes]
    assert deltas == sorted(deltas, reverse=True)
    assert "bufferhouse diff pairs recompiled modules more carefully" in data.changes_note


@pytest.mark.slow
def test_report_html_is_self_contained(labelled_db, tmp_path):
    written = visual.write_report(
        tmp_path / "r.html", db=labelled_db, label="run=nightly", baseline="run=previous"
    )
    text = written.path.read_text()
    assert text.startswith("<!DOCTYPE html>")
    assert "Content-Security-Policy" in text and "default-src 'none'" in text
    # No attribute may point outside the file (SVG namespace declarations are names, not fetches).
    assert not re.search(
        r'(?:src|href|action|srcset|poster)\s*=\s*["\']?\s*(?:https?:)?//', text, re.I
    )
    assert not re.search(r"url\(\s*['\"]?(?:https?:)?//", text, re.I)
    assert "@import" not in text
    # Every number shown in human units carries its exact bytes.
    for value, title in re.findall(r'data-v="(-?\d+)" title="([^"]+)"', text):
        assert title == f"{int(value):,} bytes"


# ------------------------------------------------------------------ browser

CHECK_PAGE = """(() => {
  const charts = Array.from(document.querySelectorAll("figure.chart")).map((f) => {
    const svg = f.querySelector("svg");
    const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
    const bbox = svg ? svg.getBBox() : {width: 0, height: 0};
    return {
      name: f.dataset.chart, width: box.width, height: box.height,
      drawnWidth: bbox.width, drawnHeight: bbox.height,
      shapes: svg ? svg.querySelectorAll("path, use, rect, text").length : 0,
      texts: svg ? Array.from(svg.querySelectorAll("text")).filter((t) => t.textContent.trim()).length : 0,
    };
  });
  const external = Array.from(document.querySelectorAll("*")).flatMap((e) =>
    Array.from(e.attributes).filter((a) => a.name !== "xmlns" && !a.name.startsWith("xmlns:"))
      .map((a) => a.value).filter((v) => /^\\s*(https?:)?\\/\\//i.test(v)));
  return {
    charts, external,
    tables: document.querySelectorAll("table.sortable").length,
    hovers: document.querySelectorAll("td[title]").length,
    csp: document.querySelector("meta[http-equiv=Content-Security-Policy]") !== null,
    duplicateIds: (() => {
      const ids = Array.from(document.querySelectorAll("[id]")).map((e) => e.id);
      return ids.length - new Set(ids).size;
    })(),
  };
})()"""

SORT_BY_HEAP_PEAK = """(() => {
  const table = document.querySelector('table[data-table="top-modules"]');
  const th = Array.from(table.tHead.rows[0].cells).find((h) => h.textContent === "heap peak");
  const col = th.cellIndex;
  const values = () => Array.from(table.tBodies[0].rows).map((r) => Number(r.cells[col].dataset.v));
  th.click();
  const first = [values(), th.getAttribute("aria-sort")];
  th.click();
  return [first, [values(), th.getAttribute("aria-sort")]];
})()"""


@pytest.fixture(scope="module")
def chromium():
    from tests.cdp import find_chromium

    exe = find_chromium()
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed; .ci/run installs Debian's chromium package")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return exe


@pytest.mark.slow
def test_report_opens_in_headless_chromium(chromium, labelled_db, tmp_path):
    from tests.cdp import Chromium

    written = visual.write_report(
        tmp_path / "report.html", db=labelled_db, label="run=nightly", baseline="run=previous"
    )
    expected = {"changes", "top-modules"} | {
        f"timeline-{s.module.hash_prefix}" for s in written.data.sections if s.timeline
    }
    assert len(expected) == 2 + 5
    profile = tmp_path / "profile"
    profile.mkdir()
    with Chromium(chromium, profile) as browser:
        session = browser.open_page(written.path.resolve().as_uri())
        page = browser.evaluate(session, CHECK_PAGE)
        ARTIFACTS.mkdir(exist_ok=True)
        shot = browser.screenshot(session, ARTIFACTS / "report.png")
        (ascending, descending) = browser.evaluate(session, SORT_BY_HEAP_PEAK)
        problems = browser.problems()
        requests = browser.requests()
    shutil.copy(written.path, ARTIFACTS / "report.html")

    assert problems == []
    assert requests == [written.path.resolve().as_uri()], "the page fetched something"
    assert page["csp"] and page["external"] == []
    assert page["duplicateIds"] == 0, "inlined SVGs must not share ids"
    assert {c["name"] for c in page["charts"]} == expected
    for c in page["charts"]:
        assert c["width"] > 600 and c["height"] > 100, c
        assert c["drawnWidth"] > 0 and c["drawnHeight"] > 0, c
        assert c["shapes"] > 20 and c["texts"] > 5, c
    assert page["tables"] >= 8 and page["hovers"] > 50
    # Numbers sort by exact value: descending first, then ascending.
    assert descending[1] == "ascending" and ascending[1] == "descending"
    assert ascending[0] == sorted(ascending[0], reverse=True)
    assert descending[0] == sorted(descending[0])
    width, height = _png_size(shot)
    assert width == 1280 and height > 3000


@pytest.mark.slow
def test_the_browser_check_would_catch_a_request(chromium, labelled_db, tmp_path):
    """Control: a report with an external image is caught (the CSP blocks it, the log says so)."""
    from tests.cdp import Chromium

    written = visual.write_report(tmp_path / "r.html", db=labelled_db, sections=0)
    html = written.path.read_text().replace(
        "</main>", '<img src="http://127.0.0.1:9/probe.png" alt=""></main>'
    )
    page = tmp_path / "leaky.html"
    page.write_text(html)
    profile = tmp_path / "profile"
    profile.mkdir()
    with Chromium(chromium, profile) as browser:
        browser.open_page(page.as_uri())
        problems = browser.problems()
    assert any("Content Security Policy" in p and "127.0.0.1:9" in p for p in problems), problems
