# SPDX-License-Identifier: Apache-2.0
"""Memory estimates, as ``gpum estimate`` makes them (docs/estimate.md).

``gpum.estimate("llama-7b", mode="lora", batch=4, precision="bf16")`` takes a preset, a kind
("transformer", "cnn", "lstm", ...) or a spec string, and the settings ``gpum estimate``'s
flags and spec strings name (batch, precision, mode, lora_rank, optimizer, checkpointing,
context, zero, gpus, impl ("hf" or "torch"), the shape's keys, image and patch of a vision
transformer, ...); ``hf_config`` reads a local config.json (impl "hf" unless given). Without a
model, the shape's keywords name it as ``gpum estimate``'s flags do:
``gpum.estimate(mlp="784/512/10", batch=64)``, ``gpum.estimate(kind="lstm", layers=2, ...)``.
"""
from __future__ import annotations

import ctypes as c
from dataclasses import dataclass, fields
from typing import Any, List, Optional, Tuple

from ._lib import lib
from . import _types as t
from .errors import check
from .pool import _size

__all__ = ["estimate", "Estimate", "presets", "accumulation"]

lib.gpum_model_init.argtypes = [c.c_void_p, c.c_int]
lib.gpum_model_init.restype = None
lib.gpum_estimate_opts_init.argtypes = [c.c_void_p]
lib.gpum_estimate_opts_init.restype = None
lib.gpum_estimate_parse.argtypes = [c.c_char_p, c.c_void_p, c.c_void_p]
lib.gpum_estimate_set.argtypes = [c.c_void_p, c.c_void_p, c.c_char_p, c.c_char_p]
lib.gpum_estimate.argtypes = [c.c_void_p, c.c_void_p, c.POINTER(t.Estimate)]
lib.gpum_estimate_max_batch.argtypes = [c.c_void_p, c.c_void_p, c.c_uint64,
                                        c.POINTER(c.c_uint64)]
lib.gpum_estimate_accumulation.argtypes = [c.c_uint64, c.c_uint64, c.c_uint32,
                                           c.POINTER(c.c_uint64), c.POINTER(c.c_uint64)]
lib.gpum_model_preset_name.argtypes = [c.c_size_t]
lib.gpum_model_preset_name.restype = c.c_char_p


@dataclass(frozen=True)
class Estimate:
    """An estimate in bytes per GPU (params and trainable_params are counts)."""

    params: int
    trainable_params: int
    weights: int
    gradients: int
    optimizer: int
    activations: int
    kv_cache: int
    workspace: int
    context: int
    allocator: int
    total: int
    _model: Any = None
    _opts: Any = None

    def max_batch(self, budget: Any) -> int:
        """The largest batch whose total fits budget (bytes, or a size such as "24GiB")."""
        out = c.c_uint64()
        check(lib.gpum_estimate_max_batch(self._model, self._opts, _size(budget), c.byref(out)))
        return out.value


# The keywords that name a model without a preset or a spec, applied before the rest (kind
# resets the shape; cnn reads channels as it parses), as gpum_estimate_parse takes them.
_MODEL_KEYS = ("preset", "kind", "channels", "mlp", "cnn")


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "/".join(str(x) for x in v)   # mlp=[784, 512, 10], cnn=["conv:16:3", "relu"]
    return str(v)


def estimate(model: Optional[str] = None, *, hf_config: Optional[str] = None,
             **settings: Any) -> Estimate:
    """Estimates the memory per GPU of model (a preset, a kind or a spec) with settings."""
    m, o = t.opaque("gpum_model_t"), t.opaque("gpum_estimate_opts_t")
    named = [k for k in ("preset", "kind", "mlp", "cnn") if k in settings]
    if model is None and hf_config is None and not named:
        raise ValueError("give a model (a preset, a kind or a spec), hf_config, or a shape "
                         "keyword (preset=, kind=, mlp=, cnn=)")
    if model is not None:
        check(lib.gpum_estimate_parse(model.encode(), m, o))
    else:
        lib.gpum_model_init(m, 0)  # a transformer's defaults, as gpum_estimate_parse starts
        lib.gpum_estimate_opts_init(o)
    if hf_config is not None:
        check(lib.gpum_estimate_set(m, o, b"hf", str(hf_config).encode()))
    first = [k for k in _MODEL_KEYS if k in settings]
    for key in first + [k for k in settings if k not in first]:
        v = settings[key]
        check(lib.gpum_estimate_set(m, o, key.encode(), _value(v).encode()))
    e = t.Estimate()
    check(lib.gpum_estimate(m, o, c.byref(e)))
    vals = {f.name: getattr(e, f.name) for f in fields(Estimate) if not f.name.startswith("_")}
    return Estimate(**vals, _model=m, _opts=o)


def presets() -> Tuple[str, ...]:
    """The preset names gpum knows."""
    names: List[str] = []
    i = 0
    while True:
        n = lib.gpum_model_preset_name(i)
        if not n:
            return tuple(names)
        names.append(n.decode())
        i += 1


def accumulation(effective: int, max_micro: int, gpus: int = 1) -> Tuple[int, int]:
    """(micro-batch, steps) that reach an effective batch with micro-batches of at most
    max_micro on gpus GPUs."""
    micro, steps = c.c_uint64(), c.c_uint64()
    check(lib.gpum_estimate_accumulation(effective, max_micro, gpus, c.byref(micro),
                                         c.byref(steps)))
    return micro.value, steps.value
