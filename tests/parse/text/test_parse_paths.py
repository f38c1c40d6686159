"""One grammar, two executions: the line reader (scan.py, the reference) and the
column reader (vector.py, forced on every module it can read, whatever its
size) take their patterns from grammar.py and leave every invariant to
rules.py, so on every fixture, era and mutant they must give the same rows,
facts, warnings and errors. The mutant runs are the safety net; test_grammar.py
tests the patterns themselves under both regex engines, and the bad-input
catalog (test_bad_inputs.py) tests every rule against its expected error."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bufferhouse.errors import DumpError
from bufferhouse.parse import parse_module
from bufferhouse.parse.discover import ModuleFiles, discover
from bufferhouse.parse.text import columns, vector
from tests import synth
from tests.conftest import DATA, SAMPLES

GROUPS = [g for g in discover([DATA]) if g.buffer_assignment and not g.problems]


PATHS = {
    "lines": {"accelerate": False},
    "vector": {"vector_min_bytes": 0},
}


def _outcome(files, path: str):
    try:
        parsed = parse_module(files.dump_files(), files.hlo, **PATHS[path])
    except DumpError as exc:
        return ("error", type(exc).__name__, exc.path, exc.line, exc.message)
    warnings = [(w.path, w.line, w.message) for w in parsed.warnings]
    return ("ok", parsed.rows(), parsed.facts, parsed.sections, sorted(parsed.features), warnings)


def test_there_are_many_fixtures():
    assert len(GROUPS) > 150


@pytest.mark.parametrize("files", GROUPS, ids=[Path(g.display).name[:60] for g in GROUPS])
def test_fast_and_slow_paths_agree(files):
    assert _outcome(files, "vector") == _outcome(files, "lines")


@pytest.mark.parametrize("files", GROUPS, ids=[Path(g.display).name[:60] for g in GROUPS])
@pytest.mark.slow
def test_spare_cores_change_nothing(files, monkeypatch):
    """With a core to spare, the column reader reads ahead and reads Used values blocks
    on threads, and instruction texts are shared out: on 256-byte chunks (256 of the
    294 modules then read more than one) and batches of five texts, every module still
    reads as the line reader reads it."""
    monkeypatch.setattr(vector, "_CHUNK", 256)
    monkeypatch.setattr(columns, "_PARSE_BATCH", 5)
    try:
        parsed = parse_module(files.dump_files(), files.hlo, vector_min_bytes=0, threads=2)
    except DumpError as exc:
        threaded = ("error", type(exc).__name__, exc.path, exc.line, exc.message)
    else:
        warnings = [(w.path, w.line, w.message) for w in parsed.warnings]
        threaded = (
            "ok",
            parsed.rows(),
            parsed.facts,
            parsed.sections,
            sorted(parsed.features),
            warnings,
        )
    assert threaded == _outcome(files, "lines")


@pytest.mark.parametrize("chunk", [1, 7, 4096])
def test_the_vectorized_scanner_reads_files_in_any_chunks(monkeypatch, chunk):
    """Lines cut across read chunks are put back together."""
    monkeypatch.setattr(vector, "_CHUNK", chunk)
    for sample in sorted(SAMPLES.glob("*.txt"))[:2]:
        files = ModuleFiles(str(sample.parent), sample.stem, buffer_assignment=str(sample))
        assert vector.scan(files.dump_files()) is not None
        assert _outcome(files, "vector") == _outcome(files, "lines")


@pytest.mark.parametrize("chunk", [1, 7, 4096, 1 << 24])
@pytest.mark.slow
def test_the_vectorized_scanner_reads_glued_used_values(tmp_path, monkeypatch, chunk):
    """2024-01-16 .. 2024-11-01 dumps (each value's header glued to the previous
    from instruction text) are read by the vectorized scanner too, in any chunks,
    and give the rows, facts and features of the same dump printed with newlines."""
    monkeypatch.setattr(vector, "_CHUNK", chunk)
    for sample in sorted(SAMPLES.glob("*.txt")):
        glued = tmp_path / sample.name
        glued.write_text("".join(synth.glue(io.StringIO(sample.read_text()))))
        assert glued.read_text().count("\n<") == 1  # only the first header starts a line
        files = ModuleFiles(str(tmp_path), glued.stem, buffer_assignment=str(glued))
        original = ModuleFiles(str(sample.parent), sample.stem, buffer_assignment=str(sample))
        assert vector.scan(files.dump_files()) is not None, sample.name
        got = _outcome(files, "vector")
        assert got == _outcome(files, "lines")
        assert got[:5] == _outcome(original, "lines")[:5]


@pytest.mark.parametrize(
    "old, new",
    [
        ('op_name="args[0]"}', 'op_name="jit(<lambda>)/args[0]"}'),  # a '<' in the text
        ('op_name="args[0]"}', 'op_name="<7 x @0>"}'),  # a header-like string in the text
        ('op_name="args[0]"}', 'op_name="args[0]"}, x=<1 a>'),  # ends in '>' before the header
        ("parameter(0)", "parameter(0)<"),  # a '<' before the header
        (" from instruction: %Arg_0.1", " from instruction:  %Arg_0.1"),  # two spaces: not glued
        (" from instruction: %Arg_0.1", " from instruction: Arg_0.1"),  # no '%': not glued
        ("<271 Arg_1.2 @0>", "<271 Arg_1.2{} (phi) @0>"),  # a phi header with an index
        ("<271 Arg_1.2 @0>", "<271 Arg_1.2 @0> "),  # not at the line's end
    ],
)
def test_glued_lines_split_as_the_reference_splits_them(tmp_path, old, new):
    sample = sorted(SAMPLES.glob("*.txt"))[0]
    text = "".join(synth.glue(io.StringIO(sample.read_text())))
    assert text.count(old) >= 1
    path = tmp_path / "g-buffer-assignment.txt"
    path.write_text(text.replace(old, new, 1))
    files = ModuleFiles(str(tmp_path), "g", buffer_assignment=str(path))
    assert _outcome(files, "vector") == _outcome(files, "lines")


@pytest.mark.parametrize(
    "new",
    [
        "parameter 007,",  # leading zeros
        "color 2, parameter 1,",  # after a color
        "parameter 999999999999999999,",  # 18 digits: read as a column
        "parameter 9999999999999999999,",  # 19 digits: past int64, worded
        "parameter 123456789012345678901,",  # past 18 digits, read with the rest
        "parameter 1x,",  # digits then no ', '
        "parameter ,",  # no digits
        "maybe-live-out, parameter 5,",  # not first: read with the rest
    ],
)
def test_parameter_numbers_read_apart_read_as_the_reference_reads_them(tmp_path, new):
    """The column reader parses allocation attribute lists once per list without its
    parameter number (vector._parameters); every form of that number reads as the line
    reader reads it, in every allocation at once or in one."""
    sample = next(p for p in sorted(SAMPLES.glob("*.txt")) if ", parameter 1," in p.read_text())
    text = sample.read_text()
    for count in (1, -1):
        path = tmp_path / f"p{count}-buffer-assignment.txt"
        path.write_text(text.replace(", parameter 1,", ", " + new, count))
        files = ModuleFiles(str(tmp_path), f"p{count}", buffer_assignment=str(path))
        assert _outcome(files, "vector") == _outcome(files, "lines")


def test_the_vectorized_scanner_reads_dumps_inside_logs():
    """A module's files inside a log of `--xla_dump_to=-` output are read as files are."""
    members = [g for g in GROUPS if "::" in g.buffer_assignment]
    assert members
    read = [g for g in members if vector.scan(g.dump_files()) is not None]
    assert read  # the GPU one has a cross-color block, which the reference reads
    for files in read:
        assert _outcome(files, "vector") == _outcome(files, "lines")


def test_the_vectorized_scanner_reads_an_unavailable_live_range():
    """'HloLiveRange not available (finalized or constructed from proto)' instead of the
    sections: read in bulk, as the reference reads it."""
    (files,) = [g for g in GROUPS if "lr_unavailable" in g.display]
    assert vector.scan(files.dump_files()) is not None
    got = _outcome(files, "vector")
    assert got == _outcome(files, "lines")
    assert "live_range_unavailable" in got[3]


@pytest.mark.slow
def test_the_vectorized_scanner_reads_most_fixtures():
    """It must not quietly hand everything to the reference."""
    read = [g for g in GROUPS if vector.scan(g.dump_files()) is not None]
    assert len(read) > 150


SAMPLE_LINES = [
    text.split("\n")
    for p in sorted(SAMPLES.glob("*.txt"))
    for text in (p.read_text(), "".join(synth.glue(io.StringIO(p.read_text()))))
]


def _cross_color_dump() -> str:
    """The split GPU fixture (an allocation with a cross-color block, 2026-06+) as one file."""
    d, stem = (
        DATA / "edge" / "gpu_split_2026",
        "module_0042.jit_step.sm_9.0_gpu_after_optimizations",
    )
    parts = ("-buffer-assignment.txt", "-buffer-assignment-values.txt", "-live-range.txt")
    ba, values, live = ((d / (stem + part)).read_text() for part in parts)
    return f"{ba}{values}\n\n{live}"


def _before_2021_09(text: str, live_range: bool) -> str:
    """`text` as XLA printed it before 2021-09: no from instruction lines, and before
    2021-04 no HloLiveRange either (the file ends with the last value's uses)."""
    if not live_range:
        text = text[: text.index("\nHloLiveRange")].rstrip("\n") + "\n"
    return "".join(
        line for line in text.splitlines(keepends=True) if not line.startswith(" from instruction:")
    )


SAMPLE_LINES += [
    _before_2021_09(p.read_text(), live_range).split("\n")
    for p in sorted(SAMPLES.glob("*.txt"))[:3]
    for live_range in (True, False)
]
SAMPLE_LINES.append(_cross_color_dump().split("\n"))


@pytest.mark.parametrize("live_range", [True, False])
def test_the_vectorized_scanner_reads_dumps_from_before_2021_09(tmp_path, live_range):
    """Without from instruction lines (2019-09 .. 2021-09) and without HloLiveRange
    (before 2021-04), as the reference reads them."""
    for sample in sorted(SAMPLES.glob("*.txt")):
        path = tmp_path / sample.name
        path.write_text(_before_2021_09(sample.read_text(), live_range))
        files = ModuleFiles(str(tmp_path), path.stem, buffer_assignment=str(path))
        assert vector.scan(files.dump_files()) is not None, sample.name
        got = _outcome(files, "vector")
        assert got == _outcome(files, "lines")
        assert got[0] == "ok" and "from_instruction" not in got[4]


SAMPLE_LINES.append(_cross_color_dump().replace("\n", "\r\n").split("\n"))  # CRLF line ends


@pytest.mark.parametrize("chunk", [1, 7, 1 << 24])
def test_the_vectorized_scanner_reads_crlf_line_ends(tmp_path, monkeypatch, chunk):
    """A dump that went through a CRLF tool reads as the same dump with LF."""
    monkeypatch.setattr(vector, "_CHUNK", chunk)
    for sample in sorted(SAMPLES.glob("*.txt"))[:3]:
        path = tmp_path / sample.name
        path.write_bytes(sample.read_bytes().replace(b"\n", b"\r\n"))
        files = ModuleFiles(str(tmp_path), path.stem, buffer_assignment=str(path))
        original = ModuleFiles(str(sample.parent), sample.stem, buffer_assignment=str(sample))
        assert vector.scan(files.dump_files()) is not None
        got = _outcome(files, "vector")
        assert got == _outcome(files, "lines")
        assert got[:5] == _outcome(original, "lines")[:5]


@pytest.mark.parametrize("chunk", [1, 7, 1 << 24])
def test_the_vectorized_scanner_reads_cross_color_blocks(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(vector, "_CHUNK", chunk)
    path = tmp_path / "c-buffer-assignment.txt"
    path.write_text(_cross_color_dump())
    files = ModuleFiles(str(tmp_path), "c", buffer_assignment=str(path))
    assert vector.scan(files.dump_files()) is not None
    got = _outcome(files, "vector")
    assert got == _outcome(files, "lines")
    assert "cross_color" in got[4]


@st.composite
def _mutants(draw):
    lines = list(draw(st.sampled_from(SAMPLE_LINES)))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["delete", "duplicate", "swap", "truncate", "blank"]))
        if op == "delete":
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "swap" and i + 1 < len(lines):
            lines[i], lines[i + 1] = lines[i + 1], lines[i]
        elif op == "truncate":
            lines[i] = lines[i][: draw(st.integers(0, max(len(lines[i]) - 1, 0)))]
        else:
            lines.insert(i, "")
    return "\n".join(lines)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=_mutants())
@pytest.mark.slow
def test_paths_agree_on_mutated_dumps(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("mut") / "m-buffer-assignment.txt"
    path.write_text(text)
    files = ModuleFiles(str(path.parent), "m", buffer_assignment=str(path))
    assert _outcome(files, "vector") == _outcome(files, "lines")


def test_a_bare_hlo_live_range_line_after_blank_lines_is_refused_alike(tmp_path):
    """After the blocks' blank lines the reference is between sections, where a bare
    'HloLiveRange' is an unexpected line; the vectorized scanner took it for more
    instruction text and failed later, with another message (found by a mutant)."""
    sample = sorted(SAMPLES.glob("*.txt"))[0].read_text()
    text = re.sub(r"HloLiveRange \(max \d+\):", "HloLiveRange", sample)
    path = tmp_path / "m-buffer-assignment.txt"
    path.write_text(text)
    files = ModuleFiles(str(tmp_path), "m", buffer_assignment=str(path))
    got = _outcome(files, "vector")
    assert got[0] == "error" and "unexpected line" in got[4]
    assert got == _outcome(files, "lines")


@given(
    st.lists(
        st.one_of(
            st.sampled_from([prefix for prefix, _ in vector.g.SECTIONS]).flatmap(
                lambda p: st.tuples(st.integers(0, len(p)), st.text(max_size=6)).map(
                    lambda t: p[: t[0]] + t[1]  # a marker, cut short or continued
                )
            ),
            st.text(max_size=8),  # anything, empty and one- or two-byte lines included
        ),
        max_size=40,
    ),
    st.integers(0, 5),
)
@settings(max_examples=300, deadline=None)
def test_section_heads_are_the_lines_the_marker_pattern_matches(lines, skip):
    """The first-bytes filter finds exactly what RE2 over every line finds, in a
    column sliced from a larger one (offsets not starting at 0) too."""
    column = pa.array(["x"] * skip + [line.replace("\n", " ") for line in lines], pa.large_string())
    column = column[skip:]
    expected = [
        i
        for i, line in enumerate(column.to_pylist())
        if any(line.startswith(prefix) for prefix, _ in vector.g.SECTIONS)
    ]
    assert vector._section_heads(column).tolist() == expected
