# SPDX-License-Identifier: Apache-2.0
"""gpum.GPUConfig and gpum.GPUManager: the presets' values, the builder against the
constructor, YAML both ways with unknown keys and bad values refused; a manager on the
simulated node (status with health, device_context without CUDA, the emergency release by hand
and by gpumd's pressure, alerts) that closes without leaving a thread behind."""
import os
import threading
import time

import pytest

import gpum
from conftest import gpum as run_gpum, jobs

GiB = 1 << 30


def test_presets_values():
    d = gpum.GPUConfig.preset("default")
    assert d == gpum.GPUConfig()
    assert (d.device_ids, d.memory_fraction, d.precision, d.optimization_level) == \
        (None, None, "mixed", "basic")
    assert d.monitoring and d.monitor_interval == 1.0 and d.pool_strategy == "balanced"
    t = gpum.GPUConfig.preset("training")
    assert (t.precision, t.enable_amp, t.memory_fraction, t.gc_threshold) == \
        ("mixed", True, 0.9, 0.85)
    assert t.gradient_checkpointing and t.gradient_accumulation_steps == 4
    assert t.enable_distributed and t.distributed_backend == "nccl" and t.device_ids is None
    i = gpum.GPUConfig.preset("inference")
    assert (i.precision, i.batching_strategy, i.max_batch_size, i.optimization_level) == \
        ("fp16", "adaptive", 128, "aggressive")
    lo = gpum.GPUConfig.preset("low-latency")
    assert (lo.device_ids, lo.memory_fraction, lo.precision, lo.max_batch_size) == \
        ([0], 0.95, "fp16", 1)
    assert (lo.max_wait_ms, lo.batching_strategy, lo.enable_tf32, lo.cudnn_benchmark) == \
        (0.1, "fixed_size", True, True)
    assert gpum.GPUConfig.preset("low_latency", max_batch_size=2).max_batch_size == 2
    with pytest.raises(ValueError, match="no preset 'fastest'"):
        gpum.GPUConfig.preset("fastest")


def test_builder_equals_constructor():
    built = (gpum.GPUConfig.builder().devices([0]).memory_fraction(0.8)
             .monitoring(interval=0.5).alerts(memory_pct=80).pool("greedy")
             .reserve("2GiB", timeout=30).precision("bf16").optimization("aggressive")
             .batching(max_batch_size=64, strategy="dynamic").distributed("gloo").build())
    assert built == gpum.GPUConfig(device_ids=[0], memory_fraction=0.8, monitor_interval=0.5,
                                   alert_memory_pct=80, pool_strategy="greedy",
                                   reserve_memory="2GiB", reserve_timeout=30,
                                   precision="bf16", optimization_level="aggressive",
                                   max_batch_size=64, batching_strategy="dynamic",
                                   enable_distributed=True, distributed_backend="gloo")
    assert gpum.GPUConfig.builder("training").build() == gpum.GPUConfig.preset("training")
    with pytest.raises(ValueError, match="memory_fraction"):
        gpum.GPUConfig.builder().memory_fraction(1.5).build()
    with pytest.raises(ValueError, match="'colour'"):
        gpum.GPUConfig.builder().set(colour="blue")


@pytest.mark.parametrize("name", ["default", "training", "inference", "low-latency"])
def test_yaml_round_trip(name, tmp_path):
    cfg = gpum.GPUConfig.preset(name, reserve_memory="3GiB", alert_temperature_c=80.0)
    text = cfg.to_yaml()
    assert gpum.GPUConfig.from_yaml(text) == cfg
    path = tmp_path / "gpu.yaml"
    path.write_text(text)
    assert gpum.GPUConfig.from_yaml(path) == cfg
    assert gpum.GPUConfig.from_yaml(str(path)) == cfg


def test_yaml_preset_key_and_unknown_keys():
    cfg = gpum.GPUConfig.from_yaml("preset: training\nmonitor_interval: 0.25\n")
    assert cfg == gpum.GPUConfig.preset("training", monitor_interval=0.25)
    with pytest.raises(ValueError, match="unknown key 'colour'"):
        gpum.GPUConfig.from_yaml("device_ids: [0]\ncolour: blue\n")
    with pytest.raises(ValueError, match="precision"):
        gpum.GPUConfig.from_yaml("precision: fp8\n")


@pytest.mark.parametrize("field,value", [
    ("device_ids", []), ("device_ids", [0, 0]), ("device_ids", [-1]), ("device_ids", ["0"]),
    ("memory_fraction", 0), ("memory_fraction", 1.2), ("pool_strategy", "fastest"),
    ("monitor_interval", 0), ("alert_memory_pct", 120), ("alert_temperature_c", -3),
    ("optimization_level", "max"), ("precision", "fp8"), ("reserve_memory", -1),
    ("reserve_gpus", 0), ("gc_threshold", 2), ("max_batch_size", 0), ("monitoring", "yes"),
    ("gradient_accumulation_steps", 1.5), ("distributed_backend", "tcp"),
    ("memory_growth", "sometimes"), ("multi_gpu_strategy", "model_parallel"), ("pool_size", 0),
    ("pool_size", ""), ("fallback_to_cpu", "cpu"),
])
def test_bad_values_refused(field, value):
    with pytest.raises(ValueError, match=f"GPUConfig.{field}:"):
        gpum.GPUConfig(**{field: value})


def test_status_lists_devices_with_health(gpumd):
    cfg = gpum.GPUConfig(monitor_interval=0.1)
    with gpum.GPUManager(cfg) as m:
        st = m.status()
        assert [d["index"] for d in st["devices"]] == [0, 1]
        assert st["health"] == {0: st["devices"][0]["state"], 1: st["devices"][1]["state"]}
        assert set(st["health"].values()) <= {"AVAILABLE", "BUSY"}
        assert all(d["memory"]["total"] == 80 * GiB for d in st["devices"])
        assert st["memory"]["total"] == 160 * GiB
        assert st["monitoring"] and st["reservation"] is None and not st["cuda"]
    with gpum.GPUManager(gpum.GPUConfig(device_ids=[1], monitoring=False)) as m:
        st = m.status()
        assert [d["index"] for d in st["devices"]] == [1] and not st["monitoring"]
    with pytest.raises(ValueError, match=r"no GPU \[5\]"):
        gpum.GPUManager(gpum.GPUConfig(device_ids=[0, 5]))


def test_device_context_without_cuda(gpumd):
    with gpum.GPUManager(gpum.GPUConfig(monitoring=False)) as m:
        with m.device_context() as dev:
            assert (dev.index, dev.device, dev.cuda) == (0, "cpu", False)
            assert "PyTorch is not installed" in dev.reason or \
                "torch.cuda.is_available() is False" in dev.reason
        with m.device_context(1) as dev:
            assert dev.index == 1 and not dev.cuda
        with pytest.raises(ValueError, match="not one of the manager's"):
            with m.device_context(3):
                pass


def test_emergency_release_reports(gpumd):
    with gpum.GPUManager(gpum.GPUConfig(monitoring=False, max_memory_cache_ratio=0.0)) as m:
        first = m.emergency_release()
        assert first.trigger == "manual" and first.pool_bytes == 0 and first.cache_bytes == 0
        assert any("no pool" in s for s in first.skipped)
        assert any(s.startswith("torch.cuda.empty_cache:") for s in first.skipped)
        pool = m.pool("simulated", capacity="1GiB")
        ptr = pool.alloc(64 << 20)
        pool.free(ptr)  # a cached segment now
        tc = m.tier_cache(device_budget="1MiB", pinned_limit="1MiB")
        tc.put("k", b"x" * 4096)
        rep = m.emergency_release()
        assert rep.pool_bytes > 0 and pool.stats().reserved_bytes == 0
        assert rep.cache_bytes == 4096 and tc.lookup("k").tier != gpum.Tier.DEVICE
        assert tc.get("k") == b"x" * 4096  # demoted, not lost
        assert any("pool trimmed" in a for a in rep.actions)
        assert any("demoted 4096" in a for a in rep.actions)
        assert m.releases == [first, rep]
    assert tc.closed


def test_pressure_triggers_release_and_alerts(gpumd, node):
    alerts, pressures = [], []
    got = threading.Event()
    cfg = gpum.GPUConfig(reserve_memory="4GiB", reserve_set_env=False, monitor_interval=0.1,
                         alert_memory_pct=50)
    with gpum.GPUManager(cfg, label="py-manager-pressure") as m:
        m.on_alert(alerts.append)
        m.on_pressure(lambda p: (pressures.append(p), got.set()))
        st = m.status()["reservation"]
        assert st["state"] == "GRANTED" and st["limit"] == 4 * GiB
        dev = st["devices"][0]
        assert [d["index"] for d in m.status()["devices"]] == [dev]  # the grant's GPU
        pool = m.pool("simulated", capacity="1GiB")
        pool.free(pool.alloc(64 << 20))
        pid = run_gpum("sim", "hold", node, "--device", str(dev), "--bytes", "76GiB").stdout
        try:
            assert got.wait(30), "no pressure event within 30 s"
            for _ in range(300):
                if any(a.device == dev and a.metric == "memory_used_pct" for a in alerts):
                    break
                time.sleep(0.1)
        finally:
            os.kill(int(pid.strip()), 9)
        rel = [r for r in m.releases if r.trigger == "pressure"]
        assert rel and rel[0].pool_bytes > 0, m.releases
        assert pressures[0].device == dev
        assert any(a.device == dev and a.metric == "memory_used_pct" and a.fired
                   for a in alerts), alerts
    assert not [j for j in jobs() if j["label"] == "py-manager-pressure"]


def test_reserve_fallback_cpu(tmp_path, monkeypatch):
    """fallback_to_cpu (the builder's reserve(fallback="cpu")): without gpumd the manager opens anyway, its reservation on the
    CPU (CUDA_VISIBLE_DEVICES="" while it is open, restored after), its GPUs the node's, and
    device_context chooses the CPU saying why; without the fallback it raises."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
    sock = str(tmp_path / "no-gpumd.sock")
    cfg = (gpum.GPUConfig.builder().monitoring(False)
           .reserve("1GiB", timeout=5, fallback="cpu").build())
    assert cfg.fallback_to_cpu
    with pytest.raises(ValueError, match="fallback must be 'cpu' or None"):
        gpum.GPUConfig.builder().reserve("1GiB", fallback="gpu")
    assert gpum.GPUConfig.from_yaml(cfg.to_yaml()) == cfg
    with gpum.GPUManager(cfg, socket=sock) as m:
        res = m.status()["reservation"]
        assert res["on_cpu"] and "cannot connect to gpumd" in res["fallback_reason"]
        assert m.device_ids == [g.index for g in gpum.devices()]
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "" and os.environ["GPUM_FALLBACK"] == "cpu"
        with m.device_context() as dev:
            assert (dev.device, dev.cuda) == ("cpu", False)
            assert dev.reason.startswith("the reservation runs on the CPU: cannot connect")
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "7" and "GPUM_FALLBACK" not in os.environ
    with pytest.raises(gpum.DaemonUnavailable):
        gpum.GPUManager(gpum.GPUConfig(monitoring=False, reserve_memory="1GiB"), socket=sock)


def test_close_leaves_no_threads(gpumd):
    before = set(threading.enumerate())
    m = gpum.GPUManager(gpum.GPUConfig(reserve_memory="1GiB", reserve_set_env=False,
                                       monitor_interval=0.1), label="py-manager-close")
    assert len(set(threading.enumerate()) - before) >= 3  # monitor (2), session (1)
    assert [j["label"] for j in jobs() if j["label"] == "py-manager-close"]
    m.close()
    m.close()  # idempotent
    assert m.closed and set(threading.enumerate()) <= before
    assert not [j for j in jobs() if j["label"] == "py-manager-close"]


def test_optimize_applies_the_config(gpumd):
    """GPUManager.optimize applies the configuration's level and precision (gpum.optimize)."""
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    cfg = gpum.GPUConfig(optimization_level="basic", precision="bf16", monitoring=False)
    with gpum.GPUManager(cfg) as m:
        rep = m.optimize(model)
    assert next(rep.model.parameters()).dtype == torch.bfloat16
    assert rep.param_bytes_after * 2 == rep.param_bytes_before
    assert not next(rep.model.parameters()).requires_grad  # inference: eval, no gradients
    cfg = gpum.GPUConfig(optimization_level="experimental", enable_compile=False, precision="fp32",
                         monitoring=False)
    with gpum.GPUManager(cfg) as m:
        rep = m.optimize(torch.nn.Linear(4, 4))
    step = rep.step("torch.compile")  # enable_compile off: skipped, and says so
    assert not step.applied and step.reason == "turned off by the caller"


def test_optimize_switches_of_the_config(gpumd):
    """gradient_checkpointing turns checkpointing on below AGGRESSIVE (training);
    enable_channels_last off leaves a CNN's weights as they are at AGGRESSIVE;
    optimize_for_inference off makes training the default mode."""
    torch = pytest.importorskip("torch")
    mlp = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(4)])
    cfg = gpum.GPUConfig(optimization_level="basic", precision="fp32", monitoring=False,
                         gradient_checkpointing=True, optimize_for_inference=False)
    with gpum.GPUManager(cfg) as m:
        rep = m.optimize(mlp)
    assert rep.mode == "training" and rep.step("activation_checkpointing").applied
    cnn = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU())
    cfg = gpum.GPUConfig(optimization_level="aggressive", precision="fp32", monitoring=False,
                         enable_channels_last=False)
    with gpum.GPUManager(cfg) as m:
        rep = m.optimize(cnn)
    assert not rep.channels_last and not rep.step("channels_last").applied
    assert cnn[0].weight.is_contiguous()  # not channels_last



# Seed 003's two YAML files, as its README shows them.
HFT_YAML = """
devices:
  - device_id: 0
    memory_fraction: 0.95
    priority: 0

compute:
  precision: fp16
  enable_tf32: true
  enable_cudnn: true
  cudnn_benchmark: true

batching:
  max_batch_size: 1
  max_wait_time_ms: 0.1
  strategy: fixed_size

optimization:
  optimize_for_inference: true
  enable_jit: true
"""

TRAINING_YAML = """
devices:
  - device_id: 0
    memory_fraction: 0.9
  - device_id: 1
    memory_fraction: 0.9

memory:
  growth_policy: grow_as_needed
  pool_size_mb: 4096
  gc_threshold: 0.85

compute:
  precision: mixed
  enable_amp: true

optimization:
  gradient_checkpointing: true
  gradient_accumulation_steps: 4

multi_gpu_strategy: distributed
"""


def test_seed_003_nested_yaml():
    hft = gpum.GPUConfig.from_yaml(HFT_YAML)
    assert hft == gpum.GPUConfig(device_ids=[0], memory_fraction=0.95, precision="fp16",
                                 enable_tf32=True, enable_cudnn=True, cudnn_benchmark=True,
                                 max_batch_size=1, max_wait_ms=0.1,
                                 batching_strategy="fixed_size", optimize_for_inference=True,
                                 enable_compile=True)
    tr = gpum.GPUConfig.from_yaml(TRAINING_YAML)
    assert (tr.device_ids, tr.memory_fraction, tr.memory_growth, tr.pool_size,
            tr.gc_threshold) == ([0, 1], 0.9, "grow_as_needed", 4096 << 20, 0.85)
    assert (tr.precision, tr.enable_amp, tr.gradient_checkpointing,
            tr.gradient_accumulation_steps) == ("mixed", True, True, 4)
    assert tr.multi_gpu_strategy == "distributed" and tr.enable_distributed
    # The flat form reads back equal, and a section mixes with flat keys and a preset.
    assert gpum.GPUConfig.from_yaml(tr.to_yaml()) == tr
    mixed = gpum.GPUConfig.from_yaml("preset: inference\nbatching:\n  max_batch_size: 4\n")
    assert mixed == gpum.GPUConfig.preset("inference", max_batch_size=4)
    # Devices in priority order (lower first, then as listed).
    prio = gpum.GPUConfig.from_dict({"devices": [{"device_id": 1, "priority": 2},
                                                 {"device_id": 0, "priority": 1},
                                                 {"device_id": 3, "priority": 2}]})
    assert prio.device_ids == [0, 1, 3] and prio.memory_fraction is None


@pytest.mark.parametrize("text,message", [
    ("compute:\n  colour: blue\n", "unknown key 'compute.colour'"),
    ("compute: fp16\n", "section 'compute' is a mapping"),
    ("devices:\n  - device_id: 0\n    memory_fraction: 0.5\n"
     "  - device_id: 1\n    memory_fraction: 0.9\n", "different memory_fraction"),
    ("devices:\n  - memory_fraction: 0.5\n", r"devices\[0\] needs a device_id"),
    ("devices:\n  - device_id: 0\n    speed: 3\n", r"unknown key 'devices\[0\].speed'"),
    ("devices: []\n", "non-empty list"),
    ("device_ids: [0]\ndevices:\n  - device_id: 1\n", "sets device_ids, which is set"),
    ("precision: fp16\ncompute:\n  precision: bf16\n", "compute.precision sets precision"),
    ("memory:\n  pool_size_mb: -1\n", "pool_size_mb must be a positive number"),
    ("compute:\n  precision: fp8\n", "GPUConfig.precision:"),
])
def test_nested_yaml_errors(text, message):
    with pytest.raises(ValueError, match=message):
        gpum.GPUConfig.from_yaml(text)


def test_seed_003_builder_names():
    import enum

    class PrecisionMode(enum.Enum):  # seed 003's enums, by name
        MIXED = "mixed"

    class MemoryGrowthPolicy(enum.Enum):
        GROW_AS_NEEDED = 1

    cfg = (gpum.GPUConfigBuilder().auto_detect_devices().set_precision(PrecisionMode.MIXED)
           .set_memory_policy(MemoryGrowthPolicy.GROW_AS_NEEDED)
           .set_batching(max_batch_size=128, strategy="adaptive")
           .enable_multi_gpu("data_parallel").build())
    assert cfg == gpum.GPUConfig(device_ids=None, precision="mixed",
                                 memory_growth="grow_as_needed", max_batch_size=128,
                                 batching_strategy="adaptive", multi_gpu_strategy="data_parallel")
    assert gpum.GPUConfig.builder().memory("preallocate", pool_size="1GiB") \
        .fallback_to_cpu().build() == gpum.GPUConfig(memory_growth="preallocate",
                                                     pool_size="1GiB", fallback_to_cpu=True)


def test_contradictions_refused():
    with pytest.raises(ValueError, match="GPUConfig.enable_amp: precision 'mixed'"):
        gpum.GPUConfig(precision="mixed", enable_amp=False)
    assert gpum.GPUConfig(precision="fp16", enable_amp=False).precision == "fp16"
    with pytest.raises(ValueError, match="GPUConfig.enable_distributed: contradicts"):
        gpum.GPUConfig(enable_distributed=True, multi_gpu_strategy="data_parallel")
    with pytest.raises(ValueError, match="GPUConfig.memory_growth: 'preallocate' needs pool_size"):
        gpum.GPUConfig(memory_growth="preallocate")
    # enable_distributed (seed 000) and the strategy "distributed" (seed 003) are one value.
    assert gpum.GPUConfig(enable_distributed=True) == \
        gpum.GPUConfig(multi_gpu_strategy="distributed")


def test_device_context_sets_torch_backend_flags(gpumd):
    torch = pytest.importorskip("torch")
    b = torch.backends
    before = (b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32, b.cudnn.enabled, b.cudnn.benchmark)
    want = (not before[0], not before[1], not before[2], not before[3])
    cfg = gpum.GPUConfig(monitoring=False, enable_tf32=want[0], enable_cudnn=want[2],
                         cudnn_benchmark=want[3])
    if before[0] != before[1]:  # one switch sets both TF32 flags: compare from equal ones
        b.cudnn.allow_tf32 = before[0]
        before = (before[0], before[0], before[2], before[3])
        want = (want[0], want[0], want[2], want[3])
    with gpum.GPUManager(cfg) as m:
        with m.device_context():
            assert (b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32, b.cudnn.enabled,
                    b.cudnn.benchmark) == want
    assert (b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32, b.cudnn.enabled,
            b.cudnn.benchmark) == before


def test_batch_processor_takes_the_batching_config(gpumd):
    cfg = gpum.GPUConfig(monitoring=False, max_batch_size=3, max_wait_ms=250.0,
                         batching_strategy="fixed_size")
    gate = threading.Event()
    sizes = []

    def model(xs):
        gate.wait(30)
        sizes.append(len(xs))
        return [x + 1 for x in xs]

    with gpum.GPUManager(cfg) as m:
        bp = m.batch_processor()
        bp.register_model("inc", model)
        o = bp.options("inc")
        assert (o["max_batch_size"], o["max_queue_delay"], o["strategy"], o["preferred_sizes"],
                o["device"], o["memory_bound"]) == (3, 0.25, "fixed_size", (3,), "cpu", False)
        futs = [bp.submit("inc", i) for i in range(10)]
        gate.set()
        assert [f.result(30) for f in futs] == list(range(1, 11))
        assert max(sizes) <= 3 and sum(sizes) == 10
        bp.register_model("inc2", model, max_batch_size=5, strategy="dynamic")
        assert (bp.options("inc2")["max_batch_size"], bp.options("inc2")["preferred_sizes"]) \
            == (5, ())
        with pytest.raises(ValueError, match="strategy must be one of"):
            bp.register_model("bad", model, strategy="greedy")
    with pytest.raises(KeyError):  # closed with the manager
        bp.submit("inc", 1)


def test_pool_size_and_preallocate(gpumd):
    cfg = gpum.GPUConfig(monitoring=False, pool_size="256MiB", memory_growth="preallocate")
    with gpum.GPUManager(cfg) as m:
        p = m.pool("simulated", capacity="1GiB")
        st = p.stats()
        assert st.reserved_bytes >= 256 << 20 and st.allocated_bytes == 0  # taken up front
        assert st.limit == 256 << 20
        with pytest.raises(gpum.OutOfMemory):
            p.alloc(300 << 20)  # over pool_size


def test_gc_threshold_triggers_release(gpumd, node):
    cfg = gpum.GPUConfig(device_ids=[1], monitor_interval=0.1, gc_threshold=0.5,
                         alert_memory_pct=None)
    with gpum.GPUManager(cfg) as m:
        got = threading.Event()
        m.on_alert(lambda a: got.set() if a.fired and a.rule.startswith("memory_used_pct > 50")
                   else None)
        pid = run_gpum("sim", "hold", node, "--device", "1", "--bytes", "60GiB").stdout
        try:
            assert got.wait(30), "no gc_threshold alert within 30 s"
        finally:
            os.kill(int(pid.strip()), 9)
        rel = [r for r in m.releases if r.trigger == "gc_threshold"]
        assert rel, m.releases


def test_fallback_to_cpu(gpumd):
    cfg = gpum.GPUConfig(monitoring=False, reserve_memory="4TiB", reserve_set_env=False,
                         fallback_to_cpu=True)
    with gpum.GPUManager(cfg, label="py-manager-fallback") as m:
        st = m.status()
        assert st["reservation"]["on_cpu"] and m.device_ids == [0, 1]  # the node's
        assert "can ever hold that" in st["reservation"]["fallback_reason"]
        with m.device_context() as dev:
            assert dev.device == "cpu" and not dev.cuda
            assert dev.reason.startswith("the reservation runs on the CPU: ")
    with pytest.raises(gpum.NeverFits):
        gpum.GPUManager(gpum.GPUConfig(monitoring=False, reserve_memory="4TiB",
                                       reserve_set_env=False))


def test_profile_follows_enable_profiling(gpumd):
    name = "py-manager-profile-" + str(os.getpid())
    with gpum.GPUManager(gpum.GPUConfig(monitoring=False)) as m:
        with m.profile(name):
            pass

        @m.profile(name)
        def f():
            return 7
        assert f() == 7
    with pytest.raises(gpum.NotFound):
        gpum.summary(name)  # profiling off: nothing recorded
    with gpum.GPUManager(gpum.GPUConfig(monitoring=False, enable_profiling=True)) as m:
        with m.profile(name):
            pass
        assert m.profile(name)(lambda: 5)() == 5
    assert gpum.summary(name).count == 2


def test_parallelize(gpumd):
    torch = pytest.importorskip("torch")
    import torch.distributed as dist
    model = torch.nn.Linear(4, 2)
    x = torch.randn(3, 4)
    with gpum.GPUManager(gpum.GPUConfig(monitoring=False,
                                        multi_gpu_strategy="data_parallel")) as m:
        p = m.parallelize(model)
    assert p.kind == "none" and p.model is model and "no CUDA" in p.reason
    with gpum.GPUManager(gpum.GPUConfig(monitoring=False)) as m:
        assert m.parallelize(model).kind == "none"  # the strategy "none"
    saved = {k: os.environ.pop(k, None) for k in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    try:
        cfg = gpum.GPUConfig(monitoring=False, multi_gpu_strategy="distributed",
                             distributed_backend="gloo")
        with gpum.GPUManager(cfg) as m:
            p = m.parallelize(model)
        assert p.kind == "ddp" and dist.is_initialized() and dist.get_world_size() == 1
        assert isinstance(p.model, torch.nn.parallel.DistributedDataParallel)
        assert torch.allclose(p.model(x), model(x))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
        os.environ.update({k: v for k, v in saved.items() if v is not None})
