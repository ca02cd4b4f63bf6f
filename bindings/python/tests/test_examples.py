# SPDX-License-Identifier: Apache-2.0
"""The examples cannot go stale: examples/python/train.py runs against gpumd and trains (its
loss falls), and every ```python block of docs/python.md runs (each one a complete program)."""
import os
import re
import subprocess
import sys

import pytest

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def run(args, **kw):
    env = os.environ.copy()
    env["PYTHONPATH"] = os.path.join(SRC, "bindings", "python")
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          timeout=120, **kw)


def test_train_example(gpumd):
    pytest.importorskip("torch", reason="python3-torch is needed (scripts/deps.sh)")
    p = run([os.path.join(SRC, "examples", "python", "train.py"), "3"])
    assert p.returncode == 0, p.stdout + p.stderr
    losses = [float(m) for m in re.findall(r"loss (\d+\.\d+)", p.stdout)]
    assert len(losses) == 3 and losses[-1] < losses[0], p.stdout
    assert "reservation r-" in p.stdout


def blocks():
    text = open(os.path.join(SRC, "docs", "python.md")).read()
    return re.findall(r"```python\n(.*?)```", text, re.S)


@pytest.mark.parametrize("i", range(len(blocks())))
def test_docs_examples(gpumd, i, tmp_path):
    code = blocks()[i]
    p = run(["-c", code], cwd=tmp_path)
    assert p.returncode == 0, f"docs/python.md block {i}:\n{code}\n{p.stdout}{p.stderr}"
