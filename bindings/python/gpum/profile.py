# SPDX-License-Identifier: Apache-2.0
"""Profiling and benchmarking over libgpum's profiler (include/gpum/profile.h), and the
monitor's window statistics (include/gpum/monitor.h).

``profile(name)`` times a block (``with gpum.profile("step"): ...``) or every call of a function
(``@gpum.profile("forward")``) and records the duration into libgpum's process-wide profiler
with ``gpum_profile_record``; C code of the same process that uses ``GPUM_PROFILE_SCOPE`` records
into the same table. Durations are measured here with ``time.perf_counter_ns`` (CLOCK_MONOTONIC
on Linux, the clock the C timers use), so they include the Python overhead of the ``with``
statement (about a microsecond), not that of the ctypes call that records them.

What is exact and what is estimated is the C side's: count, total, min and max are exact; the
mean is total / count; p50, p95 and p99 come from a log-linear histogram and are within about
3% (1/32) of a recorded value at that rank, clamped to [min, max] (exact below 16 ns).

``benchmark(fn, *args, runs=, warmup=)`` times each call in Python with
``time.perf_counter_ns`` rather than through ``gpum_bench_run``: that helper calls a C function
pointer, through which a Python exception cannot stop the loop, and it reports neither p95 nor
calls per second. Its figures are exact over the measured run times (nearest-rank p95, the
median as gpum_bench_run computes it). With ``name`` the timed runs are also recorded in the
profiler, as gpum_bench_run does.

Thread safety is the C side's: every record and read takes the profiler's mutex. A
:class:`Profiler` is a view of the one process-wide table (libgpum has one); two Profiler
objects see the same names.
"""
from __future__ import annotations

import ctypes as c
import functools
import math
import threading
import time
from dataclasses import dataclass
from typing import (
    Any, Callable, Dict, List, Optional, Sequence, Tuple, Type, TypeVar, Union, cast, overload,
)
from types import TracebackType

from ._lib import lib
from ._types import MonitorWindowStats, ProfileStat
from .errors import GPUM_EINVAL, GPUM_ENOSPC, InvalidArgument, check, error_for

__all__ = [
    "Profiler", "Summary", "BenchmarkResult", "WindowStats", "profile", "summary", "report",
    "reset", "benchmark", "window_stats", "range_stats", "stats", "default_profiler",
    "MAX_NAMES", "NAME_LEN", "METRICS",
]

MAX_NAMES = 256  # GPUM_PROFILE_MAX_NAMES
NAME_LEN = 64  # GPUM_PROFILE_NAME_LEN (a name is at most NAME_LEN - 1 bytes)


lib.gpum_profile_record.argtypes = [c.c_char_p, c.c_uint64]
lib.gpum_profile_record.restype = None
lib.gpum_profile_stats.argtypes = [c.POINTER(ProfileStat), c.c_size_t, c.POINTER(c.c_size_t)]
lib.gpum_profile_get.argtypes = [c.c_char_p, c.POINTER(ProfileStat)]
lib.gpum_profile_report.argtypes = [c.c_bool, c.POINTER(c.c_void_p)]
lib.gpum_profile_reset.argtypes = []
lib.gpum_profile_reset.restype = None
lib.gpum_profile_dropped.argtypes = []
lib.gpum_profile_dropped.restype = c.c_uint64
lib.gpum_monitor_window_stats.argtypes = [c.c_void_p, c.c_uint, c.c_int, c.c_double,
                                          c.POINTER(MonitorWindowStats)]
lib.gpum_monitor_range_stats.argtypes = [c.c_void_p, c.c_uint, c.c_int, c.c_uint64, c.c_uint64,
                                         c.POINTER(MonitorWindowStats)]
lib.gpum_stats_compute.argtypes = [c.POINTER(c.c_double), c.c_size_t, c.POINTER(MonitorWindowStats)]
lib.gpum_metric_name.argtypes = [c.c_int]
lib.gpum_metric_name.restype = c.c_char_p

_libc = c.CDLL(None)
_libc.free.argtypes = [c.c_void_p]
_libc.free.restype = None

F = TypeVar("F", bound=Callable[..., Any])


def _metric_names() -> Tuple[str, ...]:
    """gpum_metric_t's names in enum order, read from the library (``"unknown"`` ends them)."""
    names: List[str] = []
    while True:
        raw = lib.gpum_metric_name(len(names))
        if not raw or raw == b"unknown":
            return tuple(names)
        names.append(raw.decode())


METRICS = _metric_names()  # "memory_used", "utilization_gpu", ...: the metrics of window stats

# libgpum keeps the first pointer it sees for a name and matches later records by pointer
# first, so every name handed to it must stay alive (and at one address) for the process: the
# encoded names are interned here and never released.
_names: Dict[str, bytes] = {}
_names_lock = threading.Lock()


def _cname(name: str) -> bytes:
    b = _names.get(name)
    if b is not None:
        return b
    if not isinstance(name, str) or not name:
        raise InvalidArgument(GPUM_EINVAL, f"profile name must be a non-empty str, not {name!r}")
    enc = name.encode()
    if len(enc) >= NAME_LEN or b"\0" in enc:
        raise InvalidArgument(GPUM_EINVAL, f"profile name {name!r}: at most {NAME_LEN - 1} "
                              "bytes without NUL")
    with _names_lock:
        return _names.setdefault(name, enc)


class _Seconds:
    """A figure kept in nanoseconds (the field named), read in seconds."""

    def __init__(self, field: str) -> None:
        self.field = field

    def __get__(self, obj: Any, owner: Any = None) -> float:
        return float(getattr(obj, self.field)) / 1e9


@dataclass(frozen=True)
class Summary:
    """One name's aggregate, gpum_profile_stat_t's fields in ns. ``count``, ``total_ns``,
    ``min_ns`` and ``max_ns`` are exact, ``mean_ns`` is total / count, ``p50_ns``, ``p95_ns``
    and ``p99_ns`` are histogram estimates within about 3% of a recorded value at that rank
    (clamped to [min, max]). The properties without ``_ns`` give the same in seconds."""

    name: str
    count: int
    total_ns: int
    mean_ns: float
    min_ns: int
    max_ns: int
    p50_ns: int
    p95_ns: int
    p99_ns: int

    # the same figures in seconds
    total = _Seconds("total_ns")
    mean = _Seconds("mean_ns")
    min = _Seconds("min_ns")
    max = _Seconds("max_ns")
    p50 = _Seconds("p50_ns")
    p95 = _Seconds("p95_ns")
    p99 = _Seconds("p99_ns")


def _summary(s: ProfileStat) -> Summary:
    return Summary(s.name.decode(errors="replace"), s.count, s.total_ns, s.mean_ns, s.min_ns,
                   s.max_ns, s.p50_ns, s.p95_ns, s.p99_ns)


class _Timed:
    """What ``profile(name)`` returns: a reusable context manager (re-entrant and usable from
    several threads at once: the start times are kept per thread, innermost last) and a
    decorator."""

    def __init__(self, profiler: "Profiler", name: str) -> None:
        self._p = profiler
        self.name = name
        self._c = _cname(name)
        self._local = threading.local()

    def __enter__(self) -> "_Timed":
        starts = getattr(self._local, "starts", None)
        if starts is None:
            starts = self._local.starts = []
        starts.append(time.perf_counter_ns())
        return self

    def __exit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        d = time.perf_counter_ns() - self._local.starts.pop()
        lib.gpum_profile_record(self._c, d)  # also when the block raised; never swallows it

    def __call__(self, fn: F) -> F:
        cname = self._c

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter_ns()
            try:
                return fn(*args, **kwargs)
            finally:
                lib.gpum_profile_record(cname, time.perf_counter_ns() - start)

        return cast(F, timed)


class Profiler:
    """libgpum's profiler: named timers aggregated process-wide (there is one table per
    process, shared with C code of the process; every Profiler sees all of it). Thread-safe."""

    def profile(self, name: str) -> _Timed:
        """A timer for name: ``with p.profile("step"): ...`` or ``@p.profile("forward")``. The
        duration is recorded when the block or call ends, also when it raises (the exception
        goes on). Raises InvalidArgument for an empty name or one of NAME_LEN bytes or more.
        Names beyond MAX_NAMES are not recorded: see :attr:`dropped`."""
        return _Timed(self, name)

    def record(self, name: str, ns: int) -> None:
        """Records a duration measured elsewhere (gpum_profile_record)."""
        lib.gpum_profile_record(_cname(name), int(ns))

    def summary(self, name: str) -> Summary:
        """name's aggregate (gpum_profile_get); raises NotFound when nothing was recorded under
        it since the last reset."""
        s = ProfileStat()
        check(lib.gpum_profile_get(_cname(name), c.byref(s)))
        return _summary(s)

    def summaries(self) -> Dict[str, Summary]:
        """Every name's aggregate, in first-seen order (gpum_profile_stats)."""
        n = c.c_size_t(0)
        while True:
            cap = max(n.value, 1)
            buf = (ProfileStat * cap)()
            rc = lib.gpum_profile_stats(buf, cap, c.byref(n))
            if rc == GPUM_ENOSPC:
                continue  # names were added between the two calls
            check(rc)
            return {s.name: s for s in (_summary(buf[i]) for i in range(n.value))}

    def report(self, json: bool = False) -> str:
        """gpum_profile_report: an aligned text table (name, count, total, mean, p50, p95, max)
        or, with json, a JSON array of every name's figures in ns."""
        out = c.c_void_p()
        check(lib.gpum_profile_report(json, c.byref(out)))
        try:
            return c.string_at(out).decode(errors="replace") if out.value else ""
        finally:
            _libc.free(out)

    def reset(self) -> None:
        """Forgets every name and aggregate (gpum_profile_reset)."""
        lib.gpum_profile_reset()

    @property
    def dropped(self) -> int:
        """Records ignored because MAX_NAMES names were already tracked."""
        return int(lib.gpum_profile_dropped())


default_profiler = Profiler()


def profile(name: str) -> _Timed:
    """``default_profiler.profile(name)``: a decorator and a context manager."""
    return default_profiler.profile(name)


@overload
def summary(name: str) -> Summary: ...
@overload
def summary(name: None = None) -> Dict[str, Summary]: ...


def summary(name: Optional[str] = None) -> Union[Summary, Dict[str, Summary]]:
    """``default_profiler.summary(name)`` (a :class:`Summary`), or with no name every name's
    (``Dict[str, Summary]``)."""
    return default_profiler.summaries() if name is None else default_profiler.summary(name)


def report(json: bool = False) -> str:
    """``default_profiler.report(json)``: a printable table of every name."""
    return default_profiler.report(json)


def reset() -> None:
    """``default_profiler.reset()``."""
    default_profiler.reset()


# ---- Benchmarks ---------------------------------------------------------------------------

@dataclass(frozen=True)
class BenchmarkResult:
    """benchmark()'s figures, exact over ``times_ns`` (each timed call's duration, in call
    order): ``median_ns`` as gpum_bench_run computes it, ``p95_ns`` nearest-rank (the value at
    rank ceil(0.95 * runs) of the sorted times), ``total_ns`` their sum, ``throughput`` calls
    per second = runs / (total_ns / 1e9) (0 when total_ns is 0)."""

    runs: int
    warmup: int
    mean_ns: float
    median_ns: float
    p95_ns: int
    min_ns: int
    max_ns: int
    total_ns: int
    throughput: float
    times_ns: Tuple[int, ...]

    # the same figures in seconds
    mean = _Seconds("mean_ns")
    median = _Seconds("median_ns")
    p95 = _Seconds("p95_ns")
    min = _Seconds("min_ns")
    max = _Seconds("max_ns")

    def __str__(self) -> str:
        def f(ns: float) -> str:  # as gpum__profile_format_ns
            if ns < 1e3:
                return f"{ns:.0f} ns"
            if ns < 1e6:
                return f"{ns / 1e3:.2f} us"
            if ns < 1e9:
                return f"{ns / 1e6:.2f} ms"
            return f"{ns / 1e9:.2f} s"

        return (f"median {f(self.median_ns)}, mean {f(self.mean_ns)}, p95 {f(self.p95_ns)}, "
                f"min {f(self.min_ns)}, max {f(self.max_ns)}, {self.throughput:.1f} calls/s "
                f"({self.runs} runs)")


def _nearest_rank(sorted_values: Sequence[int], p: float) -> int:
    rank = max(1, math.ceil(p / 100.0 * len(sorted_values)))
    return sorted_values[rank - 1]


def benchmark(fn: Callable[..., Any], *args: Any, runs: int = 100, warmup: int = 10,
              name: Optional[str] = None, **kwargs: Any) -> BenchmarkResult:
    """Calls ``fn(*args, **kwargs)`` ``warmup`` times untimed, then ``runs`` times, each call
    timed on its own with time.perf_counter_ns. With name, the timed runs are also recorded in
    the profiler under it. An exception from fn propagates at once (nothing is returned).
    Raises InvalidArgument when runs < 1 or warmup < 0 (gpum_bench_run's EINVAL)."""
    if runs < 1 or warmup < 0:
        raise InvalidArgument(GPUM_EINVAL, f"benchmark: runs must be at least 1 and warmup at "
                              f"least 0 (runs={runs}, warmup={warmup})")
    cname = _cname(name) if name is not None else None
    for _ in range(warmup):
        fn(*args, **kwargs)
    times: List[int] = []
    clock = time.perf_counter_ns
    for _ in range(runs):
        start = clock()
        fn(*args, **kwargs)
        times.append(clock() - start)
    if cname is not None:
        for d in times:
            lib.gpum_profile_record(cname, d)
    s = sorted(times)
    n = len(s)
    median = float(s[n // 2]) if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
    total = sum(times)
    return BenchmarkResult(runs=n, warmup=warmup, mean_ns=total / n, median_ns=median,
                           p95_ns=_nearest_rank(s, 95), min_ns=s[0], max_ns=s[-1],
                           total_ns=total, throughput=n * 1e9 / total if total else 0.0,
                           times_ns=tuple(times))


# ---- Window statistics ----------------------------------------------------------------------


@dataclass(frozen=True)
class WindowStats:
    """gpum_window_stats_t: statistics of one metric's valid samples, all exact (p50, p95 and
    p99 nearest-rank: the value at rank ceil(p/100 * count) when sorted); everything is 0 when
    count is 0. Units are the metric's (``bytes``, ``percent``, ``milliwatts``...)."""

    count: int
    min: float
    max: float
    mean: float
    p50: float
    p95: float
    p99: float


def _window(w: MonitorWindowStats) -> WindowStats:
    return WindowStats(w.count, w.min, w.max, w.mean, w.p50, w.p95, w.p99)


def _metric(metric: str) -> int:
    try:
        return METRICS.index(metric)
    except ValueError:
        raise InvalidArgument(GPUM_EINVAL, f"unknown metric {metric!r} (one of "
                              f"{', '.join(METRICS)})") from None


def _handle(monitor: Any) -> c.c_void_p:
    h = getattr(monitor, "_mon", None)
    if not isinstance(h, c.c_void_p) or not h.value:
        raise error_for(GPUM_EINVAL, "window stats: not an open gpum.Monitor")
    return h


def window_stats(monitor: Any, device: int, metric: str, seconds: float) -> WindowStats:
    """Statistics of metric on device over the monitor's last ``seconds`` (> 0)
    (gpum_monitor_window_stats). Raises GpumError (ENODEV) for a device the monitor does not
    sample, InvalidArgument for a bad metric or seconds."""
    out = MonitorWindowStats()
    check(lib.gpum_monitor_window_stats(_handle(monitor), device, _metric(metric), seconds,
                                        c.byref(out)))
    return _window(out)


def range_stats(monitor: Any, device: int, metric: str, from_ns: int,
                to_ns: int) -> WindowStats:
    """Statistics of metric over the samples with from_ns <= timestamp <= to_ns
    (CLOCK_REALTIME ns, as ``time.time_ns()``) (gpum_monitor_range_stats)."""
    out = MonitorWindowStats()
    check(lib.gpum_monitor_range_stats(_handle(monitor), device, _metric(metric), from_ns, to_ns,
                                       c.byref(out)))
    return _window(out)


def stats(values: Sequence[float]) -> WindowStats:
    """The same statistics of any values (gpum_stats_compute, exact); all 0 for none."""
    arr = (c.c_double * len(values))(*values)
    out = MonitorWindowStats()
    check(lib.gpum_stats_compute(arr, len(values), c.byref(out)))
    return _window(out)
