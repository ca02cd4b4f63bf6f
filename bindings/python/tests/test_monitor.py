# SPDX-License-Identifier: Apache-2.0
"""gpum.Monitor on a simulated node of its own: samples and history arrive; an Xid 79 injected
on one GPU makes its health ERROR, reported as a health event and as a CRITICAL alert through
Python callbacks (delivered on the Monitor's Python thread); the other GPU stays AVAILABLE."""
import os
import threading
import uuid

import gpum
from conftest import SRC, gpum as run_gpum


def test_monitor_samples_health_events_alerts():
    name = "pymon" + uuid.uuid4().hex[:8]
    run_gpum("sim", "start", os.path.join(SRC, "examples", "sim", "h100x2.yaml"), "--name", name)
    old = os.environ.get("GPUM_SIM_NODE")
    os.environ["GPUM_SIM_NODE"] = name
    alerts, events, threads = [], [], set()
    lost = threading.Event()

    def on_alert(a):
        threads.add(threading.current_thread().name)
        alerts.append(a)
        if a.fired and a.device == 1 and a.level == "CRITICAL":
            lost.set()

    try:
        with gpum.Monitor(interval="100ms", on_alert=on_alert, on_event=events.append) as mon:
            assert mon.devices == [0, 1]
            for _ in range(500):  # the first samples (polling the monitor's own state)
                if len(mon.history(0)) >= 3:
                    break
                threading.Event().wait(0.01)
            hist = mon.history(0)
            assert len(hist) >= 3 and hist[-1].memory_total == 80 << 30
            assert [h.timestamp_ns for h in hist] == sorted(h.timestamp_ns for h in hist)
            assert mon.latest(0).memory_total == 80 << 30
            assert mon.health(0).state == "AVAILABLE"
            run_gpum("sim", "inject", name, "--device", "1", "--xid", "79")
            assert lost.wait(30), f"no CRITICAL alert for the lost GPU: {alerts}"
            for _ in range(500):
                if mon.health(1).state == "ERROR":
                    break
                threading.Event().wait(0.01)
            assert mon.health(1).state == "ERROR" and mon.health(0).state == "AVAILABLE"
        assert any(e.kind == "health" and e.device == 1 and e.to_state == "ERROR" for e in events)
        assert any(e.kind == "xid" and e.xid == 79 for e in events)
        assert threads == {"gpum-monitor-callbacks"}  # on the Monitor's Python thread
    finally:
        if old is None:
            os.environ.pop("GPUM_SIM_NODE", None)
        else:
            os.environ["GPUM_SIM_NODE"] = old
        run_gpum("sim", "stop", name, check=False)
