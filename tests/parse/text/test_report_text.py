"""What the report and the plots draw is the data's own text: names with `$` (matplotlib's
mathtext), bidi and zero-width characters, shown literally and never reordering the page."""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

import pytest

import bufferhouse
from tests.conftest import CORPUS

pytest.importorskip("matplotlib", reason="the plot extra is not installed")

from bufferhouse import visual
from bufferhouse.visual import plots

DUMP = CORPUS / "jax-0.7.2" / "bool_mask_ops"
STEM = "module_0001.jit_bool_masks.cpu_after_optimizations"
#: Module names as file stems give them: an odd `$` (mathtext fails) and a pair (typeset).
DOLLAR_NAMES = ("jit_$$", "jit_$x$", r"jit_$\frac{a}{$")


def _renamed_dump(root: Path, names: tuple[str, ...]) -> Path:
    """The bool_mask_ops dump once per name, each copy's stem naming the module."""
    root.mkdir(parents=True)
    for i, name in enumerate(names):
        for src in DUMP.iterdir():
            rest = src.name.removeprefix(STEM)
            shutil.copy(src, root / f"module_{i + 1:04d}.{name}.cpu_after_optimizations{rest}")
    return root


@pytest.fixture(scope="module")
def dollar_db(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("dollar")
    db = tmp / "d.duckdb"
    report = bufferhouse.ingest(_renamed_dump(tmp / "dump", DOLLAR_NAMES), db=db, jobs=1)
    assert report.ok and len(report.loaded) == len(DOLLAR_NAMES), report
    return db


def _svg_texts(html: str) -> list[str]:
    return re.findall(r"<text\b[^>]*>([^<]*)</text>", html)


def test_a_report_of_names_with_dollars_is_written_and_shows_them_as_written(dollar_db, tmp_path):
    written = visual.write_report(tmp_path / "r.html", db=dollar_db, sections=3)
    text = written.path.read_text()
    texts = _svg_texts(text)
    for name in DOLLAR_NAMES:
        # the top-modules chart's tick label and each section's timeline title, literally
        assert any(t.startswith(f"{name} \u00b7 ") for t in texts), (name, texts[:20])
        assert any(t.startswith(f"{name}  \u00b7  ") for t in texts), name


def test_plots_of_a_name_with_dollars_and_an_op_name_with_dollars(dollar_db, tmp_path):
    for name in DOLLAR_NAMES:
        plotted = visual.plot_timeline(name, tmp_path / "t.png", db=dollar_db)
        assert plotted.path.stat().st_size > 1000
        visual.plot_arena(name, tmp_path / "a.svg", db=dollar_db)
    _, tl = visual.timeline("jit_$x$", db=dollar_db)
    odd = r"jit(f)/$\frac{a}{$"
    tl = dataclasses.replace(
        tl, peak_buffers=[{**b, "op_name": odd} for b in tl.peak_buffers] or tl.peak_buffers
    )
    assert tl.peak_buffers, "the module has buffers at its peak"
    svg = plots.inline_svg(plots.draw_timeline(tl), prefix="t-")
    assert any(odd in t for t in _svg_texts(svg)), "the op_name is drawn as written"
    assert any(t.startswith("jit_$x$  \u00b7  ") for t in _svg_texts(svg))


#: Names that would reorder the page (U+202E turns "jit_evil<RLO>gpj.exe" around) or
#: hide a character (zero-width space, BOM, an isolate).
HIDDEN_NAMES = ("jit_evil\u202egpj.exe", "jit_zero\u200bwidth", "jit_bom\ufeff", "jit_iso\u2067x")
HIDDEN_CHARS = ("\u202e", "\u200b", "\ufeff", "\u2067")


@pytest.fixture(scope="module")
def hidden_db(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("hidden")
    db = tmp / "h.duckdb"
    report = bufferhouse.ingest(_renamed_dump(tmp / "dump", HIDDEN_NAMES), db=db, jobs=1)
    assert report.ok and len(report.loaded) == len(HIDDEN_NAMES), report
    return db


def test_hidden_characters_in_names_are_shown_as_code_points(hidden_db, tmp_path):
    written = visual.write_report(tmp_path / "r.html", db=hidden_db, sections=4)
    text = written.path.read_text(encoding="utf-8")
    for c in HIDDEN_CHARS:
        assert c not in text, f"U+{ord(c):04X} reached the page raw"
    # marked up in the page's own text, as plain text in the charts and attributes
    assert '<h2>jit_<wbr>evil<span class="cp" title="U+202E right-to-left override">' in text
    assert "&lt;U+202E&gt;gpj.exe" in text
    assert any("jit_zero&lt;U+200B&gt;width" in t for t in _svg_texts(text))
    assert "Content-Security-Policy" in text and "default-src 'none'" in text


SHOWN = """(() => ({
  heads: Array.from(document.querySelectorAll("section.module h2")).map((h) => h.innerText),
  hidden: /[\\u202a-\\u202e\\u2066-\\u2069\\u200b-\\u200f\\ufeff]/.test(document.documentElement.outerHTML),
  marks: document.querySelectorAll("span.cp").length,
}))()"""


@pytest.mark.slow
def test_hidden_characters_in_headless_chromium(hidden_db, tmp_path):
    """In a real browser: each section head reads as the name with its code points
    spelled out, no raw control reached the DOM, no error, no request (the CSP holds)."""
    from tests.cdp import Chromium, find_chromium

    exe = find_chromium()
    if exe is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    written = visual.write_report(tmp_path / "r.html", db=hidden_db, sections=4)
    profile = tmp_path / "profile"
    profile.mkdir()
    with Chromium(exe, profile) as browser:
        session = browser.open_page(written.path.resolve().as_uri())
        page = browser.evaluate(session, SHOWN)
        problems = browser.problems()
        requests = browser.requests()
    assert problems == [] and requests == [written.path.resolve().as_uri()]
    assert not page["hidden"]
    assert sorted(page["heads"]) == sorted(
        re.sub("[\u202e\u200b\ufeff\u2067]", lambda m: f"<U+{ord(m.group()):04X}>", n)
        for n in HIDDEN_NAMES
    )
    assert page["marks"] >= len(HIDDEN_NAMES)
