# SPDX-License-Identifier: Apache-2.0
"""PyTorch integration: adaptive batches over a Dataset, the reservation as PyTorch's memory
fraction, and gpum's pool as PyTorch's CUDA allocator.

Importing this module imports torch (it is the only part of the package that needs it).
"""
from __future__ import annotations

import ctypes as c
import os
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

import torch

# The library and its path from the module itself: the package's own `_lib` attribute is the
# loaded library (gpum/__init__.py), which `from . import _lib` would give instead.
from ._lib import lib, path as _clib_path
from .errors import check
from .pool import PoolStats, stats_of
from .adaptive import Adaptive, BatchInfo, BatchStats

__all__ = ["AdaptiveBatchLoader", "apply_reservation", "use_gpum_allocator", "cuda_memory",
           "pool_stats", "torch_library"]

lib.gpum_torch_pool.argtypes = [c.c_int, c.POINTER(c.c_void_p)]


def cuda_memory(device: Optional[int] = None) -> Optional[Callable[[], Tuple[int, int, int]]]:
    """A memory callback for the adaptive runner from PyTorch's own figures on a CUDA device:
    the peak PyTorch allocated since the previous call, the limit (the reservation's
    GPUM_MEM_LIMIT, else the device's free memory plus what PyTorch holds) and the device's
    size. None without CUDA."""
    if not torch.cuda.is_available():
        return None
    dev = torch.cuda.current_device() if device is None else device

    def memory() -> Tuple[int, int, int]:
        peak = torch.cuda.max_memory_allocated(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        free, total = torch.cuda.mem_get_info(dev)
        env = os.environ.get("GPUM_MEM_LIMIT")
        limit = int(env) if env and env.isdigit() else free + torch.cuda.memory_reserved(dev)
        return peak, limit, total

    return memory


def _default_collate(samples: List[Any]) -> Any:
    from torch.utils.data import default_collate  # torch >= 1.11
    return default_collate(samples)


class AdaptiveBatchLoader:
    """Batches of a ``torch.utils.data.Dataset`` sized by gpum's adaptive runner.

        loader = AdaptiveBatchLoader(dataset, batch_size=32, max_batch=512, effective_batch=256)
        def step(batch, info):
            loss = loss_fn(model(batch[0]), batch[1]) * info.loss_scale
            loss.backward()
            if info.window_end:
                opt.step(); opt.zero_grad()
        stats = loader.run(step)

    ``torch.cuda.OutOfMemoryError`` raised by the step (and any type in ``oom_exceptions``)
    frees PyTorch's cache and runs the same samples again in a smaller batch; each sample is
    used once per run. A step that ran out of memory must not have changed the model:
    PyTorch may have accumulated part of a backward pass, so a step that can fail in backward
    should restore the window's gradients (``info.attempt`` > 0 says it is a retry).
    ``order`` gives the samples' order (a permutation, for shuffling); ``memory`` defaults to
    PyTorch's CUDA figures when CUDA is available.
    """

    def __init__(self, dataset: Any, *, batch_size: int = 32, max_batch: Optional[int] = None,
                 effective_batch: int = 0, collate_fn: Optional[Callable[[List[Any]], Any]] = None,
                 order: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        self.dataset = dataset
        self.collate_fn = collate_fn or _default_collate
        self.order = list(order) if order is not None else None
        self._kw = dict(batch_size=batch_size, max_batch=max_batch,
                        effective_batch=effective_batch, **kwargs)
        self._kw.setdefault("memory", cuda_memory())

    def run(self, step: Callable[[Any, BatchInfo], Any], **kwargs: Any) -> BatchStats:
        """Runs step(batch, info) over the dataset; options as gpum.adaptive's."""
        items: Union[int, Sequence[int]] = (self.order if self.order is not None
                                            else len(self.dataset))

        def inner(info: BatchInfo) -> None:
            step(self.collate_fn([self.dataset[i] for i in info.indices]), info)

        oom = tuple(kwargs.pop("oom_exceptions", self._kw.pop("oom_exceptions", ())))
        err = getattr(torch.cuda, "OutOfMemoryError", None)
        if isinstance(err, type):
            oom += (err,)
        return Adaptive(items, inner, oom_exceptions=oom, **{**self._kw, **kwargs}).run()


def apply_reservation(limit: Optional[int] = None) -> List[float]:
    """Sets PyTorch's per-process memory fraction on each visible CUDA device to the
    reservation's limit (bytes per GPU; default GPUM_MEM_LIMIT, which gpum run and gpum.reserve
    set) over the device's size, so PyTorch's allocator stops there with its own error. Returns
    the fractions; [] without CUDA."""
    if limit is None:
        env = os.environ.get("GPUM_MEM_LIMIT")
        if not env:
            raise RuntimeError("no reservation: GPUM_MEM_LIMIT is not set (run under gpum run or "
                               "inside gpum.reserve, or pass the limit)")
        limit = int(env)
    if not torch.cuda.is_available():
        return []
    fractions = []
    for i in range(torch.cuda.device_count()):
        total = torch.cuda.get_device_properties(i).total_memory
        f = min(1.0, limit / total)
        torch.cuda.set_per_process_memory_fraction(f, i)
        fractions.append(f)
    return fractions


def torch_library() -> str:
    """The path of libgpum_torch.so, the pluggable allocator PyTorch loads: $GPUM_TORCH_LIBRARY,
    else beside the libgpum this package loaded."""
    env = os.environ.get("GPUM_TORCH_LIBRARY")
    if env:
        return env
    path = os.path.join(os.path.dirname(os.path.abspath(_clib_path)), "libgpum_torch.so")
    if not os.path.exists(path):
        raise RuntimeError("libgpum_torch.so is not beside %s (build gpum with its src/torch, or "
                           "set GPUM_TORCH_LIBRARY)" % _clib_path)
    return path


def use_gpum_allocator() -> Any:
    """Makes gpum's pool PyTorch's CUDA allocator (one pool per device, honouring the
    reservation's limit: gpum/torch.h). Must run before the first CUDA allocation. Returns the
    allocator object. An allocation that does not fit raises RuntimeError("CUDA out of memory.
    ..."), not torch.cuda.OutOfMemoryError, which a pluggable allocator cannot raise
    (pytorch/pytorch#133280); gpum.adaptive counts it as an out-of-memory error."""
    # PyTorch 2.0's API, looked up by name: the older PyTorch a type checker may read (Debian
    # 12's 1.13) does not declare it, and there the call fails with the same AttributeError.
    memory = torch.cuda.memory
    alloc = getattr(memory, "CUDAPluggableAllocator")(torch_library(),
                                                      "gpum_torch_pluggable_malloc",
                                                      "gpum_torch_pluggable_free")
    getattr(memory, "change_current_allocator")(alloc)
    return alloc


def pool_stats(device: int = 0) -> PoolStats:
    """The statistics of the pool that serves PyTorch on device (after use_gpum_allocator): what
    its tensors hold (allocated), what the pool keeps from the driver (reserved), its segments,
    OOMs and limit."""
    pool = c.c_void_p()
    check(lib.gpum_torch_pool(device, c.byref(pool)))
    return stats_of(pool)
