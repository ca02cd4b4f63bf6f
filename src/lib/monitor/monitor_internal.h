/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of the monitor (include/gpum/monitor.h): the packed history record and ring, the
 * per-device worker that makes the driver calls on its own session, the health state machine
 * run by the sampler thread, and the event ring with its delivery to subscribers. Pure helpers
 * (record packing, backoff delays, the health machine's steps) are exposed here for the unit
 * tests. Never installed.
 */
#ifndef GPUM_MONITOR_INTERNAL_H
#define GPUM_MONITOR_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpum/device.h>
#include <gpum/monitor.h>

/* ---- History ------------------------------------------------------------------------- */

/* One sample, packed to 64 bytes. Values beyond a field's range saturate (utilisation at 255,
 * clocks at 65535 MHz, temperature at +-32767 C, power at 4.29 MW, ECC counts at 2^32-1): none
 * occurs on real hardware, so history holds the exact values. */
typedef struct {
  uint64_t timestamp_ns;
  uint64_t memory_total, memory_used, memory_free, memory_reserved;
  uint32_t power_mw, ecc_corrected, ecc_uncorrected;
  uint16_t clock_sm_mhz, clock_mem_mhz;
  int16_t temperature_c;
  uint16_t valid;
  uint8_t util_gpu, util_memory;
  uint8_t pad[2];
} gpum__hrec_t;

void gpum__hrec_pack(const gpum_device_sample_t *s, gpum__hrec_t *r);
void gpum__hrec_unpack(const gpum__hrec_t *r, gpum_device_sample_t *s);

typedef struct {
  gpum__hrec_t *recs;
  size_t cap;     /* records */
  size_t len;     /* stored, <= cap */
  size_t head;    /* next write position */
  uint64_t total; /* ever pushed */
} gpum__ring_t;

int gpum__ring_init(gpum__ring_t *r, size_t cap);
void gpum__ring_free(gpum__ring_t *r);
void gpum__ring_push(gpum__ring_t *r, const gpum__hrec_t *rec);
/* The i-th oldest stored record (i < len). */
const gpum__hrec_t *gpum__ring_at(const gpum__ring_t *r, size_t i);
/* Index of the oldest record with timestamp_ns > t (len when none): binary search; samples
 * are pushed in timestamp order. */
size_t gpum__ring_after(const gpum__ring_t *r, uint64_t t);

/* ---- Statistics helpers (stats.c) ---------------------------------------------------- */

double gpum__percentile_sorted(const double *sorted, size_t n, double p);
/* Sorts v and fills out. */
int gpum__stats_sort_in_place(double *v, size_t n, gpum_window_stats_t *out);

/* ---- Backoff ------------------------------------------------------------------------- */

/* Delay before attempt number `attempt` (1 = the first retry): base * 2^(attempt-1) capped at
 * max, then scaled by 1 + jitter * (2 * u - 1) for u in [0, 1). In ms, at least 1. */
uint64_t gpum__mon_backoff_ms(unsigned base_ms, unsigned max_ms, double jitter, unsigned attempt,
                              double u);
/* xorshift64* in [0, 1). */
double gpum__mon_rand01(uint64_t *state);

/* ---- Health state machine (health_sm.c) ---------------------------------------------- */

/* The health bookkeeping of one device, separate from threads so the unit tests drive it. */
typedef struct {
  gpum_health_t inner; /* what the rules say (never DISABLED) */
  bool disabled;
  gpum_health_t shown; /* disabled ? DISABLED : inner; last state announced */
  char reason[GPUM_HEALTH_REASON_LEN];
  char disabled_reason[GPUM_HEALTH_REASON_LEN];
  char inner_reason[GPUM_HEALTH_REASON_LEN];
  uint64_t since_ns;
  bool responsive;
  unsigned failures;          /* consecutive failed calls */
  unsigned healthy_probes;    /* in ERROR */
  unsigned error_probes;      /* failed re-probes in ERROR (backoff exponent) */
  uint64_t next_attempt_mono; /* 0: with the next round */
  int last_rc;
  uint64_t last_xid;
  bool ecc_base_valid;
  uint64_t ecc_base;
  bool critical_pending; /* a critical event arrived since the last probe */
  char critical_reason[GPUM_HEALTH_REASON_LEN];
  bool gone; /* in ERROR on evidence the GPU is gone (gpum_device_health_t.gone) */
} gpum__hsm_t;

typedef struct {
  unsigned fail_threshold, recover_probes;
  unsigned interval_ms, backoff_base_ms, backoff_max_ms;
  double jitter;
  gpum_busy_thresholds_t busy;
} gpum__hsm_cfg_t;

/* A transition the machine produced (shown state changed), or a probe report. */
typedef struct {
  bool transition;
  gpum_health_t from, to;
  bool probe; /* a re-probe in ERROR or during a failure streak completed */
  int probe_rc;
  char reason[GPUM_HEALTH_REASON_LEN];
} gpum__hsm_out_t;

void gpum__hsm_init(gpum__hsm_t *h, uint64_t now_real);
/* A completed sample call. rc, sample (rc == 0), memory health (may be NULL), jobs (may be
 * NULL). detail: the device layer's message for a failure. now_mono schedules the next
 * attempt; u in [0,1) is the jitter draw. */
void gpum__hsm_result(gpum__hsm_t *h, const gpum__hsm_cfg_t *cfg, int rc, const char *detail,
                      const gpum_device_sample_t *s, const gpum_memory_health_t *mh,
                      const unsigned *jobs, uint64_t now_real, uint64_t now_mono, double u,
                      gpum__hsm_out_t *out);
/* Something that makes the device ERROR at once (critical XID, ECC event, hung call). gone:
 * it is evidence that the GPU is gone or needs a reset (a critical Xid), not a slow call. */
void gpum__hsm_critical(gpum__hsm_t *h, const gpum__hsm_cfg_t *cfg, const char *reason, bool gone,
                        uint64_t now_real, uint64_t now_mono, double u, gpum__hsm_out_t *out);
/* The operator's switch. */
void gpum__hsm_set_disabled(gpum__hsm_t *h, bool disabled, const char *reason, uint64_t now_real,
                            gpum__hsm_out_t *out);
/* True when the device may be called at now_mono (no pending backoff). */
bool gpum__hsm_due(const gpum__hsm_t *h, uint64_t now_mono);

/* ---- Critical XIDs ------------------------------------------------------------------- */

/* True when xid needs the device to be reset or serviced (from xid.h's table). Writes
 * "XID 79: GPU has fallen off the bus" into buf. */
bool gpum__mon_xid_critical(uint64_t xid, char *buf, size_t cap);

/* ---- The monitor object (monitor.c, sampler.c, events.c) ------------------------------ */

/* The driver calls of one device run on its reader (libgpum's hang-safe device readers,
 * gpum_device_readers_*), one thread and session per device: the sampler requests a read and
 * takes the result later (a hung call holds up only its device; the watchdog notices it). A
 * request says what to read besides the sample. */
typedef struct {
  bool want_info; /* the static info first (until it has been read once) */
  bool want_mh;   /* memory health (retired pages, remapped rows) */
  bool want_jobs; /* the job count for the BUSY rule */
} gpum__wreq_t;

/* What one read found. */
typedef struct {
  bool info_read;
  int info_rc;
  gpum_device_info_t info;
  char info_detail[GPUM_HEALTH_REASON_LEN];
  int rc; /* gpum_device_sample's */
  char detail[GPUM_HEALTH_REASON_LEN];
  gpum_device_sample_t sample;
  int mh_rc;
  gpum_memory_health_t mh;
  bool jobs_valid;
  unsigned jobs;
} gpum__wres_t;

/* The readers' own copy of what their calls need (it outlives the monitor when a reader is
 * left behind in a hung call: the calls never touch the monitor itself). */
typedef struct {
  gpum_monitor_jobs_fn jobs_fn;
  void *jobs_user;
  struct gpum_monitor *mon; /* only in notify, which the readers stop calling at stop */
} gpum__wctx_t;

/* The thread waiting for driver events (XID, ECC, lost). One stuck in a call when the monitor
 * stops is "orphaned": from then on it never touches the monitor, and frees itself when the
 * call returns. */
typedef struct gpum__evthread {
  pthread_t thread;
  bool started;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  gpum_device_session_t *session;
  struct gpum_monitor *mon;
  int enable_rc;    /* gpum_device_events_enable's result (lock), valid once enable_done */
  bool enable_done; /* the registration returned (lock; cond is broadcast) */
  bool quit, orphaned, exited;
} gpum__evthread_t;

typedef struct {
  unsigned index;
  gpum_device_info_t info; /* mon->lock; read by the device's reader after start */
  bool info_done;          /* mon->lock: the first info read returned */
  int info_rc;             /* mon->lock: its result (0: info holds the device's info) */
  gpum__ring_t ring;       /* mon->lock */
  gpum__hsm_t hsm;         /* mon->lock */
  /* sampler thread only */
  bool inflight, hung;
  bool due; /* in the round's chain, not asked yet (sampler.c, issue_due) */
  uint64_t issued_mono;
  uint64_t rounds;
} gpum__mdev_t;

#define GPUM__MON_EVQ 64
#define GPUM__MON_MAX_SUBS 32

typedef struct {
  unsigned id;
  gpum_monitor_event_fn fn;
  void *user;
} gpum__sub_t;

struct gpum_monitor {
  gpum_monitor_opts_t opts; /* with defaults resolved; devices points into devlist */
  unsigned *devlist;
  gpum_device_open_opts_t dev_opts;
  char *libraries; /* dev_opts' library paths (gpum__device_opts_dup) */
  gpum__hsm_cfg_t cfg;
  size_t ring_cap;
  gpum__mdev_t *devs;
  unsigned ndev;
  struct gpum_alert_engine *alerts;
  gpum_device_session_t *ev_session; /* until start hands it to the event thread */

  pthread_mutex_t lock; /* rings, health machines, event ring */
  pthread_cond_t ev_cond;
  gpum_monitor_event_t *events; /* GPUM_MONITOR_EVENT_KEEP, by (seq - 1) % KEEP */
  uint64_t last_seq;

  pthread_mutex_t wake_lock; /* wakes the sampler; device-event queue */
  pthread_cond_t wake_cond;
  bool wake_pending, stopping;
  gpum_device_event_t evq[GPUM__MON_EVQ];
  size_t evq_len;
  uint64_t evq_dropped;

  pthread_t sampler;
  bool started, stopped;
  /* sampler thread only: the round's chain (sampler.c, issue_due) */
  gpum__mdev_t *chain_dev;        /* the device the chain asked last (NULL: none yet) */
  uint64_t chain_mono;            /* when */
  gpum_device_readers_t *readers; /* the devices' driver calls, from start */
  gpum__evthread_t *evt;
  uint64_t rng; /* sampler thread only */

  pthread_mutex_t cb_lock; /* subscribers, delivery */
  gpum__sub_t subs[GPUM__MON_MAX_SUBS];
  unsigned nsubs, next_sub_id;
  uint64_t delivered_seq; /* under lock */
};

/* Monotonic / realtime clocks in ns. */
uint64_t gpum__mon_now(int clock_id);
/* The slot of device index, or NULL. */
gpum__mdev_t *gpum__mon_dev(const gpum_monitor_t *mon, unsigned device);
/* Appends an event (mon->lock held): assigns seq and time_ns when 0, wakes the waiters. */
void gpum__mon_emit(gpum_monitor_t *mon, gpum_monitor_event_t *ev);
/* Emits what a health-machine step produced (mon->lock held). */
void gpum__mon_emit_hsm(gpum_monitor_t *mon, unsigned device, const gpum__hsm_out_t *out,
                        uint64_t now_real);
/* Calls the subscribers and the alert engine for the events not yet delivered. Any thread,
 * no lock held; returns at once when called from inside a delivery. */
void gpum__mon_deliver(gpum_monitor_t *mon);
/* A reader read its device's static info (rc 0: info): stores it, feeds the alert engine and
 * emits GPUM_MONEV_INFO the first time, and again when a failed read is followed by a good
 * one. Called on the sampler thread, no monitor lock held (sampler.c). */
void gpum__mon_info_read(gpum_monitor_t *mon, unsigned device, int rc,
                         const gpum_device_info_t *info, const char *detail);
/* Threads (sampler.c). */
int gpum__mon_start_threads(gpum_monitor_t *mon);
void gpum__mon_stop_threads(gpum_monitor_t *mon);

#endif /* GPUM_MONITOR_INTERNAL_H */
