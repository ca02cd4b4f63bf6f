# SPDX-License-Identifier: Apache-2.0
"""Reservations from gpumd, as a context manager (libgpum's reservation session).

    with gpum.reserve(mem="20GiB", gpus=1, priority=0, timeout="10m") as r:
        import torch            # CUDA sees the granted GPUs only
        ...                     # r.devices, r.limit, r.on_pressure(callback)

On entry it waits for the grant (``on_queue`` gets the queue position while it waits), then
sets ``CUDA_VISIBLE_DEVICES`` and the other variables of the grant (gpum run's; see
docs/cli.md; with more than one GPU, or ``distributed=True``, also the torchrun/NCCL variables
WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ... of libgpum's gpum_distributed_env) in this process's
environment, before CUDA is initialised: when it was initialised
already, the variables could not take effect, and :class:`CudaAlreadyInitialized` says so with
the remedy. A thread serves the session while the block runs (gpumd's events, re-attaching after
a gpumd restart); pressure on the reservation's GPUs calls the ``on_pressure`` callbacks on that
thread. On exit, by exception too, the reservation is released and the environment put back
as it was; SIGTERM during the block is
turned into SystemExit so that it is released then as well, and if the process is killed
gpumd releases it (the reservation is bound to the session's connection).
"""
from __future__ import annotations

import ctypes as c
import os
import signal
import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Tuple, Union

from ._lib import lib
from . import _types as t
from .errors import (
    GPUM_ECLOSED, GPUM_EINTR, GPUM_ESTATE, DaemonUnavailable, GpumError, InvalidArgument,
    PermissionDenied, check, error_for,
)
from .pool import _size
from .units import Size

__all__ = ["reserve", "Reservation", "Device", "Pressure", "CudaAlreadyInitialized"]

lib.gpum_session_opts_init.argtypes = [c.POINTER(t.SessionOpts)]
lib.gpum_session_opts_init.restype = None
lib.gpum_session_open.argtypes = [c.POINTER(t.SessionOpts), c.POINTER(c.c_void_p)]
lib.gpum_session_reserve.argtypes = [c.c_void_p, c.POINTER(t.ReserveReq), c.c_int64]
lib.gpum_session_reservation.argtypes = [c.c_void_p]
lib.gpum_session_reservation.restype = c.POINTER(t.Reservation)
lib.gpum_session_process.argtypes = [c.c_void_p, c.c_int]
lib.gpum_session_release.argtypes = [c.c_void_p]
lib.gpum_session_close.argtypes = [c.c_void_p]
lib.gpum_session_close.restype = None
lib.gpum_reservation_env.argtypes = [c.POINTER(t.Reservation), c.POINTER(t.EnvVar), c.c_size_t,
                                     c.POINTER(c.c_size_t)]
lib.gpum_distributed_env.argtypes = [c.c_uint, c.c_uint, c.POINTER(t.EnvVar), c.c_size_t,
                                     c.POINTER(c.c_size_t)]

EV_QUEUED, EV_GRANTED, EV_ENDED, EV_PRESSURE, EV_LOST, EV_REATTACHED, EV_GAVE_UP = range(1, 8)
STATES = ["UNKNOWN", "QUEUED", "GRANTED", "RELEASED", "EXPIRED", "CANCELLED", "FAILED",
          "SUSPENDED"]


class CudaAlreadyInitialized(RuntimeError):
    """CUDA was initialised before the reservation: its GPUs cannot be chosen any more."""


@dataclass(frozen=True)
class Device:
    index: int         # gpumd's index
    uuid: str
    memory_total: int  # bytes (a Size: prints as "80.00 GiB")
    vendor: str = ""   # "nvidia", "amd", "intel", "host" ("" when gpumd does not say)
    vendor_index: int = 0  # its number among its vendor's devices (rocm-smi's, Level Zero's)


@dataclass(frozen=True)
class Pressure:
    device: int       # gpumd's index of the GPU under pressure
    used_ratio: float
    level: str        # "high", "critical", or "none" (back under pressure.high)


def _ms(v: Union[None, int, float, str]) -> int:
    if v is None:
        return -1
    if isinstance(v, (int, float)):
        return int(v * 1000)  # seconds
    out = c.c_uint64()
    check(lib.gpum_duration_parse(v.encode(), c.byref(out)))
    return out.value


def _cuda_initialized() -> bool:
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_initialized())
    except Exception:
        return False


class Reservation:
    """A reservation held for the life of a ``with`` block (see the module's text)."""

    def __init__(self, mem: Union[int, str], gpus: int = 1, *, priority: int = 0,
                 timeout: Union[None, int, float, str] = None, label: Optional[str] = None,
                 model: Optional[str] = None, socket: Optional[str] = None,
                 on_queue: Optional[Callable[[int], Any]] = None,
                 set_env: bool = True, distributed: Optional[bool] = None,
                 master_port: int = 0, fallback: Optional[str] = None,
                 preemptible: bool = False) -> None:
        if fallback not in (None, "cpu"):
            raise ValueError(f"fallback must be None or 'cpu', not {fallback!r}")
        self._fallback = fallback
        self._cpu_reason: Optional[str] = None  # why the block runs on the CPU (fallback)
        self._req = t.ReserveReq(bytes_per_gpu=_size(mem), gpus=gpus, priority=priority,
                                 label=(label or os.path.basename(sys.argv[0] or "python")).encode(),
                                 model=model.encode() if model else None,
                                 preemptible=preemptible)
        self._timeout_ms = _ms(timeout)
        self._socket = socket.encode() if socket else None
        self._on_queue = on_queue
        self._set_env = set_env
        self._distributed = distributed  # None: when the grant has more than one GPU
        self._master_port = master_port  # 0: libgpum's default (29500)
        self._pressure: List[Callable[[Pressure], Any]] = []
        self._s = c.c_void_p()
        self._thread: Optional[threading.Thread] = None
        self._stop = threading.Event()
        self._interrupt = False
        self._ended: Optional[str] = None
        self._old_term: Any = None
        self._event_cb = t.SESSION_EVENT_FN(self._on_event)
        self._interrupted_cb = t.SESSION_INTERRUPTED_FN(lambda user: int(self._interrupt))
        self._r: Optional[t.Reservation] = None
        self._saved_env: dict = {}  # what the grant's variables replaced, put back at release

    # --- the grant ----------------------------------------------------------------------------
    @property
    def id(self) -> str:
        return self._r.id.decode() if self._r else ""

    @property
    def limit(self) -> Size:
        """Bytes reserved per GPU (an int that prints as "20.00 GiB")."""
        return Size(self._r.bytes_per_gpu if self._r else 0)

    @property
    def devices(self) -> Tuple[Device, ...]:
        r = self._r
        if not r:
            return ()
        return tuple(Device(r.devices[i].index, r.devices[i].uuid.decode(),
                            Size(r.devices[i].memory_total), r.devices[i].vendor.decode(),
                            r.devices[i].vendor_index) for i in range(r.ndevices))

    def __repr__(self) -> str:
        if self._cpu_reason is not None:
            return f"<gpum.Reservation on the CPU: {self._cpu_reason}>"
        if not self._r:
            size = Size(self._req.bytes_per_gpu)
            return f"<gpum.Reservation of {size} x {self._req.gpus} GPUs, not held>"
        gpus = ", ".join(str(d.index) for d in self.devices)
        return f"<gpum.Reservation {self.id} {self.state}: {self.limit} on GPU {gpus}>"

    @property
    def state(self) -> str:
        return STATES[self._r.state] if self._r and 0 <= self._r.state < len(STATES) else "UNKNOWN"

    @property
    def preemptible(self) -> bool:
        """Whether gpumd may suspend the block's job for work of higher priority (its GPU memory
        moved to host memory and back: docs/suspend.md)."""
        return bool(self._req.preemptible)

    @property
    def ended(self) -> Optional[str]:
        """Why the reservation ended under the block (gpumd failed or expired it), else None."""
        return self._ended

    @property
    def on_cpu(self) -> bool:
        """True when no GPU could serve the block and it runs on the CPU (``fallback="cpu"``)."""
        return self._cpu_reason is not None

    @property
    def fallback_reason(self) -> Optional[str]:
        """Why the block runs on the CPU (the reservation's error), else None."""
        return self._cpu_reason

    def env(self) -> dict:
        """The grant's environment (as gpum run sets it), name -> (value, only_if_unset): the
        reservation's variables and, when it is distributed (``distributed``, else more than
        one GPU), the torchrun/NCCL ones (WORLD_SIZE, MASTER_PORT, ..., all only_if_unset).
        On the CPU (fallback): CUDA_VISIBLE_DEVICES="" (no GPU to see), GPUM_FALLBACK=cpu and
        GPUM_FALLBACK_REASON, as ``gpum run --fallback cpu`` sets them."""
        if self._cpu_reason is not None:
            return {"CUDA_VISIBLE_DEVICES": ("", False), "GPUM_FALLBACK": ("cpu", False),
                    "GPUM_FALLBACK_REASON": (self._cpu_reason, False)}
        if not self._r:
            return {}
        vars_ = (t.EnvVar * t.ENV_MAX)()
        n = c.c_size_t()
        check(lib.gpum_reservation_env(c.byref(self._r), vars_, t.ENV_MAX, c.byref(n)))
        env = {vars_[i].name.decode(): (vars_[i].value.decode(), bool(vars_[i].if_unset))
               for i in range(n.value)}
        ndev = int(self._r.ndevices)
        if self._distributed if self._distributed is not None else ndev > 1:
            dvars = (t.EnvVar * t.DISTRIBUTED_ENV_MAX)()
            check(lib.gpum_distributed_env(ndev, self._master_port, dvars, t.DISTRIBUTED_ENV_MAX,
                                           c.byref(n)))
            env.update({dvars[i].name.decode(): (dvars[i].value.decode(), bool(dvars[i].if_unset))
                        for i in range(n.value)})
        return env

    def on_pressure(self, callback: Callable[[Pressure], Any]) -> None:
        """Calls callback(Pressure) on the session's thread when gpumd reports memory pressure
        on one of the reservation's GPUs."""
        self._pressure.append(callback)

    # --- events ---------------------------------------------------------------------------------
    def _on_event(self, ev: Any, user: Any) -> None:
        e = ev.contents
        try:
            if e.reservation:
                self._r = t.Reservation.from_buffer_copy(e.reservation.contents)
            if e.kind == EV_QUEUED and self._on_queue and self._r:
                self._on_queue(self._r.queue_position)
            elif e.kind == EV_PRESSURE:
                p = Pressure(e.device, e.used_ratio, e.level.decode() if e.level else "high")
                mine = {d.index for d in self.devices}
                if not mine or p.device in mine:
                    for cb in list(self._pressure):
                        cb(p)
            elif e.kind in (EV_ENDED, EV_GAVE_UP) and self._r:
                self._ended = self._r.reason.decode() or STATES[self._r.state]
        except Exception as exc:  # a callback's error must not unwind through C
            print(f"gpum: a reservation callback raised {exc!r}", file=sys.stderr)

    def _serve(self) -> None:
        while not self._stop.is_set():
            rc = lib.gpum_session_process(self._s, 200)
            if rc in (GPUM_ESTATE, GPUM_ECLOSED):
                return  # ended or lost: said through the events
            lib.gpum_error_clear()

    # --- the block ------------------------------------------------------------------------------
    def _set_environment(self) -> None:
        if self._set_env:
            for name, (value, if_unset) in self.env().items():
                if not (if_unset and name in os.environ):
                    self._saved_env[name] = os.environ.get(name)
                    os.environ[name] = value

    def __enter__(self) -> "Reservation":
        try:
            return self._enter()
        except GpumError as err:  # DaemonUnavailable, NeverFits, Timeout, ...
            if self._fallback != "cpu" or isinstance(err, (PermissionDenied, InvalidArgument)):
                raise
            # No GPU can serve the block (gpumd not there, none could ever hold it, the wait
            # timed out): it runs on the CPU, as gpum run --fallback cpu runs CMD.
            self._cpu_reason = str(err) or type(err).__name__
            self._set_environment()
            return self

    def _enter(self) -> "Reservation":
        if self._set_env and _cuda_initialized():
            raise CudaAlreadyInitialized(
                "CUDA was initialised in this process before the reservation, so the granted "
                "GPUs (CUDA_VISIBLE_DEVICES) cannot take effect: enter gpum.reserve(...) before "
                "the first use of torch.cuda (or any CUDA call), e.g. at the top of the script")
        o = t.SessionOpts()
        lib.gpum_session_opts_init(c.byref(o))
        o.socket = self._socket
        o.on_event = self._event_cb
        o.interrupted = self._interrupted_cb
        rc = lib.gpum_session_open(c.byref(o), c.byref(self._s))
        if rc < 0:
            err = error_for(rc)
            if isinstance(err, PermissionDenied):
                raise err
            raise DaemonUnavailable(rc, err.message) from None
        old_int = None
        if threading.current_thread() is threading.main_thread():
            old_int = signal.signal(signal.SIGINT, self._on_sigint)
        try:
            rc = lib.gpum_session_reserve(self._s, c.byref(self._req), self._timeout_ms)
        finally:
            if old_int is not None:
                signal.signal(signal.SIGINT, old_int)
        r = lib.gpum_session_reservation(self._s)
        if r:
            self._r = t.Reservation.from_buffer_copy(r.contents)
        if rc < 0:
            err = error_for(rc)
            lib.gpum_session_close(self._s)
            self._s = c.c_void_p()
            if rc == GPUM_EINTR:
                raise KeyboardInterrupt("interrupted while waiting for the reservation")
            raise err
        self._set_environment()
        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            self._old_term = signal.signal(signal.SIGTERM, self._on_sigterm)
        self._thread = threading.Thread(target=self._serve, name="gpum-session", daemon=True)
        self._thread.start()
        return self

    def _on_sigint(self, signum: int, frame: Any) -> None:
        self._interrupt = True

    @staticmethod
    def _on_sigterm(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    def _restore_environment(self) -> None:
        for name, old in self._saved_env.items():  # the environment as it was before
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old
        self._saved_env = {}

    def release(self) -> None:
        """Releases the reservation now (the block's end does it too)."""
        if self._cpu_reason is not None:
            self._restore_environment()
            return
        if not self._s:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._old_term is not None:
            signal.signal(signal.SIGTERM, self._old_term)
            self._old_term = None
        rc = lib.gpum_session_release(self._s)
        lib.gpum_session_close(self._s)
        self._s = c.c_void_p()
        self._restore_environment()
        if rc < 0 and rc not in (GPUM_ESTATE, GPUM_ECLOSED):
            raise error_for(rc)

    def __exit__(self, *exc: Any) -> None:
        self.release()


def reserve(mem: Union[int, str], gpus: int = 1, **kwargs: Any) -> Reservation:
    """A reservation of mem bytes (or "20GiB") on each of gpus GPUs; use it with ``with``."""
    return Reservation(mem, gpus, **kwargs)
