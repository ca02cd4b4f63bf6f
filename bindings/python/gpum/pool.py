# SPDX-License-Identifier: Apache-2.0
"""gpum's caching pool allocator (docs/pool.md) for code that manages device buffers itself.

    with gpum.Pool("cuda", device=0, limit="8GiB") as pool:
        ptr = pool.alloc(64 << 20)      # a device address (int)
        ...
        pool.free(ptr)
        print(pool.stats().reserved_bytes)

Sources: "cuda" (cuMemAlloc), "cuda-vmm" (virtual memory; with ``expandable_segments=True``
a segment grows and shrinks in place, as PyTorch's ``expandable_segments:True``), "pinned" and
"host" (host memory), "simulated" (addresses without memory, for replaying traces: never touch
them). Under gpum run
a GPU pool's default limit is the reservation. Allocating past the limit or the device raises
:class:`gpum.OutOfMemory` with the pool's full explanation.
"""
from __future__ import annotations

import ctypes as c
from dataclasses import dataclass
from typing import Any, Optional, Union

from ._lib import lib
from . import _types as t
from .errors import check
from . import report as _report
from .units import Size

__all__ = ["Pool", "PoolStats"]

lib.gpum_pool_source_open.argtypes = [c.c_char_p, c.c_int, c.c_uint64, c.POINTER(c.c_void_p)]
lib.gpum_pool_source_destroy.argtypes = [c.c_void_p]
lib.gpum_pool_source_destroy.restype = None
lib.gpum_pool_opts_init.argtypes = [c.POINTER(t.PoolOpts)]
lib.gpum_pool_opts_init.restype = None
lib.gpum_pool_strategy_parse.argtypes = [c.c_char_p, c.POINTER(c.c_int)]
lib.gpum_pool_create.argtypes = [c.c_void_p, c.POINTER(t.PoolOpts), c.POINTER(c.c_void_p)]
lib.gpum_pool_destroy.argtypes = [c.c_void_p]
lib.gpum_pool_destroy.restype = None
lib.gpum_pool_alloc.argtypes = [c.c_void_p, c.c_size_t, c.c_uint64, c.POINTER(c.c_uint64)]
lib.gpum_pool_free.argtypes = [c.c_void_p, c.c_uint64]
lib.gpum_pool_trim.argtypes = [c.c_void_p, c.c_uint64, c.POINTER(c.c_uint64)]
lib.gpum_pool_stats.argtypes = [c.c_void_p, c.POINTER(t.PoolStats)]
lib.gpum_pool_reset_peaks.argtypes = [c.c_void_p]
lib.gpum_pool_reset_peaks.restype = None


@dataclass(frozen=True)
class PoolStats:
    """A pool's counters; the sizes are gpum.Size (ints that print as "2.50 GiB")."""

    allocated_bytes: int  # in blocks handed out now
    allocated_peak: int
    reserved_bytes: int   # held from the source now
    reserved_peak: int
    allocations: int      # live blocks
    segments: int
    num_ooms: int
    num_alloc_retries: int
    largest_free_block: int
    free_cached: int
    fragmentation: float  # 1 - largest free block / free cached
    limit: int            # 0: none
    cache_limit: int


def stats_of(pool: Any) -> PoolStats:
    """The statistics of a gpum_pool_t (a pointer as c_void_p or int)."""
    s = t.PoolStats()
    check(lib.gpum_pool_stats(pool, c.byref(s)))
    return PoolStats(Size(s.allocated_bytes.current), Size(s.allocated_bytes.peak),
                     Size(s.reserved_bytes.current), Size(s.reserved_bytes.peak),
                     s.allocation.current, s.segment.current, s.num_ooms, s.num_alloc_retries,
                     Size(s.largest_free_block), Size(s.free_cached), s.fragmentation,
                     Size(s.limit), Size(s.cache_limit))


def _size(v: Union[None, int, str]) -> int:
    """Bytes: an int as it is, a size such as "8GiB" as libgpum's gpum_size_parse reads it
    (gpum.InvalidArgument when it cannot), None as 0. The package's one size reader."""
    if v is None:
        return 0
    if isinstance(v, int):
        return v
    out = c.c_uint64()
    check(lib.gpum_size_parse(str(v).encode(), c.byref(out)))
    return out.value


class Pool:
    """A pool over a memory source; close() (or the with block) gives everything back."""

    def __init__(self, source: str = "cuda", *, device: int = 0,
                 capacity: Union[None, int, str] = None, limit: Union[None, int, str] = None,
                 strategy: Optional[str] = None, name: Optional[str] = None,
                 cache_limit: Union[None, int, str] = None,
                 expandable_segments: bool = False) -> None:
        self._src = c.c_void_p()
        self._pool = c.c_void_p()
        check(lib.gpum_pool_source_open(source.encode(), device, _size(capacity),
                                        c.byref(self._src)))
        o = t.PoolOpts()
        lib.gpum_pool_opts_init(c.byref(o))
        self._name = (name or "python").encode()
        o.name, o.device = self._name, device
        o.limit_bytes = _size(limit)
        o.cache_limit_bytes = _size(cache_limit)
        o.expandable_segments = bool(expandable_segments)
        if strategy:
            st = c.c_int()
            rc = lib.gpum_pool_strategy_parse(strategy.encode(), c.byref(st))
            if rc < 0:
                lib.gpum_pool_source_destroy(self._src)
                self._src = c.c_void_p()
                check(rc)
            o.strategy = st.value
        rc = lib.gpum_pool_create(self._src, c.byref(o), c.byref(self._pool))
        if rc < 0:
            lib.gpum_pool_source_destroy(self._src)
            self._src = c.c_void_p()
            check(rc)

    def alloc(self, size: int, stream: int = 0) -> int:
        """size bytes (rounded up to 512) for use on stream (a CUstream handle, 0: default)."""
        ptr = c.c_uint64()
        check(lib.gpum_pool_alloc(self._pool, size, stream, c.byref(ptr)))
        return ptr.value

    def free(self, ptr: int) -> None:
        check(lib.gpum_pool_free(self._pool, ptr))

    def trim(self, target: Union[int, str] = 0) -> int:
        """Gives cached segments back until at most target bytes are held; the bytes released."""
        out = c.c_uint64()
        check(lib.gpum_pool_trim(self._pool, _size(target), c.byref(out)))
        return out.value

    def stats(self) -> PoolStats:
        return stats_of(self._pool)

    def reset_peaks(self) -> None:
        lib.gpum_pool_reset_peaks(self._pool)

    def close(self) -> None:
        _report.detach(self)
        if self._pool:
            lib.gpum_pool_destroy(self._pool)
            self._pool = c.c_void_p()
        if self._src:
            lib.gpum_pool_source_destroy(self._src)
            self._src = c.c_void_p()

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()
