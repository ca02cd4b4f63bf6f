# SPDX-License-Identifier: Apache-2.0
"""The service's market operations, in PyTorch: they run where their input tensors are (a GPU
the reservation granted, or the CPU), in the inputs' dtype, over any leading batch dimensions
(one series per row: many assets at once). Time is the last dimension.

Conventions (the tests compare each with a reference computed another way):

- returns: log returns log(p_t / p_{t-1}) and simple returns p_t / p_{t-1} - 1, one element
  shorter than the prices.
- ema(x, span): alpha = 2 / (span + 1), seeded with the first value and not adjusted:
  y_0 = x_0, y_t = alpha x_t + (1 - alpha) y_{t-1} (pandas' ewm(span, adjust=False)).
- rsi(p, 14): Wilder's definition. Gains and losses of the price changes; the first average
  is the plain mean of the first `period` of them (at price index `period`), then Wilder's
  smoothing avg_t = (avg_{t-1} (period - 1) + x_t) / period; RSI = 100 avg_gain / (avg_gain +
  avg_loss) (= 100 - 100 / (1 + RS)), 100 with no losses, 50 when both are 0. NaN before
  index `period`.
- macd(p, 12, 26, 9): the 12-EMA minus the 26-EMA of the prices, its 9-EMA the signal line,
  their difference the histogram (the EMAs as above, all seeded at the first price).
- bollinger(p, 20, 2): the 20-price moving mean plus and minus 2 population standard
  deviations (ddof 0, as Bollinger's definition; pandas' rolling std is the sample one). NaN
  before the first full window.
- gbm_paths: geometric Brownian motion, exact in law at each step:
  S_{t+dt} = S_t exp((mu - sigma^2 / 2) dt + sigma sqrt(dt) Z), seeded (torch.Generator on the
  device), so that E[S_T] = S_0 exp(mu T).
- min_variance_weights / tangency_weights: the closed forms w = Sigma^-1 1 / (1' Sigma^-1 1)
  and w = Sigma^-1 (mu - rf) / (1' Sigma^-1 (mu - rf)), with the sample covariance (ddof 1) of
  the returns (rows: periods, columns: assets); no bounds on the weights (shorting allowed).

The exponential smoothings (EMA, Wilder's) are linear recurrences, computed as a blocked scan
(linear_recurrence): one cumulative sum per block of steps instead of one kernel per step.
"""
from __future__ import annotations

import math
from typing import Dict, NamedTuple, Optional, Sequence, Union

import torch
from torch import Tensor

__all__ = ["log_returns", "simple_returns", "linear_recurrence", "ema", "rsi", "macd", "MACD",
           "bollinger", "Bands", "gbm_paths", "min_variance_weights", "tangency_weights",
           "technical_indicators"]


def log_returns(prices: Tensor) -> Tensor:
    """log(p_t / p_{t-1}) along the last dimension."""
    return torch.log(prices[..., 1:] / prices[..., :-1])


def simple_returns(prices: Tensor) -> Tensor:
    """p_t / p_{t-1} - 1 along the last dimension."""
    return prices[..., 1:] / prices[..., :-1] - 1


def linear_recurrence(u: Tensor, r: float, y0: Optional[Tensor] = None) -> Tensor:
    """y_t = r y_{t-1} + u_t along the last dimension, y_{-1} = y0 (0 when None), 0 <= r < 1.

    Inside a block of B steps, y_j = r^j (sum_{i<=j} u_i r^-i + r carry): one cumsum per block.
    B keeps r^-B below 1e15, so the scaled terms neither overflow nor lose the small ones
    (the cumsum's rounding, scaled back by r^j, is that of the recurrence itself)."""
    if not 0.0 <= r < 1.0:
        raise ValueError(f"linear_recurrence: r must be in [0, 1) (got {r})")
    n = u.shape[-1]
    carry = torch.zeros(u.shape[:-1], dtype=u.dtype, device=u.device)
    if y0 is not None:
        carry = carry + y0.to(dtype=u.dtype, device=u.device)
    if n == 0:
        return u.clone()
    if r == 0.0:
        return u.clone()
    block = max(1, min(n, int(math.log(1e15) / -math.log(r))))
    j = torch.arange(block, dtype=u.dtype, device=u.device)
    up, down = torch.pow(r, j), torch.pow(r, -j)
    out = []
    for s in range(0, n, block):
        ub = u[..., s:s + block]
        m = ub.shape[-1]
        yb = up[:m] * (torch.cumsum(ub * down[:m], dim=-1) + r * carry.unsqueeze(-1))
        out.append(yb)
        carry = yb[..., -1]
    return torch.cat(out, dim=-1)


def ema(x: Tensor, span: Optional[float] = None, alpha: Optional[float] = None) -> Tensor:
    """The exponential moving average of x along the last dimension, seeded with x_0 (see the
    module's text); give span (alpha = 2 / (span + 1)) or alpha."""
    if (span is None) == (alpha is None):
        raise ValueError("ema: give span or alpha")
    a = 2.0 / (float(span) + 1.0) if span is not None else float(alpha)  # type: ignore[arg-type]
    if not 0.0 < a <= 1.0:
        raise ValueError(f"ema: alpha must be in (0, 1] (got {a})")
    u = x * a
    u[..., :1] = x[..., :1]  # y_0 = x_0: the recurrence starts from 0
    return linear_recurrence(u, 1.0 - a)


def rsi(prices: Tensor, period: int = 14) -> Tensor:
    """Wilder's relative strength index (see the module's text): NaN before index `period`."""
    n = prices.shape[-1]
    if period < 1 or n <= period:
        raise ValueError(f"rsi: need more than period={period} prices (got {n})")
    d = prices[..., 1:] - prices[..., :-1]
    gain, loss = d.clamp(min=0), (-d).clamp(min=0)

    def wilder(x: Tensor) -> Tensor:
        seed = x[..., :period].mean(dim=-1)
        rest = linear_recurrence(x[..., period:] / period, (period - 1) / period, seed)
        return torch.cat([seed.unsqueeze(-1), rest], dim=-1)

    g, lo = wilder(gain), wilder(loss)
    total = g + lo
    value = torch.where(total > 0, 100.0 * g / torch.where(total > 0, total, 1.0),
                        torch.full_like(total, 50.0))
    pad = torch.full(prices.shape[:-1] + (period,), math.nan, dtype=value.dtype,
                     device=value.device)
    return torch.cat([pad, value], dim=-1)


class MACD(NamedTuple):
    macd: Tensor
    signal: Tensor
    histogram: Tensor


def macd(prices: Tensor, fast: int = 12, slow: int = 26, signal: int = 9) -> MACD:
    """The MACD line (fast EMA - slow EMA), its signal EMA and their difference."""
    line = ema(prices, span=fast) - ema(prices, span=slow)
    sig = ema(line, span=signal)
    return MACD(line, sig, line - sig)


class Bands(NamedTuple):
    middle: Tensor
    upper: Tensor
    lower: Tensor


def bollinger(prices: Tensor, window: int = 20, k: float = 2.0) -> Bands:
    """The moving mean of `window` prices and k population standard deviations either side:
    NaN before the first full window."""
    n = prices.shape[-1]
    if window < 1 or n < window:
        raise ValueError(f"bollinger: need at least window={window} prices (got {n})")
    w = prices.unfold(-1, window, 1)          # (..., n - window + 1, window)
    mid = w.mean(dim=-1)
    sd = w.std(dim=-1, unbiased=False)
    pad = torch.full(prices.shape[:-1] + (window - 1,), math.nan, dtype=prices.dtype,
                     device=prices.device)

    def full(x: Tensor) -> Tensor:
        return torch.cat([pad, x], dim=-1)
    return Bands(full(mid), full(mid + k * sd), full(mid - k * sd))


def gbm_paths(s0: float, mu: float, sigma: float, steps: int, n_paths: int, *,
              dt: float = 1.0 / 252, seed: int = 0,
              device: Union[str, torch.device] = "cpu",
              dtype: torch.dtype = torch.float32) -> Tensor:
    """n_paths price paths of `steps` steps of dt years (with S_0: steps + 1 columns)."""
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    z = torch.randn(n_paths, steps, generator=g, device=device, dtype=dtype)
    inc = (mu - 0.5 * sigma * sigma) * dt + sigma * math.sqrt(dt) * z
    logp = torch.cat([torch.zeros(n_paths, 1, device=device, dtype=dtype),
                      torch.cumsum(inc, dim=1)], dim=1)
    return s0 * torch.exp(logp)


def _sample_cov(returns: Tensor) -> Tensor:
    x = returns - returns.mean(dim=0, keepdim=True)
    return x.T @ x / (returns.shape[0] - 1)


def _normalised_solve(cov: Tensor, b: Tensor) -> Tensor:
    w = torch.linalg.solve(cov, b)
    return w / w.sum()


def min_variance_weights(returns: Tensor) -> Tensor:
    """The fully invested minimum-variance weights of the assets (columns): Sigma^-1 1,
    normalised to sum to 1."""
    cov = _sample_cov(returns)
    return _normalised_solve(cov, torch.ones(cov.shape[0], dtype=cov.dtype, device=cov.device))


def tangency_weights(returns: Tensor, risk_free: float = 0.0) -> Tensor:
    """The maximum-Sharpe (tangency) weights: Sigma^-1 (mu - rf), normalised to sum to 1
    (mu: the mean return per period, rf per period too)."""
    return _normalised_solve(_sample_cov(returns), returns.mean(dim=0) - risk_free)


def technical_indicators(prices: Tensor, indicators: Sequence[str] = (
        "returns", "rsi", "macd", "bollinger", "ema_20")) -> Dict[str, Tensor]:
    """Seed 003's calculate_technical_indicators: the named indicators of the prices, by name
    ("ema_N" is the N-span EMA; "macd" adds "macd_signal" and "macd_histogram", "bollinger"
    adds "bollinger_upper" and "bollinger_lower" to "bollinger_middle")."""
    out: Dict[str, Tensor] = {}
    for name in indicators:
        if name == "returns":
            out["returns"] = log_returns(prices)
        elif name == "simple_returns":
            out["simple_returns"] = simple_returns(prices)
        elif name == "rsi":
            out["rsi"] = rsi(prices)
        elif name == "macd":
            m = macd(prices)
            out.update(macd=m.macd, macd_signal=m.signal, macd_histogram=m.histogram)
        elif name == "bollinger":
            b = bollinger(prices)
            out.update(bollinger_middle=b.middle, bollinger_upper=b.upper,
                       bollinger_lower=b.lower)
        elif name.startswith("ema_") and name[4:].isdigit():
            out[name] = ema(prices, span=int(name[4:]))
        else:
            raise ValueError(f"technical_indicators: no indicator {name!r}")
    return out
