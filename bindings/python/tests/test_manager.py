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
    with pytest.raises(ValueError, match="'devices', 'compute'"):  # seed 003's nesting
        gpum.GPUConfig.from_yaml("devices:\n  - device_id: 0\ncompute:\n  precision: fp16\n")
    with pytest.raises(ValueError, match="precision"):
        gpum.GPUConfig.from_yaml("precision: fp8\n")


@pytest.mark.parametrize("field,value", [
    ("device_ids", []), ("device_ids", [0, 0]), ("device_ids", [-1]), ("device_ids", ["0"]),
    ("memory_fraction", 0), ("memory_fraction", 1.2), ("pool_strategy", "fastest"),
    ("monitor_interval", 0), ("alert_memory_pct", 120), ("alert_temperature_c", -3),
    ("optimization_level", "max"), ("precision", "fp8"), ("reserve_memory", -1),
    ("reserve_gpus", 0), ("gc_threshold", 2), ("max_batch_size", 0), ("monitoring", "yes"),
    ("gradient_accumulation_steps", 1.5), ("distributed_backend", "tcp"),
    ("reserve_fallback", "gpu"),
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
    """reserve_fallback="cpu": without gpumd the manager opens anyway, its reservation on the
    CPU (CUDA_VISIBLE_DEVICES="" while it is open, restored after), its GPUs the node's, and
    device_context chooses the CPU saying why; without the fallback it raises."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
    sock = str(tmp_path / "no-gpumd.sock")
    cfg = (gpum.GPUConfig.builder().monitoring(False)
           .reserve("1GiB", timeout=5, fallback="cpu").build())
    assert cfg.reserve_fallback == "cpu"
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
    with pytest.raises(KeyError):  # taken as aggressive: compile is not even considered
        rep.step("torch.compile")

