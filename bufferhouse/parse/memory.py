"""Where the Arrow memory of a parse comes from, and handing freed memory back.

A parse makes many short-lived Arrow columns between the few it keeps, of
ever different sizes. pyarrow's default allocator, mimalloc, keeps the pages
that the kept columns pin: on a 500 MB dump it held ~200 MB more than the C
library's malloc at the peak, whether freed memory was released or not. So a
parse allocates from malloc, which maps large columns on their own, and
whose freed memory malloc_trim returns to the OS together with what numpy and
Python freed (pyarrow's release_unused does not trim malloc). Measured end to
end, as fast (bench/RESULTS.md, issue 5 memory section).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import threading
from collections.abc import Callable, Iterator

import pyarrow as pa

_lock = threading.Lock()
_users = 0
_before: pa.MemoryPool | None = None


@contextlib.contextmanager
def system_allocator() -> Iterator[None]:
    """pyarrow's default memory pool is malloc's while the block runs; the pool before
    is restored when the last such block running in the process ends."""
    global _users, _before
    with _lock:
        if _users == 0:
            _before = pa.default_memory_pool()
            pa.set_memory_pool(pa.system_memory_pool())
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0 and _before is not None:
                pa.set_memory_pool(_before)
                _before = None


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
