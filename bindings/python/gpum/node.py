# SPDX-License-Identifier: Apache-2.0
"""The node's GPUs as dataclasses, read through libgpum's device layer (NVML, the simulated
driver under GPUM_SIM_NODE, or the host fallback), with the field names of ``gpum status
--json``; and gpumd's view of the node when it runs.

Each GPU's health state is one probe's, by libgpum's rules (gpum_health_classify) with the
default busy thresholds: what gpum status shows without a configuration file.
"""
from __future__ import annotations

import ctypes as c
import json
import socket as _socket
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from ._lib import lib
from . import _types as t
from .errors import GPUM_ENOSPC, check, error_for

__all__ = ["devices", "status", "Gpu", "Memory", "Process", "Status"]

lib.gpum_device_open.argtypes = [c.c_void_p, c.POINTER(c.c_void_p)]
lib.gpum_device_close.argtypes = [c.c_void_p]
lib.gpum_device_close.restype = None
lib.gpum_device_count.argtypes = [c.c_void_p]
lib.gpum_device_count.restype = c.c_uint
lib.gpum_device_get_info.argtypes = [c.c_void_p, c.c_uint, c.POINTER(t.DeviceInfo)]
lib.gpum_device_sample.argtypes = [c.c_void_p, c.c_uint, c.POINTER(t.DeviceSample)]
lib.gpum_device_processes.argtypes = [c.c_void_p, c.c_uint, c.POINTER(t.Process), c.c_size_t,
                                      c.POINTER(c.c_size_t)]
lib.gpum_device_backend.argtypes = [c.c_void_p]
lib.gpum_backend_name.argtypes = [c.c_int]
lib.gpum_backend_name.restype = c.c_char_p
lib.gpum_device_backend_detail.argtypes = [c.c_void_p]
lib.gpum_device_backend_detail.restype = c.c_char_p
lib.gpum_device_driver_version.argtypes = [c.c_void_p]
lib.gpum_device_driver_version.restype = c.c_char_p
lib.gpum_device_is_simulated.argtypes = [c.c_void_p]
lib.gpum_device_is_simulated.restype = c.c_bool
lib.gpum_busy_thresholds_init.argtypes = [c.POINTER(t.BusyThresholds)]
lib.gpum_busy_thresholds_init.restype = None
lib.gpum_health_classify.argtypes = [c.POINTER(t.HealthProbe), c.POINTER(t.BusyThresholds),
                                     c.c_char_p, c.c_size_t]
lib.gpum_health_state_name.argtypes = [c.c_int]
lib.gpum_health_state_name.restype = c.c_char_p
lib.gpum_client_connect.argtypes = [c.c_char_p, c.c_uint, c.POINTER(c.c_void_p)]
lib.gpum_client_close.argtypes = [c.c_void_p]
lib.gpum_client_close.restype = None
lib.gpum_client_call_json.argtypes = [c.c_void_p, c.c_char_p, c.c_char_p,
                                      c.POINTER(c.c_void_p)]

_libc = c.CDLL(None)
_libc.free.argtypes = [c.c_void_p]
_libc.free.restype = None

# Metric bits of gpum_device_sample_t.valid (gpum/device.h's GPUM_METRICS order).
(M_TOTAL, M_USED, M_FREE, M_RESERVED, M_UTIL, M_UTIL_MEM, M_TEMP, M_POWER, M_CLOCK_SM,
 M_CLOCK_MEM, M_ECC_CORR, M_ECC_UNCORR) = range(12)


@dataclass(frozen=True)
class Memory:
    total: Optional[int]
    used: Optional[int]
    free: Optional[int]
    driver_reserved: Optional[int]


@dataclass(frozen=True)
class Process:
    pid: int
    memory: Optional[int]  # bytes; None when the driver does not say
    user: str
    command: str


@dataclass(frozen=True)
class Gpu:
    index: int
    uuid: str
    name: str
    pci_bus_id: str
    is_host: bool
    state: str                             # AVAILABLE, BUSY or ERROR, as gpum status says
    reason: Optional[str]                  # why (BUSY's utilisation, ERROR's cause)
    memory: Memory
    utilization: Dict[str, Optional[int]]  # {"gpu": %, "memory": %}
    temperature_c: Optional[int]
    power_w: Optional[float]
    power_limit_w: Optional[float]
    clocks: Dict[str, Optional[int]]       # {"sm_mhz", "memory_mhz"}
    ecc: Dict[str, Any]                    # {"enabled", "corrected", "uncorrected"}
    processes: Tuple[Process, ...]
    error: Optional[str] = None            # why the device could not be read
    vendor: Optional[str] = None           # "nvidia", "amd", "intel", "host"
    vendor_index: Optional[int] = None     # its number among its vendor's devices


@dataclass(frozen=True)
class Status:
    hostname: str
    backend: str
    backend_detail: str
    driver_version: str
    simulated: bool
    device_count: int
    devices: Tuple[Gpu, ...]
    gpumd: Optional[Dict[str, Any]]  # gpumd's status reply (docs/protocol.md), None without it


def _v(s: t.DeviceSample, bit: int, value: Any) -> Any:
    return value if (s.valid >> bit) & 1 else None


def _device(sess: c.c_void_p, i: int) -> Gpu:
    info, s = t.DeviceInfo(), t.DeviceSample()
    err = None
    rc = lib.gpum_device_get_info(sess, i, c.byref(info))
    if rc == 0:
        rc = lib.gpum_device_sample(sess, i, c.byref(s))
    procs: Tuple[Process, ...] = ()
    if rc == 0:
        arr, n = (t.Process * 256)(), c.c_size_t()
        prc = lib.gpum_device_processes(sess, i, arr, 256, c.byref(n))
        if prc == 0 or prc == GPUM_ENOSPC:  # the first 256
            procs = tuple(Process(arr[k].pid, arr[k].memory if arr[k].memory_valid else None,
                                  arr[k].user.decode(errors="replace"),
                                  arr[k].command.decode(errors="replace"))
                          for k in range(min(n.value, 256)))
    else:
        err = error_for(rc).message
        s = t.DeviceSample()  # nothing valid
    # The health state of one probe, by libgpum's rules and default thresholds (gpum status's).
    busy = t.BusyThresholds()
    lib.gpum_busy_thresholds_init(c.byref(busy))
    probe = t.HealthProbe(rc=rc, sample=c.pointer(s) if rc == 0 else None,
                          jobs_valid=rc == 0, jobs=len(procs))
    why = c.create_string_buffer(160)
    state = lib.gpum_health_state_name(lib.gpum_health_classify(c.byref(probe), c.byref(busy),
                                                                why, 160)).decode()
    return Gpu(
        index=i, uuid=info.uuid.decode(), name=info.name.decode(),
        pci_bus_id=info.pci_bus_id.decode(), is_host=bool(info.is_host), state=state,
        vendor=info.vendor.decode() if info.vendor else None,
        vendor_index=info.vendor_index if info.vendor else None,
        reason=why.value.decode() or None,
        memory=Memory(_v(s, M_TOTAL, s.memory_total), _v(s, M_USED, s.memory_used),
                      _v(s, M_FREE, s.memory_free), _v(s, M_RESERVED, s.memory_reserved)),
        utilization={"gpu": _v(s, M_UTIL, s.util_gpu), "memory": _v(s, M_UTIL_MEM, s.util_memory)},
        temperature_c=_v(s, M_TEMP, s.temperature_c),
        power_w=_v(s, M_POWER, s.power_mw / 1000.0),
        power_limit_w=info.power_limit_mw / 1000.0 if info.valid & (1 << 5) else None,
        clocks={"sm_mhz": _v(s, M_CLOCK_SM, s.clock_sm_mhz),
                "memory_mhz": _v(s, M_CLOCK_MEM, s.clock_mem_mhz)},
        ecc={"enabled": bool(info.ecc_enabled) if info.valid & (1 << 8) else None,
             "corrected": _v(s, M_ECC_CORR, s.ecc_corrected),
             "uncorrected": _v(s, M_ECC_UNCORR, s.ecc_uncorrected)},
        processes=procs, error=err)


def _gpumd(socket_path: Optional[str]) -> Optional[Dict[str, Any]]:
    cl = c.c_void_p()
    if lib.gpum_client_connect(socket_path.encode() if socket_path else None, 2000,
                               c.byref(cl)) != 0:
        lib.gpum_error_clear()
        return None
    try:
        out = c.c_void_p()
        check(lib.gpum_client_call_json(cl, b"status", None, c.byref(out)))
        try:
            return json.loads(c.string_at(out).decode())
        finally:
            _libc.free(out)
    finally:
        lib.gpum_client_close(cl)


def reservations(*, all: bool = True, state: Optional[str] = None, label: Optional[str] = None,
                 uid: Optional[int] = None, socket: Optional[str] = None) -> List[Dict[str, Any]]:
    """gpumd's live reservations (everyone's, or the caller's with all=False), in id order, as
    its documents (docs/protocol.md, list): every page, read in turn over one connection.
    state: "QUEUED" or "GRANTED"; label: that label, or with a trailing '*' a prefix; uid: one
    user's. Raises GpumError when gpumd cannot be reached or refuses the query."""
    cl = c.c_void_p()
    check(lib.gpum_client_connect(socket.encode() if socket else None, 5000, c.byref(cl)))
    try:
        q: Dict[str, Any] = {"all": all}
        if state is not None:
            q["state"] = state
        if label is not None:
            q["label"] = label
        if uid is not None:
            q["uid"] = uid
        out_list: List[Dict[str, Any]] = []
        while True:  # a page is one message: follow next_cursor to the end
            out = c.c_void_p()
            check(lib.gpum_client_call_json(cl, b"list", json.dumps(q).encode(), c.byref(out)))
            try:
                page = json.loads(c.string_at(out).decode())
            finally:
                _libc.free(out)
            out_list += page.get("reservations", [])
            if not page.get("next_cursor"):
                return out_list
            q["cursor"] = page["next_cursor"]
    finally:
        lib.gpum_client_close(cl)


def reservation(id: str, *, socket: Optional[str] = None) -> Dict[str, Any]:
    """One reservation of gpumd's by id ("r-7"), anyone's, live or ended (its ledger keeps the
    ended ones for ledger.retention), as its document (docs/protocol.md, get). Raises NotFound
    when gpumd knows none of that id, InvalidArgument for an id that is none, GpumError when
    gpumd cannot be reached."""
    cl = c.c_void_p()
    check(lib.gpum_client_connect(socket.encode() if socket else None, 5000, c.byref(cl)))
    try:
        out = c.c_void_p()
        check(lib.gpum_client_call_json(cl, b"get", json.dumps({"reservation": id}).encode(),
                                        c.byref(out)))
        try:
            doc: Dict[str, Any] = json.loads(c.string_at(out).decode())["reservation"]
            return doc
        finally:
            _libc.free(out)
    finally:
        lib.gpum_client_close(cl)


def _open() -> c.c_void_p:
    sess = c.c_void_p()
    check(lib.gpum_device_open(None, c.byref(sess)))
    return sess


def devices() -> Tuple[Gpu, ...]:
    """Every GPU of the node as the device layer reads it now."""
    return status(gpumd=False).devices


def status(*, gpumd: bool = True, socket: Optional[str] = None) -> Status:
    """The node: its GPUs and, when gpumd answers (at socket, else GPUM_SOCKET or the
    default), gpumd's view of them (capacity, reservations, queue)."""
    sess = _open()
    try:
        n = lib.gpum_device_count(sess)
        devs = tuple(_device(sess, i) for i in range(n))
        st = Status(
            hostname=_socket.gethostname(),
            backend=lib.gpum_backend_name(lib.gpum_device_backend(sess)).decode(),
            backend_detail=(lib.gpum_device_backend_detail(sess) or b"").decode(),
            driver_version=(lib.gpum_device_driver_version(sess) or b"").decode(),
            simulated=bool(lib.gpum_device_is_simulated(sess)), device_count=n, devices=devs,
            gpumd=_gpumd(socket) if gpumd else None)
    finally:
        lib.gpum_device_close(sess)
    return st
