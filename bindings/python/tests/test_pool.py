# SPDX-License-Identifier: Apache-2.0
"""gpum.Pool: blocks from a simulated source and from the simulated driver's CUDA memory, the
limit raising gpum.OutOfMemory with the pool's explanation, caching and trimming, statistics,
bad arguments."""
import ctypes

import pytest

import gpum

MiB = 1 << 20


def test_simulated_source_limit_cache_trim():
    with gpum.Pool("simulated", capacity="1GiB", limit="256MiB", strategy="balanced") as p:
        a = p.alloc(100 * MiB)
        st = p.stats()
        assert st.allocated_bytes == 100 * MiB and st.limit == 256 * MiB and st.allocations == 1
        assert str(st.allocated_bytes) == "100.00 MiB" and str(st.limit) == "256.00 MiB"
        assert "allocated_bytes=100.00 MiB" in repr(st), repr(st)
        with pytest.raises(gpum.OutOfMemory) as e:
            p.alloc(200 * MiB)
        assert "tried to allocate 200.00 MiB" in str(e.value) and "limit" in str(e.value)
        assert p.stats().num_ooms == 1
        p.free(a)
        assert p.stats().allocated_bytes == 0 and p.stats().reserved_bytes == 100 * MiB  # cached
        b = p.alloc(100 * MiB)  # from the cache: no new segment
        assert p.stats().segments == 1
        p.free(b)
        assert p.trim() == 100 * MiB and p.stats().reserved_bytes == 0


def test_cuda_source_on_the_simulated_driver(node):
    with gpum.Pool("cuda", device=0, limit="64MiB") as p:
        ptr = p.alloc(8 * MiB)
        ctypes.memset(ptr, 0x5a, 8 * MiB)  # the simulator backs device memory in this process
        assert ctypes.string_at(ptr + 8 * MiB - 4, 4) == b"\x5a" * 4
        p.free(ptr)
        with pytest.raises(gpum.OutOfMemory):
            p.alloc(65 * MiB)


def test_bad_arguments():
    with pytest.raises(gpum.GpumError):
        gpum.Pool("no-such-source")
    with pytest.raises(gpum.InvalidArgument):
        gpum.Pool("simulated", strategy="fastest")
    with gpum.Pool("simulated") as p:
        with pytest.raises(gpum.InvalidArgument):
            p.free(12345)  # not one of its blocks
