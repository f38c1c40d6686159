"""The house rules of the package layout (docs/architecture.md), checked by
import-linter with the contracts in pyproject.toml."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from importlinter.cli import lint_imports_command; "
            "sys.exit(lint_imports_command())",
        ],
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_stages_import_one_way():
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 kept, 0 broken" in result.stdout


def test_a_wrong_import_breaks_the_contract(tmp_path):
    """The contract is not vacuous: an import of the CLI from the parse stage,
    and of click from the schema, each fail it."""
    shutil.copytree(ROOT / "bufferhouse", tmp_path / "bufferhouse")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    reader = tmp_path / "bufferhouse" / "parse" / "reader.py"
    reader.write_text(reader.read_text() + "\nfrom bufferhouse.cli import main  # noqa\n")
    tables = tmp_path / "bufferhouse" / "schema" / "ids.py"
    tables.write_text(tables.read_text() + "\nimport click  # noqa\n")
    result = _lint(tmp_path)
    assert result.returncode != 0
    assert "0 kept, 2 broken" in result.stdout, result.stdout
    assert "bufferhouse.parse.reader -> bufferhouse.cli" in result.stdout


#: Files allowed past the limit: the schema's declarations (one documented entry per
#: column, data more than code) and protoc's generated modules.
LONG_FILES = {"bufferhouse/schema/tables.py"}


def test_no_room_too_big_to_hold():
    """No module of the package over 600 lines (docs/architecture.md)."""
    long = {
        str(path.relative_to(ROOT)): n
        for path in (ROOT / "bufferhouse").rglob("*.py")
        if not path.name.endswith("_pb2.py")
        and (n := len(path.read_text(encoding="utf-8").splitlines())) > 600
    }
    assert set(long) <= LONG_FILES, long
