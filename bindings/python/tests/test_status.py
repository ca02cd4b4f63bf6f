# SPDX-License-Identifier: Apache-2.0
"""gpum.devices() / gpum.status(): the node's GPUs as gpum status --json reports them (same
field names and values), and gpumd's view when it runs."""
import json

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
