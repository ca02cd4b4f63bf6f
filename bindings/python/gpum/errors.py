# SPDX-License-Identifier: Apache-2.0
"""gpum's errors as Python exceptions.

Every libgpum call returns 0 or a negative ``GPUM_E*`` code with a detail message; the package
turns a failure into a :class:`GpumError` subclass carrying both, never a bare return code.
The codes themselves are the ``GPUM_E*`` constants below, for the few places that compare a
return code or hand one back to C from a callback.
"""
from __future__ import annotations

from typing import Dict, Type

from ._lib import lib

__all__ = [
    "GpumError", "InvalidArgument", "NotFound", "OutOfMemory", "Timeout", "PermissionDenied",
    "DaemonUnavailable", "NeverFits", "Busy", "Interrupted", "check", "error_for",
    "GPUM_EINVAL", "GPUM_ENOMEM", "GPUM_ENOENT", "GPUM_ENODEV", "GPUM_ENOTSUP", "GPUM_ETIMEDOUT",
    "GPUM_EAGAIN", "GPUM_EIO", "GPUM_ELOST", "GPUM_ERESET", "GPUM_EPERM", "GPUM_ENOSPC",
    "GPUM_EDRIVER", "GPUM_ERANGE", "GPUM_EPARSE", "GPUM_EDEVOOM", "GPUM_EBUSY", "GPUM_EEXIST",
    "GPUM_ESTATE", "GPUM_EUNKNOWN_KEY", "GPUM_EDRIVERVER", "GPUM_ECLOSED", "GPUM_EPROTO",
    "GPUM_EINTERNAL", "GPUM_ENEVERFIT", "GPUM_EINTR",
]

# libgpum's codes: include/gpum/error.h's GPUM_ERRNO_MAP, value for value (codes are stable,
# only ever appended; tests/test_core.py checks each against the loaded library's names).
GPUM_EINVAL = -1
GPUM_ENOMEM = -2
GPUM_ENOENT = -3
GPUM_ENODEV = -4
GPUM_ENOTSUP = -5
GPUM_ETIMEDOUT = -6
GPUM_EAGAIN = -7
GPUM_EIO = -8
GPUM_ELOST = -9
GPUM_ERESET = -10
GPUM_EPERM = -11
GPUM_ENOSPC = -12
GPUM_EDRIVER = -13
GPUM_ERANGE = -14
GPUM_EPARSE = -15
GPUM_EDEVOOM = -16
GPUM_EBUSY = -17
GPUM_EEXIST = -18
GPUM_ESTATE = -19
GPUM_EUNKNOWN_KEY = -20
GPUM_EDRIVERVER = -21
GPUM_ECLOSED = -22
GPUM_EPROTO = -23
GPUM_EINTERNAL = -24
GPUM_ENEVERFIT = -25
GPUM_EINTR = -26


class GpumError(Exception):
    """A libgpum failure: ``code`` (negative), ``name`` (``"EDEVOOM"``) and the detail."""

    def __init__(self, code: int, message: str) -> None:
        self.code = code
        raw = lib.gpum_err_name(code)
        self.name = raw.decode() if raw else str(code)
        self.message = message
        super().__init__(message)


class InvalidArgument(GpumError, ValueError):
    """A bad value (GPUM_EINVAL, GPUM_EPARSE, GPUM_ERANGE)."""


class NotFound(GpumError, LookupError):
    """No such thing (GPUM_ENOENT)."""


class OutOfMemory(GpumError, MemoryError):
    """Out of device memory (GPUM_EDEVOOM)."""


class Timeout(GpumError, TimeoutError):
    """Timed out (GPUM_ETIMEDOUT), e.g. waiting for a reservation."""


class PermissionDenied(GpumError, PermissionError):
    """Not allowed (GPUM_EPERM)."""


class DaemonUnavailable(GpumError, ConnectionError):
    """gpumd cannot be reached, or the connection to it closed (GPUM_ECLOSED)."""


class NeverFits(GpumError):
    """The request can never be satisfied on this node (GPUM_ENEVERFIT)."""


class Busy(GpumError):
    """Not now (GPUM_EBUSY): a request that may not wait found no room."""


class Interrupted(GpumError):
    """Interrupted (GPUM_EINTR)."""


_BY_NAME: Dict[str, Type[GpumError]] = {
    "EINVAL": InvalidArgument, "EPARSE": InvalidArgument, "ERANGE": InvalidArgument,
    "ENOENT": NotFound, "EDEVOOM": OutOfMemory, "ETIMEDOUT": Timeout, "EPERM": PermissionDenied,
    "ECLOSED": DaemonUnavailable, "ENEVERFIT": NeverFits, "EBUSY": Busy, "EINTR": Interrupted,
}


def error_for(code: int, message: str = "") -> GpumError:
    """The exception for a libgpum code (the thread's detail message when none is given)."""
    if not message:
        raw = lib.gpum_last_error()
        message = raw.decode(errors="replace") if raw else ""
    if not message:
        raw = lib.gpum_strerror(code)
        message = raw.decode() if raw else f"error {code}"
    name = lib.gpum_err_name(code)
    cls = _BY_NAME.get(name.decode() if name else "", GpumError)
    return cls(code, message)


def check(rc: int) -> int:
    """Raises the exception for rc when it is a failure; returns rc otherwise."""
    if rc < 0:
        raise error_for(rc)
    return rc
