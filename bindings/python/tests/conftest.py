# SPDX-License-Identifier: Apache-2.0
"""Fixtures: a simulated node and a gpumd on it, in a scratch directory, stopped after.

Run by tests/integration/test_python.sh (ctest), which sets GPUM_BIN, GPUM_BUILD_DIR,
GPUM_SIM_LIBRARY and GPUM_LIBRARY; readiness is read from gpumd's own "ready" line.
"""
import os
import subprocess
import sys
import uuid

import pytest

BIN = os.environ.get("GPUM_BIN", "")
BUILD = os.environ.get("GPUM_BUILD_DIR", "")
SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def gpum(*args, check=True, env=None):
    return subprocess.run([BIN, *args], capture_output=True, text=True, check=check,
                          env=env or os.environ.copy())


def _die_with_parent():
    """In the child: SIGKILL when pytest dies, so that a crashed run leaves no gpumd behind."""
    import ctypes
    import signal
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@pytest.fixture(scope="session")
def node(tmp_path_factory):
    """A simulated node of two H100s; GPUM_SIM_NODE names it for the whole session."""
    if not BIN:
        pytest.fail("GPUM_BIN is not set: run through ctest (tests/integration/test_python.sh)")
    name = "py" + uuid.uuid4().hex[:10]
    gpum("sim", "start", os.path.join(SRC, "examples", "sim", "h100x2.yaml"), "--name", name)
    os.environ["GPUM_SIM_NODE"] = name
    yield name
    gpum("sim", "stop", name, check=False)


@pytest.fixture(scope="session")
def gpumd(node, tmp_path_factory):
    """gpumd on the node, its socket in GPUM_SOCKET; yields the socket's path."""
    d = tmp_path_factory.mktemp("gpumd")
    env = os.environ.copy()
    env.update(GPUM_SOCKET=str(d / "gpumd.sock"), GPUM_STATE_DIR=str(d / "state"),
               GPUM_MONITOR_INTERVAL="100ms", GPUM_LEASE_GRACE="2s",
               GPUM_HTTP_LISTEN="127.0.0.1:0")  # any free port: never a fixed one
    os.environ.update(GPUM_SOCKET=env["GPUM_SOCKET"], GPUM_STATE_DIR=env["GPUM_STATE_DIR"])
    p = subprocess.Popen([os.path.join(BUILD, "bin", "gpumd")], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, preexec_fn=_die_with_parent)
    line = p.stdout.readline()
    if not line.startswith("gpumd ready"):
        p.kill()
        pytest.fail("gpumd did not start: " + line + p.stderr.read())
    yield env["GPUM_SOCKET"]
    p.terminate()
    p.wait(timeout=30)


def jobs(all_=True):
    """gpumd's live reservations, as gpum jobs --json lists them."""
    import json
    out = gpum("jobs", "--json", *(["--all"] if all_ else [])).stdout
    d = json.loads(out)
    return d["reservations"] if isinstance(d, dict) else d
