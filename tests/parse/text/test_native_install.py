"""The compiled reader is optional (docs/native.md): installed where no C compiler
works, bufferhouse still installs and imports, says why the reader is missing
(native.MISSING, `bufferhouse --version`), ingests the same tables with the line
reader and says so once per run; installed with the compiler, every extension that
setup.py builds (each bufferhouse/parse/text/native/_*.c) is there.

The installs are `pip install --no-build-isolation --no-deps --target` of a copy of
this tree, with pyproject's build-system.requires (setuptools>=68, and wheel for
setuptools before 70.1) pip-installed once into the test cache: the venv's own
setuptools may be older and lack bdist_wheel. Without the package index and that
cache, the installs skip with the reason (fail in CI, conftest.NEED_INDEX).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

import bufferhouse
from bufferhouse.cli import main
from bufferhouse.parse.text import native
from tests import conftest
from tests.conftest import ROOT

NATIVE = ROOT / "bufferhouse" / "parse" / "text" / "native"
#: The extensions setup.py builds: one per C file.
EXTENSIONS = sorted(p.stem for p in NATIVE.glob("_*.c"))
REASON = "the compiled column reader is not built (a test says so)"
#: Ids and times differ between two ingests of the same files; everything else may not.
VARYING = {"module_id", "run_id", "started_at", "ingested_at", "host"}


# -- the notice, in this process -------------------------------------------------------


@pytest.mark.parametrize("missing", [REASON, None])
def test_an_ingest_says_once_that_it_runs_without_the_compiled_reader(
    missing, monkeypatch, tmp_path, caplog
):
    monkeypatch.setattr(native, "MISSING", missing)
    with caplog.at_level(logging.INFO, logger="bufferhouse"):
        report = bufferhouse.ingest(conftest.SAMPLES, db=tmp_path / "w.duckdb", jobs=1)
    assert report.ok and len(report.loaded) > 1
    assert report.compiled_reader_missing == missing
    said = [r.getMessage() for r in caplog.records if "compiled" in r.getMessage()]
    assert said == ([] if missing is None else [said[0]])
    if missing is not None:
        assert said[0].startswith(REASON) and "line reader" in said[0]
        assert "C compiler" in said[0] and "docs/native.md" in said[0]


def test_the_cli_says_it_once_on_stderr(monkeypatch, tmp_path):
    monkeypatch.setattr(native, "MISSING", REASON)
    args = ["ingest", str(conftest.SAMPLES), "--db", str(tmp_path / "w.duckdb"), "-j", "1"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert result.stderr.count(REASON) == 1, result.stderr
    assert REASON not in result.stdout


def test_an_ingest_of_no_text_dump_says_nothing(monkeypatch, tmp_path, caplog):
    """Only text dumps need the compiled reader: an OOM log alone is read as before."""
    monkeypatch.setattr(native, "MISSING", REASON)
    with caplog.at_level(logging.INFO, logger="bufferhouse"):
        report = bufferhouse.ingest(conftest.DATA / "oom", db=tmp_path / "w.duckdb", jobs=1)
    assert report.events_loaded and report.compiled_reader_missing is None
    assert not [r for r in caplog.records if REASON in r.getMessage()]


# -- installs of a copy of this tree ---------------------------------------------------


def _build_requires() -> list[str]:
    """pyproject's build-system.requires, and wheel (setuptools < 70.1 builds no wheel
    without it)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    found = re.search(r"\[build-system\]\s*requires\s*=\s*\[([^\]]*)\]", text)
    assert found, "pyproject.toml has no [build-system] requires"
    return [*re.findall(r'"([^"]+)"', found.group(1)), "wheel"]


def _source(tmp: Path) -> Path:
    """What a fresh clone holds of the package, without anything built in place."""
    src = tmp / "src"
    for name in ("setup.py", "pyproject.toml", "README.md"):
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("*.so", "*.pyd", "__pycache__", "build", "*.egg-info")
    shutil.copytree(ROOT / "bufferhouse", src / "bufferhouse", ignore=ignore)
    return src


#: How each install finds the C compiler: a name not on PATH (no compiler at all, as
#: on a slim image), one that fails (as without Python's headers), or the system's.
COMPILERS = {
    "absent": {"CC": "bufferhouse-no-cc", "LDSHARED": "bufferhouse-no-cc -shared"},
    "failing": {"CC": shutil.which("false") or "false", "LDSHARED": "false"},
    "present": {},
}


@pytest.fixture(scope="module")
def installs(tmp_path_factory) -> Callable[[str], Path]:
    """Install targets by compiler (COMPILERS), made on first use."""
    if sys.platform == "win32":
        pytest.skip("the compiler is hidden through CC and PATH, as on POSIX")
    tools = conftest.pip_target(_build_requires(), "build-backend")
    tmp = tmp_path_factory.mktemp("native-install")
    src = _source(tmp)
    made: dict[str, Path] = {}

    def install(compiler: str) -> Path:
        if compiler not in made:
            made[compiler] = _pip_install(src, tmp / compiler, tools, COMPILERS[compiler])
        return made[compiler]

    return install


def _pip_install(src: Path, target: Path, tools: Path, compiler: dict[str, str]) -> Path:
    env = {**os.environ, "PYTHONPATH": str(tools), **compiler}
    cmd = [sys.executable, "-m", "pip", "install", "-v", "--no-build-isolation", "--no-deps"]
    proc = subprocess.run(
        [*cmd, "--target", str(target), str(src)],
        capture_output=True,
        text=True,
        env=env,
        cwd=src,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return target


def _run(target: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`python args...` with only the install `target` added to the venv's path."""
    env = {**os.environ, "PYTHONPATH": str(target)}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, cwd=cwd, check=False
    )


PROBE = """
import importlib, json, sys
import bufferhouse
from bufferhouse.parse.text import native
built = []
for name in sys.argv[1:]:
    try:
        built.append(importlib.import_module(f"bufferhouse.parse.text.native.{name}").__file__)
    except ImportError:
        pass
print(json.dumps({"file": bufferhouse.__file__, "missing": native.MISSING, "built": built}))
"""


def _probe(target: Path, tmp: Path) -> dict:
    proc = _run(target, "-c", PROBE, *EXTENSIONS, cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> list[str]:
    """The samples and a module large enough for the column reader (tests/synth)."""
    out = tmp_path_factory.mktemp("synth")
    cmd = [sys.executable, "-m", "tests.synth", str(out), "--mb", "0.3"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(cmd, check=True, capture_output=True, env=env, cwd=ROOT)
    return [str(conftest.SAMPLES), str(out)]


def _ingest(target: Path, dumps: list[str], tmp: Path) -> tuple[dict, str]:
    """Every table's rows (less ids and times) after a CLI ingest, and its stderr."""
    tmp.mkdir()
    db = tmp / "w.duckdb"
    proc = _run(target, "-m", "bufferhouse.cli", "ingest", *dumps, "--db", str(db), cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-3000:]
    tables = {}
    with duckdb.connect(str(db), read_only=True) as con:
        names = con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'"
        ).fetchall()
        for (table,) in names:
            columns = [
                c
                for c, _type, *_ in con.execute(f'DESCRIBE "{table}"').fetchall()
                if c not in VARYING and not c.endswith(("_module_id", "_run_id"))
            ]
            query = "SELECT " + ", ".join(f'"{c}"' for c in columns) + f' FROM "{table}"'
            tables[table] = sorted(map(repr, con.execute(query).fetchall()))
    return tables, proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("compiler", ["absent", "failing"])
def test_without_a_compiler_the_install_succeeds_without_the_reader(installs, compiler, tmp_path):
    target = installs(compiler)
    probe = _probe(target, tmp_path)
    assert probe["file"].startswith(str(target)), probe
    assert probe["built"] == [] and probe["missing"], probe
    version = _run(target, "-m", "bufferhouse.cli", "--version", cwd=tmp_path)
    assert "compiled reader: no: the compiled column reader is not built" in version.stdout


@pytest.mark.slow
def test_an_editable_install_without_a_compiler_works(installs, tmp_path):
    """`pip install -e .`, as the README's test command runs it, in a venv of its own
    that sees this one's packages (not its bufferhouse)."""
    installs("absent")  # the build backend is there
    tools = conftest.pip_target(_build_requires(), "build-backend")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / "deps.pth").write_text("\n".join(sorted(set(sys.path[1:]) - {str(ROOT)})))
    src = _source(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(tools), **COMPILERS["absent"]}
    cmd = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
    cmd += ["--no-build-isolation", "--no-deps", "-e", str(src)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [python, "-c", PROBE, *EXTENSIONS], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    probe = json.loads(proc.stdout.splitlines()[-1])
    assert probe["file"].startswith(str(src)) and probe["missing"] and not probe["built"]


@pytest.mark.slow
def test_with_a_compiler_every_extension_is_built(installs, tmp_path):
    target = installs("present")
    probe = _probe(target, tmp_path)
    assert probe["missing"] is None, probe
    assert len(probe["built"]) == len(EXTENSIONS) > 0, probe
    assert all(f.startswith(str(target)) for f in probe["built"]), probe
    version = _run(target, "-m", "bufferhouse.cli", "--version", cwd=tmp_path)
    assert "compiled reader: yes" in version.stdout


@pytest.mark.slow
def test_both_installs_ingest_the_same_tables(installs, dumps, tmp_path):
    without, said = _ingest(installs("absent"), dumps, tmp_path / "without")
    with_reader, quiet = _ingest(installs("present"), dumps, tmp_path / "with")
    assert without == with_reader
    assert sum(len(rows) for rows in without.values()) > 1000
    assert said.count("the compiled column reader is not built") == 1, said
    assert "compiled" not in quiet, quiet
