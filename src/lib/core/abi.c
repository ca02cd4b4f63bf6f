/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The layouts bindings mirror (gpum/abi.h): every struct the Python package declares with
 * ctypes, and every field of it, listed once here.
 */
#include <stddef.h>
#include <string.h>

#include <gpum/abi.h>
#include <gpum/batch.h>
#include <gpum/client.h>
#include <gpum/estimate.h>
#include <gpum/session.h>

#define GPUM_ABI_TYPES(X) \
  X(gpum_env_var_t)       \
  X(gpum_res_device_t)    \
  X(gpum_reservation_t)   \
  X(gpum_reserve_req_t)   \
  X(gpum_session_opts_t)  \
  X(gpum_session_event_t) \
  X(gpum_estimate_t)      \
  X(gpum_model_t)         \
  X(gpum_estimate_opts_t) \
  X(gpum_batch_t)         \
  X(gpum_batch_memory_t)  \
  X(gpum_batch_change_t)  \
  X(gpum_batch_opts_t)    \
  X(gpum_batch_stats_t)

#define GPUM_ABI_FIELDS(X)                   \
  X(gpum_env_var_t, name)                    \
  X(gpum_env_var_t, value)                   \
  X(gpum_env_var_t, if_unset)                \
  X(gpum_res_device_t, index)                \
  X(gpum_reservation_t, pid)                 \
  X(gpum_reservation_t, label)               \
  X(gpum_reservation_t, bytes_per_gpu)       \
  X(gpum_reservation_t, ndevices)            \
  X(gpum_reservation_t, devices)             \
  X(gpum_reservation_t, queue_position)      \
  X(gpum_reservation_t, fenced)              \
  X(gpum_reservation_t, fenced_used)         \
  X(gpum_reservation_t, fenced_limit)        \
  X(gpum_reserve_req_t, gpus)                \
  X(gpum_reserve_req_t, model)               \
  X(gpum_reserve_req_t, min_memory)          \
  X(gpum_reserve_req_t, lease)               \
  X(gpum_reserve_req_t, pid)                 \
  X(gpum_reserve_req_t, ttl_ms)              \
  X(gpum_session_opts_t, connect_timeout_ms) \
  X(gpum_session_opts_t, grace_ms)           \
  X(gpum_session_opts_t, on_event)           \
  X(gpum_session_event_t, reservation)       \
  X(gpum_session_event_t, trimmed)           \
  X(gpum_session_event_t, grace_ms)          \
  X(gpum_estimate_t, params)                 \
  X(gpum_estimate_t, weights)                \
  X(gpum_estimate_t, gradients)              \
  X(gpum_estimate_t, kv_cache)               \
  X(gpum_estimate_t, workspace)              \
  X(gpum_estimate_t, total)                  \
  X(gpum_batch_t, first)                     \
  X(gpum_batch_t, count)                     \
  X(gpum_batch_memory_t, peak)               \
  X(gpum_batch_memory_t, limit)              \
  X(gpum_batch_opts_t, start)                \
  X(gpum_batch_opts_t, batch_size)           \
  X(gpum_batch_opts_t, max_batch)            \
  X(gpum_batch_opts_t, fallback)             \
  X(gpum_batch_opts_t, memory)               \
  X(gpum_batch_opts_t, checkpoint)           \
  X(gpum_batch_opts_t, checkpoint_every)     \
  X(gpum_batch_opts_t, failed)               \
  X(gpum_batch_opts_t, wait)                 \
  X(gpum_batch_stats_t, failed)              \
  X(gpum_batch_stats_t, windows)             \
  X(gpum_batch_stats_t, smallest)

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
