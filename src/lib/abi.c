/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The layouts bindings mirror (gpum/abi.h): every struct the Python package declares with
 * ctypes, and every field of it, listed once here. It sees every module's public header, so it
 * stands at the top of libgpum, above the modules (src/lib/<module>/), not in core, which
 * depends on nothing above it.
 */
#include <stddef.h>
#include <string.h>

#include <gpum/abi.h>
#include <gpum/alert.h>
#include <gpum/batch.h>
#include <gpum/batcher.h>
#include <gpum/client.h>
#include <gpum/device.h>
#include <gpum/estimate.h>
#include <gpum/monitor.h>
#include <gpum/pool.h>
#include <gpum/profile.h>
#include <gpum/report.h>
#include <gpum/session.h>
#include <gpum/tiercache.h>

#define GPUM_ABI_TYPES(X)       \
  X(gpum_device_info_t)         \
  X(gpum_device_sample_t)       \
  X(gpum_process_t)             \
  X(gpum_env_var_t)             \
  X(gpum_pool_opts_t)           \
  X(gpum_pool_stat_t)           \
  X(gpum_pool_stats_t)          \
  X(gpum_busy_thresholds_t)     \
  X(gpum_health_probe_t)        \
  X(gpum_monitor_opts_t)        \
  X(gpum_device_health_t)       \
  X(gpum_monitor_event_t)       \
  X(gpum_alert_t)               \
  X(gpum_alert_engine_opts_t)   \
  X(gpum_batcher_policy_t)      \
  X(gpum_batcher_opts_t)        \
  X(gpum_batcher_submit_opts_t) \
  X(gpum_batcher_stats_t)       \
  X(gpum_res_device_t)          \
  X(gpum_reservation_t)         \
  X(gpum_reserve_req_t)         \
  X(gpum_list_query_t)          \
  X(gpum_session_opts_t)        \
  X(gpum_session_event_t)       \
  X(gpum_estimate_t)            \
  X(gpum_batch_t)               \
  X(gpum_batch_memory_t)        \
  X(gpum_batch_change_t)        \
  X(gpum_batch_opts_t)          \
  X(gpum_batch_stats_t)         \
  X(gpum_tiercache_opts_t)      \
  X(gpum_tier_stats_t)          \
  X(gpum_tiercache_stats_t)     \
  X(gpum_figure_t)              \
  X(gpum_profile_stat_t)        \
  X(gpum_window_stats_t)        \
  X(gpum_reporter_opts_t)       \
  X(gpum_model_t)               \
  X(gpum_estimate_opts_t)

#define GPUM_ABI_FIELDS(X)                      \
  X(gpum_device_info_t, index)                  \
  X(gpum_device_info_t, uuid)                   \
  X(gpum_device_info_t, name)                   \
  X(gpum_device_info_t, pci_bus_id)             \
  X(gpum_device_info_t, memory_total)           \
  X(gpum_device_info_t, cc_major)               \
  X(gpum_device_info_t, cc_minor)               \
  X(gpum_device_info_t, power_limit_mw)         \
  X(gpum_device_info_t, temp_slowdown_c)        \
  X(gpum_device_info_t, temp_shutdown_c)        \
  X(gpum_device_info_t, ecc_enabled)            \
  X(gpum_device_info_t, is_host)                \
  X(gpum_device_info_t, vendor)                 \
  X(gpum_device_info_t, vendor_index)           \
  X(gpum_device_info_t, valid)                  \
  X(gpum_device_info_t, parent_uuid)            \
  X(gpum_device_info_t, parent_index)           \
  X(gpum_device_info_t, mig_gi)                 \
  X(gpum_device_info_t, mig_ci)                 \
  X(gpum_device_sample_t, timestamp_ns)         \
  X(gpum_device_sample_t, valid)                \
  X(gpum_device_sample_t, memory_total)         \
  X(gpum_device_sample_t, memory_used)          \
  X(gpum_device_sample_t, memory_free)          \
  X(gpum_device_sample_t, memory_reserved)      \
  X(gpum_device_sample_t, util_gpu)             \
  X(gpum_device_sample_t, util_memory)          \
  X(gpum_device_sample_t, temperature_c)        \
  X(gpum_device_sample_t, power_mw)             \
  X(gpum_device_sample_t, clock_sm_mhz)         \
  X(gpum_device_sample_t, clock_mem_mhz)        \
  X(gpum_device_sample_t, ecc_corrected)        \
  X(gpum_device_sample_t, ecc_uncorrected)      \
  X(gpum_process_t, pid)                        \
  X(gpum_process_t, memory)                     \
  X(gpum_process_t, memory_valid)               \
  X(gpum_process_t, user)                       \
  X(gpum_process_t, command)                    \
  X(gpum_process_t, mps_server)                 \
  X(gpum_env_var_t, name)                       \
  X(gpum_env_var_t, value)                      \
  X(gpum_env_var_t, if_unset)                   \
  X(gpum_pool_opts_t, name)                     \
  X(gpum_pool_opts_t, strategy)                 \
  X(gpum_pool_opts_t, device)                   \
  X(gpum_pool_opts_t, limit_bytes)              \
  X(gpum_pool_opts_t, limit_fraction)           \
  X(gpum_pool_opts_t, max_split_size)           \
  X(gpum_pool_opts_t, gc_threshold)             \
  X(gpum_pool_opts_t, expandable_segments)      \
  X(gpum_pool_opts_t, cache_limit_bytes)        \
  X(gpum_pool_opts_t, cache_limit_fraction)     \
  X(gpum_pool_opts_t, no_reservation_limit)     \
  X(gpum_pool_opts_t, event_log)                \
  X(gpum_pool_stat_t, current)                  \
  X(gpum_pool_stat_t, peak)                     \
  X(gpum_pool_stat_t, allocated)                \
  X(gpum_pool_stat_t, freed)                    \
  X(gpum_pool_stats_t, allocated_bytes)         \
  X(gpum_pool_stats_t, requested_bytes)         \
  X(gpum_pool_stats_t, reserved_bytes)          \
  X(gpum_pool_stats_t, active_bytes)            \
  X(gpum_pool_stats_t, inactive_split_bytes)    \
  X(gpum_pool_stats_t, allocation)              \
  X(gpum_pool_stats_t, segment)                 \
  X(gpum_pool_stats_t, active)                  \
  X(gpum_pool_stats_t, inactive_split)          \
  X(gpum_pool_stats_t, num_alloc_retries)       \
  X(gpum_pool_stats_t, num_ooms)                \
  X(gpum_pool_stats_t, num_source_allocs)       \
  X(gpum_pool_stats_t, num_source_frees)        \
  X(gpum_pool_stats_t, largest_free_block)      \
  X(gpum_pool_stats_t, free_cached)             \
  X(gpum_pool_stats_t, fragmentation)           \
  X(gpum_pool_stats_t, limit)                   \
  X(gpum_pool_stats_t, cache_limit)             \
  X(gpum_pool_stats_t, num_splits)              \
  X(gpum_pool_stats_t, num_merges)              \
  X(gpum_pool_stats_t, num_gc_frees)            \
  X(gpum_pool_stats_t, num_stream_merges)       \
  X(gpum_pool_stats_t, num_maps)                \
  X(gpum_pool_stats_t, num_unmaps)              \
  X(gpum_busy_thresholds_t, util_gpu_pct)       \
  X(gpum_busy_thresholds_t, memory_pct)         \
  X(gpum_busy_thresholds_t, jobs)               \
  X(gpum_health_probe_t, rc)                    \
  X(gpum_health_probe_t, sample)                \
  X(gpum_health_probe_t, memory_health)         \
  X(gpum_health_probe_t, jobs_valid)            \
  X(gpum_health_probe_t, jobs)                  \
  X(gpum_monitor_opts_t, interval_ms)           \
  X(gpum_monitor_opts_t, history_seconds)       \
  X(gpum_monitor_opts_t, watchdog_ms)           \
  X(gpum_monitor_opts_t, busy)                  \
  X(gpum_monitor_opts_t, fail_threshold)        \
  X(gpum_monitor_opts_t, recover_probes)        \
  X(gpum_monitor_opts_t, backoff_base_ms)       \
  X(gpum_monitor_opts_t, backoff_max_ms)        \
  X(gpum_monitor_opts_t, jitter)                \
  X(gpum_monitor_opts_t, seed)                  \
  X(gpum_monitor_opts_t, devices)               \
  X(gpum_monitor_opts_t, device_count)          \
  X(gpum_monitor_opts_t, events)                \
  X(gpum_monitor_opts_t, memory_health_every)   \
  X(gpum_monitor_opts_t, jobs_fn)               \
  X(gpum_monitor_opts_t, jobs_user)             \
  X(gpum_monitor_opts_t, alerts)                \
  X(gpum_device_health_t, state)                \
  X(gpum_device_health_t, reason)               \
  X(gpum_device_health_t, since_ns)             \
  X(gpum_device_health_t, responsive)           \
  X(gpum_device_health_t, consecutive_failures) \
  X(gpum_device_health_t, healthy_probes)       \
  X(gpum_device_health_t, next_probe_ns)        \
  X(gpum_device_health_t, last_rc)              \
  X(gpum_device_health_t, last_xid)             \
  X(gpum_device_health_t, gone)                 \
  X(gpum_monitor_event_t, seq)                  \
  X(gpum_monitor_event_t, kind)                 \
  X(gpum_monitor_event_t, device)               \
  X(gpum_monitor_event_t, time_ns)              \
  X(gpum_monitor_event_t, from)                 \
  X(gpum_monitor_event_t, to)                   \
  X(gpum_monitor_event_t, xid)                  \
  X(gpum_monitor_event_t, rc)                   \
  X(gpum_monitor_event_t, reason)               \
  X(gpum_alert_t, id)                           \
  X(gpum_alert_t, rule)                         \
  X(gpum_alert_t, device)                       \
  X(gpum_alert_t, level)                        \
  X(gpum_alert_t, state)                        \
  X(gpum_alert_t, rule_text)                    \
  X(gpum_alert_t, metric)                       \
  X(gpum_alert_t, value)                        \
  X(gpum_alert_t, threshold)                    \
  X(gpum_alert_t, clear_threshold)              \
  X(gpum_alert_t, clear_value)                  \
  X(gpum_alert_t, xid)                          \
  X(gpum_alert_t, repeats)                      \
  X(gpum_alert_t, since_ns)                     \
  X(gpum_alert_t, fired_ns)                     \
  X(gpum_alert_t, cleared_ns)                   \
  X(gpum_alert_t, message)                      \
  X(gpum_alert_engine_opts_t, history_cap)      \
  X(gpum_alert_engine_opts_t, xid_window_ms)    \
  X(gpum_batcher_policy_t, timeout_us)          \
  X(gpum_batcher_policy_t, delay)               \
  X(gpum_batcher_policy_t, allow_override)      \
  X(gpum_batcher_policy_t, max_queue_size)      \
  X(gpum_batcher_opts_t, max_batch_size)        \
  X(gpum_batcher_opts_t, preferred_sizes)       \
  X(gpum_batcher_opts_t, npreferred)            \
  X(gpum_batcher_opts_t, max_queue_delay_us)    \
  X(gpum_batcher_opts_t, priority_levels)       \
  X(gpum_batcher_opts_t, default_priority)      \
  X(gpum_batcher_opts_t, policies)              \
  X(gpum_batcher_opts_t, default_policy)        \
  X(gpum_batcher_opts_t, preserve_ordering)     \
  X(gpum_batcher_opts_t, workers)               \
  X(gpum_batcher_opts_t, item_bytes)            \
  X(gpum_batcher_opts_t, budget_bytes)          \
  X(gpum_batcher_opts_t, fn)                    \
  X(gpum_batcher_opts_t, user)                  \
  X(gpum_batcher_opts_t, memory)                \
  X(gpum_batcher_opts_t, memory_user)           \
  X(gpum_batcher_submit_opts_t, priority)       \
  X(gpum_batcher_submit_opts_t, timeout_us)     \
  X(gpum_batcher_submit_opts_t, done)           \
  X(gpum_batcher_submit_opts_t, user)           \
  X(gpum_batcher_stats_t, submitted)            \
  X(gpum_batcher_stats_t, completed)            \
  X(gpum_batcher_stats_t, failed)               \
  X(gpum_batcher_stats_t, rejected_full)        \
  X(gpum_batcher_stats_t, rejected_timeout)     \
  X(gpum_batcher_stats_t, cancelled)            \
  X(gpum_batcher_stats_t, shut_down)            \
  X(gpum_batcher_stats_t, batches)              \
  X(gpum_batcher_stats_t, oom_splits)           \
  X(gpum_batcher_stats_t, batch_sizes)          \
  X(gpum_batcher_stats_t, queue_p50_us)         \
  X(gpum_batcher_stats_t, queue_p95_us)         \
  X(gpum_batcher_stats_t, queue_p99_us)         \
  X(gpum_batcher_stats_t, e2e_p50_us)           \
  X(gpum_batcher_stats_t, e2e_p95_us)           \
  X(gpum_batcher_stats_t, e2e_p99_us)           \
  X(gpum_batcher_stats_t, throughput)           \
  X(gpum_batcher_stats_t, bound)                \
  X(gpum_batcher_stats_t, queued)               \
  X(gpum_batcher_stats_t, item_bytes)           \
  X(gpum_batcher_stats_t, fixed_bytes)          \
  X(gpum_res_device_t, index)                   \
  X(gpum_res_device_t, uuid)                    \
  X(gpum_res_device_t, memory_total)            \
  X(gpum_res_device_t, vendor)                  \
  X(gpum_res_device_t, vendor_index)            \
  X(gpum_reservation_t, id)                     \
  X(gpum_reservation_t, token)                  \
  X(gpum_reservation_t, state)                  \
  X(gpum_reservation_t, reason)                 \
  X(gpum_reservation_t, uid)                    \
  X(gpum_reservation_t, pid)                    \
  X(gpum_reservation_t, label)                  \
  X(gpum_reservation_t, bytes_per_gpu)          \
  X(gpum_reservation_t, gpus)                   \
  X(gpum_reservation_t, priority)               \
  X(gpum_reservation_t, lease)                  \
  X(gpum_reservation_t, ttl_ms)                 \
  X(gpum_reservation_t, expires_ns)             \
  X(gpum_reservation_t, ndevices)               \
  X(gpum_reservation_t, devices)                \
  X(gpum_reservation_t, queue_position)         \
  X(gpum_reservation_t, waiting_for)            \
  X(gpum_reservation_t, created_ns)             \
  X(gpum_reservation_t, granted_ns)             \
  X(gpum_reservation_t, ended_ns)               \
  X(gpum_reservation_t, fenced)                 \
  X(gpum_reservation_t, fenced_used)            \
  X(gpum_reservation_t, fenced_limit)           \
  X(gpum_reservation_t, slurm_job_id)           \
  X(gpum_reservation_t, slurm_step_id)          \
  X(gpum_reservation_t, preemptible)            \
  X(gpum_reservation_t, hold)                   \
  X(gpum_reservation_t, suspended_ns)           \
  X(gpum_reservation_t, host_bytes)             \
  X(gpum_reservation_t, moving)                 \
  X(gpum_reserve_req_t, bytes_per_gpu)          \
  X(gpum_reserve_req_t, gpus)                   \
  X(gpum_reserve_req_t, model)                  \
  X(gpum_reserve_req_t, min_memory)             \
  X(gpum_reserve_req_t, devices)                \
  X(gpum_reserve_req_t, ndevices)               \
  X(gpum_reserve_req_t, priority)               \
  X(gpum_reserve_req_t, queue_timeout_ms)       \
  X(gpum_reserve_req_t, wait_on_timeout)        \
  X(gpum_reserve_req_t, label)                  \
  X(gpum_reserve_req_t, lease)                  \
  X(gpum_reserve_req_t, pid)                    \
  X(gpum_reserve_req_t, ttl_ms)                 \
  X(gpum_reserve_req_t, no_wait)                \
  X(gpum_reserve_req_t, slurm_job_id)           \
  X(gpum_reserve_req_t, slurm_step_id)          \
  X(gpum_reserve_req_t, preemptible)            \
  X(gpum_list_query_t, all)                     \
  X(gpum_list_query_t, states)                  \
  X(gpum_list_query_t, by_uid)                  \
  X(gpum_list_query_t, uid)                     \
  X(gpum_list_query_t, label)                   \
  X(gpum_list_query_t, limit)                   \
  X(gpum_list_query_t, cursor)                  \
  X(gpum_session_opts_t, socket)                \
  X(gpum_session_opts_t, cfg)                   \
  X(gpum_session_opts_t, connect_timeout_ms)    \
  X(gpum_session_opts_t, grace_ms)              \
  X(gpum_session_opts_t, on_event)              \
  X(gpum_session_opts_t, interrupted)           \
  X(gpum_session_opts_t, user)                  \
  X(gpum_session_event_t, kind)                 \
  X(gpum_session_event_t, reservation)          \
  X(gpum_session_event_t, error)                \
  X(gpum_session_event_t, device)               \
  X(gpum_session_event_t, used_ratio)           \
  X(gpum_session_event_t, level)                \
  X(gpum_session_event_t, trimmed)              \
  X(gpum_session_event_t, grace_ms)             \
  X(gpum_estimate_t, params)                    \
  X(gpum_estimate_t, trainable_params)          \
  X(gpum_estimate_t, weights)                   \
  X(gpum_estimate_t, gradients)                 \
  X(gpum_estimate_t, optimizer)                 \
  X(gpum_estimate_t, activations)               \
  X(gpum_estimate_t, kv_cache)                  \
  X(gpum_estimate_t, workspace)                 \
  X(gpum_estimate_t, context)                   \
  X(gpum_estimate_t, allocator)                 \
  X(gpum_estimate_t, total)                     \
  X(gpum_batch_t, first)                        \
  X(gpum_batch_t, count)                        \
  X(gpum_batch_t, attempt)                      \
  X(gpum_batch_t, window_end)                   \
  X(gpum_batch_t, loss_scale)                   \
  X(gpum_batch_t, window)                       \
  X(gpum_batch_memory_t, peak)                  \
  X(gpum_batch_memory_t, limit)                 \
  X(gpum_batch_memory_t, total)                 \
  X(gpum_batch_change_t, item)                  \
  X(gpum_batch_change_t, size)                  \
  X(gpum_batch_opts_t, items)                   \
  X(gpum_batch_opts_t, start)                   \
  X(gpum_batch_opts_t, batch_size)              \
  X(gpum_batch_opts_t, max_batch)               \
  X(gpum_batch_opts_t, effective_batch)         \
  X(gpum_batch_opts_t, target)                  \
  X(gpum_batch_opts_t, step)                    \
  X(gpum_batch_opts_t, fallback)                \
  X(gpum_batch_opts_t, memory)                  \
  X(gpum_batch_opts_t, weight)                  \
  X(gpum_batch_opts_t, checkpoint)              \
  X(gpum_batch_opts_t, checkpoint_every)        \
  X(gpum_batch_opts_t, progress)                \
  X(gpum_batch_opts_t, failed)                  \
  X(gpum_batch_opts_t, wait)                    \
  X(gpum_batch_opts_t, max_wait_ms)             \
  X(gpum_batch_opts_t, user)                    \
  X(gpum_batch_stats_t, done)                   \
  X(gpum_batch_stats_t, fallback)               \
  X(gpum_batch_stats_t, failed)                 \
  X(gpum_batch_stats_t, steps)                  \
  X(gpum_batch_stats_t, ooms)                   \
  X(gpum_batch_stats_t, retries)                \
  X(gpum_batch_stats_t, windows)                \
  X(gpum_batch_stats_t, waits)                  \
  X(gpum_batch_stats_t, batch_size)             \
  X(gpum_batch_stats_t, smallest)               \
  X(gpum_batch_stats_t, largest)                \
  X(gpum_batch_stats_t, peak)                   \
  X(gpum_batch_stats_t, seconds)                \
  X(gpum_batch_stats_t, items_per_s)            \
  X(gpum_batch_stats_t, nchanges)               \
  X(gpum_batch_stats_t, changes)                \
  X(gpum_batch_stats_t, trajectory)             \
  X(gpum_tiercache_opts_t, device)              \
  X(gpum_tiercache_opts_t, device_budget)       \
  X(gpum_tiercache_opts_t, pinned_limit)        \
  X(gpum_tiercache_opts_t, host_limit)          \
  X(gpum_tiercache_opts_t, on_evict)            \
  X(gpum_tiercache_opts_t, user)                \
  X(gpum_tier_stats_t, hits)                    \
  X(gpum_tier_stats_t, misses)                  \
  X(gpum_tier_stats_t, promotions)              \
  X(gpum_tier_stats_t, demotions)               \
  X(gpum_tier_stats_t, evictions)               \
  X(gpum_tier_stats_t, bytes)                   \
  X(gpum_tier_stats_t, entries)                 \
  X(gpum_tier_stats_t, limit)                   \
  X(gpum_tiercache_stats_t, tier)               \
  X(gpum_tiercache_stats_t, puts)               \
  X(gpum_tiercache_stats_t, gets)               \
  X(gpum_tiercache_stats_t, misses)             \
  X(gpum_tiercache_stats_t, alloc_failures)     \
  X(gpum_tiercache_stats_t, pressure_calls)     \
  X(gpum_figure_t, name)                        \
  X(gpum_figure_t, value)                       \
  X(gpum_profile_stat_t, name)                  \
  X(gpum_profile_stat_t, count)                 \
  X(gpum_profile_stat_t, total_ns)              \
  X(gpum_profile_stat_t, min_ns)                \
  X(gpum_profile_stat_t, max_ns)                \
  X(gpum_profile_stat_t, mean_ns)               \
  X(gpum_profile_stat_t, p50_ns)                \
  X(gpum_profile_stat_t, p95_ns)                \
  X(gpum_profile_stat_t, p99_ns)                \
  X(gpum_window_stats_t, count)                 \
  X(gpum_window_stats_t, min)                   \
  X(gpum_window_stats_t, max)                   \
  X(gpum_window_stats_t, mean)                  \
  X(gpum_window_stats_t, p50)                   \
  X(gpum_window_stats_t, p95)                   \
  X(gpum_window_stats_t, p99)                   \
  X(gpum_reporter_opts_t, socket_path)          \
  X(gpum_reporter_opts_t, reservation)          \
  X(gpum_reporter_opts_t, period_ms)

long gpum_abi_sizeof(const char *type) {
  if (!type)
    return -1;
#define GPUM__ABI_SIZE(t) \
  if (!strcmp(type, #t))  \
    return (long)sizeof(t);
  GPUM_ABI_TYPES(GPUM__ABI_SIZE)
#undef GPUM__ABI_SIZE
  return -1;
}

long gpum_abi_offsetof(const char *type, const char *field) {
  if (!type || !field)
    return -1;
#define GPUM__ABI_OFF(t, f)                    \
  if (!strcmp(type, #t) && !strcmp(field, #f)) \
    return (long)offsetof(t, f);
  GPUM_ABI_FIELDS(GPUM__ABI_OFF)
#undef GPUM__ABI_OFF
  return -1;
}
