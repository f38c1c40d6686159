"""Handing the memory an ingest freed back to the OS.

Allocators keep freed pages for reuse, but each step of an ingest allocates
in other sizes than the one before it, so what one step freed is mostly still
held when the next peaks. glibc's malloc keeps what numpy, Python and a
malloc-backed Arrow pool freed until malloc_trim; pyarrow's release_unused
does not call it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable

import pyarrow as pa


def release() -> None:
    """Hand the memory freed so far back to the OS: malloc's (glibc's malloc_trim, as
    Dask trims its workers; nothing elsewhere) and the default Arrow pool's. About a
    millisecond when little is to be returned, a few when much is."""
    if _malloc_trim is not None:
        _malloc_trim(0)
    pa.default_memory_pool().release_unused()


def _find_malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim  # type: ignore[no-any-return]
    except (OSError, AttributeError):  # not glibc
        return None


_malloc_trim = _find_malloc_trim()
