# SPDX-License-Identifier: Apache-2.0
"""gpum.optimize on the CPU with small models (an MLP, a CNN, an LSTM, a block stack): outputs
stay within the stated tolerances after each precision, the measured bytes fall where they
should, skipped steps say why, and the cache returns the same report.

Tolerances: fp32 1e-6 absolute; bf16 0.1 relative to the output's scale; dynamic int8 0.1
relative to the output's scale (per-tensor weights, per-batch activations); pruning is not
compared (it changes the function), only its sparsity.
"""
import gc
import weakref

import pytest

torch = pytest.importorskip("torch", reason="python3-torch is needed (scripts/deps.sh)")
nn = torch.nn

import gpum  # noqa: E402
from gpum import OptLevel, Precision  # noqa: E402


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                         nn.Linear(128, 10))


def cnn():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))


class LSTMNet(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lstm = nn.LSTM(16, 32, num_layers=2, batch_first=True)
        self.head = nn.Linear(32, 5)

    def forward(self, x):
        return self.head(self.lstm(x)[0][:, -1])


class Blocks(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(32, 32), nn.Tanh())
                                    for _ in range(4))
        self.head = nn.Linear(32, 1)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def reference(model, x):
    with torch.no_grad():
        return model.eval()(x).float()


def close(a, b, rel):
    return (a.float() - b.float()).abs().max().item() <= rel * b.abs().max().item()


def params(model):
    return sum(t.numel() * t.element_size() for t in model.state_dict().values())


def test_fp32_basic_is_exact_and_measured():
    m, x = mlp(), torch.randn(8, 64)
    want = reference(mlp(), x)
    r = gpum.optimize(m, example_input=x)
    assert r.model is m and not m.training
    assert all(not p.requires_grad for p in m.parameters())
    assert r.applied() == ["inference_mode", "precision:fp32"]
    assert (r.model(x) - want).abs().max().item() <= 1e-6
    assert r.param_bytes_before == r.param_bytes_after == params(mlp())
    # The leaf modules' outputs: 8 rows of 128+128+128+128+10 floats.
    assert r.activation_bytes_before == r.activation_bytes_after == 8 * (4 * 128 + 10) * 4


def test_level_none_changes_nothing():
    m = mlp()
    r = gpum.optimize(m, level=OptLevel.NONE, precision=Precision.BF16)
    assert r.applied() == [] and "NONE" in r.skipped()["all"]
    assert next(m.parameters()).dtype == torch.float32 and m.training


@pytest.mark.parametrize("make,x", [(mlp, lambda: torch.randn(8, 64)),
                                    (cnn, lambda: torch.randn(2, 3, 16, 16)),
                                    (LSTMNet, lambda: torch.randn(4, 7, 16))])
def test_bf16_halves_parameters_within_tolerance(make, x):
    x = x()
    want = reference(make(), x)
    m = make()
    r = gpum.optimize(m, precision="bf16", example_input=x)
    assert r.step("precision:bf16").applied
    assert all(p.dtype == torch.bfloat16 for p in m.parameters())
    # BatchNorm's int64 step counter (8 bytes) keeps its size.
    assert r.param_bytes_before // 2 <= r.param_bytes_after <= r.param_bytes_before // 2 + 8
    assert r.activation_bytes_after * 2 == r.activation_bytes_before
    with torch.no_grad():
        got = r.model(r.cast_input(x))
    assert got.dtype == torch.bfloat16 and close(got, want, 0.1)


@pytest.mark.parametrize("make,x", [(mlp, lambda: torch.randn(8, 64)),
                                    (LSTMNet, lambda: torch.randn(4, 7, 16))])
def test_int8_shrinks_linear_and_lstm_within_tolerance(make, x):
    x = x()
    want = reference(make(), x)
    r = gpum.optimize(make(), precision=Precision.INT8, example_input=x)
    assert r.step("precision:int8").applied, r.skipped()
    assert r.model is not None
    quantised = [mod for mod in r.model.modules()
                 if mod._get_name().startswith("DynamicQuantized")]
    assert len(quantised) == len([mod for mod in make().modules()
                                  if isinstance(mod, (nn.Linear, nn.LSTM))])
    # Weights of one byte instead of four: well under half, with the float biases and scales.
    assert r.param_bytes_after < 0.4 * r.param_bytes_before
    # Dynamic quantisation computes in int8 and hands back float32: the same activations.
    assert r.activation_bytes_after == r.activation_bytes_before > 0
    with torch.no_grad():
        assert close(r.model(x), want, 0.1)


def test_int8_is_skipped_for_training_and_models_without_linear():
    r = gpum.optimize(mlp(), precision="int8", mode="training")
    assert "inference" in r.skipped()["precision:int8"]
    conv_only = nn.Sequential(nn.Conv2d(3, 3, 1))
    r = gpum.optimize(conv_only, precision="int8")
    assert "no Linear or LSTM" in r.skipped()["precision:int8"]


def test_fp16_on_cpu_is_applied_only_where_it_runs():
    m, x = mlp(), torch.randn(4, 64)
    r = gpum.optimize(m, precision=Precision.FP16, example_input=x)
    try:
        with torch.no_grad():
            nn.Linear(4, 4).half()(torch.ones(1, 4, dtype=torch.float16))
        runs = True
    except RuntimeError:
        runs = False
    assert r.step("precision:fp16").applied == runs
    if runs:
        assert r.param_bytes_after * 2 == r.param_bytes_before
    else:
        assert "fp16 does not run on cpu" in r.skipped()["precision:fp16"]
        assert next(m.parameters()).dtype == torch.float32
        assert r.param_bytes_after == r.param_bytes_before


def test_mixed_hands_back_an_autocast_context():
    m, x = mlp(), torch.randn(4, 64)
    want = reference(mlp(), x)
    r = gpum.optimize(m, precision="mixed", example_input=x)
    assert r.autocast_dtype == torch.bfloat16 and r.step("precision:mixed").applied
    assert next(m.parameters()).dtype == torch.float32
    with torch.no_grad(), r.autocast():
        got = r.model(x)
    assert got.dtype == torch.bfloat16 and close(got, want, 0.1)
    assert r.activation_bytes_after < r.activation_bytes_before


def test_aggressive_channels_last_for_conv_models():
    m, x = cnn(), torch.randn(2, 3, 16, 16)
    want = reference(cnn(), x)
    r = gpum.optimize(m, level=OptLevel.AGGRESSIVE, example_input=x)
    assert r.step("channels_last").applied and r.channels_last
    assert m[0].weight.is_contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        assert (r.model(r.cast_input(x)) - want).abs().max().item() <= 1e-5
    assert "Conv2d" in gpum.optimize(mlp(), level="aggressive").skipped()["channels_last"]
    assert "training" in r.skipped()["activation_checkpointing"]


@pytest.mark.parametrize("make,x", [(mlp, lambda: torch.randn(8, 64)),
                                    (Blocks, lambda: torch.randn(8, 32))])
def test_checkpointing_for_training_keeps_gradients(make, x):
    x = x()
    ref = make()
    ref(x).sum().backward()
    m = make()
    r = gpum.optimize(m, level=OptLevel.AGGRESSIVE, mode="training", example_input=x)
    assert r.step("activation_checkpointing").applied and m.training
    assert set(m.state_dict()) == set(make().state_dict())
    out = r.model(x)
    out.sum().backward()
    for p, q in zip(m.parameters(), ref.parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-6)
    lstm = gpum.optimize(LSTMNet(), level="aggressive", mode="training")
    assert "ModuleList" in lstm.skipped()["activation_checkpointing"]


def test_prune_is_permanent_for_inference_only():
    m = mlp()
    r = gpum.optimize(m, prune=0.5)
    assert r.step("prune").applied
    for lin in (m[0], m[2], m[4]):
        assert not hasattr(lin, "weight_orig") and not lin.weight.requires_grad
        assert abs((lin.weight == 0).float().mean().item() - 0.5) < 0.01
    r = gpum.optimize(mlp(), prune=0.5, mode="training")
    assert "inference only" in r.skipped()["prune"]
    with pytest.raises(ValueError):
        gpum.optimize(mlp(), prune=0.95)


def test_experimental_compiles_or_says_why():
    m, x = mlp(), torch.randn(4, 64)
    want = reference(mlp(), x)
    r = gpum.optimize(m, level=OptLevel.EXPERIMENTAL, example_input=x)
    step = r.step("torch.compile")
    if not hasattr(torch, "compile"):
        assert not step.applied and "has no torch.compile" in step.reason
        assert r.model is m
    assert step.applied or step.reason
    with torch.no_grad():
        assert (r.model(x) - want).abs().max().item() <= 1e-5


def test_compile_failure_keeps_the_eager_model(monkeypatch):
    """torch.compile itself is stood in for: Debian's 1.13 has none."""
    monkeypatch.setenv("CXX", "c++")

    class Broken:
        def __init__(self, model):
            self._orig_mod = model

        def __call__(self, *args):
            raise RuntimeError("no backend")

    x = torch.randn(4, 64)
    monkeypatch.setattr(torch, "compile", Broken, raising=False)
    m = mlp()
    r = gpum.optimize(m, level=OptLevel.EXPERIMENTAL, example_input=x)
    assert r.model is m and "failed, the eager model is kept: no backend" in \
        r.skipped()["torch.compile"]

    class Works(Broken):
        def __call__(self, *args):
            return self._orig_mod(*args)

    monkeypatch.setattr(torch, "compile", Works)
    r = gpum.optimize(mlp(), level=OptLevel.EXPERIMENTAL, example_input=x, precision="bf16")
    assert isinstance(r.model, Works) and r.step("torch.compile").applied
    assert r.param_bytes_after * 2 == r.param_bytes_before  # measured on the eager module
    no_input = gpum.optimize(mlp(), level=OptLevel.EXPERIMENTAL)
    assert "example_input" in no_input.skipped()["torch.compile"]


def test_the_cache_returns_the_same_report_and_keeps_no_model_alive():
    m, x = mlp(), torch.randn(4, 64)
    r = gpum.optimize(m, precision="bf16", example_input=x)
    assert gpum.optimize(m, precision="bf16", example_input=torch.randn(4, 64)) is r
    # Other arguments optimise again (the model is already bf16 now, and measured so).
    r2 = gpum.optimize(m, precision="bf16", example_input=torch.randn(2, 64))
    assert r2 is not r and r2.param_bytes_before == r.param_bytes_after
    # Held weakly both ways: dropping the reports and the model frees the model.
    ref = weakref.ref(m)
    del m, r, r2
    gc.collect()
    assert ref() is None
    # A report keeps a model made for it alive.
    r = gpum.optimize(mlp(), example_input=x)
    gc.collect()
    assert r.model is not None and r.model(x).shape == (4, 10)


def test_estimator_view_before_and_after():
    """The report's estimator view: gpum.torch.estimate of the model as it came and at the
    chosen precision. bf16 halves the estimate's weights and activations; mixed training keeps
    fp32 weights' bytes in a half copy plus a master copy; int8 has no after, and says why."""
    m, x = mlp(), torch.randn(16, 64)
    rep = gpum.optimize(m, level=OptLevel.BASIC, precision=Precision.BF16, example_input=x)
    v = rep.estimator_view()
    assert v is rep.estimator_view()  # kept
    n = sum(p.numel() for p in m.parameters())
    assert (v.before.params, v.before.weights, v.after.weights) == (n, 4 * n, 2 * n)
    assert v.after.activations * 2 == v.before.activations > 0
    assert v.saved == v.before.total - v.after.total > 0
    mt = Blocks()
    rep = gpum.optimize(mt, level=OptLevel.BASIC, precision=Precision.MIXED, mode="training",
                        example_input=torch.randn(8, 32))
    v = rep.estimator_view("adamw")
    assert v.before.optimizer == 8 * v.before.params  # two fp32 AdamW states
    assert v.after.activations < v.before.activations  # autocast's bf16 activations
    rep = gpum.optimize(mlp(), level=OptLevel.BASIC, precision=Precision.INT8,
                        example_input=x)
    v = rep.estimator_view()
    assert v.after is None and v.saved is None and "int8" in v.note
    assert v.before.weights == 4 * n
    with pytest.raises(ValueError, match="needs the example_input"):
        gpum.optimize(mlp(), level=OptLevel.BASIC).estimator_view()
