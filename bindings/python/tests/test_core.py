# SPDX-License-Identifier: Apache-2.0
"""The package's core: the mirrored structs agree with the loaded libgpum, errors are
exceptions carrying gpum's code and message, and estimates are gpum estimate's."""
import json

import pytest

import gpum
from gpum import _types
from gpum._lib import lib as _lib
from conftest import gpum as run_gpum


def test_structs_match_the_library():
    assert _types.mismatches() == []
    assert gpum.library_path


def test_errors_are_exceptions_with_code_and_message():
    with pytest.raises(gpum.NotFound) as e:
        gpum.estimate("no-such-model")
    assert e.value.code < 0 and e.value.name == "ENOENT"
    assert "no-such-model" in str(e.value) and "gpt2" in str(e.value)  # lists the presets
    with pytest.raises(gpum.InvalidArgument):
        gpum.estimate("gpt2", batch=0)
    with pytest.raises(ValueError):  # InvalidArgument is a ValueError too
        gpum.estimate("gpt2", precision="fp7")
    assert issubclass(gpum.OutOfMemory, MemoryError)
    assert issubclass(gpum.Timeout, TimeoutError)


def test_error_codes_are_the_c_tables():
    """gpum.errors' GPUM_E* constants are include/gpum/error.h's codes, all of them."""
    from gpum import errors
    codes = {n: getattr(errors, n) for n in dir(errors) if n.startswith("GPUM_E")}
    assert len(codes) == len(set(codes.values()))
    for name, code in codes.items():
        assert _lib.gpum_err_name(code).decode() == name[len("GPUM_"):], name
    assert sorted(codes.values()) == list(range(min(codes.values()), 0))
    assert _lib.gpum_err_name(min(codes.values()) - 1) == b"UNKNOWN"  # none missing


@pytest.mark.parametrize("spec", ["llama-7b,mode=lora,batch=4,precision=bf16",
                                  "gpt2,mode=training,batch=8,optimizer=adamw",
                                  "resnet50,mode=training,batch=32,precision=mixed-fp16",
                                  "mistral-7b,mode=training,batch=2,precision=mixed-bf16,impl=hf",
                                  "vit-b16,mode=training,batch=4,image=384"])
def test_estimate_is_the_clis(spec):
    cli = json.loads(run_gpum("estimate", spec, "--json").stdout)
    model, _, rest = spec.partition(",")
    kw = dict(kv.split("=") for kv in rest.split(",") if kv)
    e = gpum.estimate(model, **kw)
    for key in ("weights", "gradients", "optimizer", "activations", "kv_cache", "workspace",
                "total"):
        assert getattr(e, key) == cli[key], key
    assert e.params == cli["params"]
    # The same from the spec string.
    assert gpum.estimate(spec).total == e.total


def test_estimate_impl_and_vit_image(tmp_path):
    """impl="hf" keeps more than torch.nn's fused norms; a config.json defaults to it; a
    vision transformer's image sets its tokens; a keyword the model does not read is refused."""
    job = dict(mode="training", precision="bf16", batch=1, seq=512)
    hf, plain = gpum.estimate("mistral-7b", impl="hf", **job), gpum.estimate("mistral-7b", **job)
    assert hf.activations > plain.activations and hf.weights == plain.weights
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({
        "model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336,
        "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
        "vocab_size": 32000, "max_position_embeddings": 32768, "tie_word_embeddings": False}))
    assert gpum.estimate(hf_config=str(cfg), **job).activations == hf.activations
    assert gpum.estimate(hf_config=str(cfg), impl="torch", **job).activations == plain.activations
    assert gpum.estimate("vit-b16", image=384).params == 86567656 + (577 - 197) * 768
    with pytest.raises(gpum.InvalidArgument):
        gpum.estimate("gpt2", image=384)
    with pytest.raises(gpum.InvalidArgument):
        gpum.estimate("gpt2", impl="jax")


def test_estimate_max_batch_and_accumulation():
    e = gpum.estimate("gpt2", mode="training", batch=8)
    cli = json.loads(run_gpum("estimate", "gpt2,mode=training,batch=8", "--budget", "24GiB",
                              "--json").stdout)
    assert e.max_batch("24GiB") == cli["max_batch"]
    with pytest.raises(gpum.InvalidArgument):
        e.max_batch(1 << 20)  # below the weights
    micro, steps = gpum.accumulation(256, 48)
    assert micro * steps >= 256 and micro <= 48
    assert "llama-70b" in gpum.presets()


def test_sizes_and_figures_print_as_libgpum_writes_them():
    import json
    assert str(gpum.Size(5 << 29)) == repr(gpum.Size(5 << 29)) == "2.50 GiB"
    assert str(gpum.Size(512)) == "512 B" and gpum.format_size(0) == "0 B"
    assert gpum.Size(1 << 30) + 1 == (1 << 30) + 1 and type(gpum.Size(1) + 1) is int
    assert json.dumps({"limit": gpum.Size(1 << 30)}) == '{"limit": 1073741824}'
    assert f"{gpum.Size(2048)}" == "2.00 KiB" and f"{gpum.Size(2048):>6d}" == "  2048"
    assert gpum.format_figure("queue_p99_us", 11400) == "11.4 ms"
    assert gpum.format_figure("allocated_bytes", 5 << 29) == "2.50 GiB"
    assert gpum.format_figure("hit_ratio", 0.93) == "93.0%"
