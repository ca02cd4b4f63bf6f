# SPDX-License-Identifier: Apache-2.0
"""gpum.devices() / gpum.status(): the node's GPUs as gpum status --json reports them (same
field names and values), and gpumd's view when it runs."""
import json

import pytest

import gpum
from conftest import gpum as run_gpum, jobs


def test_devices_are_gpum_status(node):
    cli = json.loads(run_gpum("status", "--json").stdout)
    st = gpum.status(gpumd=False)
    assert st.backend == cli["backend"] and st.simulated == cli["simulated"]
    assert st.driver_version == cli["driver_version"] and st.device_count == cli["device_count"]
    assert st.gpumd is None
    for mine, theirs in zip(gpum.devices(), cli["devices"]):
        for key in ("index", "uuid", "name", "pci_bus_id", "is_host", "temperature_c",
                    "power_limit_w", "state", "reason"):
            assert getattr(mine, key) == theirs[key], key
        assert mine.memory.total == theirs["memory"]["total"]
        assert mine.memory.driver_reserved == theirs["memory"]["driver_reserved"]
        assert mine.ecc["enabled"] == theirs["ecc"]["enabled"]
        assert mine.clocks["memory_mhz"] == theirs["clocks"]["memory_mhz"]
        assert mine.error is None


def test_status_with_gpumd(gpumd):
    with gpum.reserve("6GiB", label="py-status", set_env=False) as r:
        st = gpum.status()
        assert st.gpumd is not None
        held = [d for d in st.gpumd["devices"] if r.id in d["reservations"]]
        assert len(held) == 1 and held[0]["reserved"] >= 6 << 30


def test_reservation_by_id(gpumd):
    """gpum.reservation: one document by id, live and then ended (from the ledger), the same
    document list gives; NotFound for an id gpumd never gave, InvalidArgument for no id."""
    with gpum.reserve("1GiB", label="py-get", set_env=False) as r:
        doc = gpum.reservation(r.id)
        listed = [d for d in gpum.reservations() if d["id"] == r.id]
        assert doc["id"] == r.id and doc["state"] == "GRANTED" and doc["label"] == "py-get"
        assert len(listed) == 1 and listed[0]["bytes_per_gpu"] == doc["bytes_per_gpu"]
        assert "fenced" in doc
    ended = gpum.reservation(r.id)
    assert ended["state"] == "RELEASED", ended["state"]
    with pytest.raises(gpum.NotFound):
        gpum.reservation("r-999999")
    with pytest.raises(gpum.InvalidArgument):
        gpum.reservation("seven")
