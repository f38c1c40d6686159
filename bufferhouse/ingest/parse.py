"""Turn one module's dump files into warehouse tables: scan, then finish.

Scanning has a reference and fast paths that must agree exactly (the tests
run all of them over every fixture): the per-line state machine
(`scan._Parser.feed`), the same machine taking runs of regular lines many at
a time (`feed_blocks`), and, for large dumps of the common layout, the
vectorized scanner (vector.py) that reads the bulky sections as whole Arrow
columns. A scanner that meets anything unusual hands the module to the
reference, so errors and rare eras are always reported by one code path.
"""

from __future__ import annotations

from bufferhouse.ingest import vector
from bufferhouse.ingest.finish import finish
from bufferhouse.ingest.model import ParsedModule
from bufferhouse.ingest.reader import read_blocks, read_lines
from bufferhouse.ingest.scan import _Parser

__all__ = ["VECTOR_MIN_BYTES", "ParsedModule", "parse_module"]

#: Dumps smaller than this are scanned line by line: below it, setting up the
#: vectorized scan costs more than it saves.
VECTOR_MIN_BYTES = 1 << 20


def parse_module(
    files: list[tuple[str, str]],
    hlo_path: str | None = None,
    *,
    accelerate: bool = True,
    vector_min_bytes: int = VECTOR_MIN_BYTES,
) -> ParsedModule:
    """Parse a module's files, given as (role, path).

    `accelerate=False` runs the plain per-line state machine (the reference);
    `vector_min_bytes=0` sends every module the vectorized scanner can read to it.
    """
    ba_path = next(path for role, path in files if role == "buffer_assignment")
    scanned = vector.scan(files, vector_min_bytes) if accelerate else None
    if scanned is None:
        p = _Parser()
        for role, path in files:
            if role == "usage_report":
                p.feed_report(path, read_lines(path))
                p._section("usage_report")
            elif accelerate:
                p.feed_blocks(path, read_blocks(path))
            else:
                p.feed(path, read_lines(path))
        if len(files) > 1 and any(r in ("values", "live_range") for r, _ in files):
            p.features.add("split")
        scanned = p.scanned(ba_path)
    return finish(scanned, files, hlo_path, read_lines)
