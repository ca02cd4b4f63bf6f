# SPDX-License-Identifier: Apache-2.0
"""The worked example service (examples/service, after seed 003's AlphaPulse): each of its
market operations against a reference computed another way (numpy loops by the definitions,
closed forms, numpy.linalg), its models training through gpum's adaptive loader under simulated
out-of-memory errors (the loss falls, every window once per epoch), the batch processor serving
them in order with their statistics, and the service end to end against gpumd on the simulated
node and, without gpumd, on the CPU."""
import math
import os
import re
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="python3-torch is needed (scripts/deps.sh)")
np = pytest.importorskip("numpy")

import gpum  # noqa: E402
from conftest import jobs  # noqa: E402

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SERVICE = os.path.join(SRC, "examples", "service")
sys.path.insert(0, SERVICE)

from pulse import models, ops  # noqa: E402


def prices(assets=3, n=300, seed=1):
    """Positive random-walk prices, float64, one series per row."""
    g = np.random.default_rng(seed)
    return 100.0 * np.exp(np.cumsum(g.normal(0.0, 0.02, size=(assets, n)), axis=1))


def ema_ref(x, span):
    """The EMA by its recurrence, one step at a time: y0 = x0, y = a x + (1 - a) y."""
    a = 2.0 / (span + 1.0)
    y = np.empty_like(x)
    y[..., 0] = x[..., 0]
    for t in range(1, x.shape[-1]):
        y[..., t] = a * x[..., t] + (1 - a) * y[..., t - 1]
    return y


def rsi_ref(p, period=14):
    """Wilder's RSI of one series, as he defined it: the first averages plain means of the first
    `period` gains and losses, then avg = (avg * (period - 1) + x) / period."""
    d = np.diff(p)
    out = np.full(len(p), np.nan)
    ag = sum(max(x, 0.0) for x in d[:period]) / period
    al = sum(max(-x, 0.0) for x in d[:period]) / period
    for t in range(period, len(p)):
        if t > period:
            x = d[t - 1]
            ag = (ag * (period - 1) + max(x, 0.0)) / period
            al = (al * (period - 1) + max(-x, 0.0)) / period
        out[t] = 50.0 if ag + al == 0 else (100.0 if al == 0 else 100.0 - 100.0 / (1 + ag / al))
    return out


def test_returns():
    p = prices()
    t = torch.tensor(p)
    assert np.allclose(ops.log_returns(t).numpy(), np.log(p[:, 1:]) - np.log(p[:, :-1]),
                       rtol=0, atol=1e-12)
    simple = np.array([[p[i, k + 1] / p[i, k] - 1 for k in range(p.shape[1] - 1)]
                       for i in range(p.shape[0])])
    assert np.allclose(ops.simple_returns(t).numpy(), simple, rtol=0, atol=1e-12)


@pytest.mark.parametrize("r", [0.0, 0.5, 0.9, 0.999])
def test_linear_recurrence_blocks(r):
    """The blocked scan equals the recurrence, across many blocks (r = 0.5: 49 steps a block)
    and within one (0.999), with a starting value."""
    g = np.random.default_rng(2)
    u = g.normal(size=(2, 700))
    y0 = g.normal(size=2)
    want = np.empty_like(u)
    prev = y0.copy()
    for t in range(u.shape[1]):
        prev = r * prev + u[:, t]
        want[:, t] = prev
    got = ops.linear_recurrence(torch.tensor(u), r, torch.tensor(y0)).numpy()
    assert np.allclose(got, want, rtol=1e-10, atol=1e-10)
    with pytest.raises(ValueError):
        ops.linear_recurrence(torch.tensor(u), 1.0)


@pytest.mark.parametrize("span", [5, 12, 20, 26])
def test_ema(span):
    p = prices(n=1000)
    want = ema_ref(p, span)
    assert np.allclose(ops.ema(torch.tensor(p), span=span).numpy(), want, rtol=1e-12, atol=0)
    # fp32, as a GPU runs it: within fp32's rounding of the prices' size
    got32 = ops.ema(torch.tensor(p, dtype=torch.float32), span=span).double().numpy()
    assert np.abs(got32 - want).max() <= 1e-5 * np.abs(p).max()
    assert np.allclose(ops.ema(torch.tensor(p), alpha=2.0 / (span + 1)).numpy(), want)


def test_rsi_wilder():
    p = prices(n=400)
    got = ops.rsi(torch.tensor(p)).numpy()
    for i in range(p.shape[0]):
        want = rsi_ref(p[i])
        assert np.isnan(got[i, :14]).all() and not np.isnan(got[i, 14:]).any()
        assert np.allclose(got[i, 14:], want[14:], rtol=0, atol=1e-9)
    assert ((got[:, 14:] > 0) & (got[:, 14:] < 100)).all()
    rising = torch.arange(1.0, 41.0, dtype=torch.float64)
    assert (ops.rsi(rising)[14:] == 100).all()       # no losses
    assert (ops.rsi(torch.ones(30, dtype=torch.float64))[14:] == 50).all()  # no change
    falling = ops.rsi(rising.flip(0))
    assert (falling[14:] == 0).all()
    with pytest.raises(ValueError):
        ops.rsi(rising[:14])


def test_macd():
    p = prices(n=500)
    m = ops.macd(torch.tensor(p))
    line = ema_ref(p, 12) - ema_ref(p, 26)
    sig = ema_ref(line, 9)
    assert np.allclose(m.macd.numpy(), line, rtol=0, atol=1e-9)
    assert np.allclose(m.signal.numpy(), sig, rtol=0, atol=1e-9)
    assert np.allclose(m.histogram.numpy(), line - sig, rtol=0, atol=1e-9)


def test_bollinger_population_std():
    p = prices(n=200)
    b = ops.bollinger(torch.tensor(p), 20, 2.0)
    for i in range(p.shape[0]):
        assert np.isnan(b.middle[i, :19].numpy()).all()
        for t in range(19, p.shape[1]):
            w = p[i, t - 19:t + 1]
            mid, sd = w.mean(), w.std(ddof=0)  # population, as Bollinger defined the bands
            assert b.middle[i, t].item() == pytest.approx(mid, rel=1e-12)
            assert b.upper[i, t].item() == pytest.approx(mid + 2 * sd, rel=1e-12)
            assert b.lower[i, t].item() == pytest.approx(mid - 2 * sd, rel=1e-12)
    w = p[0, :20]  # and not the sample one (ddof 1): the bands would be wider
    assert b.upper[0, 19].item() < w.mean() + 2 * w.std(ddof=1)


def test_gbm_paths_statistics():
    s0, mu, sigma, steps, n, dt = 100.0, 0.05, 0.2, 252, 40000, 1.0 / 252
    paths = ops.gbm_paths(s0, mu, sigma, steps, n, seed=7, dtype=torch.float64)
    assert paths.shape == (n, steps + 1) and (paths[:, 0] == s0).all() and (paths > 0).all()
    final = paths[:, -1].numpy()
    want = s0 * math.exp(mu * steps * dt)
    se = final.std(ddof=1) / math.sqrt(n)  # the estimate's standard error
    assert abs(final.mean() - want) <= 5 * se, (final.mean(), want, se)
    # each step's log return: mean (mu - sigma^2/2) dt, variance sigma^2 dt
    lr = np.diff(np.log(paths.numpy()), axis=1).ravel()
    assert abs(lr.mean() - (mu - sigma ** 2 / 2) * dt) <= 5 * lr.std() / math.sqrt(lr.size)
    var_se = sigma ** 2 * dt * math.sqrt(2.0 / (lr.size - 1))  # of a normal's sample variance
    assert abs(lr.var(ddof=1) - sigma ** 2 * dt) <= 5 * var_se
    again = ops.gbm_paths(s0, mu, sigma, steps, n, seed=7, dtype=torch.float64)
    assert torch.equal(paths, again)  # seeded
    assert not torch.equal(paths, ops.gbm_paths(s0, mu, sigma, steps, n, seed=8,
                                                 dtype=torch.float64))


def test_portfolio_weights():
    g = np.random.default_rng(3)
    a = g.normal(size=(6, 6))
    cov_true = a @ a.T / 6 * 1e-4 + np.eye(6) * 1e-5
    rets = g.multivariate_normal(g.normal(0.001, 0.0005, 6), cov_true, size=500)
    cov = np.cov(rets, rowvar=False)  # the sample covariance, ddof 1
    ones = np.ones(6)
    want = np.linalg.solve(cov, ones)
    want /= want.sum()
    w = ops.min_variance_weights(torch.tensor(rets)).numpy()
    assert np.allclose(w, want, rtol=1e-9, atol=1e-12) and w.sum() == pytest.approx(1.0)
    for _ in range(200):  # no fully invested portfolio has less variance
        v = g.normal(size=6)
        v /= v.sum()
        assert w @ cov @ w <= v @ cov @ v + 1e-15
    mu = rets.mean(axis=0) - 0.0002
    want_t = np.linalg.solve(cov, mu)
    want_t /= want_t.sum()
    wt = ops.tangency_weights(torch.tensor(rets), risk_free=0.0002).numpy()
    assert np.allclose(wt, want_t, rtol=1e-9, atol=1e-12) and wt.sum() == pytest.approx(1.0)


def test_technical_indicators_names():
    p = torch.tensor(prices(n=100))
    ind = ops.technical_indicators(p)
    assert set(ind) == {"returns", "rsi", "macd", "macd_signal", "macd_histogram",
                        "bollinger_middle", "bollinger_upper", "bollinger_lower", "ema_20"}
    assert torch.equal(ind["ema_20"], ops.ema(p, span=20))
    with pytest.raises(ValueError, match="no indicator 'vwap'"):
        ops.technical_indicators(p, ["vwap"])


@pytest.mark.parametrize("kind,lr", [("linear", 1e-2), ("neural_network", 1e-2),
                                     ("lstm", 1e-2), ("transformer", 3e-3)])
def test_models_train_through_adaptive_loader(kind, lr):
    """Under simulated out-of-memory errors above 24 windows a micro-batch, the adaptive loader
    shrinks the batch, trains on every window exactly once per epoch, and the loss falls."""
    torch.manual_seed(0)
    data = models.make_dataset(512, seed=1)
    net = models.create_model(kind)
    r = models.train(net, data, "cpu", epochs=2, lr=lr, batch_size=32, max_batch=128,
                     effective_batch=64, memory_cap=24)
    assert len(r.losses) == 3 and r.losses[-1] < 0.8 * r.losses[0], r.losses
    for seen, st in zip(r.seen, r.stats):
        assert sorted(seen) == list(range(len(data)))
        assert st.done == len(data) and st.ooms > 0 and st.largest <= 24


def test_batch_processor_serves_models_in_order():
    torch.manual_seed(0)
    nets = {k: models.create_model(k) for k in ("linear", "mlp", "lstm", "transformer")}
    z = torch.randn(120 + models.WINDOW)
    windows = list(z.unfold(0, models.WINDOW, 1)[:120])
    with gpum.BatchProcessor() as bp:
        for name, net in nets.items():
            bp.register_model(name, net, device="cpu", workers=2, max_batch_size=16,
                              max_queue_delay="1ms", priority_levels=3, priority=3)
        for name, net in nets.items():
            got = list(bp.stream(name, iter(windows), window=32))
            with torch.no_grad():
                want = net(torch.stack(windows))
            assert len(got) == len(windows)
            assert torch.allclose(torch.stack(got), want, rtol=1e-5, atol=1e-6), name
            assert bp.submit(name, windows[0], priority=1).result().shape == ()
            st = bp.stats(name)
            assert (st.requests, st.items, st.errors, st.device) == (121, 121, 0, "cpu")
            assert st.batches >= math.ceil(121 / 16) and st.mean_batch_size <= 16


def run_service(*args, env=None):
    e = dict(os.environ if env is None else env)
    e["PYTHONPATH"] = os.path.join(SRC, "bindings", "python")
    return subprocess.run([sys.executable, os.path.join(SERVICE, "service.py"),
                           "--samples", "512", "--paths", "4000", "--requests", "48",
                           "--days", "256", "--memory-cap", "24", *args],
                          capture_output=True, text=True, env=e, timeout=300)


def check_run(p):
    out = p.stdout
    assert p.returncode == 0, out + p.stderr
    trained = re.findall(r"train (\w+) .*: loss (\d+\.\d+) -> (\d+\.\d+) in 2 epochs, .*, "
                         r"(\d+) out-of-memory retries, every window once per epoch", out)
    assert [t[0] for t in trained] == ["linear", "price_predictor", "lstm", "transformer"], out
    for name, before, after, ooms in trained:
        assert float(after) < float(before) and int(ooms) > 0, (name, out)
    assert re.search(r"stream lstm: \d+ windows answered in order", out), out
    for name in ("linear", "price_predictor", "lstm", "transformer"):
        assert re.search(rf"model {name}: \d+ requests in \d+ batches .* 0 errors", out), out
    assert "benchmark price_predictor, batch 128: median" in out
    for name in ("ops.rsi", "ops.macd", "ops.bollinger", "ops.monte_carlo",
                 "ops.portfolio_min_variance", "bench.price_predictor"):
        assert re.search(rf"^{re.escape(name)} +\d+ ", out, re.M), (name, out)
    assert out.rstrip().endswith("pulse service: done"), out
    return out


def test_service_end_to_end(gpumd):
    """Against gpumd on the simulated node: a reservation sized by the estimator is granted,
    the service runs (on the CPU: Debian's torch has no CUDA) and gives it back."""
    out = check_run(run_service("--epochs", "2"))
    m = re.search(r"reserving (\d+) MiB", out)
    assert m and re.search(rf"reservation r-\S+: {m.group(1)} MiB on GPU \[\d\]", out), out
    assert "device: cpu (torch.cuda.is_available() is False" in out
    assert not [j for j in jobs() if j.get("label") == "pulse-service"]


def test_service_without_gpumd_runs_on_the_cpu(tmp_path):
    env = dict(os.environ, GPUM_SOCKET=str(tmp_path / "no-gpumd.sock"))
    out = check_run(run_service("--epochs", "2", "--no-monitor", env=env))
    assert "reservation: none, running on the CPU (cannot connect to gpumd" in out, out
    assert re.search(r"^device: cpu$", out, re.M), out


def test_pulse_service_object(tmp_path):
    """PulseService as seed 003's GPUService is used, in-process: without gpumd its
    reservation falls back to the CPU; a model created, served and asked; metrics; stop()
    leaves no model registered."""
    from pulse.service import PulseService
    cfg = (gpum.GPUConfig.builder("inference").monitoring(False)
           .reserve("64MiB", timeout=5, fallback="cpu").build())
    svc = PulseService(cfg, socket=str(tmp_path / "no-gpumd.sock")).start()
    try:
        assert svc.device == torch.device("cpu")
        net = svc.create_model("neural_network", "nn_model", hidden_sizes=[8], dropout=0.0)
        svc.serve("nn_model", workers=2)
        xs = list(torch.randn(10, models.WINDOW))
        with torch.no_grad():
            want = net(torch.stack(xs))
        assert torch.allclose(torch.stack(svc.predict("nn_model", xs)), want, atol=1e-6)
        m = svc.get_metrics()
        assert m["status"]["reservation"]["on_cpu"] and m["models"]["nn_model"].requests == 10
        w = svc.optimize_portfolio(torch.randn(50, 3, dtype=torch.float64), "tangency")
        assert w.sum().item() == pytest.approx(1.0)
        with pytest.raises(ValueError, match="no method 'risk_parity'"):
            svc.optimize_portfolio(torch.randn(50, 3), "risk_parity")
    finally:
        svc.stop()
    assert svc.batch_processor.models() == []
