#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Trains a small regression model the gpum way: the estimator sizes the reservation, gpumd
grants it (CUDA then sees only the granted GPU), and the adaptive loader keeps the batch as
large as memory allows while the effective batch stays 256.

    GPUM_SOCKET=... python3 examples/python/train.py [EPOCHS]

Runs on the CPU when there is no GPU (the reservation is then of gpumd's simulated or host
devices); needs gpumd running and PyTorch installed.
"""
import sys

import gpum

EPOCHS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
FEATURES, HIDDEN, EFFECTIVE = 32, 128, 256

# 1. How much memory: the estimator, for the largest micro-batch we will allow.
est = gpum.estimate("mlp", mlp=f"{FEATURES}/{HIDDEN}/1", batch=1024, mode="training",
                    optimizer="sgd")
print(f"estimate: {est.total / 2**20:.0f} MiB per GPU for batches of up to 1024")

# 2. Reserve it before CUDA is initialised: torch is imported inside the block.
with gpum.reserve(mem=est.total, timeout="5m", label="example-train") as r:
    import torch
    import gpum.torch as gt

    print(f"reservation {r.id}: {r.limit / 2**20:.0f} MiB on {[d.uuid for d in r.devices]}")
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    if dev == "cuda":
        gt.apply_reservation()  # PyTorch's allocator stops at the reservation

    torch.manual_seed(0)
    x = torch.randn(8192, FEATURES)
    y = x @ torch.randn(FEATURES, 1) + 0.5
    data = torch.utils.data.TensorDataset(x, y)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU(),
                                torch.nn.Linear(HIDDEN, 1)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)

    def step(batch, info):
        xb, yb = (t.to(dev) for t in batch)
        loss = torch.nn.functional.mse_loss(model(xb), yb) * info.loss_scale
        loss.backward()
        if info.window_end:  # an effective batch of 256, however it was split
            opt.step()
            opt.zero_grad()

    loader = gt.AdaptiveBatchLoader(data, batch_size=64, max_batch=1024,
                                    effective_batch=EFFECTIVE)
    for epoch in range(EPOCHS):
        stats = loader.run(step)
        with torch.no_grad():
            loss = torch.nn.functional.mse_loss(model(x.to(dev)), y.to(dev)).item()
        print(f"epoch {epoch}: loss {loss:.4f}, {stats.steps} steps, batches "
              f"{stats.smallest}..{stats.largest}, {stats.ooms} out-of-memory retries")
