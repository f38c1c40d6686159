"""Turn one module's dump files into warehouse tables: scan, then finish.

Two scanners must agree exactly (the tests run both over every fixture and
hundreds of mutants): the per-line state machine (`scan._Parser.feed`), the
reference, which reads every era and words every error, and, for dumps of
the common layouts above VECTOR_MIN_BYTES, the vectorized scanner (vector.py)
that reads the bulky sections as whole Arrow columns. The vectorized scanner
hands anything unusual to the reference, so errors and rare eras are always
reported by one code path.
"""

from __future__ import annotations

from bufferhouse.ingest import memory, vector
from bufferhouse.ingest.finish import finish
from bufferhouse.ingest.model import ParsedModule
from bufferhouse.ingest.reader import read_lines
from bufferhouse.ingest.scan import _Parser

__all__ = ["VECTOR_MIN_BYTES", "ParsedModule", "parse_module"]

#: Dumps (bytes on disk) smaller than this are scanned line by line: below
#: it, setting up the vectorized scan costs more than it saves.
VECTOR_MIN_BYTES = 1 << 16


def parse_module(
    files: list[tuple[str, str]],
    hlo_path: str | None = None,
    *,
    accelerate: bool = True,
    vector_min_bytes: int = VECTOR_MIN_BYTES,
) -> ParsedModule:
    """Parse a module's files, given as (role, path).

    `accelerate=False` runs only the per-line state machine (the reference);
    `vector_min_bytes=0` sends every module the vectorized scanner can read to it.
    """
    with memory.system_allocator():  # see memory.py: less memory held at the peak
        ba_path = next(path for role, path in files if role == "buffer_assignment")
        scanned = vector.scan(files, vector_min_bytes) if accelerate else None
        large = scanned is not None
        if scanned is None:
            p = _Parser()
            for role, path in files:
                if role == "usage_report":
                    p.feed_report(path, read_lines(path))
                    p._section("usage_report")
                else:
                    p.feed(path, read_lines(path))
            if len(files) > 1 and any(r in ("values", "live_range") for r, _ in files):
                p.features.add("split")
            scanned = p.scanned(ba_path)
        parsed = finish(scanned, files, hlo_path, read_lines)
        del scanned
        if large:  # its scratch memory goes back to the OS; small modules skip the call
            memory.release()
    return parsed
