"""Handing freed memory back to the system after the flow's big steps.

Every run funnels through the one flow process, so what a step frees must not stay resident and
raise the floor the next step starts from. pyarrow's allocator (mimalloc) and glibc's malloc both
keep freed pages for reuse: after staging millions of rows, or a DuckDB connection's queries, the
process kept 50-100 MB it no longer used, on top of which the evaluation's DuckDB connection then
took its own memory limit. `release_memory()` returns those pages; it frees nothing in use.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
from functools import cache

import pyarrow as pa


@cache
def _malloc_trim():
    """glibc's malloc_trim, or None where the C library is another (musl, macOS)."""
    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    except OSError:
        return None


RELEASE_FROM_ROWS = 100_000


def release_memory(rows: int) -> None:
    """After a step over `rows` rows: collect Python's cycles, then return pyarrow's and malloc's
    free pages to the system. Below RELEASE_FROM_ROWS there is little to return, and a full
    collection of the flow's objects costs about 0.1 s each time (a third of a second of a 1-row
    run's wall, in three steps)."""
    if rows < RELEASE_FROM_ROWS:
        return
    gc.collect()
    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
