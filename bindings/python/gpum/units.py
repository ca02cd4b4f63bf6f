# SPDX-License-Identifier: Apache-2.0
"""Sizes and figures as people read them, by libgpum's own rules (gpum/size.h), so a size reads
the same in Python as in ``gpum top``, ``gpum jobs`` and the dashboard.

``Size`` is an ``int`` of bytes that prints as ``gpum_size_format`` writes it::

    >>> gpum.Size(5 << 29)
    2.50 GiB
    >>> gpum.Size(5 << 29) + 1, f"{gpum.Size(1024):d}"
    (2684354561, '1024')

It is an int in every other way (arithmetic gives plain ints; ``json.dumps`` writes the
number). ``format_size(bytes)`` and ``format_figure(name, value)`` (the unit read from the
name's suffix, ``gpum_figure_format``: ``format_figure("queue_p99_us", 11400)`` is
``"11.4 ms"``) return the text.
"""
from __future__ import annotations

import ctypes as c

from ._lib import lib

__all__ = ["Size", "format_size", "format_figure"]

lib.gpum_size_format.argtypes = [c.c_uint64, c.c_char_p, c.c_size_t]
lib.gpum_size_format.restype = c.c_char_p
lib.gpum_figure_format.argtypes = [c.c_char_p, c.c_double, c.c_char_p, c.c_size_t]
lib.gpum_figure_format.restype = c.c_char_p

# Larger than GPUM_SIZE_BUFSZ and GPUM_FIGURE_BUFSZ: libgpum writes what fits, NUL-terminated.
_BUF = 64


def format_size(nbytes: int) -> str:
    """nbytes as libgpum writes sizes: "512 B", "2.50 GiB" (IEC units, two decimals)."""
    if nbytes < 0:
        return f"-{format_size(-nbytes)}"
    buf = c.create_string_buffer(_BUF)
    lib.gpum_size_format(min(nbytes, 2**64 - 1), buf, _BUF)
    return buf.value.decode()


def format_figure(name: str, value: float) -> str:
    """A reported figure with the unit its name gives ("queue_p99_us", 11400: "11.4 ms";
    "allocated_bytes": "2.50 GiB"; "hit_ratio": "93.0%"; a count: "12.3k")."""
    buf = c.create_string_buffer(_BUF)
    lib.gpum_figure_format(name.encode(), float(value), buf, _BUF)
    return buf.value.decode()


class Size(int):
    """Bytes: an int that prints as people read it ("2.50 GiB")."""

    __slots__ = ()

    def __str__(self) -> str:
        return format_size(int(self))

    def __repr__(self) -> str:
        return format_size(int(self))

    def __format__(self, spec: str) -> str:
        return str(self) if not spec else int(self).__format__(spec)
