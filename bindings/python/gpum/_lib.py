# SPDX-License-Identifier: Apache-2.0
"""Loading libgpum and declaring the C functions the package calls.

The library is looked up, in order: ``$GPUM_LIBRARY``, ``libgpum.so.0`` beside this package
(a wheel may ship it there), then the loader's search path. Nothing is compiled: any libgpum
build of the same ABI works, and the structs mirrored in ``_types`` are checked against the
library's own layouts (``gpum_abi_sizeof`` / ``gpum_abi_offsetof``) when it is loaded.

Each module declares the C functions it calls, at its top, in one style: ``lib.NAME.argtypes =
[...]`` (``[]`` for none), then ``lib.NAME.restype = ...`` unless the function returns int
(ctypes' default). This one declares those of the error table and the size parsers.
"""
from __future__ import annotations

import ctypes as c
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


def _load() -> Tuple[c.CDLL, str]:
    tried: List[str] = []
    for name in _candidates():
        try:
            return c.CDLL(name), name
        except OSError as e:
            tried.append(f"{name}: {e}")
    raise ImportError(
        "cannot load libgpum (" + "; ".join(tried) + "): install gpum's library or set "
        "GPUM_LIBRARY to the path of libgpum.so"
    )


lib, path = _load()

# Errors and version.
lib.gpum_last_error.argtypes = []
lib.gpum_last_error.restype = c.c_char_p
lib.gpum_error_clear.argtypes = []
lib.gpum_error_clear.restype = None
lib.gpum_err_name.argtypes = [c.c_int]
lib.gpum_err_name.restype = c.c_char_p
lib.gpum_strerror.argtypes = [c.c_int]
lib.gpum_strerror.restype = c.c_char_p
lib.gpum_version.argtypes = []
lib.gpum_version.restype = c.c_char_p
lib.gpum_abi_sizeof.argtypes = [c.c_char_p]
lib.gpum_abi_sizeof.restype = c.c_long
lib.gpum_abi_offsetof.argtypes = [c.c_char_p, c.c_char_p]
lib.gpum_abi_offsetof.restype = c.c_long
# Sizes.
lib.gpum_size_parse.argtypes = [c.c_char_p, c.POINTER(c.c_uint64)]
lib.gpum_duration_parse.argtypes = [c.c_char_p, c.POINTER(c.c_uint64)]
