# SPDX-License-Identifier: Apache-2.0
"""ctypes mirrors of the libgpum structs the package fills or reads.

Each is checked against the loaded library's own layout (gpum_abi_sizeof / gpum_abi_offsetof)
by :func:`check_abi`, which the package runs at import: a libgpum of another layout is refused
with a clear error rather than misread.
"""
from __future__ import annotations

import ctypes as c
from typing import List, Type

from ._lib import lib

MAX_DEVICES = 16  # GPUM_CLIENT_MAX_DEVICES
TRAJECTORY = 256  # GPUM_BATCH_TRAJECTORY


ENV_NAME_MAX = 40  # GPUM_ENV_NAME_MAX
ENV_VALUE_MAX = MAX_DEVICES * 100  # GPUM_ENV_VALUE_MAX
ENV_MAX = 10  # GPUM_RESERVATION_ENV_MAX
DISTRIBUTED_ENV_MAX = 7  # GPUM_DISTRIBUTED_ENV_MAX


class DeviceInfo(c.Structure):
    _fields_ = [
        ("index", c.c_uint), ("uuid", c.c_char * 96), ("name", c.c_char * 96),
        ("pci_bus_id", c.c_char * 32), ("memory_total", c.c_uint64), ("cc_major", c.c_int),
        ("cc_minor", c.c_int), ("power_limit_mw", c.c_uint), ("temp_slowdown_c", c.c_int),
        ("temp_shutdown_c", c.c_int), ("ecc_enabled", c.c_bool), ("is_host", c.c_bool),
        ("vendor", c.c_char_p), ("vendor_index", c.c_uint), ("valid", c.c_uint32),
        ("parent_uuid", c.c_char * 96), ("parent_index", c.c_int), ("mig_gi", c.c_uint),
        ("mig_ci", c.c_uint),
    ]


class DeviceSample(c.Structure):
    _fields_ = [
        ("timestamp_ns", c.c_uint64), ("valid", c.c_uint32), ("memory_total", c.c_uint64),
        ("memory_used", c.c_uint64), ("memory_free", c.c_uint64),
        ("memory_reserved", c.c_uint64), ("util_gpu", c.c_uint), ("util_memory", c.c_uint),
        ("temperature_c", c.c_int), ("power_mw", c.c_uint), ("clock_sm_mhz", c.c_uint),
        ("clock_mem_mhz", c.c_uint), ("ecc_corrected", c.c_uint64),
        ("ecc_uncorrected", c.c_uint64),
    ]


class Process(c.Structure):
    _fields_ = [("pid", c.c_uint), ("memory", c.c_uint64), ("memory_valid", c.c_bool),
                ("user", c.c_char * 32), ("command", c.c_char * 256), ("mps_server", c.c_bool)]


class BusyThresholds(c.Structure):
    _fields_ = [("util_gpu_pct", c.c_uint), ("memory_pct", c.c_uint), ("jobs", c.c_uint)]


class HealthProbe(c.Structure):
    _fields_ = [("rc", c.c_int), ("sample", c.POINTER(DeviceSample)), ("memory_health", c.c_void_p),
                ("jobs_valid", c.c_bool), ("jobs", c.c_uint)]


MONITOR_JOBS_FN = c.CFUNCTYPE(c.c_int, c.c_uint, c.POINTER(c.c_uint), c.c_void_p)


class MonitorOpts(c.Structure):
    _fields_ = [
        ("interval_ms", c.c_uint), ("history_seconds", c.c_uint), ("watchdog_ms", c.c_uint),
        ("busy", BusyThresholds), ("fail_threshold", c.c_uint), ("recover_probes", c.c_uint),
        ("backoff_base_ms", c.c_uint), ("backoff_max_ms", c.c_uint), ("jitter", c.c_double),
        ("seed", c.c_uint64), ("devices", c.POINTER(c.c_uint)), ("device_count", c.c_size_t),
        ("events", c.c_bool), ("memory_health_every", c.c_uint), ("jobs_fn", MONITOR_JOBS_FN),
        ("jobs_user", c.c_void_p), ("alerts", c.c_void_p),
    ]


class DeviceHealth(c.Structure):
    _fields_ = [
        ("state", c.c_int), ("reason", c.c_char * 160), ("since_ns", c.c_uint64),
        ("responsive", c.c_bool), ("consecutive_failures", c.c_uint),
        ("healthy_probes", c.c_uint), ("next_probe_ns", c.c_uint64), ("last_rc", c.c_int),
        ("last_xid", c.c_uint64), ("gone", c.c_bool),
    ]


class MonitorEvent(c.Structure):
    _fields_ = [
        ("seq", c.c_uint64), ("kind", c.c_int), ("device", c.c_uint), ("time_ns", c.c_uint64),
        ("from", c.c_int), ("to", c.c_int), ("xid", c.c_uint64), ("rc", c.c_int),
        ("reason", c.c_char * 160),
    ]


class Alert(c.Structure):
    _fields_ = [
        ("id", c.c_uint64), ("rule", c.c_uint), ("device", c.c_uint), ("level", c.c_int),
        ("state", c.c_int), ("rule_text", c.c_char * 160), ("metric", c.c_char * 32),
        ("value", c.c_double), ("threshold", c.c_double), ("clear_threshold", c.c_double),
        ("clear_value", c.c_double), ("xid", c.c_uint64), ("repeats", c.c_uint),
        ("since_ns", c.c_uint64), ("fired_ns", c.c_uint64), ("cleared_ns", c.c_uint64),
        ("message", c.c_char * 256),
    ]


class AlertEngineOpts(c.Structure):
    _fields_ = [("history_cap", c.c_size_t), ("xid_window_ms", c.c_uint64)]


ALERT_FN = c.CFUNCTYPE(None, c.POINTER(Alert), c.c_void_p)


class BatcherPolicy(c.Structure):
    _fields_ = [("timeout_us", c.c_uint64), ("delay", c.c_bool), ("allow_override", c.c_bool),
                ("max_queue_size", c.c_size_t)]


BATCHER_FN = c.CFUNCTYPE(c.c_int, c.POINTER(c.c_void_p), c.POINTER(c.c_void_p), c.c_size_t,
                         c.c_uint, c.c_void_p)
BATCHER_DONE_FN = c.CFUNCTYPE(None, c.c_void_p, c.c_int, c.c_void_p, c.c_void_p)


class BatchMemory(c.Structure):
    _fields_ = [("peak", c.c_uint64), ("limit", c.c_uint64), ("total", c.c_uint64)]


BATCH_MEMORY_FN = c.CFUNCTYPE(c.c_int, c.POINTER(BatchMemory), c.c_void_p)


class BatcherOpts(c.Structure):
    _fields_ = [
        ("max_batch_size", c.c_size_t), ("preferred_sizes", c.POINTER(c.c_size_t)),
        ("npreferred", c.c_size_t), ("max_queue_delay_us", c.c_uint64),
        ("priority_levels", c.c_uint), ("default_priority", c.c_uint),
        ("policies", c.POINTER(BatcherPolicy)), ("default_policy", BatcherPolicy),
        ("preserve_ordering", c.c_bool), ("workers", c.c_uint), ("item_bytes", c.c_uint64),
        ("budget_bytes", c.c_uint64), ("fn", BATCHER_FN), ("user", c.c_void_p),
        ("memory", BATCH_MEMORY_FN), ("memory_user", c.c_void_p),
    ]


class BatcherSubmitOpts(c.Structure):
    _fields_ = [("priority", c.c_uint), ("timeout_us", c.c_uint64), ("done", BATCHER_DONE_FN),
                ("user", c.c_void_p)]


class BatcherStats(c.Structure):
    _fields_ = [
        ("submitted", c.c_uint64), ("completed", c.c_uint64), ("failed", c.c_uint64),
        ("rejected_full", c.c_uint64), ("rejected_timeout", c.c_uint64),
        ("cancelled", c.c_uint64), ("shut_down", c.c_uint64), ("batches", c.c_uint64),
        ("oom_splits", c.c_uint64), ("batch_sizes", c.c_uint64 * 65),
        ("queue_p50_us", c.c_double), ("queue_p95_us", c.c_double),
        ("queue_p99_us", c.c_double), ("e2e_p50_us", c.c_double), ("e2e_p95_us", c.c_double),
        ("e2e_p99_us", c.c_double), ("throughput", c.c_double), ("bound", c.c_size_t),
        ("queued", c.c_size_t), ("item_bytes", c.c_uint64), ("fixed_bytes", c.c_uint64),
    ]


class PoolOpts(c.Structure):
    _fields_ = [
        ("name", c.c_char_p), ("strategy", c.c_int), ("device", c.c_int),
        ("limit_bytes", c.c_uint64), ("limit_fraction", c.c_double),
        ("max_split_size", c.c_uint64), ("gc_threshold", c.c_double),
        ("expandable_segments", c.c_bool), ("cache_limit_bytes", c.c_uint64),
        ("cache_limit_fraction", c.c_double), ("no_reservation_limit", c.c_bool),
        ("event_log", c.c_void_p),
    ]


class PoolStat(c.Structure):
    _fields_ = [("current", c.c_uint64), ("peak", c.c_uint64), ("allocated", c.c_uint64),
                ("freed", c.c_uint64)]


class PoolStats(c.Structure):
    _fields_ = [
        ("allocated_bytes", PoolStat), ("requested_bytes", PoolStat), ("reserved_bytes", PoolStat),
        ("active_bytes", PoolStat), ("inactive_split_bytes", PoolStat), ("allocation", PoolStat),
        ("segment", PoolStat), ("active", PoolStat), ("inactive_split", PoolStat),
        ("num_alloc_retries", c.c_uint64), ("num_ooms", c.c_uint64),
        ("num_source_allocs", c.c_uint64), ("num_source_frees", c.c_uint64),
        ("largest_free_block", c.c_uint64), ("free_cached", c.c_uint64),
        ("fragmentation", c.c_double), ("limit", c.c_uint64), ("cache_limit", c.c_uint64),
        ("num_splits", c.c_uint64), ("num_merges", c.c_uint64), ("num_gc_frees", c.c_uint64),
        ("num_stream_merges", c.c_uint64), ("num_maps", c.c_uint64), ("num_unmaps", c.c_uint64),
    ]


class EnvVar(c.Structure):
    _fields_ = [("name", c.c_char * ENV_NAME_MAX), ("value", c.c_char * ENV_VALUE_MAX),
                ("if_unset", c.c_bool)]


class ResDevice(c.Structure):
    _fields_ = [("index", c.c_uint), ("uuid", c.c_char * 96), ("memory_total", c.c_uint64),
                ("vendor", c.c_char * 16), ("vendor_index", c.c_uint)]


class Reservation(c.Structure):
    _fields_ = [
        ("id", c.c_char * 64), ("token", c.c_char * 80), ("state", c.c_int),
        ("reason", c.c_char * 256), ("uid", c.c_uint32), ("pid", c.c_int32),
        ("label", c.c_char * 128), ("bytes_per_gpu", c.c_uint64), ("gpus", c.c_uint),
        ("priority", c.c_int), ("lease", c.c_int), ("ttl_ms", c.c_uint64),
        ("expires_ns", c.c_uint64), ("ndevices", c.c_size_t),
        ("devices", ResDevice * MAX_DEVICES), ("queue_position", c.c_long),
        ("waiting_for", c.c_char * 256), ("created_ns", c.c_uint64), ("granted_ns", c.c_uint64),
        ("ended_ns", c.c_uint64), ("fenced", c.c_bool), ("fenced_used", c.c_uint64),
        ("fenced_limit", c.c_uint64), ("slurm_job_id", c.c_char * 24),
        ("slurm_step_id", c.c_char * 24), ("preemptible", c.c_bool), ("hold", c.c_bool),
        ("suspended_ns", c.c_uint64), ("host_bytes", c.c_uint64), ("moving", c.c_char * 16),
    ]


class ReserveReq(c.Structure):
    _fields_ = [
        ("bytes_per_gpu", c.c_uint64), ("gpus", c.c_uint), ("model", c.c_char_p),
        ("min_memory", c.c_uint64), ("devices", c.POINTER(c.c_char_p)), ("ndevices", c.c_size_t),
        ("priority", c.c_int), ("queue_timeout_ms", c.c_uint64), ("wait_on_timeout", c.c_bool),
        ("label", c.c_char_p), ("lease", c.c_int), ("pid", c.c_int32), ("ttl_ms", c.c_uint64),
        ("no_wait", c.c_bool), ("slurm_job_id", c.c_char_p), ("slurm_step_id", c.c_char_p),
        ("preemptible", c.c_bool),
    ]


class ListQuery(c.Structure):
    _fields_ = [
        ("all", c.c_bool), ("states", c.c_uint), ("by_uid", c.c_bool), ("uid", c.c_uint32),
        ("label", c.c_char_p), ("limit", c.c_size_t), ("cursor", c.c_char_p),
    ]


class SessionEvent(c.Structure):
    _fields_ = [
        ("kind", c.c_int), ("reservation", c.POINTER(Reservation)), ("error", c.c_int),
        ("device", c.c_int), ("used_ratio", c.c_double), ("level", c.c_char_p),
        ("trimmed", c.c_uint64), ("grace_ms", c.c_int64),
    ]


SESSION_EVENT_FN = c.CFUNCTYPE(None, c.POINTER(SessionEvent), c.c_void_p)
SESSION_INTERRUPTED_FN = c.CFUNCTYPE(c.c_int, c.c_void_p)


class SessionOpts(c.Structure):
    _fields_ = [
        ("socket", c.c_char_p), ("cfg", c.c_void_p), ("connect_timeout_ms", c.c_uint),
        ("grace_ms", c.c_int64), ("on_event", SESSION_EVENT_FN),
        ("interrupted", SESSION_INTERRUPTED_FN), ("user", c.c_void_p),
    ]


class Estimate(c.Structure):
    _fields_ = [(n, c.c_uint64) for n in (
        "params", "trainable_params", "weights", "gradients", "optimizer", "activations",
        "kv_cache", "workspace", "context", "allocator", "total")]


class Batch(c.Structure):
    _fields_ = [
        ("first", c.c_uint64), ("count", c.c_size_t), ("attempt", c.c_uint),
        ("window_end", c.c_bool), ("loss_scale", c.c_double), ("window", c.c_uint64),
    ]


class BatchChange(c.Structure):
    _fields_ = [("item", c.c_uint64), ("size", c.c_size_t)]


class BatchStats(c.Structure):
    _fields_ = [
        ("done", c.c_uint64), ("fallback", c.c_uint64), ("failed", c.c_uint64),
        ("steps", c.c_uint64), ("ooms", c.c_uint64), ("retries", c.c_uint64),
        ("windows", c.c_uint64), ("waits", c.c_uint64), ("batch_size", c.c_size_t),
        ("smallest", c.c_size_t), ("largest", c.c_size_t), ("peak", c.c_uint64),
        ("seconds", c.c_double), ("items_per_s", c.c_double), ("nchanges", c.c_size_t),
        ("changes", c.c_uint64), ("trajectory", BatchChange * TRAJECTORY),
    ]


BATCH_STEP_FN = c.CFUNCTYPE(c.c_int, c.POINTER(Batch), c.c_void_p)
BATCH_WEIGHT_FN = c.CFUNCTYPE(c.c_double, c.c_uint64, c.c_void_p)
BATCH_PROGRESS_FN = c.CFUNCTYPE(None, c.POINTER(BatchStats), c.c_void_p)
BATCH_CHECKPOINT_FN = c.CFUNCTYPE(c.c_int, c.c_uint64, c.c_void_p)
BATCH_FAILED_FN = c.CFUNCTYPE(None, c.c_uint64, c.c_int, c.c_void_p)
BATCH_WAIT_FN = c.CFUNCTYPE(c.c_int, c.c_void_p)


class BatchOpts(c.Structure):
    _fields_ = [
        ("items", c.c_uint64), ("start", c.c_uint64), ("batch_size", c.c_size_t),
        ("max_batch", c.c_size_t), ("effective_batch", c.c_size_t), ("target", c.c_double),
        ("step", BATCH_STEP_FN), ("fallback", BATCH_STEP_FN), ("memory", BATCH_MEMORY_FN),
        ("weight", BATCH_WEIGHT_FN), ("checkpoint", BATCH_CHECKPOINT_FN),
        ("checkpoint_every", c.c_uint64), ("progress", BATCH_PROGRESS_FN),
        ("failed", BATCH_FAILED_FN), ("wait", BATCH_WAIT_FN), ("max_wait_ms", c.c_uint64),
        ("user", c.c_void_p),
    ]


TIER_COUNT = 3  # GPUM_TIER_COUNT

TIERCACHE_EVICT_FN = c.CFUNCTYPE(None, c.c_void_p, c.c_size_t, c.c_size_t, c.c_void_p)


class TierCacheOpts(c.Structure):
    _fields_ = [
        ("device", c.c_int), ("device_budget", c.c_uint64), ("pinned_limit", c.c_uint64),
        ("host_limit", c.c_uint64), ("on_evict", TIERCACHE_EVICT_FN), ("user", c.c_void_p),
    ]


class TierStats(c.Structure):
    _fields_ = [(n, c.c_uint64) for n in (
        "hits", "misses", "promotions", "demotions", "evictions", "bytes", "entries", "limit")]


class TierCacheStats(c.Structure):
    _fields_ = [
        ("tier", TierStats * TIER_COUNT), ("puts", c.c_uint64), ("gets", c.c_uint64),
        ("misses", c.c_uint64), ("alloc_failures", c.c_uint64), ("pressure_calls", c.c_uint64),
    ]


# The C names of the mirrored structs.
class Figure(c.Structure):
    _fields_ = [("name", c.c_char_p), ("value", c.c_double)]


class ReporterOpts(c.Structure):
    _fields_ = [("socket_path", c.c_char_p), ("reservation", c.c_char_p),
                ("period_ms", c.c_uint)]


PROFILE_NAME_LEN = 64  # GPUM_PROFILE_NAME_LEN


class ProfileStat(c.Structure):  # gpum_profile_stat_t
    _fields_ = [
        ("name", c.c_char * PROFILE_NAME_LEN), ("count", c.c_uint64), ("total_ns", c.c_uint64),
        ("min_ns", c.c_uint64), ("max_ns", c.c_uint64), ("mean_ns", c.c_double),
        ("p50_ns", c.c_uint64), ("p95_ns", c.c_uint64), ("p99_ns", c.c_uint64),
    ]


class MonitorWindowStats(c.Structure):  # gpum_window_stats_t
    _fields_ = [
        ("count", c.c_size_t), ("min", c.c_double), ("max", c.c_double), ("mean", c.c_double),
        ("p50", c.c_double), ("p95", c.c_double), ("p99", c.c_double),
    ]


MIRRORED: List[tuple] = [
    ("gpum_device_info_t", DeviceInfo), ("gpum_device_sample_t", DeviceSample),
    ("gpum_process_t", Process), ("gpum_env_var_t", EnvVar), ("gpum_pool_opts_t", PoolOpts),
    ("gpum_pool_stat_t", PoolStat), ("gpum_pool_stats_t", PoolStats),
    ("gpum_busy_thresholds_t", BusyThresholds), ("gpum_health_probe_t", HealthProbe),
    ("gpum_monitor_opts_t", MonitorOpts), ("gpum_device_health_t", DeviceHealth),
    ("gpum_monitor_event_t", MonitorEvent), ("gpum_alert_t", Alert),
    ("gpum_alert_engine_opts_t", AlertEngineOpts), ("gpum_batcher_policy_t", BatcherPolicy),
    ("gpum_batcher_opts_t", BatcherOpts), ("gpum_batcher_submit_opts_t", BatcherSubmitOpts),
    ("gpum_batcher_stats_t", BatcherStats), ("gpum_res_device_t", ResDevice), ("gpum_reservation_t", Reservation),
    ("gpum_reserve_req_t", ReserveReq), ("gpum_list_query_t", ListQuery),
    ("gpum_session_opts_t", SessionOpts),
    ("gpum_session_event_t", SessionEvent), ("gpum_estimate_t", Estimate),
    ("gpum_batch_t", Batch), ("gpum_batch_memory_t", BatchMemory),
    ("gpum_batch_change_t", BatchChange), ("gpum_batch_opts_t", BatchOpts),
    ("gpum_batch_stats_t", BatchStats), ("gpum_tiercache_opts_t", TierCacheOpts),
    ("gpum_tier_stats_t", TierStats), ("gpum_tiercache_stats_t", TierCacheStats),
    ("gpum_figure_t", Figure), ("gpum_reporter_opts_t", ReporterOpts),
    ("gpum_profile_stat_t", ProfileStat), ("gpum_window_stats_t", MonitorWindowStats),
]


def opaque(name: str) -> c.Array:
    """A zeroed buffer as large as the C struct name (one the package does not look into)."""
    n = lib.gpum_abi_sizeof(name.encode())
    if n <= 0:
        raise ImportError(f"libgpum does not know the struct {name}: too old for this package")
    return (c.c_char * n)()


def mismatches() -> List[str]:
    """Where the mirrors and the loaded library disagree: [] when they agree."""
    bad = []
    for cname, cls in MIRRORED:
        want = lib.gpum_abi_sizeof(cname.encode())
        if want != c.sizeof(cls):
            bad.append(f"sizeof {cname}: library {want}, package {c.sizeof(cls)}")
        for f in cls._fields_:
            off = lib.gpum_abi_offsetof(cname.encode(), f[0].encode())
            mine = getattr(cls, f[0]).offset
            if off != mine:
                bad.append(f"{cname}.{f[0]}: library {off}, package {mine}")
    return bad


def check_abi() -> None:
    bad = mismatches()
    if bad:
        raise ImportError("libgpum's structs differ from this package's: " + "; ".join(bad))
