# SPDX-License-Identifier: Apache-2.0
"""libgpum's monitor (docs/monitoring.md) for Python: samples and history per GPU, health with
retries and recovery, the monitor's events, and alerts (the default rules, or yours).

    with gpum.Monitor(interval="1s", on_alert=print) as mon:
        mon.latest(0).memory_used, mon.health(0).state, mon.history(0)

Callbacks are delivered safely: the monitor's own threads only copy an alert or event into a
queue, and a Python thread of the Monitor calls ``on_alert`` / ``on_event`` (an exception in a
callback is printed, never raised into the monitor).
"""
from __future__ import annotations

import ctypes as c
import queue
import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence, Union

from ._lib import lib
from . import _types as t
from .errors import GPUM_ENOSPC, check

__all__ = ["Monitor", "Sample", "Health", "MonitorEvent", "Alert"]

lib.gpum_monitor_opts_init.argtypes = [c.POINTER(t.MonitorOpts)]
lib.gpum_monitor_opts_init.restype = None
lib.gpum_monitor_create.argtypes = [c.c_void_p, c.POINTER(t.MonitorOpts), c.POINTER(c.c_void_p)]
lib.gpum_monitor_start.argtypes = [c.c_void_p]
lib.gpum_monitor_stop.argtypes = [c.c_void_p]
lib.gpum_monitor_stop.restype = None
lib.gpum_monitor_destroy.argtypes = [c.c_void_p]
lib.gpum_monitor_destroy.restype = None
lib.gpum_monitor_set_alert_engine.argtypes = [c.c_void_p, c.c_void_p]
lib.gpum_monitor_device_count.argtypes = [c.c_void_p]
lib.gpum_monitor_device_count.restype = c.c_uint
lib.gpum_monitor_device_index.argtypes = [c.c_void_p, c.c_uint, c.POINTER(c.c_uint)]
lib.gpum_monitor_wait_info.argtypes = [c.c_void_p, c.c_uint, c.POINTER(c.c_uint)]
lib.gpum_monitor_latest.argtypes = [c.c_void_p, c.c_uint, c.POINTER(t.DeviceSample)]
lib.gpum_monitor_history.argtypes = [c.c_void_p, c.c_uint, c.c_uint64,
                                     c.POINTER(t.DeviceSample), c.c_size_t,
                                     c.POINTER(c.c_size_t)]
lib.gpum_monitor_health.argtypes = [c.c_void_p, c.c_uint, c.POINTER(t.DeviceHealth)]
lib.gpum_monitor_event_wait.argtypes = [c.c_void_p, c.POINTER(c.c_uint64),
                                        c.POINTER(t.MonitorEvent), c.c_uint]
lib.gpum_monitor_event_kind_name.argtypes = [c.c_int]
lib.gpum_monitor_event_kind_name.restype = c.c_char_p
lib.gpum_health_state_name.argtypes = [c.c_int]
lib.gpum_health_state_name.restype = c.c_char_p
lib.gpum_alert_engine_opts_init.argtypes = [c.POINTER(t.AlertEngineOpts)]
lib.gpum_alert_engine_opts_init.restype = None
lib.gpum_alert_engine_create.argtypes = [c.POINTER(t.AlertEngineOpts), c.POINTER(c.c_void_p)]
lib.gpum_alert_engine_destroy.argtypes = [c.c_void_p]
lib.gpum_alert_engine_destroy.restype = None
lib.gpum_alert_engine_add_default_rules.argtypes = [c.c_void_p]
lib.gpum_alert_engine_add_rule.argtypes = [c.c_void_p, c.c_char_p, c.POINTER(c.c_uint)]
lib.gpum_alert_engine_add_callback.argtypes = [c.c_void_p, t.ALERT_FN, c.c_void_p]
lib.gpum_alert_level_name.argtypes = [c.c_int]
lib.gpum_alert_level_name.restype = c.c_char_p

M = ["memory_total", "memory_used", "memory_free", "memory_driver_reserved", "utilization_gpu",
     "utilization_memory", "temperature_c", "power_mw", "clock_sm_mhz", "clock_mem_mhz",
     "ecc_corrected", "ecc_uncorrected"]
_FIELDS = ["memory_total", "memory_used", "memory_free", "memory_reserved", "util_gpu",
           "util_memory", "temperature_c", "power_mw", "clock_sm_mhz", "clock_mem_mhz",
           "ecc_corrected", "ecc_uncorrected"]


@dataclass(frozen=True)
class Sample:
    """One sample; a metric the device does not report is None."""

    timestamp_ns: int
    memory_total: Optional[int]
    memory_used: Optional[int]
    memory_free: Optional[int]
    memory_driver_reserved: Optional[int]
    utilization_gpu: Optional[int]
    utilization_memory: Optional[int]
    temperature_c: Optional[int]
    power_mw: Optional[int]
    clock_sm_mhz: Optional[int]
    clock_mem_mhz: Optional[int]
    ecc_corrected: Optional[int]
    ecc_uncorrected: Optional[int]


def _sample(s: t.DeviceSample) -> Sample:
    vals = [getattr(s, f) if (s.valid >> i) & 1 else None for i, f in enumerate(_FIELDS)]
    return Sample(s.timestamp_ns, *vals)


@dataclass(frozen=True)
class Health:
    state: str  # AVAILABLE, BUSY, ERROR, DISABLED
    reason: str
    since_ns: int
    responsive: bool
    consecutive_failures: int
    last_xid: int
    gone: bool = False  # ERROR on evidence the GPU is gone or needs a reset, not merely slow


@dataclass(frozen=True)
class MonitorEvent:
    seq: int
    kind: str  # "health", "xid", "ecc", "probe", "info"
    device: int
    time_ns: int
    from_state: Optional[str]
    to_state: Optional[str]
    xid: int
    reason: str


@dataclass(frozen=True)
class Alert:
    id: int
    device: int
    level: str  # INFO, WARNING, ERROR, CRITICAL
    fired: bool  # False: cleared
    rule: str
    metric: str
    value: float
    threshold: float
    message: str


def _ms(v: Union[int, float, str]) -> int:
    if isinstance(v, (int, float)):
        return int(v * 1000)
    out = c.c_uint64()
    check(lib.gpum_duration_parse(v.encode(), c.byref(out)))
    return out.value


class Monitor:
    """Samples the node's GPUs on threads of libgpum's; see the module's text."""

    def __init__(self, *, interval: Union[int, float, str] = "1s",
                 history: Union[int, float, str] = "1h", devices: Optional[Sequence[int]] = None,
                 alerts: bool = True, rules: Sequence[str] = (),
                 on_alert: Optional[Callable[[Alert], Any]] = None,
                 on_event: Optional[Callable[[MonitorEvent], Any]] = None) -> None:
        o = t.MonitorOpts()
        lib.gpum_monitor_opts_init(c.byref(o))
        o.interval_ms = _ms(interval)
        o.history_seconds = max(1, _ms(history) // 1000)
        self._devs: Optional[c.Array[c.c_uint]] = None
        if devices:
            self._devs = (c.c_uint * len(devices))(*devices)
            o.devices, o.device_count = self._devs, len(devices)
        self._engine = c.c_void_p()
        self._alert_cb = t.ALERT_FN(self._on_alert_c)
        self._queue: "queue.Queue[Any]" = queue.Queue()
        self._alert_fns: List[Callable[[Alert], Any]] = [on_alert] if on_alert else []
        self._event_fns: List[Callable[[MonitorEvent], Any]] = [on_event] if on_event else []
        if alerts or rules:
            eo = t.AlertEngineOpts()
            lib.gpum_alert_engine_opts_init(c.byref(eo))
            check(lib.gpum_alert_engine_create(c.byref(eo), c.byref(self._engine)))
            if alerts:
                check(lib.gpum_alert_engine_add_default_rules(self._engine))
            for r in rules:
                check(lib.gpum_alert_engine_add_rule(self._engine, r.encode(), None))
            check(lib.gpum_alert_engine_add_callback(self._engine, self._alert_cb, None))
            o.alerts = self._engine
        self._mon = c.c_void_p()
        rc = lib.gpum_monitor_create(None, c.byref(o), c.byref(self._mon))
        if rc < 0:
            self._free()
            check(rc)
        self._stop = threading.Event()
        self._threads: List[threading.Thread] = []

    # --- delivery -----------------------------------------------------------------------------
    def _on_alert_c(self, a: Any, user: Any) -> None:  # on the monitor's thread: copy, queue
        x = a.contents
        self._queue.put(Alert(x.id, x.device,
                              (lib.gpum_alert_level_name(x.level) or b"?").decode(),
                              x.state == 1, x.rule_text.decode(), x.metric.decode(), x.value,
                              x.threshold, x.message.decode(errors="replace")))

    def _events(self) -> None:
        cursor = c.c_uint64(0)
        ev = t.MonitorEvent()
        while True:  # until stopped and nothing is left to read
            rc = lib.gpum_monitor_event_wait(self._mon, c.byref(cursor), c.byref(ev),
                                             0 if self._stop.is_set() else 200)
            if rc == 0:
                kind = (lib.gpum_monitor_event_kind_name(ev.kind) or b"?").decode().lower()
                health = kind == "health"
                name = lambda s: lib.gpum_health_state_name(s).decode()  # noqa: E731
                self._queue.put(MonitorEvent(ev.seq, kind, ev.device, ev.time_ns,
                                             name(getattr(ev, "from")) if health else None,
                                             name(ev.to) if health else None, ev.xid,
                                             ev.reason.decode(errors="replace")))
                continue
            lib.gpum_error_clear()
            if self._stop.is_set():
                return

    def _deliver(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            fns: Sequence[Callable[[Any], Any]]
            if isinstance(item, Alert):
                fns = self._alert_fns
            else:
                fns = self._event_fns
            for fn in list(fns):
                try:
                    fn(item)
                except Exception as e:
                    print(f"gpum: a monitor callback raised {e!r}", file=sys.stderr)

    def on_alert(self, fn: Callable[[Alert], Any]) -> None:
        self._alert_fns.append(fn)

    def on_event(self, fn: Callable[[MonitorEvent], Any]) -> None:
        self._event_fns.append(fn)

    # --- life -----------------------------------------------------------------------------------
    def start(self, wait_info: Union[int, float, str] = "10s") -> "Monitor":
        """Starts sampling; waits up to wait_info for every device's static info."""
        check(lib.gpum_monitor_start(self._mon))
        missing = c.c_uint()
        lib.gpum_monitor_wait_info(self._mon, _ms(wait_info), c.byref(missing))
        lib.gpum_error_clear()
        for target, name in ((self._events, "gpum-monitor-events"),
                             (self._deliver, "gpum-monitor-callbacks")):
            th = threading.Thread(target=target, name=name, daemon=True)
            th.start()
            self._threads.append(th)
        return self

    def stop(self) -> None:
        if not self._threads:
            return
        lib.gpum_monitor_stop(self._mon)
        self._stop.set()
        self._threads[0].join()  # the events thread, after it read what was left
        self._queue.put(None)    # then the callbacks' thread, after it delivered it all
        self._threads[1].join()
        self._threads = []

    def _free(self) -> None:
        if getattr(self, "_mon", None):
            lib.gpum_monitor_destroy(self._mon)
            self._mon = c.c_void_p()
        if self._engine:
            lib.gpum_alert_engine_destroy(self._engine)
            self._engine = c.c_void_p()

    def close(self) -> None:
        self.stop()
        self._free()

    def __enter__(self) -> "Monitor":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # --- reading --------------------------------------------------------------------------------
    @property
    def devices(self) -> List[int]:
        out: List[int] = []
        idx = c.c_uint()
        for slot in range(lib.gpum_monitor_device_count(self._mon)):
            if lib.gpum_monitor_device_index(self._mon, slot, c.byref(idx)) == 0:
                out.append(idx.value)
        return out

    def latest(self, device: int) -> Sample:
        s = t.DeviceSample()
        check(lib.gpum_monitor_latest(self._mon, device, c.byref(s)))
        return _sample(s)

    def history(self, device: int, since_ns: int = 0, cap: int = 4096) -> List[Sample]:
        """The stored samples newer than since_ns, oldest first, at most cap (the oldest cap
        when there are more: ask again from the last one's timestamp)."""
        arr, n = (t.DeviceSample * cap)(), c.c_size_t()
        rc = lib.gpum_monitor_history(self._mon, device, since_ns, arr, cap, c.byref(n))
        if rc != GPUM_ENOSPC:  # more than cap, the oldest cap were copied
            check(rc)
        return [_sample(arr[i]) for i in range(min(n.value, cap))]

    def health(self, device: int) -> Health:
        h = t.DeviceHealth()
        check(lib.gpum_monitor_health(self._mon, device, c.byref(h)))
        return Health(lib.gpum_health_state_name(h.state).decode(),
                      h.reason.decode(errors="replace"), h.since_ns, bool(h.responsive),
                      h.consecutive_failures, h.last_xid, bool(h.gone))
