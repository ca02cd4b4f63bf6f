# SPDX-License-Identifier: Apache-2.0
"""gpum.BatchProcessor (gpum/serving.py): answers equal the unbatched model's, streams in input
order even when batches finish in reverse, priorities as the batcher defines them, exact
counts, close draining or failing what is queued and leaving no thread. No assertion depends
on the machine's speed: order is forced with events, never with sleeps."""
import gc
import os
import threading

import pytest

import gpum


def threads():
    gc.collect()  # a batcher of another test, unreferenced, is closed now, not during ours
    return len(os.listdir("/proc/self/task"))


def square_plus(xs):
    return [x * x + 1 for x in xs]


def test_answers_equal_the_unbatched_function():
    with gpum.BatchProcessor() as bp:
        bp.register_model("sq", square_plus, workers=2, max_batch_size=8, max_queue_delay="1ms")
        bp.register_model("neg", lambda xs: [-x for x in xs], max_batch_size=3)
        futs = [bp.submit("sq", i) for i in range(500)]
        negs = [bp.submit("neg", i) for i in range(50)]
        assert [f.result(30) for f in futs] == [square_plus([i])[0] for i in range(500)]
        assert [f.result(30) for f in negs] == [-i for i in range(50)]
        assert bp.models() == ["sq", "neg"]
        with pytest.raises(ValueError):
            bp.register_model("sq", square_plus)
        with pytest.raises(KeyError):
            bp.submit("none", 1)


def test_torch_module_batched_equals_unbatched():
    torch = pytest.importorskip("torch", reason="python3-torch is needed (scripts/deps.sh)")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    xs = [torch.randn(4) for _ in range(40)]
    with torch.no_grad():
        want = [net(x.unsqueeze(0))[0] for x in xs]
    with gpum.BatchProcessor() as bp:
        bp.register_model("mlp", net, device="cpu", max_batch_size=16, max_queue_delay="1ms")
        got = list(bp.stream("mlp", xs, window=10))
        st = bp.stats("mlp")
    assert len(got) == len(xs)
    for g, w in zip(got, want):  # a batched matmul may round differently
        assert torch.allclose(g, w, atol=1e-6)
    assert st.device == "cpu" and st.requests == 40 and st.items == 40


def test_stream_in_order_when_batches_finish_in_reverse():
    """Item 8k's batch holds its worker until a batch of later items has finished, so batches
    finish out of order on purpose; the stream must still yield in input order."""
    cond = threading.Condition()
    finished = []  # batches in the order the model finished them
    latest = [-1]  # the largest item of a finished batch

    def model(xs):
        if any(x % 8 == 0 for x in xs):
            with cond:
                assert cond.wait_for(lambda: latest[0] > max(xs), 30), "never overtaken"
        with cond:
            finished.append(list(xs))
            latest[0] = max(latest[0], max(xs))
            cond.notify_all()
        return [x * 10 for x in xs]

    n = 200  # 25 windows
    with gpum.BatchProcessor() as bp:
        bp.register_model("slow", model, workers=2, max_batch_size=2)
        assert list(bp.stream("slow", range(n), window=8)) == [10 * i for i in range(n)]
        st = bp.stats("slow")
    order = [x for batch in finished for x in batch]
    assert sorted(order) == list(range(n)) and order != list(range(n))  # out of order indeed
    assert st.requests == n and st.items == n


def test_stream_error_at_its_place_and_cancels_the_rest():
    def model(xs):
        if 5 in xs:
            raise ArithmeticError("five")
        return xs

    with gpum.BatchProcessor() as bp:
        bp.register_model("m", model, max_batch_size=1)
        got = []
        with pytest.raises(ArithmeticError):
            for y in bp.stream("m", range(100), window=4):
                got.append(y)
        assert got == [0, 1, 2, 3, 4]
        assert bp.stats("m").errors == 1
        with pytest.raises(ValueError):
            next(bp.stream("m", range(3), window=0))


def test_priorities_as_the_batcher_defines_them():
    """Level 1 is the highest: while the one worker is held, queued requests of level 1 run
    before those of level 2, whatever their submission order."""
    gate, started, ran = threading.Event(), threading.Event(), []

    def model(xs):
        ran.extend(xs)
        started.set()
        gate.wait(30)
        return xs

    with gpum.BatchProcessor() as bp:
        bp.register_model("p", model, priority_levels=2, priority=2, max_batch_size=1)
        first = bp.submit("p", "first")
        assert started.wait(30)
        low = [bp.submit("p", f"low{i}") for i in range(3)]              # the model's default
        high = [bp.submit("p", f"high{i}", priority=1) for i in range(3)]
        gate.set()
        for f in [first, *low, *high]:
            f.result(30)
    assert ran == ["first", "high0", "high1", "high2", "low0", "low1", "low2"]


def test_stats_counts_are_exact():
    with gpum.BatchProcessor() as bp:
        bp.register_model("sq", square_plus, workers=3, max_batch_size=4, max_queue_delay="1ms")
        futs = [bp.submit("sq", i) for i in range(301)]
        for f in futs:
            f.result(30)
        st = bp.stats("sq")
    assert st.requests == 301 and st.items == 301 and st.errors == 0
    assert st.batches >= 301 / 4 and st.mean_batch_size == pytest.approx(301 / st.batches)
    assert st.workers == 3 and st.device == "cpu"
    assert 0 <= st.latency_p50_us <= st.latency_p95_us <= st.latency_p99_us
    assert st.throughput > 0


def test_close_drains_and_leaves_no_thread():
    before = threads()
    gate, started = threading.Event(), threading.Event()

    def model(xs):
        started.set()
        gate.wait(30)
        return [x + 1 for x in xs]

    bp = gpum.BatchProcessor()
    bp.register_model("m", model, workers=2, max_batch_size=2)
    bp.register_model("n", square_plus)
    assert threads() > before
    futs = [bp.submit("m", i) for i in range(20)]
    assert started.wait(30)
    closer = threading.Thread(target=bp.close)  # drains: waits for the model, held by the gate
    closer.start()
    gate.set()
    closer.join(30)
    assert not closer.is_alive()
    assert [f.result(0) for f in futs] == [i + 1 for i in range(20)]  # answered before close
    with pytest.raises(KeyError):
        bp.submit("m", 1)
    assert threads() == before


def test_close_without_draining_fails_what_is_queued():
    before = threads()
    gate, started = threading.Event(), threading.Event()

    def model(xs):
        started.set()
        gate.wait(30)
        return xs

    bp = gpum.BatchProcessor()
    bp.register_model("m", model, max_batch_size=1)
    first = bp.submit("m", 0)
    assert started.wait(30)
    queued = [bp.submit("m", i) for i in range(1, 5)]
    batcher = bp._model("m").batcher
    closer = threading.Thread(target=bp.close, kwargs={"drain": False})
    closer.start()
    while True:  # the batcher is stopping once it refuses submits
        try:
            batcher.submit(9).add_done_callback(lambda f: f.exception())
        except gpum.GpumError:
            break
    gate.set()
    closer.join(30)
    assert not closer.is_alive()
    assert first.result(0) == 0  # it was running: it finished
    for f in queued:
        with pytest.raises(gpum.Interrupted):
            f.result(0)
    assert threads() == before
