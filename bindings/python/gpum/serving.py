# SPDX-License-Identifier: Apache-2.0
"""Serving several models through gpum's dynamic batcher (seed 003's batch processor).

    with gpum.BatchProcessor() as bp:
        bp.register_model("double", lambda xs: [2 * x for x in xs], device="cpu",
                          max_batch_size=16, workers=2)
        bp.submit("double", 21).result()                     # 42
        list(bp.stream("double", range(100), window=32))     # in input order
        bp.stats("double").mean_batch_size

Each registered model gets a gpum.Batcher of its own (its workers, its queue, its priority
levels); a request's priority is a level of that batcher: 1 is the highest, 0 the model's
default. A torch.nn.Module is moved to its device and called on the stacked batch under
torch.no_grad(), its output split along dimension 0; any other callable takes the list of
requests and returns the list of answers.

stream() keeps at most `window` requests of an iterable in flight and yields their answers in
the iterable's order, whatever order the batches finish in. close() drains: every queued
request is answered before it returns (close(drain=False) fails them with gpum.Interrupted);
the batchers' worker threads have stopped when it returns.

The processor's own arguments are its models' defaults (GPUManager.batch_processor() passes the
configuration's): device, max_batch_size, max_queue_delay and strategy. The strategy says how
a batch forms: "dynamic" sends what has queued when a worker is free, waiting at most
max_queue_delay for more (Triton's dynamic batching); "fixed_size" also prefers batches of
exactly max_batch_size (the batcher's preferred size); "adaptive" is "dynamic" bounded by
memory, on a CUDA device: the batcher measures the bytes per request from PyTorch's figures
(gpum.torch.cuda_memory) and shrinks the batch to fit (on the CPU it is "dynamic").
options(name) says what a model was given.
"""
from __future__ import annotations

import collections
import sys
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Callable, Deque, Dict, Iterable, Iterator, List, Optional, Sequence, Union

from .batcher import Batcher

__all__ = ["BatchProcessor", "ModelStats", "STRATEGIES"]

STRATEGIES = ("dynamic", "fixed_size", "adaptive")


@dataclass(frozen=True)
class ModelStats:
    """One model's figures since it was registered (latencies from its batcher, submit to
    answer, in microseconds)."""
    name: str
    device: str
    workers: int
    requests: int         # accepted by submit
    items: int            # requests the model ran (a failed batch's included)
    batches: int          # calls of the model
    errors: int           # requests failed by an exception of the model
    mean_batch_size: float
    latency_p50_us: float
    latency_p95_us: float
    latency_p99_us: float
    throughput: float     # requests answered per second since registration
    queued: int


class _Model:
    """A registered model: its batcher and the counters its wrapper keeps on the workers."""

    def __init__(self, name: str, fn: Callable[[List[Any]], Sequence[Any]], device: str,
                 workers: int, options: Dict[str, Any]) -> None:
        self.name, self.fn, self.device, self.workers = name, fn, device, workers
        self.options = options
        self.lock = threading.Lock()
        self.requests = self.items = self.batches = self.errors = 0
        self.batcher: Optional[Batcher] = None

    def run(self, xs: List[Any]) -> Sequence[Any]:
        """On a worker: the model on one batch, counted (exactly, before any answer is set)."""
        with self.lock:
            self.batches += 1
            self.items += len(xs)
        try:
            return self.fn(xs)
        except BaseException:
            with self.lock:
                self.errors += len(xs)
            raise


def _module_fn(module: Any, device: str) -> Callable[[List[Any]], Sequence[Any]]:
    """A batch function for a torch.nn.Module: requests are tensors of one shape."""
    import torch

    module.to(device)
    module.eval()

    def fn(xs: List[Any]) -> Sequence[Any]:
        with torch.no_grad():
            return list(module(torch.stack(xs).to(device)).unbind(0))
    return fn


def _is_module(model: Any) -> bool:
    torch = sys.modules.get("torch")  # a Module implies torch is imported: never import it here
    return torch is not None and isinstance(model, torch.nn.Module)


def _check_strategy(strategy: Any) -> None:
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")


class BatchProcessor:
    """Models registered by name, each served through its own gpum.Batcher. Thread-safe."""

    def __init__(self, *, device: str = "cpu", max_batch_size: int = 8,
                 max_queue_delay: Union[int, float, str] = 0, strategy: str = "dynamic") -> None:
        _check_strategy(strategy)
        self._defaults: Dict[str, Any] = dict(device=device, max_batch_size=max_batch_size,
                                              max_queue_delay=max_queue_delay,
                                              strategy=strategy)
        self._models: Dict[str, _Model] = {}
        self._lock = threading.Lock()
        self._closed = False

    def register_model(self, name: str, model: Any, *, device: Optional[str] = None,
                       priority: int = 0, priority_levels: int = 1, workers: int = 1,
                       max_batch_size: Optional[int] = None,
                       max_queue_delay: Union[None, int, float, str] = None,
                       max_queue_size: int = 0,
                       queue_timeout: Union[None, int, float, str] = None,
                       strategy: Optional[str] = None) -> None:
        """Serves model (an nn.Module, or a function from a list of requests to their answers)
        under name: `workers` worker threads, `priority_levels` levels, `priority` the level of
        a request submitted without one (0: the lowest); device, max_batch_size,
        max_queue_delay and strategy default to the processor's. ValueError if name is taken."""
        d = self._defaults
        device = d["device"] if device is None else device
        opts: Dict[str, Any] = dict(
            device=device, workers=workers, priority_levels=priority_levels, priority=priority,
            max_batch_size=d["max_batch_size"] if max_batch_size is None else max_batch_size,
            max_queue_delay=d["max_queue_delay"] if max_queue_delay is None else max_queue_delay,
            strategy=d["strategy"] if strategy is None else strategy)
        _check_strategy(opts["strategy"])
        preferred = (opts["max_batch_size"],) if opts["strategy"] == "fixed_size" else ()
        memory = None
        if opts["strategy"] == "adaptive" and device.startswith("cuda"):
            from .torch import cuda_memory  # imports torch, which a CUDA model has already
            ordinal = int(device.split(":")[1]) if ":" in device else None
            memory = cuda_memory(ordinal)
        opts.update(preferred_sizes=preferred, memory_bound=memory is not None)
        fn = _module_fn(model, device) if _is_module(model) else model
        m = _Model(name, fn, device, workers, opts)
        with self._lock:
            if self._closed:
                raise RuntimeError("the BatchProcessor is closed")
            if name in self._models:
                raise ValueError(f"a model named {name!r} is registered already")
            m.batcher = Batcher(m.run, max_batch_size=opts["max_batch_size"],
                                max_queue_delay=opts["max_queue_delay"],
                                preferred_sizes=preferred, priority_levels=priority_levels,
                                default_priority=priority, max_queue_size=max_queue_size,
                                queue_timeout=queue_timeout, workers=workers, memory=memory)
            self._models[name] = m

    def _model(self, name: str) -> _Model:
        with self._lock:
            m = self._models.get(name)
        if m is None:
            raise KeyError(f"no model named {name!r}")
        return m

    def options(self, name: str) -> Dict[str, Any]:
        """What model name was registered with: device, workers, priority_levels, priority,
        max_batch_size, max_queue_delay, strategy, preferred_sizes and memory_bound (whether
        the batch is bounded by measured memory)."""
        return dict(self._model(name).options)

    def models(self) -> List[str]:
        with self._lock:
            return list(self._models)

    def submit(self, name: str, item: Any, *, priority: int = 0,
               timeout: Union[None, int, float, str] = None) -> "Future[Any]":
        """Queues item for model name; a Future of its answer. Raises as Batcher.submit does
        (gpum.Busy when the queue is full, gpum.GpumError once closed), KeyError for a name
        never registered."""
        m = self._model(name)
        assert m.batcher is not None
        fut = m.batcher.submit(item, priority=priority, timeout=timeout)
        with m.lock:
            m.requests += 1
        return fut

    async def process_async(self, item: Any, model_name: str, *, priority: int = 0) -> Any:
        """The answer to item, awaited from asyncio (seed 003's name for it)."""
        import asyncio
        return await asyncio.wrap_future(self.submit(model_name, item, priority=priority))

    def stream(self, name: str, items: Iterable[Any], *, window: int = 64,
               priority: int = 0) -> Iterator[Any]:
        """The answers to items, in their order, at most `window` requests in flight. An
        answer that failed raises its exception at its place; requests still in flight when
        the iterator is closed or fails are cancelled (those already running are dropped)."""
        if window < 1:
            raise ValueError("window must be at least 1")
        pending: Deque["Future[Any]"] = collections.deque()
        it = iter(items)
        try:
            more = True
            while more or pending:
                while more and len(pending) < window:
                    try:
                        x = next(it)
                    except StopIteration:
                        more = False
                        break
                    pending.append(self.submit(name, x, priority=priority))
                if pending:
                    # The oldest first: a later answer that came early waits in its Future.
                    yield pending.popleft().result()
        finally:
            for f in pending:
                f.cancel()

    def stats(self, name: str) -> ModelStats:
        m = self._model(name)
        assert m.batcher is not None
        b = m.batcher.stats()
        with m.lock:
            return ModelStats(name, m.device, m.workers, m.requests, m.items, m.batches,
                              m.errors, m.items / m.batches if m.batches else 0.0,
                              b.e2e_p50_us, b.e2e_p95_us, b.e2e_p99_us, b.throughput, b.queued)

    def unregister_model(self, name: str, *, drain: bool = True) -> None:
        """Stops serving name: its queued requests answered (drain) or failed with
        gpum.Interrupted; its workers stopped."""
        with self._lock:
            m = self._models.pop(name, None)
        if m is None:
            raise KeyError(f"no model named {name!r}")
        self._stop(m, drain)

    @staticmethod
    def _stop(m: _Model, drain: bool) -> None:
        assert m.batcher is not None
        if not drain:
            m.batcher.shutdown(drain=False)
        m.batcher.close()

    def close(self, drain: bool = True) -> None:
        """Stops every model (see unregister_model); later submits raise KeyError."""
        with self._lock:
            self._closed = True
            models, self._models = list(self._models.values()), {}
        for m in models:
            self._stop(m, drain)

    def __enter__(self) -> "BatchProcessor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
