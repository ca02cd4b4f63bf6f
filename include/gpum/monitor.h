/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The monitor: samples every device at a fixed interval into per-device history rings, keeps
 * a health state per device (AVAILABLE / BUSY / ERROR / DISABLED), and reports every state
 * change as an event with a reason.
 *
 * Threads. gpum_monitor_start() starts
 *   - one sampler thread: it runs the rounds, stores the samples, evaluates health, calls the
 *     subscribers and the alert engine. All health state changes happen on this thread;
 *   - one worker thread per device, each with its own device session, that makes the driver
 *     calls. Its first call reads the device's static info (name, UUID, memory, limits):
 *     gpum_monitor_create makes no call on any device, so a device whose driver calls hang
 *     holds up neither the caller nor the other devices. Until the info is read,
 *     gpum_monitor_device_info returns GPUM_EAGAIN and the device has no samples; when it is
 *     read, a GPUM_MONEV_INFO event is emitted (gpum_monitor_wait_info waits for all of them
 *     with a deadline). The sampler hands a worker a request and waits for it with a
 *     deadline, so a call that hangs on one device (the simulated driver's --slow) holds up
 *     only that device's worker: the others are sampled on time. A call still running after
 *     the watchdog timeout (the info read included) marks its device ERROR ("driver call hung
 *     for N ms"); when the call returns, the device is re-probed and recovers like any ERROR
 *     device;
 *   - one event thread (opts.events) registering for and waiting for the driver's XID / ECC
 *     events on its own session and passing them to the sampler.
 * Every gpum_monitor_* query is thread-safe and cheap (a short lock, no driver call).
 *
 * Health rules (design.md section 4), evaluated per device on the sampler thread:
 *   - GPUM_EAGAIN from the device layer (transient errors that outlasted its own retries) is a
 *     failure; it never moves a device to ERROR by itself, only fail_threshold consecutive
 *     failures of any kind do. Between failures the device is retried with exponential backoff
 *     (backoff_base_ms doubling up to backoff_max_ms, +-jitter) instead of every round.
 *   - GPUM_ELOST (GPU fallen off the bus), GPUM_ERESET (reset required), a critical XID, a
 *     double-bit ECC event, growth of the uncorrectable ECC count, a failed row remap, or a
 *     driver call hung past the watchdog move the device to ERROR at once.
 *   - An ERROR device is re-probed with backoff (delays doubling from backoff_base_ms up to
 *     backoff_max_ms, +-jitter, reset after a healthy probe); after recover_probes consecutive
 *     healthy probes (the device answers, no new critical XID or ECC growth) it returns to
 *     AVAILABLE (or BUSY).
 *   - BUSY: the device is healthy and its GPU utilisation, memory use or job count is at or
 *     over a threshold; it returns to AVAILABLE when all are under.
 *   - DISABLED: set and cleared only by the operator (gpum_monitor_set_disabled). Sampling and
 *     the health rules go on underneath; on re-enable the device takes the state they give.
 *
 * Memory. A history record is 64 bytes (packed exact values: memory in bytes as uint64, power
 * in mW and ECC counts as uint32 (saturating), clocks uint16, temperature int16, utilisation
 * uint8, timestamp uint64 ns, validity bits uint16). Default capacity = history_seconds *
 * 1000 / interval_ms = 3600 records per device, so 8 GPUs x 3600 x 64 B = 1,843,200 B
 * (1.76 MiB) for one hour at 1 s, well under 8 MiB.
 */
#ifndef GPUM_MONITOR_H
#define GPUM_MONITOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpum/device.h>

#include <gpum/export.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Health states -------------------------------------------------------------------- */

typedef enum {
  GPUM_HEALTH_AVAILABLE = 0,
  GPUM_HEALTH_BUSY = 1,
  GPUM_HEALTH_ERROR = 2,
  GPUM_HEALTH_DISABLED = 3,
} gpum_health_t;
#define GPUM_HEALTH_COUNT 4

/* "AVAILABLE", "BUSY", "ERROR", "DISABLED"; "UNKNOWN" for other values. Never NULL. */
GPUM_API const char *gpum_health_state_name(gpum_health_t state);
/* Parses a state name, case-insensitively. Returns 0 or GPUM_EINVAL (detail names s). */
GPUM_API int gpum_health_state_parse(const char *s, gpum_health_t *out);

/* Length of every reason buffer below, NUL included. */
#define GPUM_HEALTH_REASON_LEN 160

/* When a healthy device counts as BUSY: at or over any enabled threshold. */
typedef struct {
  unsigned util_gpu_pct; /* GPU utilisation, percent; default 90; 0 = off */
  unsigned memory_pct;   /* memory_used / memory_total, percent; default 90; 0 = off */
  unsigned jobs;         /* jobs (processes) on the device; default 0 = off */
} gpum_busy_thresholds_t;

/* Fills t with the defaults above. */
GPUM_API void gpum_busy_thresholds_init(gpum_busy_thresholds_t *t);
/* The defaults, then monitor.busy_util, monitor.busy_memory and monitor.busy_jobs of cfg (NULL:
 * the defaults). Thread-safe. */
GPUM_API void gpum_busy_thresholds_from_config(const gpum_config_t *cfg,
                                               gpum_busy_thresholds_t *busy);

/* One probe of one device, as `gpum status` has it (no history). */
typedef struct {
  int rc;                                    /* return of gpum_device_sample */
  const gpum_device_sample_t *sample;        /* read when rc == 0; may be NULL */
  const gpum_memory_health_t *memory_health; /* optional (NULL) */
  bool jobs_valid;                           /* jobs below is known */
  unsigned jobs;                             /* jobs/processes on the device */
} gpum_health_probe_t;

/*
 * Classifies one probe without history (pure; thread-safe): rc GPUM_ELOST / GPUM_ERESET or any
 * error other than GPUM_EAGAIN -> ERROR; GPUM_EAGAIN -> AVAILABLE with the reason "transient
 * driver errors" (one failure is never ERROR); a failed row remap -> ERROR; otherwise BUSY
 * when a threshold of t (NULL: defaults) is reached, else AVAILABLE. Writes a human reason
 * into reason (cap bytes, may be NULL; "" for a plain AVAILABLE) and returns the state.
 * Never returns DISABLED (only the operator disables).
 */
GPUM_API gpum_health_t gpum_health_classify(const gpum_health_probe_t *p,
                                            const gpum_busy_thresholds_t *t, char *reason,
                                            size_t cap);

/* ---- Options -------------------------------------------------------------------------- */

struct gpum_alert_engine; /* include/gpum/alert.h */

/* Supplies the job count of a device for the BUSY rule (hook for the daemon). Called on the
 * device's worker thread. Returns 0 and sets *jobs, or a negative code (then not counted). */
typedef int (*gpum_monitor_jobs_fn)(void *user, unsigned device, unsigned *jobs);

typedef struct {
  unsigned interval_ms;     /* sampling period; default 1000; 1..3600000 */
  unsigned history_seconds; /* history kept; default 3600; capacity = this*1000/interval_ms */
  unsigned watchdog_ms;     /* a call running longer is "hung"; default 0 = max(5 x interval,
                               2000) */
  gpum_busy_thresholds_t busy;
  unsigned fail_threshold;      /* N consecutive failures -> ERROR; default 3 */
  unsigned recover_probes;      /* M healthy probes ERROR -> AVAILABLE; default 3 */
  unsigned backoff_base_ms;     /* first re-probe delay; default 0 = interval_ms */
  unsigned backoff_max_ms;      /* longest delay; default 0 = 60 x backoff_base_ms, max 10 min */
  double jitter;                /* +- fraction of each delay, 0..0.5; default 0.2; <0: default */
  uint64_t seed;                /* jitter random seed; 0 = from the clock */
  const unsigned *devices;      /* device indexes to watch; NULL = all */
  size_t device_count;          /* entries in devices */
  bool events;                  /* wait for XID/ECC events on a thread; default true */
  unsigned memory_health_every; /* read retired pages/remapped rows every K rounds; default
                                   60; 0 = never */
  gpum_monitor_jobs_fn jobs_fn; /* NULL: count the device's processes (only when busy.jobs) */
  void *jobs_user;
  struct gpum_alert_engine *alerts; /* optional: fed samples, XIDs and transitions */
} gpum_monitor_opts_t;

/* Fills opts with the defaults. */
GPUM_API void gpum_monitor_opts_init(gpum_monitor_opts_t *opts);
/* The defaults, then what cfg (NULL: none) says: monitor.interval (clamped to 1 h), the busy
 * thresholds, and the devices option parsed into devs[0..cap) (opts->devices points there; all
 * devices when the option is empty or devs is NULL). Returns 0, or gpum_device_list_parse's
 * errors for a bad devices option. Thread-safe. */
GPUM_API int gpum_monitor_opts_from_config(const gpum_config_t *cfg, gpum_monitor_opts_t *opts,
                                           unsigned *devs, size_t cap);

/* ---- Lifecycle ------------------------------------------------------------------------ */

typedef struct gpum_monitor gpum_monitor_t;

/*
 * Creates a monitor over the devices of a session opened with dev_opts (NULL: defaults).
 * The monitor opens its own sessions (one per device worker plus one for events) with the
 * same options, so no caller session is shared with a possibly hung call. Opening a session
 * loads the driver and counts the devices but makes no call on any one device (handles are
 * looked up on first use), and create reads no static info: it returns without waiting for
 * a device. opts NULL: defaults. Returns 0, GPUM_EINVAL (bad option: the detail names it),
 * GPUM_ENODEV (a listed device does not exist), a gpum_device_open error, or GPUM_ENOMEM.
 */
GPUM_API int gpum_monitor_create(const gpum_device_open_opts_t *dev_opts,
                                 const gpum_monitor_opts_t *opts, gpum_monitor_t **out);
/* Starts the threads. The event thread registers for the driver's XID/ECC events (when
 * opts.events) and start waits for that up to the watchdog timeout, so that no event raised
 * after it returns is missed; a registration held up by a device that does not answer is
 * logged (warning) and completes in the background. Returns 0, GPUM_ESTATE (already started)
 * or GPUM_ENOMEM; a driver without events is logged at info level, not an error. */
GPUM_API int gpum_monitor_start(gpum_monitor_t *mon);
/* Stops the threads; waits for them up to about 2 watchdog timeouts. A worker stuck in a hung
 * driver call after that is abandoned: it frees its session when the call returns. History,
 * health and events stay readable. Safe to call twice. Must not be called from a callback. */
GPUM_API void gpum_monitor_stop(gpum_monitor_t *mon);
/* Stops (if needed) and frees. NULL is fine. */
GPUM_API void gpum_monitor_destroy(gpum_monitor_t *mon);

/* Attaches an alert engine (or NULL to detach) before start. Returns 0 or GPUM_ESTATE. */
GPUM_API int gpum_monitor_set_alert_engine(gpum_monitor_t *mon, struct gpum_alert_engine *engine);

/* Number of devices watched, and the device index (as in the device layer) of slot i.
 * All per-device calls below take the device index, not the slot. */
GPUM_API unsigned gpum_monitor_device_count(const gpum_monitor_t *mon);
GPUM_API int gpum_monitor_device_index(const gpum_monitor_t *mon, unsigned slot, unsigned *device);
/* The device's static info, read by its worker after start. Returns 0, GPUM_ENODEV (not
 * watched) or GPUM_EAGAIN (not read yet: the device has not answered since start; out then
 * holds only the index). A device whose read failed (e.g. lost) returns 0 with only the index
 * set, and its worker tries again until a read works (then a new GPUM_MONEV_INFO event). */
GPUM_API int gpum_monitor_device_info(const gpum_monitor_t *mon, unsigned device,
                                      gpum_device_info_t *out);
/* Waits up to timeout_ms until every watched device's info read has returned (no polling: the
 * info events wake it). *missing (may be NULL) receives how many have not. Returns 0,
 * GPUM_ETIMEDOUT (the detail names the first silent device), GPUM_ESTATE (not started) or
 * GPUM_EINVAL. Callers that need the info at once call it after gpum_monitor_start. */
GPUM_API int gpum_monitor_wait_info(gpum_monitor_t *mon, unsigned timeout_ms, unsigned *missing);

/* ---- Samples and statistics ------------------------------------------------------------ */

/* The newest stored sample. Returns 0, GPUM_ENODEV, or GPUM_ENOENT (none yet). */
GPUM_API int gpum_monitor_latest(gpum_monitor_t *mon, unsigned device, gpum_device_sample_t *out);

/* Copies the stored samples with timestamp_ns > since_ns, oldest first, up to cap into out;
 * *count receives how many there are in all. Returns 0, GPUM_ENOSPC (more than cap: the oldest
 * cap were copied; call again with the last timestamp), GPUM_ENODEV or GPUM_EINVAL. */
GPUM_API int gpum_monitor_history(gpum_monitor_t *mon, unsigned device, uint64_t since_ns,
                                  gpum_device_sample_t *out, size_t cap, size_t *count);

/* Total samples stored for the device since start (not capped by the ring). */
GPUM_API int gpum_monitor_sample_count(gpum_monitor_t *mon, unsigned device, uint64_t *count);

/* Bytes the monitor allocated for history and events (its sessions not included): for
 * 8 devices at the defaults about 1.8 MiB of history plus the event ring. */
GPUM_API size_t gpum_monitor_memory_usage(const gpum_monitor_t *mon);

typedef struct {
  size_t count; /* valid samples in the window; the rest is 0 when count == 0 */
  double min, max, mean;
  double p50, p95, p99; /* nearest-rank: the value at rank ceil(p/100 * count) when sorted */
} gpum_window_stats_t;

/* Statistics of one metric over the valid samples with from_ns <= timestamp_ns <= to_ns
 * (CLOCK_REALTIME). Samples where the metric is invalid are skipped. Returns 0 (count may
 * be 0), GPUM_ENODEV, GPUM_EINVAL (bad metric or range) or GPUM_ENOMEM. */
GPUM_API int gpum_monitor_range_stats(gpum_monitor_t *mon, unsigned device, gpum_metric_t metric,
                                      uint64_t from_ns, uint64_t to_ns, gpum_window_stats_t *out);
/* Same over the last `seconds` (> 0) up to now. */
GPUM_API int gpum_monitor_window_stats(gpum_monitor_t *mon, unsigned device, gpum_metric_t metric,
                                       double seconds, gpum_window_stats_t *out);
/* The statistics of n values (pure; sorts a copy). Returns 0, GPUM_EINVAL or GPUM_ENOMEM. */
GPUM_API int gpum_stats_compute(const double *values, size_t n, gpum_window_stats_t *out);

/* ---- Health ----------------------------------------------------------------------------- */

typedef struct {
  gpum_health_t state;
  char reason[GPUM_HEALTH_REASON_LEN]; /* why: the transition's reason, kept current while
                                          the state lasts (e.g. BUSY's utilisation) */
  uint64_t since_ns;                   /* when state was entered (CLOCK_REALTIME) */
  bool responsive;                     /* false while a driver call runs past the watchdog */
  unsigned consecutive_failures;
  unsigned healthy_probes; /* in ERROR: consecutive healthy re-probes so far */
  uint64_t next_probe_ns;  /* in ERROR / after failures: next attempt (REALTIME); else 0 */
  int last_rc;             /* return of the last completed sample call */
  uint64_t last_xid;       /* last XID seen; 0 none */
  /* In ERROR on evidence that the GPU is gone or needs a reset (lost, reset required, a
   * critical Xid, uncorrectable ECC errors, a failed row remap); false for a device that is
   * only slow (a call past the watchdog) or failing transiently: its jobs may still run. */
  bool gone;
} gpum_device_health_t;

/* Current health of a device. Returns 0 or GPUM_ENODEV. */
GPUM_API int gpum_monitor_health(gpum_monitor_t *mon, unsigned device, gpum_device_health_t *out);

/* Operator switch: DISABLED (disabled true, reason may be NULL: "disabled by the operator")
 * or back to what the health rules say. Emits a transition event. Returns 0 or GPUM_ENODEV. */
GPUM_API int gpum_monitor_set_disabled(gpum_monitor_t *mon, unsigned device, bool disabled,
                                       const char *reason);

/* ---- Events ----------------------------------------------------------------------------- */

typedef enum {
  GPUM_MONEV_HEALTH = 1, /* a state transition: from, to, reason */
  GPUM_MONEV_XID = 2,    /* the driver reported an XID: xid, reason (its meaning) */
  GPUM_MONEV_ECC = 3,    /* an ECC event: reason ("double-bit ECC error") */
  GPUM_MONEV_PROBE = 4,  /* a re-probe of a failing / ERROR device: rc, reason */
  GPUM_MONEV_INFO = 5,   /* the device's static info was read: rc (0, or the failed read's
                            code), reason ("NAME (UUID)" or why it failed). Once per device,
                            and again when a failed read is followed by a good one */
} gpum_monitor_event_kind_t;

/* "health", "xid", "ecc", "probe", "info". */
GPUM_API const char *gpum_monitor_event_kind_name(gpum_monitor_event_kind_t kind);

typedef struct {
  uint64_t seq; /* 1, 2, ... per monitor */
  gpum_monitor_event_kind_t kind;
  unsigned device;
  uint64_t time_ns;       /* CLOCK_REALTIME */
  gpum_health_t from, to; /* HEALTH */
  uint64_t xid;           /* XID */
  int rc;                 /* PROBE: the device-layer return (0 = healthy probe) */
  char reason[GPUM_HEALTH_REASON_LEN];
} gpum_monitor_event_t;

/* Called for every event, in order, one call at a time: on the sampler thread, except that
 * the transition made by gpum_monitor_set_disabled is delivered on the thread calling it
 * before it returns. The alert engine (opts.alerts) is fed the same way (feed_health for
 * HEALTH events, feed_xid for XID events; feed_sample on the sampler thread after each
 * stored sample, with the sample's timestamp). Must be quick and must not call
 * gpum_monitor_stop/destroy or (un)subscribe; other gpum_monitor_* calls are fine. */
typedef void (*gpum_monitor_event_fn)(const gpum_monitor_event_t *ev, void *user);

/* Adds a subscriber; *id (may be NULL) identifies it for unsubscribe. Returns 0, GPUM_ENOMEM. */
GPUM_API int gpum_monitor_subscribe(gpum_monitor_t *mon, gpum_monitor_event_fn fn, void *user,
                                    unsigned *id);
/* Removes a subscriber; once this returns the callback is not running and won't be called.
 * Must not be called from the callback itself. Returns 0 or GPUM_ENOENT. */
GPUM_API int gpum_monitor_unsubscribe(gpum_monitor_t *mon, unsigned id);

/* The monitor keeps the last GPUM_MONITOR_EVENT_KEEP events. Pollable with a cursor: waits up
 * to timeout_ms for an event with seq > *cursor, copies the oldest such into ev and sets
 * *cursor = ev->seq. Start with *cursor = 0. Several readers may poll with their own cursors;
 * a reader that fell behind more than the kept events skips to the oldest kept.
 * Returns 0, GPUM_ETIMEDOUT or GPUM_EINVAL. */
#define GPUM_MONITOR_EVENT_KEEP 1024
GPUM_API int gpum_monitor_event_wait(gpum_monitor_t *mon, uint64_t *cursor,
                                     gpum_monitor_event_t *ev, unsigned timeout_ms);

#ifdef __cplusplus
}
#endif
#endif /* GPUM_MONITOR_H */
