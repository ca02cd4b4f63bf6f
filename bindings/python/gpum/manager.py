# SPDX-License-Identifier: Apache-2.0
"""One object that opens gpum for a process, configured by one dataclass.

    cfg = gpum.GPUConfig.preset("training")                  # or GPUConfig(...), a builder, YAML
    with gpum.GPUManager(cfg) as m:
        m.on_alert(print)
        print(m.status()["health"])
        with m.device_context() as dev:                      # dev.device: "cuda:0" or "cpu"
            ...
        m.emergency_release()                                # empty_cache, pool trim, demotion

:class:`GPUConfig` is validated on construction: a bad value raises ValueError naming the
field. Presets (``GPUConfig.preset(name)``) give the values of the configurations people start
from (docs/python.md lists them); ``GPUConfig.builder()`` builds one fluently (also by seed
003's builder names); ``GPUConfig.from_yaml`` / ``to_yaml`` read and write the dataclass's
fields as flat YAML keys, and from_yaml also reads seed 003's nested sections (devices,
compute, batching, optimization, memory); an unknown key is refused by name; ``preset: NAME``
starts from a preset.

:class:`GPUManager` opens, in this order: the node's devices (gpum.node, filtered by
``device_ids``), a reservation from gpumd when ``reserve_memory`` is set (gpum.reserve, on the
CPU when it cannot be served and ``fallback_to_cpu``; with ``device_ids`` None the manager's
GPUs are then the grant's, and with them gpumd still picks the GPUs, as gpum.reserve cannot
name them yet; its pressure events call :meth:`GPUManager.emergency_release` when
``release_on_pressure``, then the ``on_pressure`` callbacks), and the monitor (gpum.Monitor)
when ``monitoring`` is on, with the default alert rules plus the configuration's thresholds
and the ``gc_threshold`` rule, whose alerts call the emergency release; ``on_alert``
callbacks receive its alerts. Pools, tiered caches and batch processors made through the
manager are trimmed, demoted and closed with it. close() (or the with block's end) undoes
everything, threads included.

The rest of the configuration is applied where it acts: torch's backend switches in
:meth:`GPUManager.device_context`, optimisation in :meth:`GPUManager.optimize` (gpum.optimize),
the multi-GPU strategy in :meth:`GPUManager.parallelize` (gpum.torch.data_parallel), batching
in :meth:`GPUManager.batch_processor` (gpum.BatchProcessor), profiling in
:meth:`GPUManager.profile`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import enum
import gc
import importlib
import os
import sys
import threading
from dataclasses import dataclass, field
from typing import (Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union,
                    cast)

from .monitor import Alert, Monitor
from .node import Gpu, devices as _node_devices
from .pool import Pool, _size
from .reserve import Pressure, Reservation
from .serving import BatchProcessor
from .tiercache import TierCache

__all__ = ["GPUConfig", "GPUConfigBuilder", "GPUManager", "DeviceChoice", "ReleaseReport",
           "PRESETS", "OPTIMIZATION_LEVELS", "PRECISIONS", "POOL_STRATEGIES",
           "BATCHING_STRATEGIES", "MEMORY_GROWTH", "MULTI_GPU_STRATEGIES"]

OPTIMIZATION_LEVELS = ("none", "basic", "aggressive", "experimental")
PRECISIONS = ("fp32", "fp16", "bf16", "int8", "mixed")
POOL_STRATEGIES = ("balanced", "greedy", "consolidated", "fragmentation_aware")
BATCHING_STRATEGIES = ("adaptive", "fixed_size", "dynamic")
DISTRIBUTED_BACKENDS = ("nccl", "gloo", "mpi")
MEMORY_GROWTH = ("grow_as_needed", "preallocate")
MULTI_GPU_STRATEGIES = ("none", "data_parallel", "distributed")


def _key(v: Any) -> str:
    """A choice as written in Python, YAML or seed 003's enums (PrecisionMode.MIXED): lower
    case, '-' as '_'."""
    if isinstance(v, enum.Enum):
        v = v.value if isinstance(v.value, str) else v.name
    return str(v).lower().replace("-", "_")


def _fail(name: str, why: str, value: Any) -> None:
    raise ValueError(f"GPUConfig.{name}: {why} (got {value!r})")


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


@dataclass
class GPUConfig:
    """How a :class:`GPUManager` opens gpum; every field is checked on construction."""

    # --- devices -----------------------------------------------------------------------------
    device_ids: Optional[List[int]] = None      # gpum's indexes; None: every GPU of the node
    memory_fraction: Optional[float] = None     # share of each GPU torch may use, (0, 1]
    # --- reservation (gpum.reserve); None: no reservation ---------------------------------------
    reserve_memory: Union[None, int, str] = None  # bytes per GPU, or "20GiB"
    reserve_gpus: Optional[int] = None          # None: len(device_ids), else 1
    reserve_timeout: Optional[float] = None     # seconds to wait for the grant; None: forever
    reserve_set_env: bool = True                # CUDA_VISIBLE_DEVICES etc. for the grant
    release_on_pressure: bool = True            # gpumd's pressure triggers emergency_release()
    fallback_to_cpu: bool = False               # no GPU can serve the reservation: run on CPU
    # --- memory pooling ---------------------------------------------------------------------------
    enable_memory_pooling: bool = True
    pool_strategy: str = "balanced"             # one of POOL_STRATEGIES
    max_memory_cache_ratio: float = 0.8         # cached share a pool keeps after a trim, [0, 1]
    gc_threshold: float = 0.8                   # used share of a GPU that calls for a release
    memory_growth: str = "grow_as_needed"       # one of MEMORY_GROWTH: pools grow, or start full
    pool_size: Union[None, int, str] = None     # bytes a pool may hold (None: no bound)
    # --- monitoring and alerts ---------------------------------------------------------------
    monitoring: bool = True
    monitor_interval: float = 1.0               # seconds between samples
    alert_defaults: bool = True                 # libgpum's default alert rules
    alert_memory_pct: Optional[float] = 90.0    # WARNING above this used %; None: no such rule
    alert_temperature_c: Optional[float] = None  # WARNING above this; None: the default rules'
    # --- optimisation (names; applied by the optimisation module) ----------------------------
    optimization_level: str = "basic"           # one of OPTIMIZATION_LEVELS
    precision: str = "mixed"                    # one of PRECISIONS
    enable_amp: bool = True
    enable_compile: bool = True
    enable_channels_last: bool = True
    enable_tf32: bool = False
    enable_cudnn: bool = True
    cudnn_benchmark: bool = False
    optimize_for_inference: bool = True         # optimize()'s mode: inference, else training
    gradient_checkpointing: bool = False
    gradient_accumulation_steps: int = 1
    enable_profiling: bool = False
    # --- batching (serving) ---------------------------------------------------------------------
    max_batch_size: int = 32
    max_wait_ms: float = 10.0
    batching_strategy: str = "adaptive"         # one of BATCHING_STRATEGIES
    # --- distributed ------------------------------------------------------------------------------
    enable_distributed: bool = False            # the same as multi_gpu_strategy "distributed"
    distributed_backend: str = "nccl"           # one of DISTRIBUTED_BACKENDS
    multi_gpu_strategy: str = "none"            # one of MULTI_GPU_STRATEGIES

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            if isinstance(f.default, bool) and not isinstance(getattr(self, f.name), bool):
                _fail(f.name, "must be true or false", getattr(self, f.name))
        d = self.device_ids
        if d is not None:
            if not isinstance(d, (list, tuple)) or not d:
                _fail("device_ids", "must be a non-empty list of GPU indexes or None", d)
            if any(not _is_int(i) or i < 0 for i in d):
                _fail("device_ids", "indexes must be integers >= 0", d)
            if len(set(d)) != len(d):
                _fail("device_ids", "an index is listed twice", d)
            self.device_ids = list(d)
        mf = self.memory_fraction
        if mf is not None and (not _is_num(mf) or not 0 < mf <= 1):
            _fail("memory_fraction", "must be in (0, 1] or None", mf)
        for name in ("reserve_memory", "pool_size"):
            v = getattr(self, name)
            if v is None:
                continue
            if isinstance(v, str):
                if not v.strip():
                    _fail(name, "must be a size such as '20GiB'", v)
            elif not _is_int(v) or v <= 0:
                _fail(name, "must be a positive number of bytes or a size string", v)
        if self.reserve_gpus is not None and (not _is_int(self.reserve_gpus)
                                              or self.reserve_gpus < 1):
            _fail("reserve_gpus", "must be an integer >= 1 or None", self.reserve_gpus)
        if self.reserve_timeout is not None and (not _is_num(self.reserve_timeout)
                                                 or self.reserve_timeout < 0):
            _fail("reserve_timeout", "must be seconds >= 0 or None", self.reserve_timeout)
        for name in ("max_memory_cache_ratio", "gc_threshold"):
            v = getattr(self, name)
            if not _is_num(v) or not 0 <= v <= 1:
                _fail(name, "must be in [0, 1]", v)
        if not _is_num(self.monitor_interval) or not 0.01 <= self.monitor_interval <= 3600:
            _fail("monitor_interval", "must be seconds in [0.01, 3600]", self.monitor_interval)
        amp = self.alert_memory_pct
        if amp is not None and (not _is_num(amp) or not 0 < amp <= 100):
            _fail("alert_memory_pct", "must be a percentage in (0, 100] or None", amp)
        at = self.alert_temperature_c
        if at is not None and (not _is_num(at) or not 0 < at < 150):
            _fail("alert_temperature_c", "must be degrees Celsius in (0, 150) or None", at)
        for name, allowed in (("pool_strategy", POOL_STRATEGIES),
                              ("optimization_level", OPTIMIZATION_LEVELS),
                              ("precision", PRECISIONS),
                              ("batching_strategy", BATCHING_STRATEGIES),
                              ("distributed_backend", DISTRIBUTED_BACKENDS),
                              ("memory_growth", MEMORY_GROWTH),
                              ("multi_gpu_strategy", MULTI_GPU_STRATEGIES)):
            v = getattr(self, name)
            if _key(v) not in allowed:
                _fail(name, "must be one of " + ", ".join(allowed), v)
            setattr(self, name, _key(v))
        if self.precision == "mixed" and not self.enable_amp:
            _fail("enable_amp", "precision 'mixed' is automatic mixed precision, so it must be "
                  "true (or choose fp32, fp16, bf16 or int8)", self.enable_amp)
        # enable_distributed is seed 000's name for the strategy "distributed": one value.
        if self.enable_distributed and self.multi_gpu_strategy == "none":
            self.multi_gpu_strategy = "distributed"
        elif self.multi_gpu_strategy == "distributed":
            self.enable_distributed = True
        elif self.enable_distributed:
            _fail("enable_distributed", "contradicts multi_gpu_strategy "
                  f"{self.multi_gpu_strategy!r}", self.enable_distributed)
        if self.memory_growth == "preallocate" and self.pool_size is None:
            _fail("memory_growth", "'preallocate' needs pool_size (the bytes to take up front)",
                  self.memory_growth)
        if not _is_int(self.gradient_accumulation_steps) or self.gradient_accumulation_steps < 1:
            _fail("gradient_accumulation_steps", "must be an integer >= 1",
                  self.gradient_accumulation_steps)
        if not _is_int(self.max_batch_size) or self.max_batch_size < 1:
            _fail("max_batch_size", "must be an integer >= 1", self.max_batch_size)
        if not _is_num(self.max_wait_ms) or self.max_wait_ms < 0:
            _fail("max_wait_ms", "must be milliseconds >= 0", self.max_wait_ms)

    # --- presets, builder, YAML -------------------------------------------------------------------
    @classmethod
    def preset(cls, name: str, **overrides: Any) -> "GPUConfig":
        """The named preset ("default", "training", "inference", "low-latency"), with
        overrides of any field."""
        key = name.lower().replace("_", "-")
        if key not in PRESETS:
            raise ValueError(f"GPUConfig.preset: no preset {name!r} (there are "
                             + ", ".join(PRESETS) + ")")
        return cls(**{**PRESETS[key], **overrides})

    @classmethod
    def builder(cls, preset: Optional[str] = None) -> "GPUConfigBuilder":
        """A fluent builder, from the defaults or from a preset."""
        return GPUConfigBuilder(preset)

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        """The fields as flat YAML keys, every one of them (from_yaml reads it back equal)."""
        return cast(str, _yaml().safe_dump(self.to_dict(), sort_keys=False))

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "GPUConfig":
        """A configuration from a mapping of field names (``preset`` names a base) and/or seed
        003's sections (devices, compute, batching, optimization, memory); an unknown key
        raises ValueError naming it."""
        if not isinstance(data, dict):
            raise ValueError(f"GPUConfig: a configuration is a mapping, not {type(data).__name__}")
        data = _flatten_sections(data)
        base = data.pop("preset", None)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = [k for k in data if k not in known]
        if unknown:
            raise ValueError("GPUConfig: unknown key" + ("s " if len(unknown) > 1 else " ")
                             + ", ".join(repr(k) for k in unknown))
        if base is not None:
            return cls.preset(str(base), **data)
        return cls(**data)

    @classmethod
    def from_yaml(cls, source: Union[str, "os.PathLike[str]"]) -> "GPUConfig":
        """From a YAML file's path (a path object, an existing file, or a string without a
        colon or a newline) or else from YAML text."""
        s = os.fspath(source)
        text = s
        if "\n" not in s and (isinstance(source, os.PathLike) or os.path.exists(s)
                              or ":" not in s):
            with open(s, encoding="utf-8") as f:
                text = f.read()
        data = _yaml().safe_load(text)
        return cls.from_dict({} if data is None else data)


# Seed 003's nested YAML: section -> {its key: the field it sets}. Keys named as the field are
# accepted too (every field of the section's kind).
_SECTIONS: Dict[str, Dict[str, str]] = {
    "compute": {"precision": "precision", "enable_amp": "enable_amp",
                "enable_tf32": "enable_tf32", "enable_cudnn": "enable_cudnn",
                "cudnn_benchmark": "cudnn_benchmark"},
    "batching": {"max_batch_size": "max_batch_size", "max_wait_time_ms": "max_wait_ms",
                 "max_wait_ms": "max_wait_ms", "strategy": "batching_strategy"},
    "optimization": {"optimize_for_inference": "optimize_for_inference",
                     "enable_jit": "enable_compile", "enable_compile": "enable_compile",
                     "level": "optimization_level", "channels_last": "enable_channels_last",
                     "gradient_checkpointing": "gradient_checkpointing",
                     "gradient_accumulation_steps": "gradient_accumulation_steps",
                     "enable_profiling": "enable_profiling"},
    "memory": {"growth_policy": "memory_growth", "pool_size_mb": "pool_size",
               "pool_size": "pool_size", "gc_threshold": "gc_threshold",
               "enable_pooling": "enable_memory_pooling", "pool_strategy": "pool_strategy",
               "max_memory_cache_ratio": "max_memory_cache_ratio"},
}
_DEVICE_KEYS = ("device_id", "memory_fraction", "priority")


def _flatten_sections(data: Dict[str, Any]) -> Dict[str, Any]:
    """data with seed 003's sections turned into fields (see _SECTIONS). ``devices`` is a list
    of {device_id, memory_fraction, priority}: device_ids in priority order (lower first, then
    as listed), and one memory_fraction, which every device that gives one must share (torch
    applies one fraction per process here). A field set twice is refused."""
    out: Dict[str, Any] = {}

    def put(field_name: str, value: Any, where: str) -> None:
        if field_name in out:
            raise ValueError(f"GPUConfig: {where} sets {field_name}, which is set already")
        out[field_name] = value

    for k, v in data.items():
        if k in _SECTIONS:
            if not isinstance(v, dict):
                raise ValueError(f"GPUConfig: section {k!r} is a mapping, not "
                                 f"{type(v).__name__}")
            for sk, sv in v.items():
                name = _SECTIONS[k].get(sk)
                if name is None:
                    raise ValueError(f"GPUConfig: unknown key '{k}.{sk}' (the section takes "
                                     + ", ".join(_SECTIONS[k]) + ")")
                if sk == "pool_size_mb":
                    if not _is_num(sv) or sv <= 0:
                        _fail("pool_size", "memory.pool_size_mb must be a positive number", sv)
                    sv = int(sv * (1 << 20))
                put(name, sv, f"{k}.{sk}")
        elif k == "devices":
            for name, value in _devices_section(v).items():
                put(name, value, "devices")
        else:
            put(k, v, k)
    return out


def _devices_section(devs: Any) -> Dict[str, Any]:
    if not isinstance(devs, list) or not devs:
        raise ValueError("GPUConfig: 'devices' is a non-empty list of {device_id: N, ...}")
    rows = []
    fractions = set()
    for i, d in enumerate(devs):
        if not isinstance(d, dict) or "device_id" not in d:
            raise ValueError(f"GPUConfig: devices[{i}] needs a device_id (got {d!r})")
        bad = [k for k in d if k not in _DEVICE_KEYS]
        if bad:
            raise ValueError(f"GPUConfig: unknown key 'devices[{i}].{bad[0]}' (a device takes "
                             + ", ".join(_DEVICE_KEYS) + ")")
        prio = d.get("priority", 0)
        if not _is_int(prio):
            raise ValueError(f"GPUConfig: devices[{i}].priority must be an integer (got {prio!r})")
        rows.append((prio, i, d["device_id"]))
        if "memory_fraction" in d:
            fractions.add(d["memory_fraction"])
    if len(fractions) > 1:
        raise ValueError("GPUConfig: the devices give different memory_fraction values "
                         f"{sorted(fractions)}; gpum applies one to every device")
    out: Dict[str, Any] = {"device_ids": [dev for _, _, dev in sorted(rows)]}
    if fractions:
        out["memory_fraction"] = fractions.pop()
    return out


def _yaml() -> Any:
    try:
        return importlib.import_module("yaml")
    except ImportError:
        raise ImportError("GPUConfig's YAML needs PyYAML (Debian: python3-yaml)") from None


# Each preset is what its source's configuration implies, in this dataclass's fields; a field
# not named keeps the dataclass's default (seed 000's GPUConfig defaults).
PRESETS: Dict[str, Dict[str, Any]] = {
    # get_default_config(): every GPU, monitoring, pooling, basic optimisation, mixed precision.
    "default": {},
    # get_training_config() and the "Deep Learning Training" YAML: mixed precision with AMP,
    # memory growth up to 90% of each GPU, GC at 85%, gradient checkpointing and accumulation
    # over 4 steps, every GPU with distributed training (NCCL).
    "training": dict(precision="mixed", enable_amp=True, memory_fraction=0.9, gc_threshold=0.85,
                     gradient_checkpointing=True, gradient_accumulation_steps=4,
                     enable_distributed=True, distributed_backend="nccl"),
    # get_inference_config(): FP16, dynamic (adaptive) batching with larger batches (128),
    # inference optimisations (aggressive level, compiled), no AMP.
    "inference": dict(precision="fp16", enable_amp=False, optimization_level="aggressive",
                      enable_compile=True, batching_strategy="adaptive", max_batch_size=128,
                      max_wait_ms=5.0, cudnn_benchmark=True),
    # The "High-Frequency Trading" YAML: GPU 0 only, 95% of its memory, FP16 with TF32 and
    # cuDNN benchmark, batches of 1 sent after at most 0.1 ms (fixed size), optimised for
    # inference with the JIT (compile).
    "low-latency": dict(device_ids=[0], memory_fraction=0.95, precision="fp16",
                        enable_amp=False, enable_tf32=True, cudnn_benchmark=True,
                        max_batch_size=1, max_wait_ms=0.1, batching_strategy="fixed_size",
                        optimization_level="aggressive", enable_compile=True),
}


class GPUConfigBuilder:
    """``GPUConfig.builder().devices([0]).memory_fraction(0.8).monitoring(interval=1.0).build()``;
    build() validates, as the constructor does."""

    def __init__(self, preset: Optional[str] = None) -> None:
        self._f: Dict[str, Any] = (GPUConfig.preset(preset).to_dict() if preset else {})

    def set(self, **fields: Any) -> "GPUConfigBuilder":
        known = {f.name for f in dataclasses.fields(GPUConfig)}
        for k in fields:
            if k not in known:
                raise ValueError(f"GPUConfig: unknown field {k!r}")
        self._f.update(fields)
        return self

    def devices(self, ids: Optional[Sequence[int]]) -> "GPUConfigBuilder":
        return self.set(device_ids=None if ids is None else list(ids))

    def memory_fraction(self, fraction: Optional[float]) -> "GPUConfigBuilder":
        return self.set(memory_fraction=fraction)

    def monitoring(self, enabled: bool = True, *,
                   interval: Optional[float] = None) -> "GPUConfigBuilder":
        self.set(monitoring=enabled)
        return self if interval is None else self.set(monitor_interval=interval)

    def alerts(self, *, memory_pct: Optional[float] = None,
               temperature_c: Optional[float] = None,
               defaults: Optional[bool] = None) -> "GPUConfigBuilder":
        if memory_pct is not None:
            self.set(alert_memory_pct=memory_pct)
        if temperature_c is not None:
            self.set(alert_temperature_c=temperature_c)
        return self if defaults is None else self.set(alert_defaults=defaults)

    def pool(self, strategy: str = "balanced", *, enabled: bool = True,
             cache_ratio: Optional[float] = None) -> "GPUConfigBuilder":
        self.set(pool_strategy=strategy, enable_memory_pooling=enabled)
        return self if cache_ratio is None else self.set(max_memory_cache_ratio=cache_ratio)

    def reserve(self, memory: Union[int, str], gpus: Optional[int] = None, *,
                timeout: Optional[float] = None, set_env: bool = True,
                fallback: Optional[str] = None) -> "GPUConfigBuilder":
        """fallback="cpu" is fallback_to_cpu=True (gpum.reserve's spelling)."""
        if fallback not in (None, "cpu"):
            raise ValueError(f"GPUConfigBuilder.reserve: fallback must be 'cpu' or None "
                             f"(got {fallback!r})")
        self.set(reserve_memory=memory, reserve_gpus=gpus, reserve_timeout=timeout,
                 reserve_set_env=set_env)
        return self if fallback is None else self.set(fallback_to_cpu=True)

    def precision(self, name: str) -> "GPUConfigBuilder":
        return self.set(precision=name)

    def optimization(self, level: str) -> "GPUConfigBuilder":
        return self.set(optimization_level=level)

    def batching(self, *, max_batch_size: Optional[int] = None,
                 max_wait_ms: Optional[float] = None,
                 strategy: Optional[str] = None) -> "GPUConfigBuilder":
        for k, v in (("max_batch_size", max_batch_size), ("max_wait_ms", max_wait_ms),
                     ("batching_strategy", strategy)):
            if v is not None:
                self.set(**{k: v})
        return self

    def distributed(self, backend: str = "nccl", enabled: bool = True) -> "GPUConfigBuilder":
        return self.set(enable_distributed=enabled, distributed_backend=backend,
                        multi_gpu_strategy="distributed" if enabled else "none")

    def memory(self, growth: Optional[str] = None, *, pool_size: Union[None, int, str] = None,
               gc_threshold: Optional[float] = None) -> "GPUConfigBuilder":
        for k, v in (("memory_growth", growth), ("pool_size", pool_size),
                     ("gc_threshold", gc_threshold)):
            if v is not None:
                self.set(**{k: v})
        return self

    def fallback_to_cpu(self, enabled: bool = True) -> "GPUConfigBuilder":
        return self.set(fallback_to_cpu=enabled)

    # Seed 003's builder, by its names (its enums are taken by name: PrecisionMode.MIXED).
    def auto_detect_devices(self) -> "GPUConfigBuilder":
        return self.set(device_ids=None)

    def set_precision(self, mode: Any) -> "GPUConfigBuilder":
        return self.set(precision=_key(mode))

    def set_memory_policy(self, policy: Any) -> "GPUConfigBuilder":
        return self.set(memory_growth=_key(policy))

    def set_batching(self, *, max_batch_size: Optional[int] = None,
                     max_wait_time_ms: Optional[float] = None,
                     strategy: Optional[str] = None) -> "GPUConfigBuilder":
        return self.batching(max_batch_size=max_batch_size, max_wait_ms=max_wait_time_ms,
                             strategy=None if strategy is None else _key(strategy))

    def enable_multi_gpu(self, strategy: Any = "data_parallel") -> "GPUConfigBuilder":
        k = _key(strategy)
        return self.set(multi_gpu_strategy=k, enable_distributed=k == "distributed")

    def build(self) -> GPUConfig:
        return GPUConfig(**self._f)


# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DeviceChoice:
    """What device_context() chose: gpum's index, the torch device string it made current
    ("cuda:N", or "cpu" when it could not), and why not when it did not."""
    index: int
    device: str
    cuda: bool
    reason: Optional[str] = None


class _NoProfile:
    """A profile timer that records nothing: ``with`` and ``@`` both work."""

    def __enter__(self) -> "_NoProfile":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        return fn


_NO_PROFILE = _NoProfile()


@dataclass
class ReleaseReport:
    """What one emergency_release() did (actions) and did not (skipped, with the reason)."""
    trigger: str                               # "manual", or "pressure" from gpumd
    empty_cache: bool = False                  # torch.cuda.empty_cache() ran
    pool_bytes: int = 0                        # bytes the manager's pools gave back
    cache_bytes: int = 0                       # payload bytes the manager's caches demoted
    gc_objects: int = 0                        # objects the garbage collector freed
    actions: List[str] = field(default_factory=list)
    skipped: List[str] = field(default_factory=list)


def _torch_cuda() -> Tuple[Any, Optional[str]]:
    """(torch, None) when torch can use CUDA here, else (torch or None, why not)."""
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        return None, "PyTorch is not installed"
    try:
        if not torch.cuda.is_available():
            return torch, "torch.cuda.is_available() is False (a CPU build of PyTorch, " \
                          "or no CUDA device or driver visible to it)"
    except Exception as e:  # a broken CUDA setup says so here
        return torch, f"torch.cuda failed: {e}"
    return torch, None


class GPUManager:
    """Opens gpum for this process as its GPUConfig says (see the module's text)."""

    def __init__(self, config: Optional[GPUConfig] = None, *, label: Optional[str] = None,
                 socket: Optional[str] = None) -> None:
        self.config = config if config is not None else GPUConfig()
        self._label = label or "gpum-manager"
        self._socket = socket
        self._lock = threading.Lock()
        self._alert_fns: List[Callable[[Alert], Any]] = []
        self._pressure_fns: List[Callable[[Pressure], Any]] = []
        self._pools: List[Pool] = []
        self._caches: List[TierCache] = []
        self._processors: List[BatchProcessor] = []
        self._gc_rule: Optional[str] = None
        self.releases: List[ReleaseReport] = []
        self.monitor: Optional[Monitor] = None
        self.reservation: Optional[Reservation] = None
        self._closed = False
        try:
            self._open()
        except BaseException:
            self.close()
            raise

    # --- opening ------------------------------------------------------------------------------
    def _open(self) -> None:
        cfg = self.config
        node = _node_devices()
        have = [g.index for g in node]
        if cfg.device_ids is not None:
            missing = [i for i in cfg.device_ids if i not in have]
            if missing:
                raise ValueError(f"GPUConfig.device_ids: no GPU {missing} on this node "
                                 f"(it has {have})")
        self.device_ids: List[int] = list(cfg.device_ids) if cfg.device_ids is not None else have
        if cfg.reserve_memory is not None:
            gpus = cfg.reserve_gpus or (len(cfg.device_ids) if cfg.device_ids else 1)
            r = Reservation(cfg.reserve_memory, gpus, timeout=cfg.reserve_timeout,
                            label=self._label, socket=self._socket,
                            set_env=cfg.reserve_set_env,
                            fallback="cpu" if cfg.fallback_to_cpu else None)
            r.__enter__()
            self.reservation = r
            r.on_pressure(self._on_pressure)
            # The manager's GPUs are the grant's; on the CPU (fallback) there is no grant and
            # they stay the node's, for status and monitoring (device_context chooses the CPU).
            if cfg.device_ids is None and not r.on_cpu:
                self.device_ids = [d.index for d in r.devices]
        if cfg.monitoring and self.device_ids:
            # gc_threshold: a GPU's used share above it calls emergency_release() (_on_alert).
            self._gc_rule = f"memory_used_pct > {cfg.gc_threshold * 100:g} for 1s INFO"
            rules: List[str] = [self._gc_rule]
            if cfg.alert_memory_pct is not None:
                rules.append(f"memory_used_pct > {cfg.alert_memory_pct:g} for 2s WARNING")
            if cfg.alert_temperature_c is not None:
                rules.append(f"temperature > {cfg.alert_temperature_c:g}C for 5s WARNING")
            self.monitor = Monitor(interval=cfg.monitor_interval, devices=self.device_ids,
                                   alerts=cfg.alert_defaults, rules=rules,
                                   on_alert=self._on_alert).start()

    # --- callbacks ------------------------------------------------------------------------------
    def on_alert(self, fn: Callable[[Alert], Any]) -> None:
        """Calls fn(gpum.monitor.Alert) for each alert the monitor raises or clears (on the
        monitor's callback thread). Without monitoring there are no alerts to deliver."""
        self._alert_fns.append(fn)

    def _on_alert(self, a: Alert) -> None:
        if a.fired and a.rule == self._gc_rule:
            self.emergency_release(trigger="gc_threshold")
        for fn in list(self._alert_fns):
            fn(a)  # the monitor prints what one raises

    def on_pressure(self, fn: Callable[[Pressure], Any]) -> None:
        """Calls fn(gpum.Pressure) when gpumd reports memory pressure on the reservation's GPUs
        (after the emergency release, when release_on_pressure). Only with a reservation:
        gpumd tells pressure to the sessions that hold one."""
        self._pressure_fns.append(fn)

    def _on_pressure(self, p: Pressure) -> None:  # on the reservation's session thread
        if self.config.release_on_pressure and p.level in ("high", "critical"):
            self.emergency_release(trigger="pressure")
        for fn in list(self._pressure_fns):
            try:
                fn(p)
            except Exception as e:
                print(f"gpum: an on_pressure callback raised {e!r}", file=sys.stderr)

    # --- objects made through the manager ---------------------------------------------------------
    def pool(self, source: str = "cuda", *, device: Optional[int] = None,
             **kwargs: Any) -> Pool:
        """A gpum.Pool with the configuration's strategy, trimmed by emergency_release() and
        closed with the manager."""
        cfg = self.config
        if not cfg.enable_memory_pooling:
            raise RuntimeError("GPUConfig.enable_memory_pooling is false")
        kwargs.setdefault("strategy", cfg.pool_strategy)
        kwargs.setdefault("limit", cfg.pool_size)
        p = Pool(source, device=self._first_gpu("pool") if device is None else device, **kwargs)
        with self._lock:
            self._pools.append(p)
        if cfg.memory_growth == "preallocate":  # take pool_size now; the pool keeps it cached
            assert cfg.pool_size is not None
            p.free(p.alloc(_size(cfg.pool_size)))
        return p

    def _first_gpu(self, what: str) -> int:
        if not self.device_ids:
            raise RuntimeError(f"GPUManager.{what}: the manager has no GPU")
        return self.device_ids[0]

    def tier_cache(self, *, device: Optional[int] = None, **kwargs: Any) -> TierCache:
        """A gpum.TierCache, demoted by emergency_release() and closed with the manager."""
        tc = TierCache(device=self._first_gpu("tier_cache") if device is None else device,
                       **kwargs)
        with self._lock:
            self._caches.append(tc)
        return tc

    # --- status -----------------------------------------------------------------------------------
    def status(self) -> Dict[str, Any]:
        """{"devices": [...], "memory": {...}, "health": {index: state}, "reservation": ...,
        "monitoring": bool, "cuda": bool}: the manager's GPUs read now, health from the
        monitor (with its retries) when it runs, else one probe's; "cuda" is whether torch
        can use CUDA, None when torch was not imported (status() does not import it)."""
        gpus = {g.index: g for g in _node_devices() if g.index in self.device_ids}
        devs: List[Dict[str, Any]] = []
        health: Dict[int, str] = {}
        total = used = free = 0
        for i in self.device_ids:
            g: Optional[Gpu] = gpus.get(i)
            if g is None:
                health[i] = "GONE"
                devs.append({"index": i, "state": "GONE", "reason": "no longer on the node"})
                continue
            state, reason = g.state, g.reason
            if self.monitor is not None:
                try:
                    h = self.monitor.health(i)
                    state, reason = h.state, (h.reason or None)
                except Exception:  # not sampled yet: the probe's view stands
                    pass
            health[i] = state
            total += g.memory.total or 0
            used += g.memory.used or 0
            free += g.memory.free or 0
            devs.append({"index": i, "name": g.name, "uuid": g.uuid, "state": state,
                         "reason": reason,
                         "memory": {"total": g.memory.total, "used": g.memory.used,
                                    "free": g.memory.free},
                         "utilization": dict(g.utilization),
                         "temperature_c": g.temperature_c})
        res: Optional[Dict[str, Any]] = None
        if self.reservation is not None:
            r = self.reservation
            res = {"id": r.id, "state": r.state, "limit": r.limit,
                   "devices": [d.index for d in r.devices], "ended": r.ended,
                   "on_cpu": r.on_cpu, "fallback_reason": r.fallback_reason}
        return {"devices": devs, "memory": {"total": total, "used": used, "free": free},
                "health": health, "reservation": res, "monitoring": self.monitor is not None,
                "cuda": _torch_cuda()[1] is None if "torch" in sys.modules else None,
                "releases": len(self.releases)}

    # --- device context -----------------------------------------------------------------------
    @contextlib.contextmanager
    def device_context(self, index: Optional[int] = None) -> Iterator[DeviceChoice]:
        """Makes GPU ``index`` (gpum's index, one of the manager's; None: the first) current
        for torch for the block and yields the DeviceChoice. Without torch or CUDA, when the
        reservation fell back to the CPU, or with fallback_to_cpu when the GPU's health is
        ERROR or DISABLED, the block runs unchanged and the choice says "cpu" and why.
        Under a reservation that set CUDA_VISIBLE_DEVICES, torch's ordinal is the GPU's
        position in the grant. torch's backend switches (enable_tf32, enable_cudnn,
        cudnn_benchmark) hold for the block and are put back after it."""
        if not self.device_ids:
            with self._backend_flags():
                yield DeviceChoice(-1, "cpu", False, "the manager has no GPU")
            return
        if index is None:
            index = self.device_ids[0]
        if index not in self.device_ids:
            raise ValueError(f"device_context: GPU {index} is not one of the manager's "
                             f"{self.device_ids}")
        r = self.reservation
        torch, why = _torch_cuda()
        if r is not None and r.on_cpu:  # fallback_to_cpu, and no GPU could serve it
            why = f"the reservation runs on the CPU: {r.fallback_reason}"
        if why is None and self.config.fallback_to_cpu:
            state = self._health(index)
            if state in ("ERROR", "DISABLED", "GONE"):
                why = f"GPU {index} is {state} and fallback_to_cpu is on"
        ordinal = index
        if why is None and r is not None and self.config.reserve_set_env:
            granted = [d.index for d in r.devices]
            if index not in granted:
                why = f"GPU {index} is not in the reservation's grant {granted}"
            else:
                ordinal = granted.index(index)
        with self._backend_flags():
            if why is not None:
                yield DeviceChoice(index, "cpu", False, why)
                return
            if self.config.memory_fraction is not None:
                torch.cuda.set_per_process_memory_fraction(self.config.memory_fraction, ordinal)
            with torch.cuda.device(ordinal):
                yield DeviceChoice(index, f"cuda:{ordinal}", True, None)

    def _health(self, index: int) -> Optional[str]:
        """GPU index's health: the monitor's when it has sampled it, else one probe's
        (status())."""
        if self.monitor is not None:
            try:
                return self.monitor.health(index).state
            except Exception:  # not sampled yet
                pass
        return self.status()["health"].get(index)

    @contextlib.contextmanager
    def _backend_flags(self) -> Iterator[None]:
        """torch.backends' switches as the configuration says, put back afterwards (nothing
        without torch)."""
        try:
            torch = importlib.import_module("torch")
        except ImportError:
            yield
            return
        cfg = self.config
        b = torch.backends
        flags = ((b.cuda.matmul, "allow_tf32", cfg.enable_tf32),
                 (b.cudnn, "allow_tf32", cfg.enable_tf32),
                 (b.cudnn, "enabled", cfg.enable_cudnn),
                 (b.cudnn, "benchmark", cfg.cudnn_benchmark))
        saved = [(obj, name, getattr(obj, name)) for obj, name, _ in flags]
        for obj, name, value in flags:
            setattr(obj, name, value)
        try:
            yield
        finally:
            for obj, name, value in saved:
                setattr(obj, name, value)

    # --- models -------------------------------------------------------------------------------
    def optimize(self, model: Any, mode: Optional[str] = None, example_input: Any = None,
                 prune: float = 0.0) -> Any:
        """gpum.optimize(model) as the configuration says: its optimization_level and
        precision, for inference or training (mode; None: optimize_for_inference). The level
        decides channels_last and torch.compile unless enable_channels_last / enable_compile
        turn them off, and activation checkpointing unless gradient_checkpointing turns it on
        at any level. Returns its OptimizationReport."""
        from .optimize import optimize as _optimize  # the module imports torch when asked
        cfg = self.config
        if mode is None:
            mode = "inference" if cfg.optimize_for_inference else "training"
        return _optimize(model, level=cfg.optimization_level, precision=cfg.precision,
                         mode=mode, example_input=example_input, prune=prune,
                         channels_last=None if cfg.enable_channels_last else False,
                         checkpointing=True if cfg.gradient_checkpointing else None,
                         compile=None if cfg.enable_compile else False)

    def parallelize(self, model: Any) -> Any:
        """model wrapped as multi_gpu_strategy says, on the manager's GPUs (gpum.torch.
        data_parallel): "distributed" DistributedDataParallel (the process group started from
        the environment gpum.reserve or torchrun set, over distributed_backend), "data_parallel"
        nn.DataParallel over the GPUs torch sees, "none" unchanged. Returns its Parallel
        (``.model``, ``.kind``, ``.reason``)."""
        from .torch import data_parallel  # imports torch
        cfg = self.config
        ordinals = list(range(len(self.device_ids)))
        if self.reservation is None or not cfg.reserve_set_env:
            ordinals = list(self.device_ids)
        return data_parallel(model, cfg.multi_gpu_strategy, device_ids=ordinals,
                             backend=cfg.distributed_backend)

    def profile(self, name: str) -> Any:
        """gpum.profile(name) (a decorator and a context manager) when enable_profiling is on,
        else one that records nothing and costs nothing."""
        if self.config.enable_profiling:
            from .profile import profile as _profile
            return _profile(name)
        return _NO_PROFILE

    def batch_processor(self) -> BatchProcessor:
        """A gpum.BatchProcessor whose models default to the configuration's batching
        (max_batch_size, max_wait_ms, batching_strategy) and to the device device_context()
        chooses; closed with the manager."""
        cfg = self.config
        with self.device_context() as dev:
            device = dev.device
        bp = BatchProcessor(device=device, max_batch_size=cfg.max_batch_size,
                            max_queue_delay=cfg.max_wait_ms / 1000.0,
                            strategy=cfg.batching_strategy)
        with self._lock:
            self._processors.append(bp)
        return bp

    # --- emergency ----------------------------------------------------------------------------
    def emergency_release(self, trigger: str = "manual") -> ReleaseReport:
        """Frees what can be freed now: torch's cached CUDA memory (empty_cache, when torch has
        CUDA), the cached segments of the manager's pools (down to max_memory_cache_ratio of
        their cache, 0 under pressure), the device tier of the manager's tiered caches (demoted
        to the lower tiers), and Python's garbage. Returns (and appends to ``releases``) what
        it did and what it skipped and why. Safe from any thread."""
        rep = ReleaseReport(trigger)
        rep.gc_objects = gc.collect()
        rep.actions.append(f"gc.collect() freed {rep.gc_objects} objects")
        torch: Any = None
        why: Optional[str] = "PyTorch was not imported in this process (no cache to empty)"
        if "torch" in sys.modules:
            torch, why = _torch_cuda()
        if why is None:
            torch.cuda.empty_cache()
            rep.empty_cache = True
            rep.actions.append("torch.cuda.empty_cache()")
        else:
            rep.skipped.append(f"torch.cuda.empty_cache: {why}")
        with self._lock:
            pools, caches = list(self._pools), list(self._caches)
        if not pools:
            rep.skipped.append("pool trim: no pool was made through the manager")
        for p in pools:
            st = p.stats()
            cached = max(0, st.reserved_bytes - st.allocated_bytes)
            keep = 0 if trigger == "pressure" else int(cached * self.config.max_memory_cache_ratio)
            n = p.trim(st.allocated_bytes + keep)
            rep.pool_bytes += n
            rep.actions.append(f"pool trimmed to {keep} cached bytes: {n} bytes released")
        if not caches:
            rep.skipped.append("cache demotion: no tiered cache was made through the manager")
        for tc in caches:
            if tc.closed:
                continue
            n = tc.pressure()
            rep.cache_bytes += n
            rep.actions.append(f"tiered cache demoted {n} bytes from the device")
        with self._lock:
            self.releases.append(rep)
        return rep

    # --- life -------------------------------------------------------------------------------------
    def close(self) -> None:
        """Closes the manager's caches and pools, stops the monitor (delivering what was
        left) and releases the reservation; threads the manager started end. Idempotent."""
        if self._closed:
            return
        self._closed = True
        errors: List[BaseException] = []
        with self._lock:
            caches, pools, procs = self._caches, self._pools, self._processors
            self._caches, self._pools, self._processors = [], [], []
        objs: List[Any] = [*procs, *caches, *pools]
        for obj in objs:
            try:
                obj.close()
            except Exception as e:
                errors.append(e)
        if self.monitor is not None:
            try:
                self.monitor.close()
            except Exception as e:
                errors.append(e)
            self.monitor = None
        if self.reservation is not None:
            try:
                self.reservation.release()
            except Exception as e:
                errors.append(e)
            self.reservation = None
        if errors:
            raise errors[0]

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> "GPUManager":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"GPUManager(devices={getattr(self, 'device_ids', None)}, "
                f"monitoring={self.monitor is not None}, "
                f"reservation={self.reservation.id if self.reservation else None}, "
                f"closed={self._closed})")
