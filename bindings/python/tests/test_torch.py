# SPDX-License-Identifier: Apache-2.0
"""gpum.torch with Debian's CPU PyTorch: AdaptiveBatchLoader over a small model whose step
raises torch.cuda.OutOfMemoryError above a batch size that changes during the run trains to
the same weights as a run without OOMs; apply_reservation sets PyTorch's memory fraction from
the reservation (CUDA's calls recorded, as this machine has no GPU)."""
import pytest

torch = pytest.importorskip("torch", reason="python3-torch is needed (scripts/deps.sh)")

import gpum  # noqa: E402
import gpum.torch as gt  # noqa: E402

N, D, E, WINDOWS = 1200, 8, 96, 12  # samples, features, effective batch, windows


def data():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(N, D, generator=g, dtype=torch.float64)
    y = x @ torch.randn(D, 1, generator=g, dtype=torch.float64) + 0.1
    return torch.utils.data.TensorDataset(x, y)


def model():
    torch.manual_seed(5)
    return torch.nn.Linear(D, 1).double()


def reference(ds):
    """Plain training: one batch of E samples per optimizer step."""
    m = model()
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    for w in range(WINDOWS):
        x, y = ds[w * E:(w + 1) * E]
        torch.nn.functional.mse_loss(m(x), y).backward()
        opt.step()
        opt.zero_grad()
    return m


def test_adaptive_loader_trains_as_without_ooms():
    ds = torch.utils.data.Subset(data(), range(WINDOWS * E))
    m = model()
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    cap = [70]
    steps = [0]

    def step(batch, info):
        x, y = batch
        steps[0] += 1
        if steps[0] % 9 == 0:
            cap[0] = 10 + (cap[0] * 7) % 60  # the free memory changes during the run
        if len(x) > cap[0]:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated)")
        loss = torch.nn.functional.mse_loss(m(x), y) * info.loss_scale
        loss.backward()
        if info.window_end:
            opt.step()
            opt.zero_grad()

    stats = gt.AdaptiveBatchLoader(ds, batch_size=64, max_batch=96, effective_batch=E).run(step)
    assert stats.ooms > 0 and stats.done == WINDOWS * E and stats.windows == WINDOWS
    ref = reference(data())
    for a, b in zip(m.parameters(), ref.parameters()):
        assert torch.allclose(a, b, rtol=1e-10, atol=1e-12)


def test_apply_reservation(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)

    class Props:
        total_memory = 80 << 30

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: Props())
    monkeypatch.setattr(torch.cuda, "set_per_process_memory_fraction",
                        lambda f, i: calls.append((f, i)))
    monkeypatch.setenv("GPUM_MEM_LIMIT", str(20 << 30))
    assert gt.apply_reservation() == [0.25, 0.25]
    assert calls == [(0.25, 0), (0.25, 1)]
    monkeypatch.delenv("GPUM_MEM_LIMIT")
    with pytest.raises(RuntimeError, match="GPUM_MEM_LIMIT is not set"):
        gt.apply_reservation()


def test_use_gpum_allocator_names_libgpum(monkeypatch):
    """The pluggable allocator is libgpum_torch.so beside the libgpum this package loaded."""
    seen = {}

    class Pluggable:
        def __init__(self, path, malloc, free):
            seen.update(path=path, malloc=malloc, free=free)

    monkeypatch.setattr(torch.cuda.memory, "CUDAPluggableAllocator", Pluggable, raising=False)
    monkeypatch.setattr(torch.cuda.memory, "change_current_allocator",
                        lambda a: seen.update(current=a), raising=False)
    a = gt.use_gpum_allocator()
    import os
    assert seen == {"path": os.path.join(os.path.dirname(os.path.abspath(gpum.library_path)),
                                         "libgpum_torch.so"),
                    "malloc": "gpum_torch_pluggable_malloc",
                    "free": "gpum_torch_pluggable_free", "current": a}
    assert os.path.exists(seen["path"])


def test_pool_stats_of_the_torch_pool(node):
    """gpum.torch.pool_stats shows what PyTorch's allocations through gpum's pool hold (the
    allocator's C entry points called as PyTorch calls them, on the simulated node)."""
    import ctypes
    lib = gpum._lib
    lib.gpum_torch_malloc.restype = ctypes.c_void_p
    lib.gpum_torch_malloc.argtypes = [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
    lib.gpum_torch_free.restype = None
    lib.gpum_torch_free.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int,
                                    ctypes.c_void_p]
    before = gt.pool_stats(0)
    p = lib.gpum_torch_malloc(64 << 20, 0, None)
    assert p
    s = gt.pool_stats(0)
    assert s.allocated_bytes == before.allocated_bytes + (64 << 20)
    assert s.reserved_bytes >= s.allocated_bytes
    lib.gpum_torch_free(p, 64 << 20, 0, None)
    assert gt.pool_stats(0).allocated_bytes == before.allocated_bytes
    with pytest.raises(gpum.GpumError):
        gt.pool_stats(99)


DIST = ("WORLD_SIZE", "LOCAL_WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
        "PET_NPROC_PER_NODE", "PET_NNODES")


def test_distributed_settings_from_the_reservation(gpumd, monkeypatch):
    """A reservation of two GPUs sets the world; the ranks are the launcher's, so without one
    the settings say so and init_distributed refuses instead of hanging in the rendezvous."""
    for k in DIST:
        monkeypatch.delenv(k, raising=False)
    st = gt.distributed_settings()
    assert (st.world_size, st.rank, st.local_rank, st.backend) == (1, None, None, "gloo")
    with gpum.reserve("1GiB", gpus=2, label="py-torch-dist"):
        st = gt.distributed_settings()
        assert (st.world_size, st.local_world_size, st.master_addr, st.master_port) == \
            (2, 2, "127.0.0.1", 29500)
        assert st.rank is None and not st.complete
        with pytest.raises(RuntimeError, match="RANK is not set"):
            gt.init_distributed()
        monkeypatch.setenv("RANK", "1")
        monkeypatch.setenv("LOCAL_RANK", "1")
        st = gt.distributed_settings("nccl")
        assert (st.rank, st.local_rank, st.backend) == (1, 1, "nccl") and st.complete
        monkeypatch.setenv("RANK", "2")
        with pytest.raises(ValueError, match="RANK=2 is outside WORLD_SIZE=2"):
            gt.distributed_settings()
    monkeypatch.setenv("WORLD_SIZE", "two")
    with pytest.raises(ValueError, match="WORLD_SIZE='two' is not an integer"):
        gt.distributed_settings()


def test_data_parallel_on_the_cpu(monkeypatch):
    """Without CUDA, "data_parallel" leaves the model as it is and says why; "auto" in a world
    of one picks it; "distributed" starts a one-process gloo group and wraps in DDP, whose
    output and gradients are the model's."""
    import torch.distributed as dist
    for k in DIST:
        monkeypatch.delenv(k, raising=False)
    m = torch.nn.Linear(4, 2)
    for strategy in ("data_parallel", "auto"):
        p = gt.data_parallel(m, strategy)
        assert (p.kind, p.model) == ("none", m) and "no CUDA" in p.reason
    with pytest.raises(ValueError, match="strategy must be"):
        gt.data_parallel(m, "pipeline")
    try:
        p = gt.data_parallel(m, "distributed")
        assert p.kind == "ddp" and dist.get_backend() == "gloo"
        x = torch.randn(5, 4)
        assert torch.allclose(p.model(x), m(x))
        p.model(x).sum().backward()
        assert m.weight.grad is not None  # DDP's backward reached the wrapped model
        assert gt.data_parallel(m, "auto").kind == "ddp"  # a group is started: distributed
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
