"""No committed fixture, script or page names the machine it was made on.

The checkouts fixtures were made in (this repository's worktrees, and the folder that
holds them: tests/machine.py reads them from the machine) leak into source-file tables,
pprof frames and XProf programs; tests/data/scrub_paths.py cuts them to repository paths.
The home and temporary directories are not looked for here: the public dumps keep
other machines' /root/… and /tmp/… as written. Compressed fixtures are read decompressed, where the text
and protos are.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

from tests import machine
from tests.conftest import ROOT

MACHINE = machine.pattern(machine.places(ROOT, home=False, temp=False))
SCANNED = ("tests", "bench", "docs", "bufferhouse", "examples")


def _contents(path: Path) -> bytes:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(data)
        except (OSError, EOFError, zlib.error):  # a deliberately broken fixture
            return data
    return data


def _files():
    for f in machine.tracked(ROOT, SCANNED):
        if not {".venv", "__pycache__", "_work"} & set(f.parts):
            yield f


def test_no_machine_paths_anywhere() -> None:
    found = [str(f.relative_to(ROOT)) for f in _files() if MACHINE.search(_contents(f))]
    assert not found, f"machine paths in {found}; run python -m tests.data.scrub_paths on them"
