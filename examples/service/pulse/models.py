# SPDX-License-Identifier: Apache-2.0
"""The service's models (seed 003's linear, neural network, LSTM and transformer) and their
training through gpum's adaptive loader.

Every model takes a batch of windows of WINDOW standardised log returns, shape (batch, WINDOW),
and predicts one number per window, shape (batch,): so one request is one window (a tensor of
shape (WINDOW,)) whichever model serves it, and gpum.BatchProcessor stacks requests into a batch
and splits the answers back.

train() runs gpum.torch.AdaptiveBatchLoader: the micro-batch grows while memory allows and
shrinks after an out-of-memory error (torch's on a GPU; gpum.OutOfMemory raised by the step
when `memory_cap` simulates a device with room for that many windows), the same windows run
again in smaller pieces, and every window is trained on exactly once per epoch (checked: the
indices the steps saw are returned). Gradients are accumulated to an effective batch.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

import gpum
import gpum.torch as gt
from gpum.errors import GPUM_ENOMEM

__all__ = ["WINDOW", "LinearModel", "MLP", "LSTMModel", "TransformerModel", "create_model",
           "make_dataset", "TrainResult", "train", "mse", "parameters"]

WINDOW = 16

_ACTIVATIONS: Dict[str, Callable[[], nn.Module]] = {"relu": nn.ReLU, "gelu": nn.GELU,
                                                    "tanh": nn.Tanh}


class LinearModel(nn.Module):
    """Linear regression on the window (seed 003's 'linear', n_features inputs)."""

    def __init__(self, n_features: int = WINDOW) -> None:
        super().__init__()
        self.linear = nn.Linear(n_features, 1)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear(x).squeeze(-1)


class MLP(nn.Module):
    """Seed 003's 'neural_network': hidden layers with an activation and dropout."""

    def __init__(self, input_size: int = WINDOW, hidden_sizes: Sequence[int] = (64, 32),
                 output_size: int = 1, dropout: float = 0.1, activation: str = "relu") -> None:
        super().__init__()
        layers: List[nn.Module] = []
        width = input_size
        for h in hidden_sizes:
            layers += [nn.Linear(width, h), _ACTIVATIONS[activation](), nn.Dropout(dropout)]
            width = h
        layers.append(nn.Linear(width, output_size))
        self.net = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x).squeeze(-1)


class LSTMModel(nn.Module):
    """An LSTM over the window's returns (one feature per step), its last output read by a
    linear layer."""

    def __init__(self, input_size: int = 1, hidden_size: int = 32, num_layers: int = 2,
                 output_size: int = 1, bidirectional: bool = False) -> None:
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True,
                            bidirectional=bidirectional)
        self.head = nn.Linear(hidden_size * (2 if bidirectional else 1), output_size)

    def forward(self, x: Tensor) -> Tensor:
        out, _ = self.lstm(x.unsqueeze(-1))
        return self.head(out[:, -1]).squeeze(-1)


class TransformerModel(nn.Module):
    """A small transformer encoder: each return embedded with a learned position, encoded,
    mean-pooled and read by a linear layer."""

    def __init__(self, input_size: int = 1, d_model: int = 32, nhead: int = 4,
                 num_layers: int = 2, dim_feedforward: int = 64, output_size: int = 1,
                 window: int = WINDOW, dropout: float = 0.0) -> None:
        super().__init__()
        self.embed = nn.Linear(input_size, d_model)
        self.position = nn.Parameter(torch.randn(window, d_model) * 0.1)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers)
        self.head = nn.Linear(d_model, output_size)

    def forward(self, x: Tensor) -> Tensor:
        h = self.encoder(self.embed(x.unsqueeze(-1)) + self.position)
        return self.head(h.mean(dim=1)).squeeze(-1)


def create_model(model_type: str, **kwargs: Any) -> nn.Module:
    """Seed 003's create_model: 'linear', 'neural_network' (or 'mlp'), 'lstm', 'transformer'."""
    kinds: Dict[str, Callable[..., nn.Module]] = {
        "linear": LinearModel, "neural_network": MLP, "mlp": MLP, "lstm": LSTMModel,
        "transformer": TransformerModel}
    if model_type not in kinds:
        raise ValueError(f"create_model: no model type {model_type!r} (there are "
                         + ", ".join(kinds) + ")")
    return kinds[model_type](**kwargs)


def make_dataset(n: int, window: int = WINDOW, seed: int = 0) -> torch.utils.data.TensorDataset:
    """n windows of standardised returns and a target to learn: a momentum signal (recent
    returns weighted most) with a little noise. Deterministic for a seed."""
    g = torch.Generator().manual_seed(seed)
    r = torch.randn(n + window, generator=g)
    x = r.unfold(0, window, 1)[:n].contiguous()
    w = torch.tensor([0.8 ** (window - 1 - i) for i in range(window)])
    w = w / w.norm()
    y = x @ w + 0.1 * torch.randn(n, generator=g)
    return torch.utils.data.TensorDataset(x, y)


def mse(model: nn.Module, data: torch.utils.data.TensorDataset, device: Any) -> float:
    """The model's mean squared error over the whole dataset, in eval mode."""
    x, y = data.tensors
    was = model.training
    model.eval()
    with torch.no_grad():
        loss = float(nn.functional.mse_loss(model(x.to(device)), y.to(device)).item())
    model.train(was)
    return loss


@dataclass
class TrainResult:
    losses: List[float]                              # before training, then after each epoch
    stats: List[gpum.BatchStats] = field(default_factory=list)  # the loader's, per epoch
    seen: List[List[int]] = field(default_factory=list)          # windows each epoch trained on
    seconds: float = 0.0


def train(model: nn.Module, data: torch.utils.data.TensorDataset, device: Any, *,
          epochs: int = 2, lr: float = 1e-2, batch_size: int = 32, max_batch: int = 256,
          effective_batch: int = 64, memory_cap: Optional[int] = None,
          seed: int = 0) -> TrainResult:
    """Trains model on data (Adam, MSE) with gpum's adaptive loader; see the module's text."""
    model.to(device)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    res = TrainResult([mse(model, data, device)])
    g = torch.Generator().manual_seed(seed)

    for _ in range(epochs):
        seen: List[int] = []

        def step(batch: Tuple[Tensor, Tensor], info: gpum.BatchInfo) -> None:
            xb, yb = batch
            if memory_cap is not None and len(xb) > memory_cap:  # before any gradient
                raise gpum.OutOfMemory(GPUM_ENOMEM, f"out of memory (simulated: room for "
                                                    f"{memory_cap} windows, {len(xb)} asked)")
            pred = model(xb.to(device))
            loss = nn.functional.mse_loss(pred, yb.to(device)) * info.loss_scale
            loss.backward()
            seen.extend(info.indices)
            if info.window_end:  # an effective batch, however it was split
                opt.step()
                opt.zero_grad()

        order = torch.randperm(len(data), generator=g).tolist()
        loader = gt.AdaptiveBatchLoader(data, batch_size=batch_size, max_batch=max_batch,
                                        effective_batch=effective_batch, order=order)
        st = loader.run(step)
        res.stats.append(st)
        res.seen.append(seen)
        res.seconds += st.seconds
        res.losses.append(mse(model, data, device))
    return res


def parameters(model: nn.Module) -> int:
    """The model's parameter count."""
    return sum(p.numel() for p in model.parameters())
