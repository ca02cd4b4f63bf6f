# SPDX-License-Identifier: Apache-2.0
"""Model optimisation: ``gpum.optimize(model, level, precision, mode)`` (docs/python.md).

Applies what an optimisation level and a precision mean in current PyTorch -- eval mode and no
gradients for inference, autocast for MIXED, a cast for FP16/BF16, dynamic INT8 quantisation,
channels_last for convolutional models, activation checkpointing for training, pruning,
torch.compile -- and records each step as applied or skipped with its reason, with the
parameter and activation bytes measured before and after. Nothing is assumed about the device:
a step the model, the device or this PyTorch cannot take is skipped and says why.

The model is changed in place where PyTorch does so (eval, casts, channels_last, pruning,
checkpointing); quantisation and compilation make a new module, so callers use
``report.model``. Results are cached per model and arguments.

PyTorch is imported on first use: ``import gpum`` works without it.
"""
from __future__ import annotations

import contextlib
import enum
import importlib.util
import math
import os
import shutil
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, Dict, List, Optional, Tuple, Union

__all__ = ["optimize", "OptLevel", "Precision", "OptimizationLevel", "ModelPrecision",
           "OptimizationReport", "OptimizationStep", "EstimatorView"]


class OptLevel(enum.IntEnum):
    """How far optimize goes; each level includes the ones below it."""

    NONE = 0          # nothing is changed
    BASIC = 1         # mode settings (eval, no grad), precision, pruning
    AGGRESSIVE = 2    # + channels_last for Conv2d models, activation checkpointing (training)
    EXPERIMENTAL = 3  # + torch.compile


class Precision(enum.Enum):
    """The precision the model's weights (or its autocast region) run in."""

    FP32 = "fp32"
    FP16 = "fp16"
    BF16 = "bf16"
    INT8 = "int8"
    MIXED = "mixed"


# The names seed 000's GPUConfig uses for the same enums.
OptimizationLevel = OptLevel
ModelPrecision = Precision


@dataclass(frozen=True)
class OptimizationStep:
    """One step optimize considered: applied, or skipped with the reason."""

    name: str
    applied: bool
    reason: str = ""


@dataclass(frozen=True)
class EstimatorView:
    """gpum.torch.estimate's breakdowns (gpum.Estimate's fields: weights, gradients, optimizer,
    activations, ..., total) of the model before and after optimisation; after is None where
    the estimator cannot measure the result (note says why)."""
    before: Any
    after: Any
    note: str = ""

    @property
    def saved(self) -> Optional[int]:
        """Bytes of the estimate's total the optimisation saves (None without an after)."""
        return None if self.after is None else self.before.total - self.after.total


@dataclass
class OptimizationReport:
    """What optimize did and what it saved, measured on the model's own tensors.

    param_bytes_* count the bytes of every parameter and buffer (quantised weights included);
    activation_bytes_* sum the bytes of the outputs of every leaf module on one forward pass of
    example_input (under torch.no_grad for inference), None without example_input.
    """

    level: OptLevel
    precision: Precision
    mode: str
    device: str
    steps: List[OptimizationStep]
    param_bytes_before: int
    param_bytes_after: int
    activation_bytes_before: Optional[int] = None
    activation_bytes_after: Optional[int] = None
    autocast_dtype: Any = None  # the torch.dtype autocast runs in for MIXED, else None
    input_dtype: Any = None     # the dtype floating inputs must have (cast models), else None
    channels_last: bool = False
    _model: Any = field(default=None, repr=False)
    _source: Any = field(default=None, repr=False)        # the model as passed
    _example: Any = field(default=None, repr=False)       # example_input as passed
    _source_dtype: Any = field(default=None, repr=False)  # its floating dtype on entry
    _views: Dict[str, "EstimatorView"] = field(default_factory=dict, repr=False)

    def estimator_view(self, optimizer: Any = "adam") -> "EstimatorView":
        """The estimator's view of what the optimisation saves: gpum.torch.estimate (one step
        measured on a copy, in the report's mode, with optimizer for training) of the model
        as it came and at the precision chosen. Computed on first call (it runs the model
        twice) and kept; needs example_input. INT8 has no "after": the live estimator
        measures floating-point models (the note says so)."""
        key = repr(optimizer)
        if key in self._views:
            return self._views[key]
        if self._example is None:
            raise ValueError("estimator_view needs the example_input optimize was given")
        src = self._source
        import copy
        import torch
        from . import torch as gt
        names = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}
        current = next((p.dtype for p in src.parameters() if p.is_floating_point()), None)
        if current is not None and current != self._source_dtype:  # cast in place since
            src = copy.deepcopy(src).to(self._source_dtype)
        before_prec = names.get(self._source_dtype, "fp32")
        before = gt.estimate(src, self._example, mode=self.mode, optimizer=optimizer,
                             precision=before_prec)
        after, note = None, ""
        if self.precision is Precision.INT8:
            note = "int8: the live estimator measures floating-point models only"
        else:
            prec = {Precision.FP32: "fp32", Precision.FP16: "fp16",
                    Precision.BF16: "bf16"}.get(self.precision)
            if self.precision is Precision.MIXED:
                prec = "mixed-fp16" if self.autocast_dtype == torch.float16 else "mixed-bf16"
            assert prec is not None
            after = gt.estimate(src, self._example, mode=self.mode, optimizer=optimizer,
                                precision=prec)
        view = EstimatorView(before, after, note)
        self._views[key] = view
        return view

    @property
    def model(self) -> Any:
        """The optimised model: the one passed in, or the new module quantisation or
        compilation made."""
        return self._model

    def applied(self) -> List[str]:
        """The names of the steps applied, in order."""
        return [s.name for s in self.steps if s.applied]

    def skipped(self) -> Dict[str, str]:
        """The steps skipped, each with its reason."""
        return {s.name: s.reason for s in self.steps if not s.applied}

    def step(self, name: str) -> OptimizationStep:
        """The step of that name (KeyError when optimize did not consider it)."""
        for s in self.steps:
            if s.name == name:
                return s
        raise KeyError(name)

    def autocast(self) -> ContextManager[Any]:
        """The context to run the model in: torch.autocast for MIXED, else a no-op."""
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        import torch
        return torch.autocast(device_type=self.device.split(":")[0], dtype=self.autocast_dtype)

    def cast_input(self, x: Any) -> Any:
        """x (a tensor, or a tuple/list/dict of them) as the optimised model takes it: floating
        tensors in the model's dtype, 4-d ones channels_last where that step was applied."""
        return _map_tensors(x, lambda t: _cast_tensor(t, self.input_dtype, self.channels_last))


def _map_tensors(x: Any, fn: Callable[[Any], Any]) -> Any:
    import torch
    if isinstance(x, torch.Tensor):
        return fn(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_map_tensors(v, fn) for v in x)
    if isinstance(x, dict):
        return {k: _map_tensors(v, fn) for k, v in x.items()}
    return x


def _cast_tensor(t: Any, dtype: Any, channels_last: bool) -> Any:
    import torch
    if dtype is not None and t.is_floating_point():
        t = t.to(dtype)
    if channels_last and t.dim() == 4:
        t = t.contiguous(memory_format=torch.channels_last)
    return t


# Measurements ---------------------------------------------------------------------------------

def _obj_bytes(obj: Any, seen: set) -> int:
    """Bytes of the tensors in obj, descending into tuples, lists and the packed parameters of
    quantised modules (TorchScript objects whose state holds their tensors)."""
    import torch
    if isinstance(obj, torch.Tensor):
        key = (obj.data_ptr(), obj.numel(), obj.dtype) if obj.data_ptr() else id(obj)
        if key in seen:
            return 0
        seen.add(key)
        return obj.numel() * obj.element_size()
    if isinstance(obj, (tuple, list)):
        return sum(_obj_bytes(v, seen) for v in obj)
    if isinstance(obj, torch._C.ScriptObject):
        try:
            state = getattr(obj, "__getstate__")()
        except Exception:  # an object without state holds no tensors we can count
            return 0
        return _obj_bytes(state, seen)
    return 0


def param_bytes(model: Any) -> int:
    """The bytes of model's parameters and buffers, quantised packed weights included."""
    seen: set = set()
    return sum(_obj_bytes(v, seen) for v in model.state_dict(keep_vars=True).values())


def activation_bytes(model: Any, example_input: Any, inference: bool,
                     context: Optional[ContextManager[Any]] = None) -> int:
    """The bytes of every leaf module's outputs on one forward pass of example_input."""
    import torch
    total = [0]

    def hook(_m: Any, _i: Any, out: Any) -> None:
        seen: set = set()
        total[0] += _obj_bytes(_flatten(out), seen)

    leaves = _leaves(model)
    handles = [m.register_forward_hook(hook) for m in leaves]
    # A training-mode pass updates BatchNorm's running statistics: put them back after.
    saved = {k: v.detach().clone() for k, v in model.named_buffers()}
    try:
        grad = _grad_context(inference)
        with grad, (context or contextlib.nullcontext()):
            args = example_input if isinstance(example_input, tuple) else (example_input,)
            model(*args)
    finally:
        for h in handles:
            h.remove()
        with torch.no_grad():
            for k, v in model.named_buffers():
                if k in saved and saved[k].shape == v.shape:
                    v.copy_(saved[k])
    return total[0]


def _leaves(model: Any) -> List[Any]:
    """The modules whose outputs are activations: those without children, and quantised ones
    (whose only children hold their packed weights and are never called)."""
    out: List[Any] = []

    def walk(m: Any) -> None:
        kids = list(m.children())
        if not kids or type(m).__module__.startswith(("torch.ao.nn.quantized",
                                                      "torch.nn.quantized")):
            out.append(m)
            return
        for k in kids:
            walk(k)
    walk(model)
    return out


def _grad_context(inference: bool) -> ContextManager[Any]:
    """torch.no_grad() for inference, a no-op for training."""
    import torch
    if inference:
        return torch.no_grad()
    return contextlib.nullcontext()


def _flatten(out: Any) -> List[Any]:
    import torch
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for v in out for t in _flatten(v)]
    if isinstance(out, dict):
        return [t for v in out.values() for t in _flatten(v)]
    return []


# Steps ----------------------------------------------------------------------------------------

class _Steps:
    def __init__(self) -> None:
        self.steps: List[OptimizationStep] = []

    def ok(self, name: str, what: str = "") -> None:
        self.steps.append(OptimizationStep(name, True, what))

    def skip(self, name: str, reason: str) -> None:
        self.steps.append(OptimizationStep(name, False, reason))


def _device_of(model: Any, device: Any) -> Any:
    import torch
    if device is not None:
        return torch.device(device)
    for t in list(model.parameters()) + list(model.buffers()):
        return t.device
    return torch.device("cpu")


def _has_module(model: Any, types: Tuple[Any, ...]) -> bool:
    return any(isinstance(m, types) for m in model.modules())


def _probe_fp16(model: Any, dev: Any, example_input: Any) -> Optional[str]:
    """None when fp16 runs on dev, else why not: the model itself on a copy with example_input,
    else a half-precision linear and conv."""
    import copy
    import torch
    try:
        if example_input is not None:
            m = copy.deepcopy(model).half()
            args = example_input if isinstance(example_input, tuple) else (example_input,)
            with torch.no_grad():
                m(*_map_tensors(args, lambda t: _cast_tensor(t, torch.float16, False)))
        else:
            x = torch.ones(2, 4, dtype=torch.float16, device=dev)
            torch.nn.functional.linear(x, torch.ones(4, 4, dtype=torch.float16, device=dev))
            img = torch.ones(1, 1, 4, 4, dtype=torch.float16, device=dev)
            torch.nn.functional.conv2d(img, torch.ones(1, 1, 3, 3, dtype=torch.float16,
                                                       device=dev))
    except Exception as e:  # the op is missing for Half on this device
        return f"fp16 does not run on {dev}: {e}"
    return None


def _bf16_supported(dev: Any) -> bool:
    import torch
    if dev.type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    return dev.type == "cpu"


def _precision(model: Any, precision: Precision, mode: str, dev: Any, example_input: Any,
               s: _Steps, rep: Dict[str, Any]) -> Any:
    import torch
    name = f"precision:{precision.value}"
    if precision is Precision.FP32:
        model.float()
        s.ok(name, "parameters in float32")
        rep["input_dtype"] = torch.float32
    elif precision is Precision.MIXED:
        dt = torch.bfloat16 if _bf16_supported(dev) else torch.float16
        rep["autocast_dtype"] = dt
        extra = "; train with torch.cuda.amp.GradScaler" if (
            dt == torch.float16 and mode == "training") else ""
        s.ok(name, f"autocast to {dt} on {dev.type}: run under report.autocast(){extra}")
    elif precision is Precision.BF16:
        if not _bf16_supported(dev):
            s.skip(name, f"bfloat16 is not supported on {dev}")
        else:
            model.to(torch.bfloat16)
            rep["input_dtype"] = torch.bfloat16
            s.ok(name, "parameters cast to bfloat16")
    elif precision is Precision.FP16:
        why = _probe_fp16(model, dev, example_input)
        if why is not None:
            s.skip(name, why)
        else:
            model.half()
            rep["input_dtype"] = torch.float16
            s.ok(name, "parameters cast to float16")
    else:  # INT8
        model = _int8(model, mode, dev, s, name)
    return model


def _int8(model: Any, mode: str, dev: Any, s: _Steps, name: str) -> Any:
    import torch
    nn = torch.nn
    if mode != "inference":
        s.skip(name, "dynamic int8 quantisation is for inference, not training")
        return model
    if dev.type != "cpu":
        s.skip(name, f"dynamic int8 quantisation runs on the CPU only, not {dev}")
        return model
    engines = [e for e in torch.backends.quantized.supported_engines if e != "none"]
    if not engines or torch.backends.quantized.engine == "none":
        s.skip(name, "no quantisation engine in this PyTorch (torch.backends.quantized)")
        return model
    if not _has_module(model, (nn.Linear, nn.LSTM)):
        s.skip(name, "the model has no Linear or LSTM module to quantise")
        return model
    try:
        q = torch.ao.quantization.quantize_dynamic(model, {nn.Linear, nn.LSTM},
                                                   dtype=torch.qint8)
    except Exception as e:  # an unsupported layer configuration
        s.skip(name, f"quantize_dynamic failed: {e}")
        return model
    s.ok(name, f"Linear/LSTM weights dynamically quantised to qint8 "
               f"({torch.backends.quantized.engine})")
    return q


def _prune(model: Any, amount: float, s: _Steps) -> None:
    import torch
    from torch.nn.utils import prune as tprune
    nn = torch.nn
    mods = [m for m in model.modules()
            if isinstance(m, (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d))]
    if not mods:
        s.skip("prune", "the model has no Linear or Conv module to prune")
        return
    for m in mods:
        tprune.l1_unstructured(m, name="weight", amount=amount)
        tprune.remove(m, "weight")
    s.ok("prune", f"{amount:.0%} of each Linear/Conv weight zeroed by L1 magnitude, permanent")


class _CheckpointForward:
    """A module's forward run under torch.utils.checkpoint (non-reentrant): its activations are
    recomputed in backward instead of kept. An object, not a closure, so deepcopy follows it."""

    def __init__(self, forward: Callable[..., Any]) -> None:
        self.forward = forward

    def __call__(self, *args: Any) -> Any:
        from torch.utils.checkpoint import checkpoint
        return checkpoint(self.forward, *args, use_reentrant=False)


class _SegmentedForward:
    """An nn.Sequential's forward in checkpointed segments of about sqrt(n) modules."""

    def __init__(self, seq: Any, segments: List[Tuple[int, int]]) -> None:
        self.seq = seq
        self.segments = segments

    def __call__(self, x: Any) -> Any:
        from torch.utils.checkpoint import checkpoint
        mods = list(self.seq)
        for a, b in self.segments:
            x = checkpoint(_RunRange(mods[a:b]), x, use_reentrant=False)
        return x


class _RunRange:
    def __init__(self, mods: List[Any]) -> None:
        self.mods = mods

    def __call__(self, x: Any) -> Any:
        for m in self.mods:
            x = m(x)
        return x


def _checkpointing(model: Any, s: _Steps) -> None:
    import torch
    nn = torch.nn
    name = "activation_checkpointing"
    if isinstance(model, nn.Sequential) and len(model) >= 2:
        if isinstance(model.forward, _SegmentedForward):
            s.ok(name, "already checkpointed")
            return
        n = len(model)
        size = max(1, int(math.isqrt(n)))
        segments = [(a, min(a + size, n)) for a in range(0, n, size)]
        # An instance attribute: the module keeps its class and its state_dict keys.
        setattr(model, "forward", _SegmentedForward(model, segments))
        s.ok(name, f"nn.Sequential of {n} run in {len(segments)} checkpointed segments")
        return
    for path, m in model.named_modules():
        if isinstance(m, nn.ModuleList) and len(m) >= 2:
            for block in m:
                if isinstance(block.forward, _CheckpointForward):
                    continue
                setattr(block, "forward", _CheckpointForward(block.forward))
            s.ok(name, f"each of the {len(m)} blocks of {path or 'the model'} checkpointed")
            return
    s.skip(name, "the model is neither an nn.Sequential nor holds an nn.ModuleList of blocks")


def _compiler_missing(dev: Any) -> Optional[str]:
    import torch
    if not hasattr(torch, "compile"):
        return f"torch {torch.__version__} has no torch.compile"
    if dev.type == "cuda":
        if importlib.util.find_spec("triton") is None:
            return "torch.compile on CUDA needs triton, which is not installed"
    elif not (os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")):
        return "torch.compile on the CPU needs a C++ compiler, and none is on PATH"
    return None


def _compile(model: Any, dev: Any, example_input: Any, inference: bool,
             context: ContextManager[Any], s: _Steps) -> Any:
    import torch
    name = "torch.compile"
    why = _compiler_missing(dev)
    if why is None and example_input is None:
        why = "torch.compile is only applied when example_input lets it be tried first"
    if why is not None:
        s.skip(name, why)
        return model
    try:
        compiled = getattr(torch, "compile")(model)
        args = example_input if isinstance(example_input, tuple) else (example_input,)
        grad = _grad_context(inference)
        with grad, context:
            compiled(*args)
    except Exception as e:  # the compiler failed on this model: keep the eager one
        s.skip(name, f"torch.compile failed, the eager model is kept: {e}")
        return model
    s.ok(name, "compiled with the default backend")
    return compiled


# The cache ------------------------------------------------------------------------------------

# model -> {arguments -> report}, both weakly: a report holds its model (the one passed in, or
# one made from it), so a strong value would keep the key alive for ever. A report lives as long
# as its caller keeps it; optimising again after that repeats steps that are idempotent on the
# model already optimised (eval, casts, channels_last, pruning the same zeros, checkpointing
# once) and measures it as it is then.
_Reports = Dict[Tuple[Any, ...], "weakref.ReferenceType[OptimizationReport]"]
_cache: "weakref.WeakKeyDictionary[Any, _Reports]" = weakref.WeakKeyDictionary()


def _wanted(asked: Optional[bool], by_level: bool, step: str, s: _Steps) -> bool:
    """Whether an optional step runs: as asked (True/False), else as the level says. A step
    turned off by the caller is reported as skipped; one the level leaves out is not."""
    if asked is False:
        s.skip(step, "turned off by the caller")
        return False
    return by_level if asked is None else True


def _signature(x: Any) -> Any:
    import torch
    if isinstance(x, torch.Tensor):
        return ("tensor", tuple(x.shape), str(x.dtype), str(x.device))
    if isinstance(x, (list, tuple)):
        return tuple(_signature(v) for v in x)
    if isinstance(x, dict):
        return tuple(sorted((k, _signature(v)) for k, v in x.items()))
    return repr(x)


def optimize(model: Any, level: Union[OptLevel, str, int] = OptLevel.BASIC,
             precision: Union[Precision, str] = Precision.FP32, mode: str = "inference",
             example_input: Any = None, device: Any = None, prune: float = 0.0,
             channels_last: Optional[bool] = None, checkpointing: Optional[bool] = None,
             compile: Optional[bool] = None) -> OptimizationReport:
    """Optimise model (an nn.Module) for mode ("inference" or "training") at level, in
    precision, and report each step and the bytes it saved.

    example_input (a tensor or a tuple of positional arguments; floating tensors are cast to
    the model's dtype and device) lets the activation bytes be measured and fp16 and
    torch.compile be tried on the model itself; device moves the model first (default: where
    its parameters are). prune (0.0 to 0.9, inference only) zeroes
    that fraction of each Linear/Conv weight. channels_last, checkpointing (activation
    checkpointing, training only) and compile (torch.compile) are applied from level AGGRESSIVE,
    AGGRESSIVE and EXPERIMENTAL on; True applies one at any level but NONE, False leaves it out
    (the report says so). Use ``report.model`` afterwards, under
    ``report.autocast()``, with inputs through ``report.cast_input``. The same model with the
    same arguments returns the cached report. Raises ValueError on a bad argument.
    """
    import torch
    lvl = OptLevel[level.upper()] if isinstance(level, str) else OptLevel(level)
    prec = Precision(precision.lower()) if isinstance(precision, str) else Precision(precision)
    if mode not in ("inference", "training"):
        raise ValueError(f"mode must be 'inference' or 'training', not {mode!r}")
    if not 0.0 <= prune <= 0.9:
        raise ValueError(f"prune must be within 0.0..0.9, not {prune}")
    if not isinstance(model, torch.nn.Module):
        raise ValueError("model must be a torch.nn.Module")
    dev = _device_of(model, device)
    key = (lvl, prec, mode, str(dev), float(prune), channels_last, checkpointing, compile,
           _signature(example_input))
    cached = _cache.get(model, {}).get(key)
    hit = cached() if cached is not None else None
    if hit is not None:
        return hit

    inference = mode == "inference"
    s = _Steps()
    if device is not None:
        model.to(dev)
    if example_input is not None:
        # On the model's device, floating tensors in the dtype its parameters have now.
        dt = next((p.dtype for p in model.parameters() if p.is_floating_point()), None)
        example_input = _map_tensors(example_input,
                                     lambda t: _cast_tensor(t.to(dev), dt, False))
    # Measured as the model comes, in the mode it is in.
    source_dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()),
                        torch.float32)
    before_p = param_bytes(model)
    before_a = (activation_bytes(model, example_input, inference)
                if example_input is not None else None)

    rep: Dict[str, Any] = {}
    out = model
    if lvl is OptLevel.NONE:
        s.skip("all", "level NONE changes nothing")
    else:
        if inference:
            model.eval()
        else:
            model.train()
        if prune > 0.0:
            if inference:
                _prune(model, prune, s)
            else:
                s.skip("prune", "pruning is applied for inference only")
        if inference:
            for p in model.parameters():
                p.requires_grad_(False)
            s.ok("inference_mode", "eval() and requires_grad off on every parameter")
        else:
            s.ok("training_mode", "train() with gradients on")
        if _wanted(channels_last, lvl >= OptLevel.AGGRESSIVE, "channels_last", s):
            if _has_module(model, (torch.nn.Conv2d,)):
                model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
                rep["channels_last"] = True
                s.ok("channels_last", "Conv2d weights in channels_last")
            else:
                s.skip("channels_last", "the model has no Conv2d")
        out = _precision(model, prec, mode, dev, example_input, s, rep)
        if _wanted(checkpointing, lvl >= OptLevel.AGGRESSIVE, "activation_checkpointing", s):
            if inference:
                s.skip("activation_checkpointing", "only training keeps activations")
            else:
                _checkpointing(out, s)
    report = OptimizationReport(level=lvl, precision=prec, mode=mode, device=str(dev),
                                steps=s.steps, param_bytes_before=before_p,
                                param_bytes_after=0, activation_bytes_before=before_a,
                                autocast_dtype=rep.get("autocast_dtype"),
                                input_dtype=rep.get("input_dtype"),
                                channels_last=rep.get("channels_last", False))
    x = report.cast_input(example_input) if example_input is not None else None
    if lvl is not OptLevel.NONE and _wanted(compile, lvl >= OptLevel.EXPERIMENTAL,
                                            "torch.compile", s):
        out = _compile(out, dev, x, inference, report.autocast(), s)
    # Measured on the eager module: a compiled wrapper runs the same tensors.
    eager = getattr(out, "_orig_mod", out)
    report.param_bytes_after = param_bytes(eager)
    if x is not None:
        report.activation_bytes_after = activation_bytes(eager, x, inference,
                                                         report.autocast())
    report._model = out
    report._source, report._example = model, example_input
    report._source_dtype = source_dtype
    _cache.setdefault(model, {})[key] = weakref.ref(report)
    return report
