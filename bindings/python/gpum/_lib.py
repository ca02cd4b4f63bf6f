# SPDX-License-Identifier: Apache-2.0
"""Loading libgpum and declaring the C functions the package calls.

The library is looked up, in order: ``$GPUM_LIBRARY``, ``libgpum.so.0`` beside this package
(a wheel may ship it there), then the loader's search path. Nothing is compiled: any libgpum
build of the same ABI works, and the structs mirrored in ``_types`` are checked against the
library's own layouts (``gpum_abi_sizeof`` / ``gpum_abi_offsetof``) when it is loaded.
"""
from __future__ import annotations

import ctypes
import os
from typing import Iterator, List, Tuple

__all__ = ["lib", "path"]


def _candidates() -> Iterator[str]:
    env = os.environ.get("GPUM_LIBRARY")
    if env:
        yield env
    here = os.path.dirname(os.path.abspath(__file__))
    for name in ("libgpum.so.0", "libgpum.so"):
        p = os.path.join(here, name)
        if os.path.exists(p):
            yield p
    yield "libgpum.so.0"


def _load() -> Tuple[ctypes.CDLL, str]:
    tried: List[str] = []
    for c in _candidates():
        try:
            return ctypes.CDLL(c), c
        except OSError as e:
            tried.append(f"{c}: {e}")
    raise ImportError(
        "cannot load libgpum (" + "; ".join(tried) + "): install gpum's library or set "
        "GPUM_LIBRARY to the path of libgpum.so"
    )


lib, path = _load()

_c = ctypes
_P = _c.c_void_p


def _fn(name: str, restype, *argtypes) -> None:
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)


# Errors and version.
_fn("gpum_last_error", _c.c_char_p)
_fn("gpum_error_clear", None)
_fn("gpum_err_name", _c.c_char_p, _c.c_int)
_fn("gpum_strerror", _c.c_char_p, _c.c_int)
_fn("gpum_version", _c.c_char_p)
_fn("gpum_abi_sizeof", _c.c_long, _c.c_char_p)
_fn("gpum_abi_offsetof", _c.c_long, _c.c_char_p, _c.c_char_p)
# Sizes.
_fn("gpum_size_parse", _c.c_int, _c.c_char_p, _c.POINTER(_c.c_uint64))
_fn("gpum_duration_parse", _c.c_int, _c.c_char_p, _c.POINTER(_c.c_uint64))
