# SPDX-License-Identifier: Apache-2.0
"""PyTorch integration: adaptive batches over a Dataset, the reservation as PyTorch's memory
fraction, gpum's pool as PyTorch's CUDA allocator, and the memory of a live model measured in one
step (``estimate``).

Importing this module imports torch (it is the only part of the package that needs it).
"""
from __future__ import annotations

import copy
import ctypes as c
import os
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import torch

# The library and its path from the module itself: the package's own `_lib` attribute is the
# loaded library (gpum/__init__.py), which `from . import _lib` would give instead.
from ._lib import lib, path as _clib_path
from .errors import check
from .pool import PoolStats, stats_of
from .adaptive import Adaptive, BatchInfo, BatchStats
from .estimate import Estimate
from .pool import _size

__all__ = ["AdaptiveBatchLoader", "apply_reservation", "use_gpum_allocator", "cuda_memory",
           "pool_stats", "torch_library", "estimate", "MeasuredEstimate",
           "DistributedSettings", "distributed_settings", "init_distributed", "Parallel",
           "data_parallel"]

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


# --- Distributed and data parallel ------------------------------------------------------------


@dataclass(frozen=True)
class DistributedSettings:
    """What torch.distributed's env:// initialisation reads, as this process's environment has
    it (gpum.reserve and ``gpum run`` set WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR and
    MASTER_PORT for their GPUs; RANK and LOCAL_RANK are the launcher's, torchrun's). rank and
    local_rank are None when no launcher set them; backend is the one to use: "nccl" when torch
    has CUDA, else "gloo", unless asked."""
    world_size: int
    rank: Optional[int]
    local_rank: Optional[int]
    local_world_size: int
    master_addr: Optional[str]
    master_port: Optional[int]
    backend: str

    @property
    def complete(self) -> bool:
        """Whether env:// can start the process group from these (rank, address and port)."""
        return (self.rank is not None and self.master_addr is not None
                and self.master_port is not None)


def _env_int(name: str) -> Optional[int]:
    v = os.environ.get(name)
    if v is None or v == "":
        return None
    try:
        return int(v)
    except ValueError:
        raise ValueError(f"{name}={v!r} is not an integer") from None


def distributed_settings(backend: Optional[str] = None) -> DistributedSettings:
    """This process's DistributedSettings, read from the environment now. Raises ValueError
    for a variable that is not a number, or a rank outside the world."""
    world = _env_int("WORLD_SIZE") or 1
    rank, local = _env_int("RANK"), _env_int("LOCAL_RANK")
    if rank is not None and not 0 <= rank < world:
        raise ValueError(f"RANK={rank} is outside WORLD_SIZE={world}")
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    return DistributedSettings(world, rank, local, _env_int("LOCAL_WORLD_SIZE") or world,
                               os.environ.get("MASTER_ADDR") or None, _env_int("MASTER_PORT"),
                               backend)


def init_distributed(backend: Optional[str] = None) -> DistributedSettings:
    """Starts torch.distributed's default process group from the environment (env://) unless
    it is started already; returns the settings. A single process without a launcher (no RANK)
    is rank 0 of a world of 1. Raises RuntimeError when the environment names a world of more
    than one process but not this one's rank (start it with torchrun or ``gpum run``)."""
    import torch.distributed as dist
    st = distributed_settings(backend)
    if dist.is_initialized():
        return st
    if st.rank is None:
        if st.world_size > 1:
            raise RuntimeError(f"WORLD_SIZE={st.world_size} but RANK is not set: start one "
                               "process per GPU with torchrun (or set RANK and LOCAL_RANK)")
        st = DistributedSettings(1, 0, 0, 1, st.master_addr or "127.0.0.1",
                                 st.master_port or _free_port(), st.backend)
    if st.rank is None or not st.complete:
        raise RuntimeError("MASTER_ADDR and MASTER_PORT must be set for a world of "
                           f"{st.world_size} (gpum.reserve and gpum run set them)")
    dist.init_process_group(st.backend, init_method=f"tcp://{st.master_addr}:{st.master_port}",
                            world_size=st.world_size, rank=st.rank)
    return st


def _free_port() -> int:
    import socket
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        return int(sk.getsockname()[1])


@dataclass(frozen=True)
class Parallel:
    """What data_parallel did: the model to use, how it is wrapped ("ddp", "dp" or "none") and,
    for "none", why not."""
    model: Any
    kind: str
    reason: Optional[str] = None


def data_parallel(model: Any, strategy: str = "auto", *, device_ids: Optional[Sequence[int]] = None,
                  backend: Optional[str] = None) -> Parallel:
    """model wrapped for data parallel training on the process's GPUs.

    strategy "distributed": DistributedDataParallel in the default process group (started by
    init_distributed when it is not), on the GPU LOCAL_RANK names (its position among
    device_ids, torch's ordinals: under a reservation, the granted GPUs are 0..n-1), or on the
    CPU without CUDA (gloo). "data_parallel": nn.DataParallel over device_ids (default: every GPU
    torch sees) when there are two or more. "none": unchanged. "auto": "distributed" when a
    process group is started or WORLD_SIZE is above 1, else "data_parallel". The model is moved
    to the device it runs on."""
    import torch.distributed as dist
    if strategy == "auto":
        strategy = ("distributed" if (dist.is_available() and dist.is_initialized())
                    or distributed_settings().world_size > 1 else "data_parallel")
    if strategy == "none":
        return Parallel(model, "none", "multi-GPU strategy 'none'")
    cuda = torch.cuda.is_available()
    ids = list(device_ids) if device_ids is not None else \
        list(range(torch.cuda.device_count() if cuda else 0))
    if strategy == "distributed":
        if not dist.is_available():
            return Parallel(model, "none", "this torch has no torch.distributed")
        st = init_distributed(backend)
        if cuda and ids:
            local = st.local_rank if st.local_rank is not None else 0
            if not 0 <= local < len(ids):
                raise ValueError(f"LOCAL_RANK={local} but there are {len(ids)} GPUs {ids}")
            dev = ids[local]
            return Parallel(torch.nn.parallel.DistributedDataParallel(
                model.to(f"cuda:{dev}"), device_ids=[dev]), "ddp")
        return Parallel(torch.nn.parallel.DistributedDataParallel(model.to("cpu")), "ddp")
    if strategy != "data_parallel":
        raise ValueError("strategy must be auto, distributed, data_parallel or none, "
                         f"not {strategy!r}")
    if not cuda:
        return Parallel(model, "none", "torch has no CUDA device (a CPU build, or none visible)")
    if len(ids) < 2:
        return Parallel(model, "none", f"one GPU ({ids}): nothing to split the batch over")
    return Parallel(torch.nn.DataParallel(model.to(f"cuda:{ids[0]}"), device_ids=ids), "dp")


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


# --- Estimate a live model --------------------------------------------------------------------
#
# The breakdown of `gpum estimate` (gpum.Estimate's fields), measured on one step of the module
# instead of computed from a shape: a copy of the module runs one forward (and, in training, a
# backward and an optimizer step) on the device its parameters are on, the CPU or the meta
# device, and what it holds is counted. Bytes follow docs/estimate.md's accounting per precision
# (mixed: half weights and gradients, fp32 optimizer state plus a 4-byte master copy), so the
# figures line up with the formula estimator's field by field.

_HALF = {"fp16": torch.float16, "bf16": torch.bfloat16}
_PRECISIONS = ("fp32", "fp16", "bf16", "mixed-fp16", "mixed-bf16")
# Optimizer state elements per parameter where it is not stepped (the meta device).
_SLOTS = {"adam": 2, "adamw": 2, "momentum": 1, "sgd": 0}


@dataclass(frozen=True)
class MeasuredEstimate(Estimate):
    """gpum.Estimate's breakdown measured on a live model. workspace holds the half copies of the
    weights that autocast makes and autograd keeps (mixed training); kv_cache, context and
    allocator are 0 (a CPU step has none of them; the formula estimator's figures or
    estimate.margin cover them); notes say how each part was measured and what stood in."""

    batch: int = 0
    device: str = "cpu"
    notes: Tuple[str, ...] = ()

    def max_batch(self, budget: Any) -> int:
        """The largest batch whose total fits budget (bytes, or a size such as "24GiB"), with
        activations linear in the batch."""
        fixed = self.total - self.activations
        per = self.activations / max(self.batch, 1)
        room = _size(budget) - fixed
        return 0 if room <= 0 or per <= 0 else int(room // per)


def _tensors(x: Any) -> Iterator[Any]:
    """The tensors in x: a tensor, or lists, tuples and dicts of them (nested)."""
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _tensors(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from _tensors(v)


def _cast(x: Any, dtype: Any) -> Any:
    """x with its floating-point tensors cast to dtype (integer inputs, token ids, kept)."""
    if isinstance(x, torch.Tensor):
        return x.to(dtype) if x.is_floating_point() else x
    if isinstance(x, (list, tuple)):
        return type(x)(_cast(v, dtype) for v in x)
    if isinstance(x, dict):
        return {k: _cast(v, dtype) for k, v in x.items()}
    return x


def _storage(t: Any) -> Tuple[Any, int]:
    """(a key naming t's storage, its bytes). On the meta device every data pointer is 0: the
    storage's own handle names it there."""
    st = t.storage()
    if t.device.type == "meta":
        inner = getattr(st, "_storage", st)   # a TypedStorage wraps the untyped one
        return ("meta", getattr(inner, "_cdata", id(inner))), st.nbytes()
    return (t.device.type, st.data_ptr()), st.nbytes()


def _call(model: Any, x: Any) -> Any:
    if isinstance(x, dict):
        return model(**x)
    if isinstance(x, (list, tuple)):
        return model(*x)
    return model(x)


def _is_weight_copy(t: Any) -> bool:
    """Whether t is a cast of a parameter, or a view of one (autocast's half copy of a weight,
    saved as its transpose by a linear map): up a chain of single-input functions, a copy whose
    input accumulates into a leaf."""
    fn = t.grad_fn
    for _ in range(4):
        nexts = [f for f, _ in fn.next_functions if f is not None] if fn is not None else []
        if len(nexts) != 1:
            return False
        if type(fn).__name__.startswith("ToCopyBackward"):
            return type(nexts[0]).__name__ == "AccumulateGrad"
        fn = nexts[0]
    return False


def _saved_bytes(model: Any, x: Any, params: set,
                 autocast: Optional[Any]) -> Tuple[int, int, Any]:
    """(bytes of the distinct storages autograd saves for backward in one forward pass, the
    parameters' and their casts excepted; bytes of the casts of parameters it saves, the half
    copies of the weights under autocast; the output)."""
    seen: Dict[Any, int] = {}
    copies: Dict[Any, int] = {}

    def pack(t: Any) -> Any:
        key, n = _storage(t)
        if key not in params and key not in seen and key not in copies:
            (copies if _is_weight_copy(t) else seen)[key] = n
        return t

    # enable_grad: a caller's no_grad would leave autograd nothing to save.
    with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        if autocast is not None:
            with torch.autocast(_device(model), dtype=autocast):
                out = _call(model, x)
        else:
            out = _call(model, x)
    return sum(seen.values()), sum(copies.values()), out


def _device(model: Any) -> str:
    p = next(iter(model.parameters()), None)
    return "cpu" if p is None else str(p.device.type)


def _live_peak(model: Any, x: Any, params: set, autocast: Optional[Any]) -> int:
    """The peak bytes of live tensors in a forward under no_grad: the inputs, then every module's
    outputs (forward hooks) until they are freed, distinct storages, parameters excepted."""
    live: Dict[Any, int] = {}
    state = {"cur": 0, "peak": 0}

    def drop(key: Any) -> None:
        state["cur"] -= live.pop(key, 0)

    def track(value: Any) -> None:
        for t in _tensors(value):
            key, n = _storage(t)
            if key in params or key in live:
                continue
            live[key] = n
            state["cur"] += n
            state["peak"] = max(state["peak"], state["cur"])
            weakref.finalize(t, drop, key)

    def hook(_m: Any, _inp: Any, out: Any) -> None:
        track(out)

    handles = [m.register_forward_hook(hook) for m in model.modules()]
    try:
        track(x)
        with torch.no_grad():
            if autocast is not None:
                with torch.autocast(_device(model), dtype=autocast):
                    out = _call(model, x)
            else:
                out = _call(model, x)
        del out
    finally:
        for h in handles:
            h.remove()
    return state["peak"]


def _optimizer(opt: Any, params: List[Any]) -> Tuple[Any, str]:
    """(a fresh optimizer over params, its name) from a name or an optimizer instance (its class
    and defaults; the instance itself is not touched)."""
    if isinstance(opt, torch.optim.Optimizer):
        name = type(opt).__name__.lower()
        if name == "sgd":
            name = "momentum" if opt.defaults.get("momentum", 0) else "sgd"
        return type(opt)(params, **opt.defaults), name
    if opt in ("adam", "adamw"):
        cls = torch.optim.Adam if opt == "adam" else torch.optim.AdamW
        return cls(params, lr=1e-3), str(opt)
    if opt in ("sgd", "momentum"):
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9 if opt == "momentum" else 0), opt
    raise ValueError(f"optimizer {opt!r}: adam, adamw, sgd, momentum, None or an optimizer")


def estimate(model: Any, example_input: Any, mode: str = "training",
             optimizer: Any = "adam", precision: str = "fp32",
             batch: Optional[int] = None) -> MeasuredEstimate:
    """Measures one step of model (a torch.nn.Module) on example_input (a tensor, a tuple of
    positional inputs or a dict of keyword inputs; its leading dimension is the batch) and
    returns gpum.estimate's breakdown in bytes. mode is "training" (forward, backward on the sum
    of the outputs, one optimizer step) or "inference" (a forward under no_grad); optimizer is
    "adam", "adamw", "sgd", "momentum", an optimizer (its class and defaults) or None; precision
    is fp32, fp16, bf16, mixed-fp16 or mixed-bf16. batch scales the activations linearly from the
    example's batch. The model runs on a deep copy, on the device its parameters are on (the CPU,
    or the meta device for a model built there: nothing computed, the optimizer state from its
    known slots). The caller's model and optimizer are left as they were."""
    if mode not in ("training", "inference"):
        raise ValueError(f"mode {mode!r}: training or inference")
    if precision not in _PRECISIONS:
        raise ValueError(f"precision {precision!r}: one of {', '.join(_PRECISIONS)}")
    train = mode == "training"
    notes: List[str] = []
    dev = _device(model)
    mixed = precision.startswith("mixed-")
    half = _HALF.get(precision.replace("mixed-", ""))
    run_dtype = half
    if half is torch.float16 and dev != "cuda":
        # PyTorch's CPU has no fp16 matmul ("addmm_impl_cpu_" not implemented for 'Half'):
        # bf16 has the same 2-byte element, and keeps the same tensors.
        run_dtype = torch.bfloat16
        notes.append(f"fp16 measured as bf16 on {dev} (same element size)")
    example = list(_tensors(example_input))
    example_batch = int(example[0].shape[0]) if example and example[0].dim() > 0 else 1
    batch = example_batch if batch is None else int(batch)

    # How to run the forward, in order of preference: mixed under autocast with fp32
    # parameters, else with the model cast to the half type; a precision the device has no
    # kernels for (or autocast breaks, as a fused fast path can) in fp32, the activations halved.
    plans: List[Tuple[str, Any]] = [("fp32", None)]
    if run_dtype is not None:
        plans = [("cast", run_dtype), ("fp32, activations halved", None)]
        if mixed and dev != "meta":
            plans.insert(0, ("autocast", run_dtype))
    for i, (how, dtype) in enumerate(plans):
        m = copy.deepcopy(model)
        m.train(train)
        if how == "cast":
            m = m.to(dtype)
        for p in m.parameters():
            p.requires_grad_(train)
        x = _cast(example_input, dtype) if how == "cast" else example_input
        autocast = dtype if how == "autocast" else None
        keys = {_storage(p)[0] for p in m.parameters()}
        try:
            if train:
                activations, workspace, out = _saved_bytes(m, x, keys, autocast)
            else:
                workspace = 0
                activations, out = _live_peak(m, x, keys, autocast), None
        except RuntimeError as err:
            if i + 1 == len(plans):
                raise
            notes.append(f"{how} failed on {dev} ({str(err).splitlines()[0]})")
            continue
        if i > 0 or (mixed and how == "cast"):
            notes.append(f"{precision} measured as {how}")
        if how.startswith("fp32") and run_dtype is not None:
            activations //= 2
        break

    # Weights: the distinct parameter storages at the precision's element size (mixed: half).
    params: Dict[Any, Any] = {}
    for p in m.parameters():
        params.setdefault(_storage(p)[0], p)
    nparams = sum(p.numel() for p in params.values())
    weights = nparams * (2 if half is not None else 4)
    notes.append("activations: " + ("bytes autograd saves for backward in one forward "
                                    "(saved_tensors_hooks, distinct storages, parameters excepted)"
                                    if train else
                                    "peak of live module outputs in a forward under no_grad "
                                    "(forward hooks, distinct storages)"))
    activations = int(activations * batch / example_batch)
    if batch != example_batch:
        notes.append(f"activations scaled linearly from the example's batch {example_batch}")

    gradients = opt_bytes = trainable = 0
    if train:
        trainable = nparams
        with torch.enable_grad():
            loss = sum(t.float().sum() for t in _tensors(out) if t.is_floating_point())
            if dev != "meta" and isinstance(loss, torch.Tensor):
                loss.backward()
        # Gradients: one per trainable parameter, as large as it (mixed: the half copy).
        gradients = weights
        if optimizer is not None:
            plist = list(params.values())
            # State elements as measured, at the precision's state element: the parameters'
            # dtype, fp32 in mixed precision (whatever the run above stood in with).
            esize = 4 if mixed or half is None else 2
            if dev == "meta":
                name = _optimizer(optimizer, plist)[1]   # made, never stepped
                if name not in _SLOTS:
                    raise ValueError(f"optimizer {name!r} has no known slots on meta")
                opt_bytes = _SLOTS[name] * nparams * esize
                notes.append(f"optimizer: {name}'s {_SLOTS[name]} slots per parameter (meta)")
            else:
                opt, name = _optimizer(optimizer, plist)
                opt.step()
                for st in opt.state.values():
                    for v in st.values():
                        # Step counters (0-dim tensors) are bookkeeping, not per-parameter state.
                        if isinstance(v, torch.Tensor) and v.dim() > 0:
                            opt_bytes += v.numel() * esize
                notes.append(f"optimizer: {name}'s state after one step")
            if mixed:
                opt_bytes += 4 * nparams
                notes.append("mixed: optimizer includes the fp32 master copy (4 bytes/param)")
    if workspace:
        notes.append("workspace: the half copies of the weights autocast makes and autograd "
                     "keeps for backward")
    notes.append("kv_cache, context, allocator: not measured (0)")
    total = weights + gradients + opt_bytes + activations + workspace
    return MeasuredEstimate(params=nparams, trainable_params=trainable, weights=weights,
                            gradients=gradients, optimizer=opt_bytes, activations=activations,
                            kv_cache=0, workspace=workspace, context=0, allocator=0, total=total,
                            batch=batch, device=dev, notes=tuple(notes))
