# SPDX-License-Identifier: Apache-2.0
"""gpum.Reporter: a batcher's figures and a function's reach gpumd on the reservation (gpum
jobs --json shows them under this pid), a closed batcher stops being reported, a bad figure is
left out, a bad source name and reporting outside a reservation raise, and the reporter hears
gpumd's pressure on the reservation's GPU (a foreign process pushes it over pressure.high)."""
import os
import subprocess
import time

import pytest

import gpum
from conftest import BIN, jobs


def workload(rid):
    r = [x for x in jobs() if x["id"] == rid][0]
    return {w["source"]: w["figures"] for w in r.get("workload", []) if w["pid"] == os.getpid()}


def test_reports_reach_gpumd(gpumd, node):
    with gpum.reserve("2GiB", label="py-report", set_env=False) as r, \
            gpum.Reporter(r.id, period=None) as rep:
        b = gpum.Batcher(lambda xs: [x + 1 for x in xs], max_batch_size=8,
                         max_queue_delay="1ms")
        assert [f.result(30) for f in [b.submit(i) for i in range(40)]] == list(range(1, 41))
        rep.add("infer", b)
        rep.add("train", lambda: {"batch_size": 32, "loss": float("nan"), "note": "x"})
        with pytest.raises(gpum.InvalidArgument):
            rep.add("Bad Name", lambda: {})
        with pytest.raises(TypeError):
            rep.add("thing", object())
        rep.flush()
        w = workload(r.id)
        assert w["infer"]["completed"] == 40 and w["infer"]["batches"] >= 5, w
        assert w["train"] == {"batch_size": 32}, w  # NaN and non-numbers left out
        b.close()  # the reporter stops reading it
        with pytest.raises(KeyError):
            rep.remove("infer")
        rep.flush()
        rep.remove("train")
        assert not rep.pressure


def test_outside_a_reservation(gpumd, monkeypatch):
    monkeypatch.delenv("GPUM_RESERVATION_ID", raising=False)
    with pytest.raises(gpum.InvalidArgument, match="no reservation"):
        gpum.Reporter()


def test_pressure_reaches_the_reporter(gpumd, node):
    """Pressure halves the batcher's bound and makes the cache demote half its device tier into
    a pinned tier too small for it: what the pinned tier drops is delivered to on_evict (at the
    next call: the reporter's thread is C's), and the rest reads back intact."""
    evicted = []
    with gpum.reserve("2GiB", label="py-report-pressure", set_env=False) as r, \
            gpum.Reporter(r.id, period="20ms") as rep, \
            gpum.Batcher(lambda xs: xs, max_batch_size=16) as b, \
            gpum.TierCache(pinned_limit="512KiB", on_evict=lambda k, n: evicted.append(k)) as tc:
        rep.add("infer", b)
        for i in range(4):
            tc.put(f"k{i}", bytes([i]) * 512 * 1024)
        rep.add("cache", tc)
        rep.flush()
        gpu = r.devices[0].index
        hold = subprocess.run([BIN, "sim", "hold", node, "--device", str(gpu), "--bytes", "75GiB"],
                              capture_output=True, text=True, check=True).stdout.split()[0]
        try:
            for _ in range(3000):  # the reporter's state, polled: <= 30 s
                if rep.pressure:
                    break
                time.sleep(0.01)
            assert rep.pressure, "gpumd's pressure never reached the reporter"
            assert b.stats().bound == 8
            st = tc.stats()
            assert st.device.demotions == 2 and st.pinned.evictions == 1, st
            assert evicted == [] and len(tc) == 3
            tc.pressure(0)  # a call that may evict delivers what the reporter's thread evicted
            intact = [tc.get(f"k{i}") == bytes([i]) * 512 * 1024
                      for i in range(4) if f"k{i}".encode() not in evicted]
            assert len(evicted) == 1 and len(intact) == 3 and all(intact), (evicted, intact)
        finally:
            os.kill(int(hold), 15)
        for _ in range(3000):
            if not rep.pressure:
                break
            time.sleep(0.01)
        assert not rep.pressure and b.stats().bound == 16



def test_adaptive_runner_reports(gpumd, node):
    """An adaptive run with report= shows its figures (batch size, OOMs, items done) on the
    reservation, from its last step, and leaves the reporter when it ends; Reporter.add takes a
    runner too."""
    with gpum.reserve("2GiB", label="py-report-adaptive", set_env=False) as r, \
            gpum.Reporter(r.id, period=None) as rep:
        calls = []

        def step(info):
            calls.append(info.count)
            if len(calls) == 3:
                raise gpum.OutOfMemory(-16, "injected")

        st = gpum.Adaptive(100, step, batch_size=4, max_batch=16, report=rep,
                           report_source="fit").run()
        w = workload(r.id)["fit"]
        assert w["done"] == 100 and w["items"] == 100, w
        assert w["batch_size"] == st.batch_size and w["ooms"] == st.ooms == 1, (w, st)
        assert w["largest_batch"] == st.largest
        with pytest.raises(KeyError):  # it left the reporter
            rep.remove("fit")
        runner = gpum.Adaptive(10, lambda info: None, batch_size=2)
        rep.add("other", runner)
        runner.run()
        rep.flush()
        assert workload(r.id)["other"]["done"] == 10
