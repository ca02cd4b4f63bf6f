# SPDX-License-Identifier: Apache-2.0
"""gpum.profile over libgpum's profiler: the decorator and context-manager forms record one
count per call or block (also when it raises, the exception going on), summaries keep their
exact figures consistent and their percentiles ordered, the report lists every name, and
benchmark() calls fn exactly warmup + runs times with throughput = runs / total time. No
assertion depends on the machine's speed. Names are unique per test: the profiler is
process-wide. The window statistics run on a simulated node's Monitor."""
import json
import os
import threading
import time
import uuid

import pytest

import gpum
from gpum.profile import (
    MAX_NAMES, NAME_LEN, METRICS, Profiler, default_profiler, range_stats, stats,
)
from conftest import SRC, gpum as run_gpum


def uname(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def workload(n=200):  # sleep-free, deterministic work
    return sum(i * i for i in range(n))


def check_consistent(s, count):
    assert s.count == count
    assert 0 <= s.min_ns <= s.p50_ns <= s.p95_ns <= s.p99_ns <= s.max_ns
    assert s.min_ns * count <= s.total_ns <= s.max_ns * count
    assert s.mean_ns == pytest.approx(s.total_ns / count)
    assert s.mean == pytest.approx(s.mean_ns / 1e9) and s.p99 == pytest.approx(s.p99_ns / 1e9)


def test_decorator_counts_calls_and_keeps_the_function():
    name = uname("forward")

    @gpum.profile(name)
    def forward(x, scale=1):
        """Doubles."""
        workload()
        return 2 * x * scale

    assert forward.__name__ == "forward" and forward.__doc__ == "Doubles."
    assert [forward(i, scale=2) for i in range(3)] == [0, 4, 8]
    for _ in range(97):
        forward(1)
    check_consistent(gpum.summary(name), 100)


def test_context_manager_counts_blocks_nested_and_reused():
    name, inner = uname("step"), uname("inner")
    p = gpum.profile(name)
    for _ in range(50):
        with p:
            with gpum.profile(inner):
                workload()
            with p:  # re-entrant: the same object nested in itself
                workload()
    check_consistent(gpum.summary(name), 100)
    check_consistent(gpum.summary(inner), 50)


def test_exceptions_record_and_propagate():
    name, deco = uname("fails"), uname("fails-deco")
    for _ in range(3):
        with pytest.raises(KeyError):
            with gpum.profile(name):
                {}["missing"]

    @gpum.profile(deco)
    def boom():
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        boom()
    assert gpum.summary(name).count == 3
    assert gpum.summary(deco).count == 1


def test_threads_record_every_block():
    name = uname("threaded")
    p = gpum.profile(name)  # one object shared by all threads

    def work():
        for _ in range(250):
            with p:
                workload(20)

    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    check_consistent(gpum.summary(name), 1000)


def test_recorded_durations_give_exact_figures_and_bounded_percentiles():
    name = uname("recorded")
    prof = Profiler()
    for ns in range(1, 1001):  # 1..1000 ns
        prof.record(name, ns * 1000)
    s = prof.summary(name)
    assert (s.count, s.total_ns, s.min_ns, s.max_ns) == (1000, 500500 * 1000, 1000, 1000000)
    assert s.mean_ns == 500500.0
    # Histogram estimates: within 1/32 of the value at that rank (header's promise).
    for got, want in ((s.p50_ns, 500000), (s.p95_ns, 950000), (s.p99_ns, 990000)):
        assert abs(got - want) <= want / 32
    assert s.p50_ns <= s.p95_ns <= s.p99_ns <= s.max_ns
    # The default profiler is a view of the same process-wide table.
    assert default_profiler.summary(name) == s and gpum.summary()[name] == s


def test_summary_report_reset_and_errors():
    name = uname("reported")
    with gpum.profile(name):
        workload()
    text = gpum.profile_report()
    assert text.splitlines()[0].split() == ["name", "count", "total", "mean", "p50", "p95", "max"]
    assert any(line.split()[:2] == [name, "1"] for line in text.splitlines())
    rows = {r["name"]: r for r in json.loads(gpum.profile_report(json=True))}
    assert rows[name]["count"] == 1 and rows[name]["total_ns"] == gpum.summary(name).total_ns
    with pytest.raises(gpum.NotFound) as e:
        gpum.summary(uname("never"))
    assert e.value.name == "ENOENT"
    for bad in ("", "x" * NAME_LEN):
        with pytest.raises(gpum.InvalidArgument):
            gpum.profile(bad)
    gpum.profile("x" * (NAME_LEN - 1))  # the longest name there is room for
    assert MAX_NAMES == 256 and default_profiler.dropped >= 0


def test_reset_forgets_everything():
    name = uname("reset")
    with gpum.profile(name):
        pass
    default_profiler.reset()
    assert gpum.summary() == {}
    with pytest.raises(gpum.NotFound):
        gpum.summary(name)
    with gpum.profile(name):  # the same name records again after a reset
        pass
    assert gpum.summary(name).count == 1


def test_benchmark_counts_runs_and_warmup_exactly():
    calls = []

    def fn(a, b=0):
        calls.append((a, b))
        return workload()

    r = gpum.benchmark(fn, 7, runs=25, warmup=4, b=3)
    assert len(calls) == 29 and set(calls) == {(7, 3)}
    assert (r.runs, r.warmup, len(r.times_ns)) == (25, 4, 25)
    s = sorted(r.times_ns)
    assert (r.min_ns, r.max_ns, r.total_ns) == (s[0], s[-1], sum(s))
    assert r.median_ns == s[12]  # 25 runs: the middle one
    assert r.p95_ns == s[23]  # nearest rank ceil(0.95 * 25) = 24
    assert r.min_ns <= r.median_ns <= r.p95_ns <= r.max_ns
    assert r.mean_ns == pytest.approx(r.total_ns / 25)
    assert r.throughput == pytest.approx(25 / (r.total_ns / 1e9))
    assert r.throughput == pytest.approx(1e9 / r.mean_ns)
    assert "25 runs" in str(r)


def test_benchmark_even_runs_median_no_warmup_and_profiler_record():
    calls = []
    name = uname("bench")
    r = gpum.benchmark(lambda: calls.append(1), runs=10, warmup=0, name=name)
    assert len(calls) == 10
    s = sorted(r.times_ns)
    assert r.median_ns == (s[4] + s[5]) / 2
    p = gpum.summary(name)
    assert (p.count, p.total_ns, p.min_ns, p.max_ns) == (10, r.total_ns, r.min_ns, r.max_ns)


def test_benchmark_errors():
    calls = []

    def fails():
        calls.append(1)
        if len(calls) == 3:
            raise ValueError("third call")

    with pytest.raises(ValueError, match="third call"):
        gpum.benchmark(fails, runs=10, warmup=1)
    assert len(calls) == 3  # stopped at once
    for runs, warmup in ((0, 0), (1, -1)):
        with pytest.raises(gpum.InvalidArgument):
            gpum.benchmark(workload, runs=runs, warmup=warmup)


def test_stats_of_values_are_exact():
    s = stats([float(v) for v in range(100, 0, -1)])  # 100..1, unsorted on purpose
    assert (s.count, s.min, s.max, s.mean) == (100, 1.0, 100.0, 50.5)
    assert (s.p50, s.p95, s.p99) == (50.0, 95.0, 99.0)  # nearest rank
    assert stats([]).count == 0


def test_monitor_window_stats():
    name = "pyprof" + uuid.uuid4().hex[:8]
    run_gpum("sim", "start", os.path.join(SRC, "examples", "sim", "h100x2.yaml"), "--name", name)
    old = os.environ.get("GPUM_SIM_NODE")
    os.environ["GPUM_SIM_NODE"] = name
    try:
        with gpum.Monitor(interval="100ms", alerts=False) as mon:
            for _ in range(500):
                if len(mon.history(0)) >= 3:
                    break
                time.sleep(0.01)
            n = len(mon.history(0))
            w = gpum.window_stats(mon, 0, "memory_total", 3600)
            assert w.count >= n >= 3 and w.min == w.max == w.p99 == float(80 << 30)
            r = range_stats(mon, 0, "memory_total", 0, time.time_ns() + 10**9)
            assert r.count >= n
            assert "utilization_gpu" in METRICS
            with pytest.raises(gpum.InvalidArgument):
                gpum.window_stats(mon, 0, "no_such_metric", 1)
            with pytest.raises(gpum.GpumError) as e:
                gpum.window_stats(mon, 9, "memory_total", 1)
            assert e.value.name == "ENODEV"
    finally:
        if old is None:
            os.environ.pop("GPUM_SIM_NODE", None)
        else:
            os.environ["GPUM_SIM_NODE"] = old
        run_gpum("sim", "stop", name, check=False)
