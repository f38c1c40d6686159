"""No committed fixture, script or page names the machine it was made on.

The checkouts fixtures were made in (/work/main, /work/wt-…, /work/wt/…) leak into
source-file tables, pprof frames and XProf programs; tests/data/scrub_paths.py cuts
them to repository paths. Compressed fixtures are read decompressed, where the text
and protos are.
"""

from __future__ import annotations

import gzip
import re
import zlib
from pathlib import Path

from tests.conftest import ROOT

MACHINE = re.compile(rb"/work/(?:main/|wt[-/]|venv\d|jaxenv|tpu\.lock)")
#: The two files that name the pattern itself.
SELF_NAMED = {"test_fixture_paths.py", "scrub_paths.py"}
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
    for top in SCANNED:
        for f in (ROOT / top).rglob("*"):
            if f.is_file() and not {".venv", "__pycache__", "_work"} & set(f.parts):
                yield f


def test_no_machine_paths_anywhere() -> None:
    found = [
        str(f.relative_to(ROOT))
        for f in _files()
        if f.name not in SELF_NAMED and MACHINE.search(_contents(f))
    ]
    assert not found, f"machine paths in {found}; run tests/data/scrub_paths.py on them"
