# SPDX-License-Identifier: Apache-2.0
"""gpum.adaptive over the C runner: out-of-memory raised by the step (gpum.OutOfMemory, or a
type the caller names) is retried smaller with every item run exactly once; windows and loss
scales; a sequence's elements as the indices; another exception stops the run and comes out;
fallback for an item that never fits; checkpoint and resume; statistics."""
import random

import pytest

import gpum


class Oom(Exception):
    """Stands for torch.cuda.OutOfMemoryError."""


def test_injected_ooms_every_item_once():
    n = 100_000
    runs = [0] * n
    rng = random.Random(7)
    cap = [300]

    def step(b):
        if b.count > cap[0] or rng.random() < 0.05:
            raise Oom("CUDA out of memory")
        if rng.random() < 0.02:
            cap[0] = rng.randint(1, 700)  # other jobs come and go
        for i in b.indices:
            runs[i] += 1

    st = gpum.adaptive(n, step, batch_size=64, max_batch=1024, oom_exceptions=[Oom])
    assert runs == [1] * n
    assert st.done == n and st.failed == 0
    assert st.ooms > 50 and st.retries >= st.ooms
    assert 64 < st.largest <= 1024 and st.trajectory


def test_windows_and_loss_scales():
    seen, scale, window_items = [], [0.0], [0]

    def step(b):
        if b.count > 40:
            raise gpum.OutOfMemory(-16, "simulated")
        seen.extend(b.indices)
        scale[0] += b.loss_scale
        window_items[0] += b.count
        if b.window_end:
            assert scale[0] == pytest.approx(1.0)
            assert window_items[0] in (100, 1000 % 100 or 100)
            scale[0], window_items[0] = 0.0, 0

    items = [f"sample-{i}" for i in range(1000)]
    st = gpum.adaptive(items, step, batch_size=64, max_batch=128, effective_batch=100)
    assert seen == items  # the sequence's elements, each once, in order
    assert st.windows == 10


def test_other_exceptions_stop_the_run():
    def step(b):
        if b.first >= 500:
            raise KeyError("a bug in the step")

    with pytest.raises(KeyError):
        gpum.adaptive(1000, step, batch_size=50)


def test_fallback_and_failed():
    done, fell, failed = set(), [], []

    def step(b):
        if 123 in b.indices:
            raise Oom()
        done.update(b.indices)

    st = gpum.adaptive(300, step, batch_size=32, oom_exceptions=(Oom,),
                       fallback=lambda b: fell.extend(b.indices))
    assert fell == [123] and st.fallback == 1 and len(done) == 299
    st = gpum.adaptive(300, step, batch_size=32, oom_exceptions=(Oom,),
                       on_failed=failed.append)
    assert failed == [123] and st.failed == 1


def test_checkpoint_and_resume():
    n, runs, marks = 5000, [0] * 5000, []

    class Preempted(Exception):
        pass

    def step(b):
        for i in b.indices:
            runs[i] += 1

    def checkpoint(nxt):
        marks.append(nxt)
        if nxt >= 2000:
            raise Preempted()

    with pytest.raises(Preempted):
        gpum.adaptive(n, step, batch_size=16, max_batch=64, effective_batch=64,
                      checkpoint=checkpoint, checkpoint_every=500)
    start = marks[-1]
    assert start >= 2000 and start % 64 == 0
    gpum.adaptive(n, step, batch_size=16, max_batch=64, effective_batch=64, start=start)
    assert runs == [1] * n


def test_memory_callback_sizes_batches():
    """A step whose memory is 10 + 2 per item, against a limit of 210: batches grow to what
    fits under the target share."""
    last = [0]

    def step(b):
        need = 10 + 2 * b.count
        if need > 210:
            raise gpum.OutOfMemory(-16, "over")
        last[0] = need

    st = gpum.adaptive(20000, step, batch_size=4, max_batch=1000,
                       memory=lambda: (last[0], 210, 0))
    assert 50 <= st.largest <= 100 and st.ooms <= 2


def test_pluggable_allocator_oom_text_is_an_oom():
    """PyTorch raises a pluggable allocator's refusal (gpum's, RMM's) as RuntimeError("CUDA out
    of memory. ..."): retried smaller like torch.cuda.OutOfMemoryError; another RuntimeError
    still stops the run."""
    runs = [0] * 500

    def step(b):
        if b.count > 40:
            raise RuntimeError("CUDA out of memory. Tried to allocate 3.00 GiB on GPU 0: ...")
        for i in b.indices:
            runs[i] += 1

    st = gpum.adaptive(500, step, batch_size=128)
    assert runs == [1] * 500 and st.ooms >= 1 and st.largest <= 40

    def bad(b):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    with pytest.raises(RuntimeError, match="illegal memory access"):
        gpum.adaptive(10, bad, batch_size=4)
