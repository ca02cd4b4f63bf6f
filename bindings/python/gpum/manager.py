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
from (docs/python.md lists them); ``GPUConfig.builder()`` builds one fluently;
``GPUConfig.from_yaml`` / ``to_yaml`` read and write the dataclass's fields as flat YAML keys (an
unknown key is refused by name; ``preset: NAME`` starts from a preset).

:class:`GPUManager` opens, in this order: the node's devices (gpum.node, filtered by
``device_ids``), a reservation from gpumd when ``reserve_memory`` is set (gpum.reserve; with
``device_ids`` None the manager's GPUs are then the grant's, and with them gpumd still picks the
GPUs, as gpum.reserve cannot name them yet; its pressure events call :meth:`GPUManager.emergency_release` when ``release_on_pressure``, then the
``on_pressure`` callbacks), and the monitor (gpum.Monitor) when ``monitoring`` is on, with the
default alert rules plus the configuration's thresholds; ``on_alert`` callbacks receive its
alerts. Pools and tiered caches made through :meth:`GPUManager.pool` and
:meth:`GPUManager.tier_cache` are trimmed and demoted by the emergency release and closed with
the manager. close() (or the with block's end) undoes everything, threads included.

The optimisation level and precision are names (strings) here; :meth:`GPUManager.optimize`
applies them to a model through :func:`gpum.optimize` (the optimisation module).
"""
from __future__ import annotations

import contextlib
import dataclasses
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
from .pool import Pool
from .reserve import Pressure, Reservation
from .tiercache import TierCache

__all__ = ["GPUConfig", "GPUConfigBuilder", "GPUManager", "DeviceChoice", "ReleaseReport",
           "PRESETS", "OPTIMIZATION_LEVELS", "PRECISIONS", "POOL_STRATEGIES",
           "BATCHING_STRATEGIES"]

OPTIMIZATION_LEVELS = ("none", "basic", "aggressive", "experimental")
PRECISIONS = ("fp32", "fp16", "bf16", "int8", "mixed")
POOL_STRATEGIES = ("balanced", "greedy", "consolidated", "fragmentation_aware")
BATCHING_STRATEGIES = ("adaptive", "fixed_size", "dynamic")
DISTRIBUTED_BACKENDS = ("nccl", "gloo", "mpi")


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
    reserve_fallback: Optional[str] = None      # "cpu": run on the CPU when no GPU can serve
    release_on_pressure: bool = True            # gpumd's pressure triggers emergency_release()
    # --- memory pooling ---------------------------------------------------------------------------
    enable_memory_pooling: bool = True
    pool_strategy: str = "balanced"             # one of POOL_STRATEGIES
    max_memory_cache_ratio: float = 0.8         # cached share a pool keeps after a trim, [0, 1]
    gc_threshold: float = 0.8                   # used share of a GPU that calls for a release
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
    cudnn_benchmark: bool = False
    gradient_checkpointing: bool = False
    gradient_accumulation_steps: int = 1
    enable_profiling: bool = False
    # --- batching (serving) ---------------------------------------------------------------------
    max_batch_size: int = 32
    max_wait_ms: float = 10.0
    batching_strategy: str = "adaptive"         # one of BATCHING_STRATEGIES
    # --- distributed ------------------------------------------------------------------------------
    enable_distributed: bool = False
    distributed_backend: str = "nccl"           # one of DISTRIBUTED_BACKENDS

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
        rm = self.reserve_memory
        if rm is not None:
            if isinstance(rm, str):
                if not rm.strip():
                    _fail("reserve_memory", "must be a size such as '20GiB'", rm)
            elif not _is_int(rm) or rm <= 0:
                _fail("reserve_memory", "must be a positive number of bytes or a size string", rm)
        if self.reserve_gpus is not None and (not _is_int(self.reserve_gpus)
                                              or self.reserve_gpus < 1):
            _fail("reserve_gpus", "must be an integer >= 1 or None", self.reserve_gpus)
        if self.reserve_fallback not in (None, "cpu"):
            _fail("reserve_fallback", "must be 'cpu' or None", self.reserve_fallback)
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
                              ("distributed_backend", DISTRIBUTED_BACKENDS)):
            v = getattr(self, name)
            if not isinstance(v, str) or v.lower().replace("-", "_") not in allowed:
                _fail(name, "must be one of " + ", ".join(allowed), v)
            setattr(self, name, v.lower().replace("-", "_"))
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
        """A configuration from a mapping of field names (``preset`` names a base); an unknown
        key raises ValueError naming it."""
        if not isinstance(data, dict):
            raise ValueError(f"GPUConfig: a configuration is a mapping, not {type(data).__name__}")
        data = dict(data)
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
        return self.set(reserve_memory=memory, reserve_gpus=gpus, reserve_timeout=timeout,
                        reserve_set_env=set_env, reserve_fallback=fallback)

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
        return self.set(enable_distributed=enabled, distributed_backend=backend)

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
                            set_env=cfg.reserve_set_env, fallback=cfg.reserve_fallback)
            r.__enter__()
            self.reservation = r
            r.on_pressure(self._on_pressure)
            # The manager's GPUs are the grant's; on the CPU (fallback) there is no grant and
            # they stay the node's, for status and monitoring.
            if cfg.device_ids is None and not r.on_cpu:
                self.device_ids = [d.index for d in r.devices]
        if cfg.monitoring:
            rules: List[str] = []
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
        if not self.config.enable_memory_pooling:
            raise RuntimeError("GPUConfig.enable_memory_pooling is false")
        kwargs.setdefault("strategy", self.config.pool_strategy)
        p = Pool(source, device=self.device_ids[0] if device is None else device, **kwargs)
        with self._lock:
            self._pools.append(p)
        return p

    def tier_cache(self, *, device: Optional[int] = None, **kwargs: Any) -> TierCache:
        """A gpum.TierCache, demoted by emergency_release() and closed with the manager."""
        tc = TierCache(device=self.device_ids[0] if device is None else device, **kwargs)
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
        for torch for the block and yields the DeviceChoice. Without torch or CUDA the block
        runs unchanged and the choice says "cpu" and why. Under a reservation that set
        CUDA_VISIBLE_DEVICES, torch's ordinal is the GPU's position in the grant."""
        if index is None:
            index = self.device_ids[0]
        if index not in self.device_ids:
            raise ValueError(f"device_context: GPU {index} is not one of the manager's "
                             f"{self.device_ids}")
        r = self.reservation
        if r is not None and r.on_cpu:  # reserve_fallback="cpu" and no GPU could serve it
            yield DeviceChoice(index, "cpu", False,
                               f"the reservation runs on the CPU: {r.fallback_reason}")
            return
        torch, why = _torch_cuda()
        if why is not None:
            yield DeviceChoice(index, "cpu", False, why)
            return
        ordinal = index
        if r is not None and self.config.reserve_set_env:
            granted = [d.index for d in r.devices]
            if index not in granted:
                yield DeviceChoice(index, "cpu", False,
                                   f"GPU {index} is not in the reservation's grant {granted}")
                return
            ordinal = granted.index(index)
        if self.config.memory_fraction is not None:
            torch.cuda.set_per_process_memory_fraction(self.config.memory_fraction, ordinal)
        with torch.cuda.device(ordinal):
            yield DeviceChoice(index, f"cuda:{ordinal}", True, None)

    # --- models -------------------------------------------------------------------------------
    def optimize(self, model: Any, mode: str = "inference", example_input: Any = None,
                 prune: float = 0.0) -> Any:
        """gpum.optimize(model) at the configuration's optimization_level and precision, on the
        device device_context() would choose; "experimental" is taken as "aggressive" when
        enable_compile is False (no torch.compile). Returns its OptimizationReport."""
        from .optimize import optimize as _optimize  # the module imports torch when asked
        level = self.config.optimization_level
        if level == "experimental" and not self.config.enable_compile:
            level = "aggressive"
        return _optimize(model, level=level, precision=self.config.precision, mode=mode,
                         example_input=example_input, prune=prune)

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
            caches, pools = self._caches, self._pools
            self._caches, self._pools = [], []
        objs: List[Any] = [*caches, *pools]
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
