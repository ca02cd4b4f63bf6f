# SPDX-License-Identifier: Apache-2.0
"""Workload reports (docs/report.md): this process's figures on its reservation, shown by gpumd.

    with gpum.reserve("20GiB") as r, gpum.Batcher(model) as b, gpum.Reporter() as rep:
        rep.add("infer", b)                          # the batcher's queue, latencies, ...
        rep.add("train", lambda: {"batch_size": bs})  # your own figures
        ...

gpumd shows the figures with the reservation (`gpum jobs`, the REST API, /metrics as
gpum_workload_bytes, _seconds, ... by the unit in each figure's name). The reporter also hears gpumd's memory pressure on the reservation's
GPUs: a Batcher added to it takes half-size batches until the pressure clears, a TierCache
demotes its coldest device entries as it rises; `rep.pressure` says whether there is some.
"""
from __future__ import annotations

import ctypes as c
import math
import threading
from typing import Any, Callable, Dict, List, Mapping, Optional, Union

from ._lib import lib
from . import _types as t
from .errors import check

__all__ = ["Reporter"]

FIGURES_FN = c.CFUNCTYPE(c.c_size_t, c.c_void_p, c.POINTER(t.Figure), c.c_size_t)
MANUAL = 0xFFFFFFFF  # GPUM_REPORTER_MANUAL

lib.gpum_reporter_create.argtypes = [c.POINTER(t.ReporterOpts), c.POINTER(c.c_void_p)]
lib.gpum_reporter_add.argtypes = [c.c_void_p, c.c_char_p, FIGURES_FN, c.c_void_p]
lib.gpum_reporter_add_batcher.argtypes = [c.c_void_p, c.c_char_p, c.c_void_p]
lib.gpum_reporter_add_pool.argtypes = [c.c_void_p, c.c_char_p, c.c_void_p]
lib.gpum_reporter_add_tiercache.argtypes = [c.c_void_p, c.c_char_p, c.c_void_p]
lib.gpum_reporter_add_batch.argtypes = [c.c_void_p, c.c_char_p, c.c_void_p]
lib.gpum_reporter_remove.argtypes = [c.c_void_p, c.c_char_p]
lib.gpum_reporter_flush.argtypes = [c.c_void_p]
lib.gpum_reporter_pressure.argtypes = [c.c_void_p]
lib.gpum_reporter_pressure.restype = c.c_bool
lib.gpum_reporter_destroy.argtypes = [c.c_void_p]
lib.gpum_reporter_destroy.restype = None

Figures = Callable[[], Mapping[str, float]]


def _period_ms(v: Union[None, int, float, str]) -> int:
    if v is None:
        return MANUAL
    if isinstance(v, (int, float)):
        return max(1, int(v * 1000))  # seconds
    out = c.c_uint64()
    check(lib.gpum_duration_parse(v.encode(), c.byref(out)))
    return max(1, out.value)


class Reporter:
    """Reports on reservation (default: $GPUM_RESERVATION_ID, which gpum run and gpum.reserve
    set) every period ("2s"; None: only on flush()). Sources: a gpum.Batcher, gpum.TierCache or
    gpum.Pool or gpum.Adaptive (their own figures), or a function returning {name: number}."""

    def __init__(self, reservation: Optional[str] = None, *,
                 period: Union[None, int, float, str] = "2s",
                 socket: Optional[str] = None) -> None:
        o = t.ReporterOpts(socket_path=socket.encode() if socket else None,
                           reservation=reservation.encode() if reservation else None,
                           period_ms=_period_ms(period))
        self._rep = c.c_void_p()
        self._mu = threading.Lock()
        self._sources: Dict[str, Any] = {}  # name -> (object or callback, its C function)
        self._names: Dict[str, List[bytes]] = {}  # the figure names last given to C, kept alive
        check(lib.gpum_reporter_create(c.byref(o), c.byref(self._rep)))

    def add(self, source: str, what: Any) -> None:
        """Reports what under source ([a-z0-9_.-], at most 48 bytes) from now on. A Batcher,
        TierCache or Pool is removed by itself when it is closed; an Adaptive runner's figures
        (batch size, OOMs, ...) are those of its last step."""
        from .adaptive import Adaptive
        from .batcher import Batcher
        from .pool import Pool
        from .tiercache import TierCache
        name = source.encode()
        with self._mu:
            if isinstance(what, Batcher):
                check(lib.gpum_reporter_add_batcher(self._handle(), name, what._b))
            elif isinstance(what, TierCache):
                with what._mu:
                    check(lib.gpum_reporter_add_tiercache(self._handle(), name, what._live()))
            elif isinstance(what, Pool):
                check(lib.gpum_reporter_add_pool(self._handle(), name, what._pool))
            elif isinstance(what, Adaptive):
                check(lib.gpum_reporter_add_batch(self._handle(), name, what._r))
            elif callable(what):
                fn = FIGURES_FN(lambda user, out, cap: self._fill(source, what, out, cap))
                check(lib.gpum_reporter_add(self._handle(), name, fn, None))
                self._sources[source] = (what, fn)
                return
            else:
                raise TypeError("a source is a Batcher, TierCache, Pool, Adaptive or a function "
                                "returning "
                                f"{{name: number}}, not {type(what).__name__}")
            self._sources[source] = (what, None)
        hooks = what.__dict__.setdefault("_report_hooks", [])
        hooks.append(lambda: self._forget(source))

    def _fill(self, source: str, fn: Figures, out: Any, cap: int) -> int:
        try:
            figures = dict(fn())
        except Exception:  # a failing figures function reports nothing this period
            return 0
        names, n = [], 0
        for k, v in figures.items():
            if n >= cap:
                break
            try:
                value = float(v)
            except (TypeError, ValueError):
                continue
            if not math.isfinite(value):
                continue
            names.append(k.encode())
            out[n].name, out[n].value = names[-1], value
            n += 1
        self._names[source] = names  # valid until the next call: the reporter sent them by then
        return n

    def _forget(self, source: str) -> None:
        with self._mu:
            if self._rep and source in self._sources:
                lib.gpum_reporter_remove(self._rep, source.encode())
                del self._sources[source]
                self._names.pop(source, None)

    def remove(self, source: str) -> None:
        """Stops reporting source (KeyError when there is none)."""
        with self._mu:
            if source not in self._sources:
                raise KeyError(source)
            check(lib.gpum_reporter_remove(self._handle(), source.encode()))
            del self._sources[source]
            self._names.pop(source, None)

    def flush(self) -> None:
        """Reports every source now; raises the first failure (gpum.PermissionDenied, ...)."""
        check(lib.gpum_reporter_flush(self._handle()))

    @property
    def pressure(self) -> bool:
        """Whether gpumd reports memory pressure on one of the reservation's GPUs now."""
        return bool(lib.gpum_reporter_pressure(self._handle()))

    def _handle(self) -> c.c_void_p:
        if not self._rep:
            raise ValueError("the reporter is closed")
        return self._rep

    def close(self) -> None:
        """A last report, then stops."""
        with self._mu:
            if self._rep:
                lib.gpum_reporter_destroy(self._rep)
                self._rep = c.c_void_p()
                self._sources.clear()

    def __enter__(self) -> "Reporter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


def detach(obj: Any) -> None:
    """Called by a Batcher, TierCache or Pool as it closes: reporters stop reading it."""
    for hook in obj.__dict__.pop("_report_hooks", []):
        hook()
