# SPDX-License-Identifier: Apache-2.0
"""The adaptive batch runner (docs/batch.md) for Python steps.

``gpum.adaptive(n_or_items, step, batch_size=32, effective_batch=256)`` runs ``step`` over the
items a batch at a time. The step gets a :class:`BatchInfo` (the batch's indices, whether it
closes an accumulation window, its loss scale). An out-of-memory exception raised by the step
(``torch.cuda.OutOfMemoryError``, :class:`gpum.OutOfMemory`, any type given in
``oom_exceptions``, or a RuntimeError whose message begins "CUDA out of memory", as PyTorch's
pluggable allocators such as gpum's raise it) makes the runner free PyTorch's cache and run the same items again with a
smaller batch: no item is lost and none is run twice. Any other exception stops the run and is
raised from ``adaptive``.
"""
from __future__ import annotations

import ctypes as c
import sys
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Type, Union

from ._lib import lib
from . import _types as t
from .errors import GPUM_EDEVOOM, GPUM_EINTR, GpumError, OutOfMemory, check, error_for

__all__ = ["adaptive", "Adaptive", "BatchInfo", "BatchStats"]

lib.gpum_batch_create.argtypes = [c.POINTER(t.BatchOpts), c.POINTER(c.c_void_p)]
lib.gpum_batch_destroy.argtypes = [c.c_void_p]
lib.gpum_batch_destroy.restype = None
lib.gpum_batch_run.argtypes = [c.c_void_p]
lib.gpum_batch_stats.argtypes = [c.c_void_p, c.POINTER(t.BatchStats)]
lib.gpum_batch_stats.restype = None
lib.gpum_batch_set_pressure.argtypes = [c.c_void_p, c.c_bool]
lib.gpum_batch_set_pressure.restype = None


@dataclass(frozen=True)
class BatchInfo:
    """One micro-batch: items ``first .. first + count - 1`` of the run."""

    first: int
    count: int
    attempt: int
    window_end: bool
    loss_scale: float
    window: int
    indices: Sequence[Any]


@dataclass(frozen=True)
class BatchStats:
    done: int
    fallback: int
    failed: int
    steps: int
    ooms: int
    retries: int
    windows: int
    waits: int
    batch_size: int
    smallest: int
    largest: int
    peak: int
    seconds: float
    items_per_s: float
    trajectory: Tuple[Tuple[int, int], ...]  # (item, batch size) where the size changed


def _stats(s: t.BatchStats) -> BatchStats:
    traj = tuple((s.trajectory[i].item, s.trajectory[i].size) for i in range(s.nchanges))
    return BatchStats(s.done, s.fallback, s.failed, s.steps, s.ooms, s.retries, s.windows,
                      s.waits, s.batch_size, s.smallest, s.largest, s.peak, s.seconds,
                      s.items_per_s, traj)


def _default_ooms() -> Tuple[Type[BaseException], ...]:
    ooms: List[Type[BaseException]] = [OutOfMemory]
    torch = sys.modules.get("torch")
    if torch is not None:
        err = getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None)
        if isinstance(err, type):
            ooms.append(err)
    return tuple(ooms)


def _is_oom_text(e: BaseException) -> bool:
    """A RuntimeError that says it is CUDA's out-of-memory error: what PyTorch raises for an
    allocation a pluggable allocator (gpum.torch.use_gpum_allocator, RMM) refused."""
    return isinstance(e, RuntimeError) and str(e).startswith("CUDA out of memory")


def _free_framework_cache() -> None:
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:  # a cache that cannot be emptied is not the step's failure
        pass


class Adaptive:
    """A runner over items (a count, or a sequence whose elements the steps get as indices)."""

    def __init__(self, items: Union[int, Sequence[Any]], step: Callable[[BatchInfo], Any], *,
                 batch_size: int = 32, max_batch: Optional[int] = None,
                 effective_batch: int = 0, start: int = 0,
                 oom_exceptions: Sequence[Type[BaseException]] = (),
                 weight: Optional[Callable[[int], float]] = None,
                 memory: Optional[Callable[[], Tuple[int, int, int]]] = None,
                 fallback: Optional[Callable[[BatchInfo], Any]] = None,
                 on_failed: Optional[Callable[[int], Any]] = None,
                 checkpoint: Optional[Callable[[int], Any]] = None, checkpoint_every: int = 0,
                 progress: Optional[Callable[[BatchStats], Any]] = None,
                 report: Any = None, report_source: str = "adaptive") -> None:
        self._items = items
        self._report, self._report_source = report, report_source
        n = items if isinstance(items, int) else len(items)
        self._step, self._fallback = step, fallback
        self._ooms = tuple(oom_exceptions) + _default_ooms()
        self._error: Optional[BaseException] = None
        self._weight, self._memory, self._on_failed_fn = weight, memory, on_failed
        self._checkpoint, self._progress = checkpoint, progress
        # The C callbacks by their field of gpum_batch_opts_t, kept alive as long as the runner;
        # one not given stays NULL in the zeroed options.
        self._cb: Dict[str, Any] = {"step": t.BATCH_STEP_FN(self._on_step)}
        if fallback:
            self._cb["fallback"] = t.BATCH_STEP_FN(self._on_fallback)
        if memory:
            self._cb["memory"] = t.BATCH_MEMORY_FN(self._on_memory)
        if weight:
            self._cb["weight"] = t.BATCH_WEIGHT_FN(self._on_weight)
        if checkpoint:
            self._cb["checkpoint"] = t.BATCH_CHECKPOINT_FN(self._on_checkpoint)
        if progress:
            self._cb["progress"] = t.BATCH_PROGRESS_FN(self._on_progress)
        if on_failed:
            self._cb["failed"] = t.BATCH_FAILED_FN(self._on_failed)
        o = t.BatchOpts(items=n, start=start, batch_size=batch_size, max_batch=max_batch or 0,
                        effective_batch=effective_batch, checkpoint_every=checkpoint_every,
                        **self._cb)
        self._r = c.c_void_p()
        check(lib.gpum_batch_create(c.byref(o), c.byref(self._r)))

    def __del__(self) -> None:
        r = getattr(self, "_r", None)
        if r:
            lib.gpum_batch_destroy(r)
            self._r = c.c_void_p()

    def _info(self, b: t.Batch) -> BatchInfo:
        first, count = b.first, b.count
        idx: Sequence[Any] = (range(first, first + count) if isinstance(self._items, int)
                              else [self._items[i] for i in range(first, first + count)])
        return BatchInfo(first, count, b.attempt, bool(b.window_end), b.loss_scale, b.window,
                         idx)

    def _call(self, fn: Callable[[BatchInfo], Any], b: Any) -> int:
        if self._error is not None:
            return GPUM_EINTR
        try:
            fn(self._info(b.contents))
            return 0
        except self._ooms:
            pass
        except BaseException as e:  # stops the run; raised again from run()
            if not _is_oom_text(e):
                self._error = e
                return GPUM_EINTR
        # Out of memory. The cache is emptied here, after the handler: while it runs, the
        # exception's traceback still holds the failed step's frames and their tensors.
        _free_framework_cache()
        return GPUM_EDEVOOM

    def _on_step(self, b: Any, user: Any) -> int:
        return self._call(self._step, b)

    def _on_fallback(self, b: Any, user: Any) -> int:
        assert self._fallback is not None
        return self._call(self._fallback, b)

    def _on_memory(self, m: Any, user: Any) -> int:
        assert self._memory is not None
        try:
            peak, limit, total = self._memory()
            m.contents.peak, m.contents.limit, m.contents.total = peak, limit, total
            return 0
        except BaseException as e:
            self._error = self._error or e
            return GPUM_EINTR

    def _on_weight(self, item: int, user: Any) -> float:
        assert self._weight is not None
        try:
            return float(self._weight(item))
        except BaseException as e:
            self._error = self._error or e
            return 1.0

    def _on_checkpoint(self, nxt: int, user: Any) -> int:
        assert self._checkpoint is not None
        try:
            self._checkpoint(nxt)
            return 0
        except BaseException as e:
            self._error = self._error or e
            return GPUM_EINTR

    def _on_progress(self, s: Any, user: Any) -> None:
        assert self._progress is not None
        try:
            self._progress(_stats(s.contents))
        except BaseException as e:
            self._error = self._error or e

    def _on_failed(self, item: int, err: int, user: Any) -> None:
        assert self._on_failed_fn is not None
        try:
            self._on_failed_fn(item)
        except BaseException as e:
            self._error = self._error or e

    def set_pressure(self, on: bool) -> None:
        """gpumd's memory pressure began or ended (any thread)."""
        lib.gpum_batch_set_pressure(self._r, on)

    @property
    def stats(self) -> BatchStats:
        s = t.BatchStats()
        lib.gpum_batch_stats(self._r, c.byref(s))
        return _stats(s)

    def run(self) -> BatchStats:
        """Runs to the end; raises what a step (or a callback) raised, or gpum's error. With
        report (a gpum.Reporter), the runner's figures are reported on the reservation under
        report_source while it runs, and a last time at the end."""
        rep = self._report
        if rep is None:
            return self._run()
        rep.add(self._report_source, self)
        try:
            return self._run()
        finally:
            try:
                rep.flush()
            except GpumError:  # the figures are a view; the run's result stands
                pass
            rep.remove(self._report_source)

    def _run(self) -> BatchStats:
        rc = lib.gpum_batch_run(self._r)
        if self._error is not None:
            err, self._error = self._error, None
            raise err
        if rc < 0:
            raise error_for(rc)
        return self.stats


def adaptive(items: Union[int, Sequence[Any]], step: Callable[[BatchInfo], Any],
             **kwargs: Any) -> BatchStats:
    """Runs step over items with the adaptive runner (see :class:`Adaptive`); its statistics."""
    return Adaptive(items, step, **kwargs).run()
