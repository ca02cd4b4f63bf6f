# SPDX-License-Identifier: Apache-2.0
"""gpum.reserve against a real gpumd on a simulated node: the grant's environment, devices and
limit; release at the block's end and on an exception; a timeout; the queue position while
waiting; memory pressure reaching the callback; gpumd releasing the reservation of a Python
process killed with SIGKILL; errors without a daemon and with CUDA initialised already."""
import os
import subprocess
import sys
import textwrap
import threading
import types

import pytest

import gpum
from conftest import gpum as run_gpum, jobs

GiB = 1 << 30


def test_grant_environment_and_release(gpumd):
    with gpum.reserve(mem="10GiB", label="py-env") as r:
        assert r.state == "GRANTED" and r.limit == 10 * GiB
        assert len(r.devices) == 1 and r.devices[0].uuid.startswith("GPU-")
        assert r.devices[0].memory_total == 80 * GiB
        assert os.environ["CUDA_VISIBLE_DEVICES"] == r.devices[0].uuid
        assert os.environ["GPUM_MEM_LIMIT"] == str(10 * GiB)
        assert os.environ["GPUM_RESERVATION_ID"] == r.id
        assert [j["id"] for j in jobs() if j["label"] == "py-env"] == [r.id]
        # Sizes print as libgpum writes them; they stay ints.
        assert str(r.limit) == repr(r.limit) == f"{r.limit}" == "10.00 GiB"
        assert f"{r.limit:d}" == str(10 * GiB) and r.limit + 0 == 10 * GiB
        assert str(r.devices[0].memory_total) == "80.00 GiB"
        gpus = ", ".join(str(d.index) for d in r.devices)
        assert repr(r) == f"<gpum.Reservation {r.id} GRANTED: 10.00 GiB on GPU {gpus}>", repr(r)
    assert not [j for j in jobs() if j["label"] == "py-env"]
    assert "GPUM_RESERVATION_ID" not in os.environ  # put back as it was


def test_release_on_exception(gpumd):
    with pytest.raises(RuntimeError):
        with gpum.reserve("5GiB", label="py-exc"):
            raise RuntimeError("the job failed")
    assert not [j for j in jobs() if j["label"] == "py-exc"]


def test_queue_progress_and_timeout(gpumd):
    # Another holder takes most of both GPUs for a while.
    out = run_gpum("reserve", "--mem", "70GiB", "--gpus", "2", "--ttl", "10m", "-q").stdout
    holder = out.strip()
    try:
        with pytest.raises(gpum.Timeout):
            with gpum.reserve("20GiB", timeout="300ms", label="py-timeout"):
                pass
        assert not [j for j in jobs() if j["label"] == "py-timeout"]  # cancelled
        positions, granted = [], threading.Event()

        def waiter():
            with gpum.reserve("20GiB", timeout="30s", label="py-queued",
                              on_queue=positions.append, set_env=False):
                granted.set()

        t = threading.Thread(target=waiter)
        t.start()
        # Queued: it shows in gpumd's queue; then the holder leaves and it is granted.
        for _ in range(300):
            if [j for j in jobs() if j["label"] == "py-queued" and j["state"] == "QUEUED"]:
                break
            threading.Event().wait(0.01)  # polling gpumd's state, not standing in for it
        run_gpum("release", holder)
        holder = None
        t.join(30)
        assert granted.is_set() and positions and positions[0] == 0
    finally:
        if holder:
            run_gpum("release", holder, check=False)


def test_pressure_reaches_the_callback(gpumd, node):
    got = threading.Event()
    seen = []
    with gpum.reserve("4GiB", label="py-pressure", set_env=False) as r:
        r.on_pressure(lambda p: (seen.append(p), got.set()))
        dev = r.devices[0].index
        pid = run_gpum("sim", "hold", node, "--device", str(dev), "--bytes", "76GiB").stdout
        try:
            assert got.wait(30), "no pressure event within 30 s"
        finally:
            os.kill(int(pid.strip()), 9)
    assert seen[0].device == dev and seen[0].level in ("high", "critical")
    assert seen[0].used_ratio > 0.9


def test_sigkill_releases(gpumd, tmp_path):
    ready = tmp_path / "ready"
    code = textwrap.dedent(f"""
        import gpum, pathlib, time
        with gpum.reserve("3GiB", label="py-killed") as r:
            pathlib.Path({str(ready)!r}).write_text(r.id)
            time.sleep(600)
    """)
    p = subprocess.Popen([sys.executable, "-c", code], env=os.environ.copy())
    try:
        for _ in range(3000):
            if ready.exists() and ready.read_text():
                break
            threading.Event().wait(0.01)
        rid = ready.read_text()
        assert [j["id"] for j in jobs()] .count(rid) == 1
    finally:
        p.kill()
        p.wait()
    for _ in range(500):  # gpumd sees the connection close
        if rid not in [j["id"] for j in jobs()]:
            break
        threading.Event().wait(0.01)
    assert rid not in [j["id"] for j in jobs()]


def test_sigterm_releases_through_the_block(gpumd, tmp_path):
    """SIGTERM during the block becomes SystemExit: the block's exit releases the reservation
    (the process ends with 128 + 15, not killed by the signal)."""
    ready, after = tmp_path / "ready", tmp_path / "after"
    code = textwrap.dedent(f"""
        import gpum, pathlib, time
        try:
            with gpum.reserve("2GiB", label="py-term") as r:
                pathlib.Path({str(ready)!r}).write_text(r.id)
                time.sleep(600)
        finally:
            pathlib.Path({str(after)!r}).write_text("released")
    """)
    p = subprocess.Popen([sys.executable, "-c", code], env=os.environ.copy())
    for _ in range(3000):
        if ready.exists() and ready.read_text():
            break
        threading.Event().wait(0.01)
    rid = ready.read_text()
    p.terminate()
    assert p.wait(30) == 143
    assert after.read_text() == "released"
    assert rid not in [j["id"] for j in jobs()]


def test_no_daemon(tmp_path, node):
    with pytest.raises(gpum.DaemonUnavailable) as e:
        with gpum.reserve("1GiB", socket=str(tmp_path / "none.sock")):
            pass
    assert "cannot connect to gpumd" in str(e.value)


def test_cuda_initialised_already(monkeypatch):
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(is_initialized=lambda: True))
    monkeypatch.setitem(sys.modules, "torch", fake)
    with pytest.raises(gpum.CudaAlreadyInitialized) as e:
        with gpum.reserve("1GiB"):
            pass
    assert "before the first use of torch.cuda" in str(e.value)


DIST = ("WORLD_SIZE", "LOCAL_WORLD_SIZE", "PET_NPROC_PER_NODE", "PET_NNODES", "MASTER_ADDR",
        "MASTER_PORT", "TORCH_NCCL_ASYNC_ERROR_HANDLING")


def test_distributed_environment(gpumd, monkeypatch):
    for k in DIST:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("MASTER_PORT", "31000")  # the user's value wins
    with gpum.reserve("1GiB", gpus=2, label="py-dist") as r:
        env = r.env()
        assert env["WORLD_SIZE"] == ("2", True) and env["MASTER_PORT"] == ("29500", True)
        assert os.environ["WORLD_SIZE"] == "2" and os.environ["LOCAL_WORLD_SIZE"] == "2"
        assert os.environ["PET_NPROC_PER_NODE"] == "2" and os.environ["PET_NNODES"] == "1"
        assert os.environ["MASTER_ADDR"] == "127.0.0.1"
        assert os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1"
        assert os.environ["MASTER_PORT"] == "31000"
    assert "WORLD_SIZE" not in os.environ and os.environ["MASTER_PORT"] == "31000"
    with gpum.reserve("1GiB", label="py-one") as r:
        assert not set(DIST) & set(r.env()) and "WORLD_SIZE" not in os.environ
    with gpum.reserve("1GiB", gpus=2, distributed=False, set_env=False) as r:
        assert not set(DIST) & set(r.env())
    with gpum.reserve("1GiB", distributed=True, master_port=29611, set_env=False) as r:
        env = r.env()
        assert env["WORLD_SIZE"] == ("1", True) and env["MASTER_PORT"] == ("29611", True)


def test_fallback_cpu(gpumd, tmp_path, node, monkeypatch):
    """fallback="cpu": when no GPU can serve the block (none could ever hold it, gpumd not
    there) it runs on the CPU with the environment saying so, as gpum run --fallback cpu; a
    request that fits is a reservation as always; without it the errors are raised."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "before")
    with gpum.reserve("500GiB", fallback="cpu", label="py-fb") as r:
        assert r.on_cpu and "can ever hold" in r.fallback_reason
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "" and os.environ["GPUM_FALLBACK"] == "cpu"
        assert os.environ["GPUM_FALLBACK_REASON"] == r.fallback_reason
        assert r.id == "" and r.devices == () and r.limit == 0
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "before" and "GPUM_FALLBACK" not in os.environ
    with gpum.reserve("1GiB", fallback="cpu", socket=str(tmp_path / "none.sock"),
                      set_env=False) as r:
        assert r.on_cpu and r.env()["GPUM_FALLBACK"] == ("cpu", False)
    with gpum.reserve("1GiB", fallback="cpu", label="py-fb-ok", set_env=False) as r:
        assert not r.on_cpu and r.fallback_reason is None and r.state == "GRANTED"
    with pytest.raises(gpum.NeverFits):
        with gpum.reserve("500GiB"):
            pass
    with pytest.raises(ValueError):
        gpum.reserve("1GiB", fallback="gpu")
