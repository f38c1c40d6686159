"""What a process pays at start: `--version` imports neither the parser nor pyarrow,
and the processes of ours that never use pandas do not import it through pyarrow."""

from __future__ import annotations

import json
import subprocess
import sys

from bufferhouse.parse.text import native
from bufferhouse.version import compiled_reader_missing


def _run(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_version_imports_neither_the_parser_nor_pyarrow():
    got = _run(
        "import contextlib, io, json, sys\n"
        "from bufferhouse.cli import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
        "    main(['--version'])\n"
        "print(json.dumps({'out': out.getvalue(), 'mods': sorted(sys.modules)}))"
    )
    assert got["out"].startswith("bufferhouse, version ")
    assert "compiled reader: yes" in got["out"] or "compiled reader: no: " in got["out"]
    heavy = [m for m in got["mods"] if m.split(".")[0] in ("pyarrow", "numpy", "duckdb")]
    assert heavy == []
    assert not [m for m in got["mods"] if m.startswith("bufferhouse.parse")]


def test_version_says_what_the_parser_finds():
    assert compiled_reader_missing() == native.MISSING


def test_without_pandas_keeps_pyarrow_from_importing_it():
    got = _run(
        "import json, sys\n"
        "from bufferhouse.load.workers import without_pandas\n"
        "without_pandas()\n"
        "import pyarrow as pa\n"
        "t = pa.Table.from_pylist([{'a': 1, 'b': 'x'}])\n"
        "print(json.dumps({'rows': t.num_rows, 'pandas': 'pandas' in sys.modules}))"
    )
    assert got == {"rows": 1, "pandas": False}
