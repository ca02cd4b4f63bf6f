# SPDX-License-Identifier: Apache-2.0
"""The device/host tiered cache (docs/tiercache.md): keyed byte buffers kept on the GPU while it
has room, spilled to pinned host memory (then, optionally, plain host memory) when it is short.

    with gpum.TierCache(device_budget="1GiB", pinned_limit="4GiB", host_limit="16GiB",
                        on_evict=lambda key, size: print("dropped", key, size)) as cache:
        cache.put("user:42", embedding)        # any bytes-like value; on the GPU if it fits
        data = cache.get("user:42")            # bytes (KeyError when absent); promotes it
        cache.lookup("user:42")                # Placement(tier=Tier.DEVICE, size=...) or None
        with cache.pinned("user:42") as ptr:   # its device address, kept on the GPU meanwhile
            ...
        cache.pressure("512MiB")               # gpumd says the GPU is short: demote
        print(cache.stats().device.hits)

Keys are bytes or str (a str is its UTF-8 bytes: "a" and b"a" are one entry), 1 to 4096 bytes.
Every method is thread-safe; calls on one cache run one at a time (libgpum holds the cache's
lock for each call). The eviction callback runs on the thread whose call evicted, after that
call's work is done and every lock is released, so it may use the cache.
"""
from __future__ import annotations

import collections
import contextlib
import ctypes as c
import enum
import threading
from dataclasses import dataclass
from typing import Any, Callable, Deque, Iterator, NamedTuple, Optional, Tuple, Union

from ._lib import lib
from . import _types as t
from .errors import GPUM_ENOENT, GPUM_ENOSPC, OutOfMemory, check, error_for
from .pool import _size
from .units import Size
from . import report as _report

__all__ = ["TierCache", "TierCacheStats", "TierStats", "Tier", "Placement"]

lib.gpum_tiercache_opts_init.argtypes = [c.POINTER(t.TierCacheOpts)]
lib.gpum_tiercache_opts_init.restype = None
lib.gpum_tiercache_create.argtypes = [c.POINTER(t.TierCacheOpts), c.POINTER(c.c_void_p)]
lib.gpum_tiercache_destroy.argtypes = [c.c_void_p]
lib.gpum_tiercache_destroy.restype = None
lib.gpum_tiercache_put.argtypes = [c.c_void_p, c.c_char_p, c.c_size_t, c.c_void_p, c.c_size_t]
lib.gpum_tiercache_get.argtypes = [c.c_void_p, c.c_char_p, c.c_size_t, c.c_void_p, c.c_size_t,
                                   c.POINTER(c.c_size_t), c.POINTER(c.c_int)]
lib.gpum_tiercache_put_device.argtypes = [c.c_void_p, c.c_char_p, c.c_size_t, c.c_uint64,
                                          c.c_size_t]
lib.gpum_tiercache_get_device.argtypes = [c.c_void_p, c.c_char_p, c.c_size_t, c.c_uint64,
                                          c.c_size_t, c.POINTER(c.c_size_t), c.POINTER(c.c_int)]
lib.gpum_tiercache_lookup.argtypes = [c.c_void_p, c.c_char_p, c.c_size_t, c.POINTER(c.c_int),
                                      c.POINTER(c.c_size_t)]
lib.gpum_tiercache_remove.argtypes = [c.c_void_p, c.c_char_p, c.c_size_t]
lib.gpum_tiercache_pin.argtypes = [c.c_void_p, c.c_char_p, c.c_size_t, c.POINTER(c.c_uint64)]
lib.gpum_tiercache_unpin.argtypes = [c.c_void_p, c.c_char_p, c.c_size_t]
lib.gpum_tiercache_pressure.argtypes = [c.c_void_p, c.c_uint64, c.POINTER(c.c_uint64)]
lib.gpum_tiercache_stats.argtypes = [c.c_void_p, c.POINTER(t.TierCacheStats)]
lib.gpum_tiercache_stats.restype = None

_ALL = (1 << 64) - 1

Key = Union[bytes, bytearray, memoryview, str]
EvictFn = Callable[[bytes, int], Any]


class Tier(enum.IntEnum):
    """Where an entry lives, hottest first (gpum_tier_t)."""

    DEVICE = 0
    PINNED = 1
    HOST = 2

    def __str__(self) -> str:
        return self.name.lower()


class Placement(NamedTuple):
    """What :meth:`TierCache.lookup` says about an entry: its tier and its size in bytes."""

    tier: Tier
    size: int


@dataclass(frozen=True)
class TierStats:
    """One tier's counters (payload bytes: the sizes given to put, not the pools' blocks)."""

    hits: int        # gets and pins that found the entry in this tier
    misses: int      # gets that looked past this tier (the entry was lower, or absent)
    promotions: int  # entries moved up to the device from this tier
    demotions: int   # entries moved down out of this tier
    evictions: int   # entries dropped from this tier (their data is gone)
    bytes: int       # payload bytes held now
    entries: int     # entries held now
    limit: int       # the tier's byte limit (0: none, or no such tier)


@dataclass(frozen=True)
class TierCacheStats:
    """A snapshot of the cache's counters: ``stats.device.hits``, ``stats[Tier.PINNED]``..."""

    tiers: Tuple[TierStats, ...]  # indexed by Tier
    puts: int
    gets: int
    misses: int          # gets of a key not in the cache
    alloc_failures: int  # device allocations that failed (each one demoted entries)
    pressure_calls: int

    def __getitem__(self, tier: Union[Tier, int]) -> TierStats:
        return self.tiers[tier]

    @property
    def device(self) -> TierStats:
        return self.tiers[Tier.DEVICE]

    @property
    def pinned(self) -> TierStats:
        return self.tiers[Tier.PINNED]

    @property
    def host(self) -> TierStats:
        return self.tiers[Tier.HOST]

    @property
    def entries(self) -> int:
        return sum(s.entries for s in self.tiers)

    @property
    def bytes(self) -> int:
        return sum(s.bytes for s in self.tiers)


def _key(key: Key) -> bytes:
    if isinstance(key, bytes):
        return key
    if isinstance(key, str):
        return key.encode()
    if isinstance(key, (bytearray, memoryview)):
        return bytes(key)
    raise TypeError(f"a TierCache key is bytes or str, not {type(key).__name__}")


def _value(value: Any) -> Tuple[Any, int]:
    """A pointer argument for value's bytes (not copied when value is bytes or writable) and
    their count."""
    if isinstance(value, bytes):
        return value, len(value)
    if isinstance(value, str):
        raise TypeError("a TierCache value is bytes-like, not str: encode it")
    try:
        mv = memoryview(value)
    except TypeError:
        raise TypeError("a TierCache value is bytes-like (bytes, bytearray, memoryview, an "
                        f"array), not {type(value).__name__}") from None
    if not mv.c_contiguous:
        raise ValueError("a TierCache value must be C-contiguous")
    mv = mv.cast("B") if mv.ndim != 1 or mv.format != "B" else mv
    if mv.readonly:
        return mv.tobytes(), mv.nbytes
    return (c.c_char * mv.nbytes).from_buffer(mv), mv.nbytes


def _nbytes(name: str, v: Union[int, str]) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise TypeError(f"{name} is a byte count (int) or a size (\"64MiB\"), "
                        f"not {type(v).__name__}")
    n = _size(v)
    if not 0 <= n <= _ALL:
        raise ValueError(f"{name} must be 0 to 2**64-1 bytes, not {n}")
    return n


class _Pending(threading.local):
    """Evictions reported by the C callback, per thread: the callback runs on the thread whose
    call into the cache evicted, with the cache's lock held, so it only records them here."""

    def __init__(self) -> None:
        self.q: Deque[Tuple[bytes, int]] = collections.deque()


def _trampoline(pending: _Pending, foreign: Deque[Tuple[bytes, int]]) -> Any:
    # A closure over the queues, not over the cache: the cache stays free of reference cycles.
    def on_evict(key: int, key_len: int, size: int, user: Any) -> None:
        item = (c.string_at(key, key_len), size)
        if isinstance(threading.current_thread(), threading._DummyThread):
            # A thread of C's own (a gpum.Reporter demoting under gpumd's pressure): its
            # evictions wait for the next call into the cache, on whatever thread.
            foreign.append(item)
        else:
            pending.q.append(item)
    return t.TIERCACHE_EVICT_FN(on_evict)


class TierCache:
    """A tiered cache on one CUDA device (gpum/tiercache.h); close() or the with block frees it.

    Options, sizes in bytes or as strings ("64MiB"):
      device: the CUDA ordinal of the device tier.
      device_budget: most payload bytes on the device (None or 0: until the device pool fails).
      pinned_limit: most payload bytes in pinned host memory (None: libgpum's 256 MiB).
      host_limit: most payload bytes in plain host memory (None or 0: no host tier).
      on_evict: called as on_evict(key: bytes, size: int) for each entry the lowest tier drops
        (its data is gone), on the thread whose call evicted it, after that call's work is done
        (evictions by a gpum.Reporter's thread under gpumd's pressure: at the next put, get,
        remove, pin or pressure call).
        An exception it raises is raised from that call, after the other evictions were
        delivered.

    Raises gpum.InvalidArgument for bad options, gpum.GpumError for the driver's errors (no
    CUDA driver, no such device).
    """

    def __init__(self, *, device: int = 0, device_budget: Union[None, int, str] = None,
                 pinned_limit: Union[None, int, str] = None,
                 host_limit: Union[None, int, str] = None,
                 on_evict: Optional[EvictFn] = None) -> None:
        self._mu = threading.Lock()
        self._c = c.c_void_p()
        self._on_evict = on_evict
        self._pending = _Pending()
        if on_evict is not None and not callable(on_evict):
            raise TypeError("on_evict must be callable")
        if isinstance(device, bool) or not isinstance(device, int):
            raise TypeError(f"device is a CUDA ordinal (int), not {type(device).__name__}")
        o = t.TierCacheOpts()
        lib.gpum_tiercache_opts_init(c.byref(o))
        o.device = device
        if device_budget is not None:
            o.device_budget = _nbytes("device_budget", device_budget)
        if pinned_limit is not None:
            o.pinned_limit = _nbytes("pinned_limit", pinned_limit)
        if host_limit is not None:
            o.host_limit = _nbytes("host_limit", host_limit)
        self._foreign: Deque[Tuple[bytes, int]] = collections.deque()
        self._evict_c = (_trampoline(self._pending, self._foreign) if on_evict is not None
                         else None)
        if self._evict_c is not None:
            o.on_evict = self._evict_c
        h = c.c_void_p()
        check(lib.gpum_tiercache_create(c.byref(o), c.byref(h)))
        self._c = h

    # --- helpers --------------------------------------------------------------------------------
    def _live(self) -> c.c_void_p:
        """The C cache; the caller holds _mu. ValueError once closed."""
        if not self._c:
            raise ValueError("the TierCache is closed")
        return self._c

    def _finish(self, err: Optional[BaseException]) -> None:
        """After a call, outside the locks: delivers the evictions it caused, then raises err
        (its own failure, made right after the C call, whose detail message a callback could
        otherwise replace)."""
        try:
            first: Optional[Exception] = None
            for q in (self._foreign, self._pending.q):
                while q and self._on_evict is not None:
                    try:
                        key, size = q.popleft()
                    except IndexError:  # another thread took the last foreign one
                        break
                    try:
                        self._on_evict(key, size)
                    except Exception as e:  # the others are still delivered
                        if first is None:
                            first = e
            if first is not None:
                raise first
        finally:
            if err is not None:
                raise err

    # --- the calls ------------------------------------------------------------------------------
    def put(self, key: Key, value: Any) -> None:
        """Stores value's bytes (any C-contiguous bytes-like object: copied) under key, replacing
        the key's entry. On the device when it fits, demoting colder entries to make room.

        Raises TypeError (not bytes-like), gpum.InvalidArgument (an empty or too long key, an
        empty value, or one larger than every tier's limit), gpum.Busy (the key's entry is
        pinned), gpum.OutOfMemory (no tier can make room: their entries are pinned; the key's
        old entry is gone), gpum.GpumError (a driver error of a copy)."""
        k = _key(key)
        ptr, n = _value(value)
        err: Optional[BaseException] = None
        with self._mu:
            rc = lib.gpum_tiercache_put(self._live(), k, len(k), ptr, n)
            if rc == GPUM_ENOSPC:
                err = OutOfMemory(rc, (lib.gpum_last_error() or b"").decode(errors="replace"))
            elif rc < 0:
                err = error_for(rc)
        self._finish(err)

    def get(self, key: Key) -> bytes:
        """A copy of key's bytes; an entry found on a lower tier is then promoted to the device.
        Raises KeyError when key is not cached (a miss), gpum.GpumError for a driver error."""
        k = _key(key)
        err: Optional[BaseException] = None
        data = b""
        size, tier = c.c_size_t(), c.c_int()
        with self._mu:
            h = self._live()
            # The size first (lookup counts nothing); the lock keeps it until the get.
            cap = size.value if lib.gpum_tiercache_lookup(h, k, len(k), None,
                                                          c.byref(size)) == 0 else 0
            while True:
                buf = c.create_string_buffer(cap) if cap else None
                rc = lib.gpum_tiercache_get(h, k, len(k), buf, cap, c.byref(size), c.byref(tier))
                if rc != GPUM_ENOSPC:
                    break
                cap = size.value
            if rc == GPUM_ENOENT:
                err = KeyError(key)
            elif rc < 0:
                err = error_for(rc)
            elif buf is not None:
                data = buf.raw
        self._finish(err)
        return data

    def get_into(self, key: Key, buffer: Any) -> Tuple[int, Tier]:
        """Copies key's bytes into buffer (a writable bytes-like object, e.g. a bytearray or a
        numpy array) without an intermediate copy: (bytes copied, the tier it was found in).
        Raises KeyError (not cached), ValueError (buffer smaller than the entry: nothing copied),
        TypeError (not a writable buffer)."""
        k = _key(key)
        try:
            mv = memoryview(buffer)
        except TypeError:
            raise TypeError(f"get_into needs a writable buffer, not {type(buffer).__name__}") \
                from None
        if mv.readonly or not mv.c_contiguous:
            raise TypeError("get_into needs a writable, C-contiguous buffer")
        mv = mv.cast("B") if mv.ndim != 1 or mv.format != "B" else mv
        dst = (c.c_char * mv.nbytes).from_buffer(mv)
        err: Optional[BaseException] = None
        size, tier = c.c_size_t(), c.c_int()
        with self._mu:
            rc = lib.gpum_tiercache_get(self._live(), k, len(k), dst, mv.nbytes, c.byref(size),
                                        c.byref(tier))
            if rc == GPUM_ENOENT:
                err = KeyError(key)
            elif rc == GPUM_ENOSPC:
                err = ValueError(f"the entry has {size.value} bytes, the buffer {mv.nbytes}")
            elif rc < 0:
                err = error_for(rc)
        del dst
        self._finish(err)
        return size.value, Tier(tier.value)

    def put_device(self, key: Key, ptr: int, size: int) -> None:
        """Stores size bytes at ptr, an address on the cache's device (a gpum.Pool block, a
        tensor's data_ptr()), copied device to device (or to host memory when the entry goes
        lower). Raises as put."""
        k = _key(key)
        err: Optional[BaseException] = None
        with self._mu:
            rc = lib.gpum_tiercache_put_device(self._live(), k, len(k), ptr, size)
            if rc == GPUM_ENOSPC:
                err = OutOfMemory(rc, (lib.gpum_last_error() or b"").decode(errors="replace"))
            elif rc < 0:
                err = error_for(rc)
        self._finish(err)

    def get_device(self, key: Key, ptr: int, capacity: int) -> Tuple[int, Tier]:
        """Copies key's bytes to ptr, an address on the cache's device with capacity bytes:
        (bytes copied, the tier it was found in). Raises KeyError (not cached), ValueError
        (capacity below the entry: nothing copied)."""
        k = _key(key)
        err: Optional[BaseException] = None
        size, tier = c.c_size_t(), c.c_int()
        with self._mu:
            rc = lib.gpum_tiercache_get_device(self._live(), k, len(k), ptr, capacity,
                                               c.byref(size), c.byref(tier))
            if rc == GPUM_ENOENT:
                err = KeyError(key)
            elif rc == GPUM_ENOSPC:
                err = ValueError(f"the entry has {size.value} bytes, the buffer {capacity}")
            elif rc < 0:
                err = error_for(rc)
        self._finish(err)
        return size.value, Tier(tier.value)

    def lookup(self, key: Key) -> Optional[Placement]:
        """Where key's entry is and its size, or None; neither a hit nor a miss, and the LRU
        order does not change."""
        k = _key(key)
        size, tier = c.c_size_t(), c.c_int()
        with self._mu:
            rc = lib.gpum_tiercache_lookup(self._live(), k, len(k), c.byref(tier), c.byref(size))
            if rc == GPUM_ENOENT:
                return None
            check(rc)
        return Placement(Tier(tier.value), size.value)

    def remove(self, key: Key) -> None:
        """Drops key's entry (no eviction callback). KeyError when not cached, gpum.Busy when
        pinned."""
        k = _key(key)
        with self._mu:
            rc = lib.gpum_tiercache_remove(self._live(), k, len(k))
            if rc == GPUM_ENOENT:
                raise KeyError(key)
            check(rc)

    def pin(self, key: Key) -> int:
        """Pins key's entry on the device, promoting it first if it is lower, and returns its
        device address: valid, with the entry's bytes there, until the matching unpin (pins
        nest). A pinned entry is never demoted, evicted, replaced or removed. Counts as a hit.
        Raises KeyError, gpum.OutOfMemory (no room on the device even with every unpinned entry
        demoted; the entry stays where it was)."""
        k = _key(key)
        ptr = c.c_uint64()
        err: Optional[BaseException] = None
        with self._mu:
            rc = lib.gpum_tiercache_pin(self._live(), k, len(k), c.byref(ptr))
            if rc == GPUM_ENOENT:
                err = KeyError(key)
            elif rc < 0:
                err = error_for(rc)
        self._finish(err)
        return ptr.value

    def unpin(self, key: Key) -> None:
        """Undoes one pin. KeyError when not cached, gpum.GpumError (ESTATE) when not pinned."""
        self._unpin(_key(key), key, closed_ok=False)

    def _unpin(self, k: bytes, key: Key, closed_ok: bool) -> None:
        with self._mu:
            if closed_ok and not self._c:
                return  # closing freed the entry, pin and all
            rc = lib.gpum_tiercache_unpin(self._live(), k, len(k))
            if rc == GPUM_ENOENT:
                raise KeyError(key)
            check(rc)

    @contextlib.contextmanager
    def pinned(self, key: Key) -> Iterator[int]:
        """``with cache.pinned(key) as ptr:`` pins key for the block and gives its device
        address; GPU work using it must be finished when the block ends."""
        k = _key(key)
        ptr = self.pin(k)
        try:
            yield ptr
        finally:
            self._unpin(k, key, closed_ok=True)

    def pressure(self, nbytes: Union[None, int, str] = None) -> int:
        """Demotes the coldest unpinned device entries until nbytes of payload left the device
        (None: all of them), then gives the device pool's cached memory back to the driver: what
        a gpumd pressure event should trigger. Returns the payload bytes demoted (or evicted,
        when no lower tier could hold them)."""
        n = _ALL if nbytes is None else _nbytes("nbytes", nbytes)
        freed = c.c_uint64()
        err: Optional[BaseException] = None
        with self._mu:
            rc = lib.gpum_tiercache_pressure(self._live(), n, c.byref(freed))
            if rc < 0:
                err = error_for(rc)
        self._finish(err)
        return freed.value

    def stats(self) -> TierCacheStats:
        """A snapshot of the counters."""
        s = t.TierCacheStats()
        with self._mu:
            lib.gpum_tiercache_stats(self._live(), c.byref(s))
        tiers = tuple(TierStats(x.hits, x.misses, x.promotions, x.demotions, x.evictions,
                                Size(x.bytes), x.entries, Size(x.limit)) for x in s.tier)
        return TierCacheStats(tiers, s.puts, s.gets, s.misses, s.alloc_failures,
                              s.pressure_calls)

    def close(self) -> None:
        """Frees every entry (no eviction callbacks; pinned ones too: their device addresses
        become invalid), the pools and the stream. Later calls raise ValueError; closing again
        does nothing."""
        _report.detach(self)
        with self._mu:
            if self._c:
                lib.gpum_tiercache_destroy(self._c)
                self._c = c.c_void_p()

    @property
    def closed(self) -> bool:
        return not self._c

    # --- the mapping face -----------------------------------------------------------------------
    def __contains__(self, key: Key) -> bool:
        return self.lookup(key) is not None

    def __getitem__(self, key: Key) -> bytes:
        return self.get(key)

    def __setitem__(self, key: Key, value: Any) -> None:
        self.put(key, value)

    def __delitem__(self, key: Key) -> None:
        self.remove(key)

    def __len__(self) -> int:
        return self.stats().entries

    def __enter__(self) -> "TierCache":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if getattr(self, "_mu", None) is not None:
                self.close()
        except Exception:  # at interpreter exit the module may be half torn down
            pass

