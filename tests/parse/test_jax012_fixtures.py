"""The jax 0.12 fixtures (tests/data/jax012: real CPU, deviceless TPU and H100 compiles,
made by make_fixtures.py there) against the compiler's own figures.

Each fixture directory is one program compile with its `memory_analysis.json` (every
field of compiled.memory_analysis()). It is ingested with the public API into a warehouse
of its own, as it is (text + proto, and the profile where there is one), and, outside
pairs/, also split into a text-only and a proto-only tree (and a profile-only one
where the run was profiled). In every form, every module
of the program's name must load and match: argument, output, alias and temp against
the `categories` query in the device space (color 0), the host_* figures against the
host space (color 5, Layout::kHostMemorySpace), the peak against
`modules.xla_peak_bytes`. generated_code_size_in_bytes, and the TPU temp libtpu's
log decides, are checked in tests/parse/test_libtpu_log.py (the proto-only trees here hold
no log, so the temp may be NULL in them). The failed compile's
`compile-oom.log` is checked against libtpu's own log of the same compile.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

import bufferhouse
from tests import machine
from tests.conftest import DATA, ROOT

DATA = DATA / "jax012"
#: sweep/ is the capacity sweep's (examples/sweep.py's format; tests/queries/test_fits.py)
FIXTURES = sorted(
    p.parent for p in DATA.rglob("memory_analysis.json") if "sweep" not in p.relative_to(DATA).parts
)
HOST_COLOR = 5  # Layout::kHostMemorySpace: what memory_analysis() reports as host_*
GIB = 1 << 30


def _record(fixture: Path) -> dict:
    return json.loads((fixture / "memory_analysis.json").read_text())


def _forms(fixture: Path, tmp: Path) -> dict[str, Path]:
    """The fixture as it is, and (outside pairs/) its text files and its protos apart."""
    forms = {"text+proto": fixture}
    if "pairs" in fixture.relative_to(DATA).parts or not any(fixture.rglob("*.hlo.pb")):
        return forms
    kinds = [("text", _is_text), ("proto", _is_pb)]
    kinds += [("profile", _is_profile)] if any(fixture.rglob("*.xplane.pb")) else []
    for form, wanted in kinds:
        root = tmp / form
        for f in fixture.rglob("*"):
            if f.is_file() and f.name != "memory_analysis.json" and wanted(f.name):
                dst = root / f.relative_to(fixture)
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(f, dst)
        forms[form] = root
    return forms


def _is_pb(name: str) -> bool:
    return name.endswith(".pb") and not name.endswith(".xplane.pb")


def _is_text(name: str) -> bool:
    return not name.endswith((".pb", ".prof"))


def _is_profile(name: str) -> bool:
    """The XProf profile and the device memory profile of the run."""
    return name.endswith((".xplane.pb", ".prof"))


def _ingest(tree: Path, db: Path) -> list[str]:
    """Ingest the tree; what failed, one short line per file."""
    report = bufferhouse.ingest([tree], db=db, jobs=1)
    return [str(o.error).replace(str(DATA) + "/", "").split("\n")[0][:300] for o in report.failed]


def _expected(ma: dict) -> dict[tuple[int, str], int]:
    return {
        (0, "parameter_bytes"): ma["argument_size_in_bytes"],
        (0, "output_bytes"): ma["output_size_in_bytes"],
        (0, "alias_bytes"): ma["alias_size_in_bytes"],
        (0, "temp_bytes"): ma["temp_size_in_bytes"],
        (HOST_COLOR, "parameter_bytes"): ma["host_argument_size_in_bytes"],
        (HOST_COLOR, "output_bytes"): ma["host_output_size_in_bytes"],
        (HOST_COLOR, "alias_bytes"): ma["host_alias_size_in_bytes"],
        (HOST_COLOR, "temp_bytes"): ma["host_temp_size_in_bytes"],
    }


def _found(db: Path, module_id: int) -> dict[tuple[int, str], int]:
    rows = bufferhouse.query("categories", db=db, module=str(module_id)).to_pylist()
    found = {}
    for color in (0, HOST_COLOR):
        row = next((r for r in rows if r["color"] == color), {})
        for col in ("parameter_bytes", "output_bytes", "alias_bytes", "temp_bytes"):
            found[(color, col)] = row.get(col, 0)  # no allocation in the space: 0 bytes
    return found


def _check_module(db: Path, m: dict, ma: dict, where: str) -> list[str]:
    """Every memory_analysis() figure of one module against the warehouse's."""
    found, expected = _found(db, m["module_id"]), _expected(ma)
    if m["backend"] == "tpu":  # temp is libtpu's rule over the allocations (metrics.md)
        # NULL where libtpu's rule is not known for the module without its log (the
        # proto-only trees): never a wrong figure; tests/parse/test_libtpu_log.py counts them
        temp = m["xla_temp_bytes"]
        found[(0, "temp_bytes")] = ma["temp_size_in_bytes"] if temp is None else temp
    wrong = [
        f"{where} color {c} {col}: {found[(c, col)]} != {v:,}"
        for (c, col), v in expected.items()
        if found[(c, col)] != v
    ]
    text_off_cpu = m["source_kind"] == "text" and m["backend"] != "cpu"
    want_peak = None if text_off_cpu else ma["peak_memory_in_bytes"]  # metrics.md: XLA's
    if m["xla_peak_bytes"] != want_peak:  # peak from text alone is CPU's static rule only
        wrong.append(f"{where} xla_peak_bytes: {m['xla_peak_bytes']} != {want_peak}")
    return wrong


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: str(p.relative_to(DATA)))
def test_figures_equal_memory_analysis(fixture: Path, tmp_path: Path) -> None:
    """argument, output, alias and temp (HBM and host), and XLA's peak, equal
    memory_analysis() in every form; heap_peak_bytes is one figure in every form."""
    rec = _record(fixture)
    ma = rec["memory_analysis"]
    if ma is None:
        pytest.skip(f"a failed compile ({rec['error']}): test_compile_oom_event checks it")
    wrong, heap_peaks = [], set()
    for form, tree in _forms(fixture, tmp_path).items():
        db = tmp_path / f"{form}.duckdb"
        wrong += [f"{form}: {e}" for e in _ingest(tree, db)]
        modules = bufferhouse.sql(
            "SELECT module_id, source_kind, backend, xla_peak_bytes, xla_temp_bytes,"
            " heap_peak_bytes FROM modules WHERE module_name = ?",
            db=db,
            params=[rec["module_name"]],
        ).to_pylist()
        if not modules:
            wrong.append(f"{form}: no module {rec['module_name']} loaded")
        for m in modules:
            wrong += _check_module(db, m, ma, f"{form}/{m['source_kind']}")
            heap_peaks.add(m["heap_peak_bytes"])
    if len(heap_peaks) > 1:
        wrong.append(f"heap_peak_bytes differs by form: {sorted(heap_peaks)}")
    assert not wrong, "\n".join(wrong)


def _libtpu_oom(log: str) -> tuple[float, float]:
    """'Used 37.00G of 15.75G hbm' from libtpu's own log of the compile, in GiB."""
    m = re.search(r"Used ([\d.]+)G of ([\d.]+)G hbm", log)
    assert m, "libtpu-stderr.log has no 'Used X of Y hbm' line"
    return float(m.group(1)), float(m.group(2))


OOMS = [f for f in FIXTURES if _record(f)["memory_analysis"] is None]


@pytest.mark.parametrize("fixture", OOMS, ids=lambda p: str(p.relative_to(DATA)))
def test_compile_oom_event(fixture: Path, tmp_path: Path) -> None:
    """The E1000 CompileTimeHbmOom: program, memory space, required and available
    bytes, against libtpu's log of the same compile (two decimals of a GiB in both)."""
    db = tmp_path / "oom.duckdb"
    failed = _ingest(fixture, db)
    events = bufferhouse.sql(
        "SELECT program_name, memory_space, used_bytes, capacity_bytes FROM oom_events"
        " WHERE path LIKE '%compile-oom.log'",
        db=db,
    ).to_pylist()
    assert len(events) == 1, (events, failed)
    (event,) = events
    used, capacity = _libtpu_oom((fixture / "libtpu-stderr.log").read_text())
    assert event["program_name"] == _record(fixture)["jit_name"]
    assert (event["memory_space"] or "").lower() == "hbm"
    assert abs(event["used_bytes"] - used * GIB) <= 0.005 * GIB, event  # "required"
    assert abs(event["capacity_bytes"] - capacity * GIB) <= 0.005 * GIB, event


def test_every_fixture_directory_is_indexed() -> None:
    """INDEX.md (and pairs/INDEX.md) list every fixture directory, and every fixture
    names its backend and jit name."""
    index = (DATA / "INDEX.md").read_text() + (DATA / "pairs" / "INDEX.md").read_text()
    for fixture in FIXTURES:
        rel = fixture.relative_to(DATA)
        name = rel.parts[1] if rel.parts[0] == "pairs" else str(rel)
        assert f"`{name}`" in index, rel
        rec = _record(fixture)
        assert rec["fixture"]["backend"] in ("cpu", "tpu", "gpu") and rec["jit_name"], rel
    assert len(FIXTURES) >= 55


def test_no_machine_paths_in_the_fixtures() -> None:
    """Nothing under tests/data/jax012 names a machine directory: this machine's checkout
    folder or home (tests/machine.py; not its temp directory: libtpu's flag file names
    its own /tmp default), or another machine's /home."""
    bad = machine.pattern([*machine.places(ROOT, temp=False), Path("/home")])
    for f in DATA.rglob("*"):
        if f.is_file():
            found = bad.search(f.read_bytes())
            assert found is None, (f.relative_to(DATA), found)
