# SPDX-License-Identifier: Apache-2.0
"""gpum.Batcher over the C batcher: requests batched, answers to the right futures; an
out-of-memory exception splits batches with every request answered once; another exception
fails the batch's futures with it; asyncio's infer; a full queue raises gpum.Busy at submit; a
queue timeout fails with gpum.Timeout; shutdown without draining fails what is queued."""
import asyncio
import threading

import pytest

import gpum


def test_batches_and_answers():
    sizes = []

    def model(xs):
        sizes.append(len(xs))
        return [x * 2 for x in xs]

    with gpum.Batcher(model, max_batch_size=16, max_queue_delay="20ms", workers=2) as b:
        futs = [b.submit(i) for i in range(200)]
        assert [f.result(30) for f in futs] == [2 * i for i in range(200)]
        st = b.stats()
    assert sum(sizes) == 200 and max(sizes) <= 16 and len(sizes) < 200
    assert st.completed == 200 and st.batches == len(sizes)


def test_oom_splits_and_errors():
    seen = []

    def model(xs):
        if len(xs) > 3:
            raise gpum.OutOfMemory(-16, "simulated")
        if "bad" in xs:
            raise KeyError("a bug in the model")
        seen.extend(xs)
        return [f"{x}!" for x in xs]

    with gpum.Batcher(model, max_batch_size=16, max_queue_delay="50ms") as b:
        futs = [b.submit(i) for i in range(12)]
        assert [f.result(30) for f in futs] == [f"{i}!" for i in range(12)]
        assert sorted(seen) == list(range(12))  # each once
        st = b.stats()
        assert st.oom_splits > 0 and st.queue_p95_us <= st.queue_p99_us
        bad = b.submit("bad")
        with pytest.raises(KeyError):
            bad.result(30)


def test_asyncio_infer():
    with gpum.Batcher(lambda xs: [x + 1 for x in xs], max_batch_size=32,
                      max_queue_delay="5ms") as b:
        async def main():
            return await asyncio.gather(*(b.infer(i) for i in range(100)))

        assert asyncio.run(main()) == list(range(1, 101))


def test_queue_full_timeout_shutdown():
    gate = threading.Event()
    started = threading.Event()

    def model(xs):
        started.set()
        gate.wait(30)
        return xs

    b = gpum.Batcher(model, max_batch_size=1, max_queue_size=2, queue_timeout="50ms")
    first = b.submit(0)
    assert started.wait(30)
    a, c = b.submit(1), b.submit(2)
    with pytest.raises(gpum.Busy):
        b.submit(3)  # the queue holds 2
    with pytest.raises(gpum.Timeout):
        a.result(30)  # waited past 50 ms while the model was held
    gate.set()
    assert first.result(30) == 0
    with pytest.raises(gpum.Timeout):
        c.result(30)
    b.close()
    # Shutdown without draining: what is queued fails.
    gate.clear()
    started.clear()
    b = gpum.Batcher(model, max_batch_size=1)
    first = b.submit(0)
    assert started.wait(30)
    queued = b.submit(1)
    t = threading.Thread(target=b.shutdown, kwargs={"drain": False})
    t.start()
    while True:  # the batcher is stopping once it refuses submits
        try:
            b.submit(9).add_done_callback(lambda f: f.exception())
        except gpum.GpumError:
            break
    gate.set()
    t.join(30)
    assert first.result(30) == 0
    with pytest.raises(gpum.Interrupted):
        queued.result(30)
    b.close()


def test_measured_memory_bounds_the_batch():
    sizes = []

    def model(xs):
        sizes.append(len(xs))
        return xs

    def memory():  # 1000 bytes plus 100 per request of the batch that just ran, of 10000
        return 1000 + 100 * sizes[-1], 10000, 80 << 30

    with gpum.Batcher(model, max_batch_size=128, max_queue_delay="50ms", memory=memory) as b:
        for wave in (3, 5):
            assert [f.result(30) for f in [b.submit(i) for i in range(wave)]] == list(range(wave))
        st = b.stats()
        assert (st.item_bytes, st.fixed_bytes, st.bound) == (100, 1000, 80), st
        futs = [b.submit(i) for i in range(300)]
        assert [f.result(30) for f in futs] == list(range(300))
        assert max(sizes[2:]) <= 80


def test_cancelled_future_cancels_its_request(monkeypatch):
    unraisable = []
    monkeypatch.setattr("sys.unraisablehook", lambda u: unraisable.append(u))
    gate, started, ran = threading.Event(), threading.Event(), []

    def model(xs):
        started.set()
        gate.wait(30)
        ran.extend(xs)
        return xs

    with gpum.Batcher(model, max_batch_size=1) as b:
        first = b.submit(0)
        assert started.wait(30)
        second, third = b.submit(1), b.submit(2)
        assert second.cancel()  # queued: its request is cancelled in the batcher
        assert not first.cancel()  # running: cannot be cancelled; it is answered
        gate.set()
        assert first.result(30) == 0 and third.result(30) == 2
        assert b.stats().cancelled == 1
    assert ran == [0, 2] and unraisable == []
