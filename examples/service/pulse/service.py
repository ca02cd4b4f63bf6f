# SPDX-License-Identifier: Apache-2.0
"""The service: seed 003's GPUService, on gpum.

    python3 examples/service/service.py [--epochs 2] [--memory-cap 48] [--help]

In order:

1. The four models are built on the CPU and measured by gpum.torch.estimate (one training
   step of Adam at the largest micro-batch); with the Monte Carlo paths' bytes and a margin,
   that is the reservation's size.
2. gpum.GPUManager opens a reservation of that size from gpumd, configured by
   GPUConfig.builder("inference") with fallback "cpu": without gpumd or a GPU that could hold
   it, the service runs on the CPU and says why. device_context() chooses the device ("cuda:N"
   of the grant, else "cpu"); everything below runs there. PyTorch is imported before the
   reservation but CUDA is first touched after it, so CUDA sees only the granted GPU.
3. Each model trains through gpum's adaptive loader (pulse.models.train); --memory-cap N
   simulates a device with room for N windows per micro-batch, so the batch shrinks after
   out-of-memory errors and every window is still trained on once per epoch.
4. The market operations (pulse.ops) run on a batch of simulated assets: technical
   indicators, Monte Carlo price paths, minimum-variance and tangency portfolio weights. Each
   is timed by gpum.profile.
5. gpum.BatchProcessor serves the models: one batcher per model with its device, workers and
   priority levels; urgent requests at level 1; a stream of sliding windows answered in order
   and checked against the model run directly; per-model statistics.
6. gpum.benchmark times a batch of inference; the profile's table and a summary end the run.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import sys
import time
from typing import Any, Dict, Iterator, List, Optional, Sequence

import torch

import gpum
import gpum.torch as gt

from . import models, ops

MiB = 1 << 20

# Seed 003's models, small enough for a CPU run: (type, constructor arguments, learning rate,
# serving workers).
MODELS: Dict[str, Any] = {
    "linear": ("linear", dict(n_features=models.WINDOW), 1e-2, 1),
    "price_predictor": ("neural_network", dict(input_size=models.WINDOW, hidden_sizes=[64, 32],
                                               output_size=1, dropout=0.1), 1e-2, 2),
    "lstm": ("lstm", dict(input_size=1, hidden_size=32, num_layers=2, output_size=1), 1e-2, 2),
    "transformer": ("transformer", dict(input_size=1, d_model=32, nhead=4, num_layers=2,
                                        dim_feedforward=64, output_size=1), 3e-3, 2),
}
MAX_BATCH = 256          # the adaptive loader's largest micro-batch
PRIORITY_LEVELS = 3      # serving: level 1 is the most urgent, 3 the default


def _sync(device: torch.device) -> None:
    """Waits for the device's queued kernels, so that a timed block times them."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@contextlib.contextmanager
def _timed(name: str, device: torch.device) -> Iterator[None]:
    """gpum.profile(name) around the block, the device's work included."""
    with gpum.profile(name):
        yield
        _sync(device)


def reservation_bytes(nets: Dict[str, torch.nn.Module], mc_paths: int, mc_steps: int,
                      margin: float = 0.25) -> Dict[str, int]:
    """What the service needs on a GPU: each model's training step at MAX_BATCH, measured by
    gpum.torch.estimate on the CPU (weights, gradients, Adam's state, the activations autograd
    keeps), all resident at once, plus the Monte Carlo paths (normals, increments and prices in
    fp32), plus `margin` of it. Returns each part and "total"."""
    parts: Dict[str, int] = {}
    x = torch.zeros(MAX_BATCH, models.WINDOW)
    for name, net in nets.items():
        parts[name] = gt.estimate(net, x, mode="training", optimizer="adam").total
    parts["monte_carlo"] = 3 * 4 * mc_paths * (mc_steps + 1)
    need = sum(parts.values())
    parts["total"] = max(64 * MiB, int(math.ceil(need * (1 + margin) / MiB)) * MiB)
    return parts


class PulseService:
    """Seed 003's GPUService: a GPUManager (its reservation, its device), the models, their
    serving through a gpum.BatchProcessor, the market operations, profiled."""

    def __init__(self, config: gpum.GPUConfig, *, label: str = "pulse-service",
                 socket: Optional[str] = None) -> None:
        self.config = config
        self._label, self._socket = label, socket
        self._stack = contextlib.ExitStack()
        self.manager: Optional[gpum.GPUManager] = None
        self.choice: Optional[gpum.DeviceChoice] = None
        self.device = torch.device("cpu")
        self.models: Dict[str, torch.nn.Module] = {}
        self.batch_processor = gpum.BatchProcessor()  # the manager's, once started

    # --- life -------------------------------------------------------------------------------
    def start(self) -> "PulseService":
        m = self._stack.enter_context(gpum.GPUManager(self.config, label=self._label,
                                                      socket=self._socket))
        self.manager = m
        self.choice = self._stack.enter_context(m.device_context())
        self.device = torch.device(self.choice.device)
        if self.device.type == "cuda":
            gt.apply_reservation()  # torch's allocator stops at the reservation
        # The configuration's batching (max_batch_size, max_wait_ms, strategy) on the device.
        self.batch_processor = m.batch_processor()
        # Closed first (the stack unwinds in reverse): the queued requests are served, every
        # worker stops, then the device context and the reservation end.
        self._stack.callback(self.batch_processor.close)
        return self

    def stop(self) -> None:
        self._stack.close()

    def __enter__(self) -> "PulseService":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # --- models -----------------------------------------------------------------------------
    def add_model(self, name: str, model: torch.nn.Module) -> torch.nn.Module:
        """Takes a model built already (main() builds them before the reservation, to size
        it), moved to the service's device."""
        self.models[name] = model.to(self.device)
        return self.models[name]

    def create_model(self, model_type: str, model_name: str, **kwargs: Any) -> torch.nn.Module:
        """Seed 003's create_model: builds one (pulse.models.create_model) on the device."""
        return self.add_model(model_name, models.create_model(model_type, **kwargs))

    def train_model(self, name: str, data: torch.utils.data.TensorDataset, *, epochs: int,
                    lr: float, memory_cap: Optional[int] = None,
                    seed: int = 0) -> models.TrainResult:
        with gpum.profile(f"train.{name}"):
            return models.train(self.models[name], data, self.device, epochs=epochs, lr=lr,
                                max_batch=MAX_BATCH, memory_cap=memory_cap, seed=seed)

    def serve(self, name: str, *, workers: int) -> None:
        """Registers the model with the manager's batch processor: on the service's device,
        batches up to the configuration's max_batch_size, waiting at most its max_wait_ms, as
        its batching_strategy says."""
        self.batch_processor.register_model(
            name, self.models[name], workers=workers,
            priority_levels=PRIORITY_LEVELS, priority=PRIORITY_LEVELS)

    def predict(self, name: str, windows: Sequence[torch.Tensor],
                priority: int = 0) -> List[torch.Tensor]:
        futures = [self.batch_processor.submit(name, w, priority=priority) for w in windows]
        return [f.result() for f in futures]

    async def predict_async(self, name: str, windows: Sequence[torch.Tensor]) -> List[Any]:
        return list(await asyncio.gather(*(self.batch_processor.process_async(w, name)
                                           for w in windows)))

    def stream(self, name: str, windows: Iterator[torch.Tensor],
               window: int = 32) -> Iterator[torch.Tensor]:
        return self.batch_processor.stream(name, windows, window=window)

    # --- operations -------------------------------------------------------------------------
    def calculate_technical_indicators(self, prices: torch.Tensor,
                                       indicators: Sequence[str] = (
                                           "returns", "rsi", "macd", "bollinger", "ema_20"),
                                       ) -> Dict[str, torch.Tensor]:
        out: Dict[str, torch.Tensor] = {}
        prices = prices.to(self.device)
        for name in indicators:
            with _timed(f"ops.{name}", self.device):
                out.update(ops.technical_indicators(prices, [name]))
        return out

    def run_monte_carlo(self, initial_price: float, drift: float, volatility: float,
                        time_horizon: int, n_simulations: int, seed: int = 0) -> torch.Tensor:
        with _timed("ops.monte_carlo", self.device):
            return ops.gbm_paths(initial_price, drift, volatility, time_horizon, n_simulations,
                                 seed=seed, device=self.device)

    def optimize_portfolio(self, returns: torch.Tensor,
                           method: str = "min_variance") -> torch.Tensor:
        returns = returns.to(self.device)
        with _timed(f"ops.portfolio_{method}", self.device):
            if method == "min_variance":
                return ops.min_variance_weights(returns)
            if method == "tangency":
                return ops.tangency_weights(returns)
        raise ValueError(f"optimize_portfolio: no method {method!r}")

    # --- figures ----------------------------------------------------------------------------
    def get_metrics(self) -> Dict[str, Any]:
        assert self.manager is not None
        return {"status": self.manager.status(),
                "models": {n: self.batch_processor.stats(n)
                           for n in self.batch_processor.models()},
                "profile": gpum.summary()}


# ------------------------------------------------------------------------------------------------
def _simulated_prices(assets: int, n: int, seed: int) -> torch.Tensor:
    """assets price series of n days (GBM with drifts and volatilities of their own), fp32."""
    g = torch.Generator().manual_seed(seed)
    mu = 0.02 + 0.10 * torch.rand(assets, 1, generator=g)
    sigma = 0.10 + 0.30 * torch.rand(assets, 1, generator=g)
    dt = 1.0 / 252
    z = torch.randn(assets, n - 1, generator=g)
    inc = (mu - 0.5 * sigma ** 2) * dt + sigma * math.sqrt(dt) * z
    logp = torch.cat([torch.zeros(assets, 1), inc.cumsum(dim=1)], dim=1)
    return 100.0 * torch.exp(logp)


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="service.py", description=(
        "A worked example service on gpum (seed 003's AlphaPulse): models trained through the "
        "adaptive loader and served through the batch processor, market operations on the "
        "reserved device, profiled."))
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--samples", type=int, default=2048, help="training windows")
    p.add_argument("--assets", type=int, default=16)
    p.add_argument("--days", type=int, default=512, help="prices per asset")
    p.add_argument("--paths", type=int, default=20000, help="Monte Carlo paths")
    p.add_argument("--requests", type=int, default=200, help="requests per model")
    p.add_argument("--memory-cap", type=int, default=0, metavar="N",
                   help="simulate a device with room for N training windows per micro-batch")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds to wait for the reservation before running on the CPU")
    p.add_argument("--no-monitor", action="store_true", help="no gpum.Monitor")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    t0 = time.perf_counter()

    # 1. The models, on the CPU, measured.
    nets = {name: models.create_model(kind, **kw) for name, (kind, kw, _, _) in MODELS.items()}
    steps = 252
    need = reservation_bytes(nets, args.paths, steps)
    print("estimate: " + ", ".join(f"{n} {b / MiB:.2f} MiB" for n, b in need.items()
                                   if n != "total")
          + f"; reserving {need['total'] / MiB:.0f} MiB")

    # 2. The reservation and the device.
    cfg = (gpum.GPUConfig.builder("inference")
           .reserve(need["total"], timeout=args.timeout, fallback="cpu")
           .monitoring(not args.no_monitor, interval=0.5)
           .build())
    with PulseService(cfg) as svc:
        assert svc.manager is not None and svc.choice is not None
        res = svc.manager.status()["reservation"]
        if res["on_cpu"]:
            print(f"reservation: none, running on the CPU ({res['fallback_reason']})")
        else:
            print(f"reservation {res['id']}: {res['limit'] / MiB:.0f} MiB on GPU "
                  f"{res['devices']}")
        why = svc.choice.reason if svc.choice.reason and not res["on_cpu"] else None
        print(f"device: {svc.choice.device}" + (f" ({why})" if why else ""))

        # 3. Training through the adaptive loader.
        data = models.make_dataset(args.samples, seed=args.seed)
        for name, (kind, _, lr, _) in MODELS.items():
            svc.add_model(name, nets[name])
            r = svc.train_model(name, data, epochs=args.epochs, lr=lr,
                                memory_cap=args.memory_cap or None, seed=args.seed)
            once = all(sorted(s) == list(range(len(data))) for s in r.seen)
            ooms = sum(s.ooms for s in r.stats)
            print(f"train {name} ({kind}, {models.parameters(nets[name])} parameters): loss "
                  f"{r.losses[0]:.4f} -> {r.losses[-1]:.4f} in {args.epochs} epochs, "
                  f"micro-batches {min(s.smallest for s in r.stats)}.."
                  f"{max(s.largest for s in r.stats)}, {ooms} out-of-memory retries, "
                  + ("every window once per epoch" if once else "WINDOWS LOST OR REPEATED"))
            if not once:
                return 1

        # 4. The market operations.
        prices = _simulated_prices(args.assets, args.days, args.seed).to(svc.device)
        for _ in range(3):  # a few runs each, for the profile
            ind = svc.calculate_technical_indicators(prices)
        print(f"indicators of {args.assets} assets x {args.days} days: asset 0 on the last "
              f"day: rsi {ind['rsi'][0, -1]:.1f}, macd {ind['macd'][0, -1]:.3f} (signal "
              f"{ind['macd_signal'][0, -1]:.3f}), bollinger "
              f"{ind['bollinger_lower'][0, -1]:.2f}..{ind['bollinger_upper'][0, -1]:.2f}, "
              f"ema_20 {ind['ema_20'][0, -1]:.2f}, price {prices[0, -1]:.2f}")
        mu, sigma = 0.05, 0.20
        paths = svc.run_monte_carlo(100.0, mu, sigma, steps, args.paths, seed=args.seed)
        final = paths[:, -1].double()
        se = float(final.std()) / math.sqrt(args.paths)
        print(f"monte carlo: {args.paths} paths of {steps} days, mean final price "
              f"{float(final.mean()):.2f} +- {se:.2f} (S0 exp(mu T) = "
              f"{100.0 * math.exp(mu * steps / 252):.2f}), 5% quantile "
              f"{float(final.quantile(0.05)):.2f}")
        rets = ops.log_returns(prices).T  # (days, assets)
        for method in ("min_variance", "tangency"):
            w = svc.optimize_portfolio(rets.double(), method)
            print(f"portfolio {method}: weights sum {float(w.sum()):.6f}, largest "
                  f"{float(w.max()):.3f}, smallest {float(w.min()):.3f}")

        # 5. Serving.
        for name, (_, _, _, workers) in MODELS.items():
            svc.serve(name, workers=workers)
        z = ops.log_returns(prices[0])
        z = (z - z.mean()) / z.std()
        windows = list(z.unfold(0, models.WINDOW, 1))
        for name in MODELS:
            reqs = [windows[i % len(windows)] for i in range(args.requests)]
            futures = [svc.batch_processor.submit(name, w) for w in reqs[1:]]
            urgent = svc.batch_processor.submit(name, reqs[0], priority=1)  # ahead of those
            answers = [f.result() for f in futures] + [urgent.result()]
            if len(answers) != len(reqs):
                return 1
        got = asyncio.run(svc.predict_async("linear", windows[:16]))
        print(f"serve: {args.requests} requests per model (one urgent), "
              f"{len(got)} more through asyncio")
        live = list(svc.stream("lstm", iter(windows), window=32))
        with torch.no_grad():
            direct = svc.models["lstm"](torch.stack(windows))
        diff = float((torch.stack(live) - direct).abs().max())
        print(f"stream lstm: {len(live)} windows answered in order, largest difference from "
              f"the unbatched model {diff:.2e}")
        for name in MODELS:
            st = svc.batch_processor.stats(name)
            print(f"model {name}: {st.requests} requests in {st.batches} batches (mean "
                  f"{st.mean_batch_size:.1f}) on {st.device} with {st.workers} workers, "
                  f"p50 {st.latency_p50_us:.0f} us, p99 {st.latency_p99_us:.0f} us, "
                  f"{st.errors} errors")

        # 6. A benchmark and the profile.
        x = torch.stack(windows[:128])
        net = svc.models["price_predictor"]

        def infer(batch: torch.Tensor) -> torch.Tensor:
            with torch.no_grad():
                y = net(batch)
            _sync(svc.device)
            return y
        b = gpum.benchmark(infer, x, runs=30, warmup=3, name="bench.price_predictor")
        print(f"benchmark price_predictor, batch 128: {b}")
        print(f"benchmark throughput: {b.throughput * len(x):.0f} windows/s")
        print("profile:")
        print(gpum.profile_report())
        m = svc.get_metrics()
        health = m["status"]["health"]
    print(f"summary: {len(MODELS)} models trained and served, "
          f"{sum(s.requests for s in m['models'].values())} requests, "
          f"{len(m['profile'])} profiled names, health {health}, "
          f"{time.perf_counter() - t0:.1f} s")
    print("pulse service: done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
