# SPDX-License-Identifier: Apache-2.0
"""The dynamic request batcher (docs/batcher.md) for Python models.

    def model(inputs):                  # a list of requests -> a list of answers
        return [x * 2 for x in inputs]

    with gpum.Batcher(model, max_batch_size=32, max_queue_delay="2ms") as b:
        fut = b.submit(21)              # a concurrent.futures.Future
        fut.result()                    # 42
        answer = await b.infer(21)      # from asyncio

The model runs on the batcher's worker threads (one per model instance). An out-of-memory
exception it raises (gpum.OutOfMemory, torch.cuda.OutOfMemoryError, or a type in
oom_exceptions) splits the batch and runs the halves; any other exception fails every request
of the batch with it. A request past its queue timeout fails with gpum.Timeout, one refused by
a full queue raises gpum.Busy at submit.

The batch is also bounded by memory: item_bytes per request against budget_bytes, or, with
memory (a callable returning (peak, limit, total) after each batch, as gpum.torch.cuda_memory()
gives from PyTorch's figures), the bytes per request the batcher measures against the limit.
"""
from __future__ import annotations

import asyncio
import ctypes as c
import itertools
import sys
import threading
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Type, Union

from ._lib import lib
from . import _types as t
from .adaptive import _default_ooms, _free_framework_cache
from .errors import GPUM_EAGAIN, GPUM_EDEVOOM, GPUM_EIO, check, error_for
from . import report as _report

__all__ = ["Batcher", "BatcherStats"]

lib.gpum_batcher_create.argtypes = [c.POINTER(t.BatcherOpts), c.POINTER(c.c_void_p)]
lib.gpum_batcher_shutdown.argtypes = [c.c_void_p, c.c_bool]
lib.gpum_batcher_shutdown.restype = None
lib.gpum_batcher_destroy.argtypes = [c.c_void_p]
lib.gpum_batcher_destroy.restype = None
lib.gpum_batcher_submit.argtypes = [c.c_void_p, c.c_void_p, c.POINTER(t.BatcherSubmitOpts),
                                    c.POINTER(c.c_void_p)]
lib.gpum_batcher_set_pressure.argtypes = [c.c_void_p, c.c_bool]
lib.gpum_batcher_set_pressure.restype = None
lib.gpum_batcher_stats.argtypes = [c.c_void_p, c.POINTER(t.BatcherStats)]
lib.gpum_batcher_stats.restype = None

lib.gpum_batcher_wait.argtypes = [c.c_void_p, c.c_int64, c.c_void_p]
lib.gpum_batcher_cancel.argtypes = [c.c_void_p]
lib.gpum_batcher_req_free.argtypes = [c.c_void_p]
lib.gpum_batcher_req_free.restype = None


@dataclass(frozen=True)
class BatcherStats:
    submitted: int
    completed: int
    failed: int
    rejected_full: int
    rejected_timeout: int
    cancelled: int
    shut_down: int
    batches: int
    oom_splits: int
    batch_sizes: Dict[int, int]  # batch size -> batches of that size (64: 64 or more)
    queue_p50_us: float
    queue_p95_us: float
    queue_p99_us: float
    e2e_p50_us: float
    e2e_p95_us: float
    e2e_p99_us: float
    throughput: float  # completed per second since the batcher started
    bound: int  # the largest batch a worker takes now (memory, out-of-memory splits)
    queued: int
    item_bytes: int   # per request: item_bytes, or as measured through memory (0: not yet)
    fixed_bytes: int  # measured bytes that do not grow with the batch


def _us(v: Union[None, int, float, str]) -> int:
    if v is None:
        return 0
    if isinstance(v, (int, float)):
        return int(v * 1e6)  # seconds
    out = c.c_uint64()
    check(lib.gpum_duration_parse(v.encode(), c.byref(out)))
    return out.value * 1000


class Batcher:
    """See the module's text. Options as gpum/batcher.h's (durations in seconds or "2ms")."""

    def __init__(self, fn: Callable[[List[Any]], Sequence[Any]], *, max_batch_size: int = 8,
                 preferred_sizes: Sequence[int] = (), max_queue_delay: Union[int, float, str] = 0,
                 priority_levels: int = 1, default_priority: int = 0,
                 queue_timeout: Union[None, int, float, str] = None, delay_on_timeout: bool = False,
                 allow_timeout_override: bool = False, max_queue_size: int = 0,
                 preserve_ordering: bool = False, workers: int = 1, item_bytes: int = 0,
                 budget_bytes: int = 0,
                 memory: Optional[Callable[[], Tuple[int, int, int]]] = None,
                 oom_exceptions: Sequence[Type[BaseException]] = ()) -> None:
        self._fn = fn
        self._ooms = tuple(oom_exceptions) + _default_ooms()
        self._objs: Dict[int, Any] = {}   # key -> input or output object
        self._futs: Dict[int, Future] = {}
        self._errors: Dict[int, BaseException] = {}  # key -> the exception that failed it
        self._keys = itertools.count(1)
        self._lock = threading.Lock()
        # Request handles (freed by us: a cancelled Future cancels its request through it):
        # key -> handle while pending; answered ones wait in _finished until the batcher let go.
        self._reqs: Dict[int, c.c_void_p] = {}
        self._answered: set = set()  # keys answered before submit stored their handle
        self._finished: List[c.c_void_p] = []
        self._handles = threading.Lock()  # held while a handle is used or freed
        self._fn_c = t.BATCHER_FN(self._run)
        self._done_c = t.BATCHER_DONE_FN(self._done)
        self._memory = memory
        self._memory_c = t.BATCH_MEMORY_FN(self._on_memory) if memory else None
        self._pref = (c.c_size_t * max(1, len(preferred_sizes)))(*preferred_sizes)
        pol = t.BatcherPolicy(timeout_us=_us(queue_timeout), delay=delay_on_timeout,
                              allow_override=allow_timeout_override,
                              max_queue_size=max_queue_size)
        o = t.BatcherOpts(max_batch_size=max_batch_size, preferred_sizes=self._pref,
                          npreferred=len(preferred_sizes), max_queue_delay_us=_us(max_queue_delay),
                          priority_levels=priority_levels, default_priority=default_priority,
                          default_policy=pol, preserve_ordering=preserve_ordering,
                          workers=workers, item_bytes=item_bytes, budget_bytes=budget_bytes,
                          fn=self._fn_c)
        if self._memory_c is not None:  # else NULL: no memory callback
            o.memory = self._memory_c
        self._b = c.c_void_p()
        check(lib.gpum_batcher_create(c.byref(o), c.byref(self._b)))

    # --- on the workers' threads ----------------------------------------------------------------
    def _run(self, inputs: Any, outputs: Any, n: int, worker: int, user: Any) -> int:
        keys = [inputs[i] for i in range(n)]
        with self._lock:
            xs = [self._objs[k] for k in keys]
            futs = [self._futs[k] for k in keys]
        for f in futs:  # running now: no longer cancellable (one cancelled meanwhile is run and
            if not f.running():  # its answer dropped); a split batch's halves are running already
                f.set_running_or_notify_cancel()
        try:
            ys = list(self._fn(xs))
            if len(ys) != n:
                raise ValueError(f"the model returned {len(ys)} answers for {n} requests")
        except self._ooms:
            _free_framework_cache()
            return GPUM_EDEVOOM
        except BaseException as e:
            with self._lock:
                for k in keys:
                    self._errors[k] = e
            return GPUM_EIO
        with self._lock:
            for k, y in zip(keys, ys):
                self._objs[k] = y
        for i, k in enumerate(keys):
            outputs[i] = k
        return 0

    def _on_memory(self, m: Any, user: Any) -> int:
        try:
            assert self._memory is not None
            peak, limit, total = self._memory()
            m.contents.peak, m.contents.limit, m.contents.total = peak, limit, total
            return 0
        except Exception:  # no measurement this batch
            return GPUM_EIO

    def _done(self, req: Any, status: int, output: Any, user: Any) -> None:
        key = user
        with self._lock:
            fut = self._futs.pop(key)
            obj = self._objs.pop(key, None)
            err = self._errors.pop(key, None)
            handle = self._reqs.pop(key, None)
            if handle is not None:
                self._finished.append(handle)
            else:
                self._answered.add(key)
        try:
            if status == 0:
                fut.set_result(obj)
            elif err is not None:
                fut.set_exception(err)
            else:
                fut.set_exception(error_for(status, f"request failed: {error_for(status).name}"))
        except InvalidStateError:  # the Future was cancelled: nobody waits for the answer
            pass

    def _cancelled(self, key: int, fut: "Future[Any]") -> None:
        """A Future's done callback: a cancelled one cancels its request while it is queued."""
        if not fut.cancelled():
            return
        with self._handles:
            with self._lock:
                handle = self._reqs.get(key)
            if handle is not None and self._b:
                lib.gpum_batcher_cancel(handle)  # GPUM_ESTATE once it runs: its answer is dropped

    def _free_finished(self, wait: bool = False) -> None:
        """Frees the handles of answered requests the batcher has let go of."""
        with self._handles:
            with self._lock:
                done, self._finished = self._finished, []
            keep = []
            for h in done:
                if lib.gpum_batcher_wait(h, -1 if wait else 0, None) == GPUM_EAGAIN:
                    keep.append(h)
                else:
                    lib.gpum_batcher_req_free(h)
            with self._lock:
                self._finished.extend(keep)

    # --- the caller's side ----------------------------------------------------------------------
    def submit(self, x: Any, *, priority: int = 0,
               timeout: Union[None, int, float, str] = None) -> "Future[Any]":
        """Queues x; a Future of the model's answer for it."""
        key = next(self._keys)
        fut: Future = Future()
        with self._lock:
            self._objs[key] = x
            self._futs[key] = fut
        so = t.BatcherSubmitOpts(priority=priority, timeout_us=_us(timeout), done=self._done_c,
                                 user=key)
        self._free_finished()
        handle = c.c_void_p()
        rc = lib.gpum_batcher_submit(self._b, key, c.byref(so), c.byref(handle))
        if rc < 0:
            with self._lock:
                self._objs.pop(key, None)
                self._futs.pop(key, None)
            raise error_for(rc)
        with self._lock:
            if key in self._answered:  # answered already, on a worker
                self._answered.discard(key)
                self._finished.append(handle)
            else:
                self._reqs[key] = handle
        fut.add_done_callback(lambda f: self._cancelled(key, f))
        return fut

    async def infer(self, x: Any, **kwargs: Any) -> Any:
        """The model's answer for x, awaited from asyncio."""
        return await asyncio.wrap_future(self.submit(x, **kwargs))

    def set_pressure(self, on: bool) -> None:
        lib.gpum_batcher_set_pressure(self._b, on)

    def stats(self) -> BatcherStats:
        s = t.BatcherStats()
        lib.gpum_batcher_stats(self._b, c.byref(s))
        sizes = {i: s.batch_sizes[i] for i in range(65) if s.batch_sizes[i]}
        return BatcherStats(s.submitted, s.completed, s.failed, s.rejected_full,
                            s.rejected_timeout, s.cancelled, s.shut_down, s.batches, s.oom_splits,
                            sizes, s.queue_p50_us, s.queue_p95_us, s.queue_p99_us, s.e2e_p50_us,
                            s.e2e_p95_us, s.e2e_p99_us, s.throughput, s.bound, s.queued,
                            s.item_bytes, s.fixed_bytes)

    def shutdown(self, drain: bool = True) -> None:
        """Stops: queued requests are served (drain) or fail with gpum.Interrupted."""
        if self._b:
            lib.gpum_batcher_shutdown(self._b, drain)

    def close(self) -> None:
        _report.detach(self)
        if self._b:
            lib.gpum_batcher_shutdown(self._b, True)  # every request answered and let go
            with self._handles:
                lib.gpum_batcher_destroy(self._b)
                self._b = c.c_void_p()
            self._free_finished(wait=True)

    def __enter__(self) -> "Batcher":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()
