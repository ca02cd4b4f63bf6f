# SPDX-License-Identifier: Apache-2.0
"""gpum.TierCache on the simulated node's devices: put/get round trips with every kind of key and
value, demotion under a device budget and promotion on a hit (with the stats), pinning that
keeps an entry on the device under pressure (its device bytes read back), failed device
allocations demoting, the eviction callback from the lowest tier (its key, on the calling
thread, free to use the cache), a few thousand random operations against a dict, several
threads, and the errors as Python exceptions."""
import array
import ctypes
import random
import threading

import pytest

import gpum
from conftest import gpum as run_gpum
from gpum import Tier

KiB = 1 << 10


def payload(i, v=0, n=KiB):
    """n bytes that follow from a key number and a version."""
    return random.Random(i * 1_000_003 + v).randbytes(n)


def tiers(cache, keys):
    return [str(cache.lookup(k).tier) if k in cache else None for k in keys]


def test_put_get_round_trip(node):
    with gpum.TierCache(device_budget="1MiB", pinned_limit="1MiB") as c:
        c.put("user:42", b"hello")
        assert c.get("user:42") == b"hello"
        assert c.get(b"user:42") == b"hello"  # a str key is its UTF-8 bytes
        c.put("ключ", bytearray(b"\x00\x01\x02"))  # non-ASCII key, embedded NUL bytes
        assert c.get("ключ".encode()) == b"\x00\x01\x02"
        c.put(b"mv", memoryview(b"abcdef")[1:4])  # read-only view, copied once
        assert c.get("mv") == b"bcd"
        ints = array.array("i", range(1000))
        c.put("ints", ints)  # any contiguous buffer: its raw bytes
        assert c.get("ints") == ints.tobytes()
        c.put("user:42", b"replaced, longer")
        assert c.lookup("user:42") == gpum.Placement(Tier.DEVICE, 16)
        assert c.get("user:42") == b"replaced, longer"
        buf = bytearray(32)
        assert c.get_into("user:42", buf) == (16, Tier.DEVICE)
        assert bytes(buf[:16]) == b"replaced, longer"
        c["k"] = b"v"  # the mapping face
        assert c["k"] == b"v" and "k" in c and "absent" not in c and len(c) == 5
        del c["k"]
        assert "k" not in c and c.lookup("k") is None and len(c) == 4
        with pytest.raises(KeyError):
            c.get("k")
        with pytest.raises(KeyError):
            c.remove("k")
        st = c.stats()
        assert st.puts == 6 and st.misses == 1 and st.device.entries == 4
        assert st.device.limit == 1 << 20 and st.pinned.limit == 1 << 20 and st.host.limit == 0
    assert c.closed


def test_budget_demotes_and_a_hit_promotes(node):
    keys = [f"k{i}" for i in range(6)]
    with gpum.TierCache(device_budget=4 * KiB, pinned_limit=64 * KiB) as c:
        for i, k in enumerate(keys):
            c.put(k, payload(i))
        # The device holds 4 KiB: the two coldest went down to pinned memory.
        assert tiers(c, keys) == ["pinned"] * 2 + ["device"] * 4
        st = c.stats()
        assert (st.device.entries, st.device.bytes, st.device.demotions) == (4, 4 * KiB, 2)
        assert (st.pinned.entries, st.pinned.bytes) == (2, 2 * KiB)
        # A hit in pinned memory: the bytes, then the entry moves up and the coldest (k2) down.
        assert c.get("k0") == payload(0)
        assert tiers(c, keys) == ["device", "pinned", "pinned", "device", "device", "device"]
        st = c.stats()
        assert (st.pinned.hits, st.pinned.promotions, st.device.misses) == (1, 1, 1)
        assert (st.device.hits, st.device.demotions, st.gets) == (0, 3, 1)
        assert c.get("k0") == payload(0)  # now a device hit
        assert c.stats().device.hits == 1
        for i, k in enumerate(keys):  # nothing was lost on the way
            assert c.get(k) == payload(i)


def test_pinning_keeps_an_entry_on_the_device(node):
    with gpum.TierCache(device_budget=8 * KiB, pinned_limit=64 * KiB) as c:
        for i in range(4):
            c.put(f"k{i}", payload(i))
        with c.pinned("k0") as ptr:
            # The simulated driver backs device memory in this process: read it back.
            assert ctypes.string_at(ptr, KiB) == payload(0)
            assert c.pin("k0") == ptr  # pins nest
            assert c.pressure() == 3 * KiB  # everything else went down
            assert tiers(c, ["k0", "k1", "k2", "k3"]) == ["device"] + ["pinned"] * 3
            for i in range(4, 12):  # filling the device demotes others, never k0
                c.put(f"k{i}", payload(i))
            assert c.lookup("k0").tier == Tier.DEVICE
            assert ctypes.string_at(ptr, KiB) == payload(0)
            with pytest.raises(gpum.Busy):
                c.remove("k0")
            with pytest.raises(gpum.Busy):
                c.put("k0", b"new")
            c.unpin("k0")
            assert c.pressure("1KiB") == KiB and c.lookup("k0").tier == Tier.DEVICE  # still pinned
        assert c.pressure() == 7 * KiB  # unpinned at last: it goes down with the rest
        assert c.lookup("k0").tier == Tier.PINNED and c.get("k0") == payload(0)
        with pytest.raises(gpum.GpumError) as e:
            c.unpin("k0")
        assert e.value.name == "ESTATE"
        # Pinning a lower entry promotes it; one the device can never hold stays where it is.
        c.put("big", payload(99, n=16 * KiB))
        assert c.lookup("big").tier == Tier.PINNED
        with pytest.raises(gpum.OutOfMemory):
            c.pin("big")
        assert c.lookup("big").tier == Tier.PINNED
        assert c.stats().pressure_calls == 3


def test_failed_device_allocations_demote(node):
    # Device 1 of the session's node: the fault is cleared after, and nothing else uses it.
    with gpum.TierCache(device=1, pinned_limit="64MiB") as c:
        run_gpum("sim", "inject", node, "--device", "1", "--fail-after", str(4 << 20))
        try:
            for i in range(24):
                c.put(f"k{i}", payload(i, n=512 * KiB))
        finally:
            run_gpum("sim", "clear", node, "--device", "1")
        st = c.stats()
        assert st.alloc_failures > 0 and st.device.demotions >= 16 and st.device.entries <= 8
        assert st.device.entries + st.pinned.entries == 24
        assert c.lookup("k23").tier == Tier.DEVICE and c.lookup("k0").tier == Tier.PINNED
        for i in range(24):
            assert c.get(f"k{i}") == payload(i, n=512 * KiB)


def test_eviction_callback_from_the_lowest_tier(node):
    seen = []

    def on_evict(key, size):
        seen.append((key, size, threading.get_ident()))
        # Delivered after the evicting call finished and released the cache: usable here.
        assert key not in c and c.lookup(b"k6") is not None

    c = gpum.TierCache(device_budget=2 * KiB, pinned_limit=2 * KiB, host_limit=2 * KiB,
                       on_evict=on_evict)
    for i in range(6):
        c.put(f"k{i}", payload(i))
    assert seen == [] and tiers(c, ["k0", "k2", "k4"]) == ["host", "pinned", "device"]
    c.put("k6", payload(6))  # k4 -> pinned, k2 -> host, k0 (the coldest) evicted
    assert seen == [(b"k0", KiB, threading.get_ident())]
    st = c.stats()
    assert st.host.evictions == 1 and st.entries == 6
    assert (st.device.demotions, st.pinned.demotions) == (5, 3)
    with pytest.raises(KeyError):
        c.get("k0")
    # A hit in host memory promotes k1 to the device: the cascade may evict again, and every
    # key reported is gone while every other one is still cached.
    assert c.get("k1") == payload(1) and c.lookup("k1").tier == Tier.DEVICE
    gone = {s[0] for s in seen}
    assert {f"k{i}".encode() for i in range(7) if f"k{i}" not in c} == gone
    assert c.stats().host.evictions == len(seen)
    c.remove("k1")
    assert len(seen) == len(gone)  # remove is no eviction
    c.close()  # neither is closing
    assert len(seen) == len(gone)

    def failing(key, size):
        raise RuntimeError(f"callback for {key!r}")

    with gpum.TierCache(device_budget=KiB, pinned_limit=KiB, on_evict=failing) as c:
        c.put("a", payload(0))
        c.put("b", payload(1))
        with pytest.raises(RuntimeError, match="callback for b'a'"):
            c.put("c", payload(2))
        assert c.get("c") == payload(2)  # the put itself was done


def test_random_operations_against_a_dict(node):
    rng = random.Random(7)
    model, evicted = {}, []
    with gpum.TierCache(device_budget=24 * KiB, pinned_limit=48 * KiB, host_limit=64 * KiB,
                        on_evict=lambda k, n: evicted.append(k)) as c:
        version = 0
        for op in range(4000):
            k = f"key{rng.randrange(120)}"
            r = rng.random()
            if r < 0.45:
                version += 1
                v = payload(op, version, rng.randrange(1, 4 * KiB))
                c.put(k, v)
                model[k] = v
            elif r < 0.85:
                if k in model:
                    assert c.get(k) == model[k], f"op {op}: {k}"
                else:
                    with pytest.raises(KeyError):
                        c.get(k)
            elif r < 0.93:
                if k in model:
                    c.remove(k)
                    del model[k]
                else:
                    with pytest.raises(KeyError):
                        c.remove(k)
            elif r < 0.97 and k in model:
                with c.pinned(k) as ptr:
                    assert ctypes.string_at(ptr, len(model[k])) == model[k]
                    c.pressure(rng.randrange(16 * KiB))
                    assert c.lookup(k).tier == Tier.DEVICE
            else:
                c.pressure(rng.randrange(16 * KiB))
            for e in evicted:  # the callback ran before the call returned
                del model[e.decode()]
            evicted.clear()
            st = c.stats()
            assert st.entries == len(model)
            assert all(s.bytes <= s.limit for s in st.tiers if s.limit)
        for k, v in model.items():
            assert c.lookup(k).size == len(v) and c.get(k) == v
        st = c.stats()
        assert st.host.evictions > 0 and st.pinned.promotions > 0 and st.host.promotions > 0


def test_threads_with_their_own_keys(node):
    errors, deliveries = [], {}
    with gpum.TierCache(device_budget=16 * KiB, pinned_limit=32 * KiB,
                        on_evict=lambda k, n: deliveries.setdefault(
                            threading.get_ident(), []).append(k)) as c:
        def worker(w):
            try:
                rng, mine = random.Random(w), {}
                for op in range(600):
                    k = f"w{w}-{rng.randrange(40)}"
                    if rng.random() < 0.5:
                        mine[k] = payload(w * 10_000 + op, n=rng.randrange(1, 2 * KiB))
                        c.put(k, mine[k])
                    else:
                        try:
                            got = c.get(k)
                        except KeyError:  # never put, or another thread's put evicted it
                            mine.pop(k, None)
                        else:
                            assert got == mine[k]  # never another's or stale bytes
            except BaseException as e:  # reported by the main thread
                errors.append(e)

        ts = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert errors == []
        # Each eviction was delivered to the thread whose call caused it; a thread may evict
        # another's key.
        assert set(deliveries) <= {t.ident for t in ts}
        delivered = sum(map(len, deliveries.values()))
        assert delivered == c.stats().pinned.evictions and delivered > 0


def test_errors(node):
    with pytest.raises(gpum.InvalidArgument, match="pinned_limit"):
        gpum.TierCache(pinned_limit=0)
    with pytest.raises(gpum.InvalidArgument):
        gpum.TierCache(device_budget="lots")
    with pytest.raises(ValueError):
        gpum.TierCache(host_limit=-1)
    with pytest.raises(TypeError):
        gpum.TierCache(device_budget=1.5)
    with pytest.raises(TypeError):
        gpum.TierCache(on_evict="print")
    with pytest.raises(gpum.GpumError):
        gpum.TierCache(device=7)  # the node has two GPUs
    c = gpum.TierCache(device_budget=4 * KiB, pinned_limit=4 * KiB)
    for bad in (42, None, 1.0, ("k",)):
        with pytest.raises(TypeError, match="key"):
            c.put(bad, b"v")
        with pytest.raises(TypeError, match="key"):
            c.get(bad)
    for bad in ("text", 42, None, [1, 2]):
        with pytest.raises(TypeError, match="value"):
            c.put("k", bad)
    with pytest.raises(ValueError, match="contiguous"):
        c.put("k", memoryview(bytearray(8))[::2])
    with pytest.raises(gpum.InvalidArgument, match="key"):
        c.put("", b"v")
    with pytest.raises(gpum.InvalidArgument, match="key"):
        c.put(b"x" * 4097, b"v")
    with pytest.raises(gpum.InvalidArgument, match="size 0"):
        c.put("k", b"")
    with pytest.raises(gpum.InvalidArgument, match="exceed"):
        c.put("k", bytes(8 * KiB))
    c.put("k", b"12345678")
    with pytest.raises(ValueError, match="8 bytes"):
        c.get_into("k", bytearray(4))
    with pytest.raises(TypeError):
        c.get_into("k", b"read-only")
    with pytest.raises(KeyError):
        c.pin("absent")
    with pytest.raises(KeyError):
        c.unpin("absent")
    with c.pinned("k"):
        c.close()  # closing inside the block: the exit has nothing left to unpin
    for call in (lambda: c.put("k", b"v"), lambda: c.get("k"), lambda: c.lookup("k"),
                 lambda: "k" in c, lambda: c.pin("k"), lambda: c.pressure(1), c.stats,
                 lambda: c.remove("k")):
        with pytest.raises(ValueError, match="closed"):
            call()
    c.close()  # again: nothing


def test_device_buffers(node):
    """put_device/get_device with blocks of a gpum.Pool on the same device: device to device on
    the device tier, through pinned memory below it; a short buffer copies nothing."""
    with gpum.Pool("cuda", device=0) as pool, \
            gpum.TierCache(device_budget="2KiB", pinned_limit="64KiB") as cache:
        a, b = pool.alloc(1024), pool.alloc(1024)
        cache.put("src", bytes(range(256)) * 4)
        assert cache.get_device("src", a, 1024) == (1024, gpum.Tier.DEVICE)
        cache.put_device("copy", a, 1024)
        assert cache.lookup("copy").tier == gpum.Tier.DEVICE
        with cache.pinned("src"), cache.pinned("copy"):  # the device is full of pinned entries
            cache.put_device("low", a, 1024)
            assert cache.lookup("low").tier == gpum.Tier.PINNED
            assert cache.get_device("low", b, 1024) == (1024, gpum.Tier.PINNED)
        cache.put_device("again", b, 1024)
        for k in ("copy", "low", "again"):
            assert cache.get(k) == bytes(range(256)) * 4
        with pytest.raises(ValueError):
            cache.get_device("again", b, 512)
        with pytest.raises(KeyError):
            cache.get_device("none", b, 1024)
        pool.free(a)
        pool.free(b)
