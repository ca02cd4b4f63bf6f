/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A reservation session: one reservation held from gpumd for the life of a job, over the
 * client of gpum/client.h. It is the piece every launcher shares (gpum run, gpum reserve, the
 * Slurm plugin, the Python package): reserve and wait for the grant while reporting the queue
 * position, keep serving the daemon's events while the job runs, survive a daemon restart by
 * re-attaching the reservation with its token within lease.grace, renew a TTL lease, trim
 * caching pools when gpumd reports memory pressure on their device, release. And the grant's
 * environment (gpum_reservation_env), so that every launcher hands a job the same variables.
 *
 * What is reported goes to one callback (gpum_session_opts_t.on_event), called on the thread
 * that called into the session, inside that call. The library installs no signal handler: a
 * caller that wants Ctrl-C to end a wait gives an `interrupted` callback, which the session
 * asks at least every 250 ms while it waits.
 *
 * Thread safety: a session is not thread-safe; use it from one thread (or serialise calls).
 * Different sessions are independent. Nothing here keeps global state.
 */
#ifndef GPUM_SESSION_H
#define GPUM_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpum/client.h>
#include <gpum/export.h>
#include <gpum/fence.h>
#include <gpum/options.h>
#include <gpum/pool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* --- The grant's environment ---------------------------------------------------------------- */

#define GPUM_ENV_NAME_MAX 40
#define GPUM_ENV_VALUE_MAX (GPUM_CLIENT_MAX_DEVICES * 100)
#define GPUM_RESERVATION_ENV_MAX 10 /* variables gpum_reservation_env writes at most */

typedef struct {
  char name[GPUM_ENV_NAME_MAX];
  char value[GPUM_ENV_VALUE_MAX];
  bool if_unset; /* a framework default: a value the job's environment already has wins */
} gpum_env_var_t;

/* The environment of a job that runs under reservation r, in vars[0..*count), each runtime
 * shown the granted devices it drives (a reservation's GPUs are of one vendor):
 *   CUDA_VISIBLE_DEVICES          the granted NVIDIA GPUs' UUIDs (MIG-... for MIG instances;
 *                                 indexes for devices without one), comma-separated, in the
 *                                 reservation's order: CUDA device k of the job is the k-th.
 *                                 Empty when none is NVIDIA (an AMD or Intel grant, or the
 *                                 host device of gpumd's CPU fallback, "host-..." UUIDs): CUDA
 *                                 sees no GPU and CUDA frameworks run on the CPU.
 *   CUDA_DEVICE_ORDER=PCI_BUS_ID  CUDA numbers devices as nvidia-smi and gpumd do
 *   ROCR_VISIBLE_DEVICES          (AMD grants only) the AMD GPUs' UUIDs (GPU-<16 hex>, ROCm
 *                                 SMI's unique id): ROCm's runtime shows only these
 *   HIP_VISIBLE_DEVICES           (AMD grants only) 0,1,...: every GPU ROCR left, so that HIP
 *                                 does not apply CUDA_VISIBLE_DEVICES, which it reads too
 *   ZE_AFFINITY_MASK              (Intel grants only) the Intel GPUs' numbers in Level Zero's
 *                                 order (gpum_res_device_t.vendor_index)
 *   GPUM_RESERVATION_ID           r's id
 *   GPUM_MEM_LIMIT                bytes per GPU (decimal)
 *   GPUM_RESERVATION_DEVICES      gpumd's names of the granted devices (UUIDs, also host-...)
 *   TF_FORCE_GPU_ALLOW_GROWTH=true       (if_unset) TensorFlow takes memory as it needs it
 *                                        instead of mapping nearly all of the GPU at start
 *   XLA_PYTHON_CLIENT_PREALLOCATE=false  (if_unset) JAX likewise (it preallocates 75% of the
 *                                        GPU by default)
 * A device whose vendor gpumd does not say (an older gpumd) is taken as NVIDIA's.
 * r must hold at least one device. Returns 0, GPUM_EINVAL (r NULL or without devices or id),
 * or GPUM_ENOSPC when cap is too small for the variables (nothing useful is written then;
 * GPUM_RESERVATION_ENV_MAX is always enough). Thread-safe. */
GPUM_API int gpum_reservation_env(const gpum_reservation_t *r, gpum_env_var_t *vars, size_t cap,
                                  size_t *count);
/* Sets r's environment in this process (setenv; a variable marked if_unset only when the
 * environment has none). For the child a launcher is about to exec. Returns 0 or
 * gpum_reservation_env's errors; GPUM_ENOMEM when setenv fails. Not thread-safe (setenv). */
GPUM_API int gpum_reservation_setenv(const gpum_reservation_t *r);

#define GPUM_DISTRIBUTED_ENV_MAX 7         /* variables gpum_distributed_env writes */
#define GPUM_DISTRIBUTED_MASTER_PORT 29500 /* torchrun's default rendezvous port */

/* What torchrun, torch.distributed and NCCL need to run nproc processes, one per granted GPU,
 * on this node, in vars[0..*count), every one if_unset (a value the job's environment already
 * has wins, so a launcher or the user can always override it):
 *   WORLD_SIZE=nproc, LOCAL_WORLD_SIZE=nproc  what torch.distributed's env:// init and a
 *                                             plain multi-process launcher read
 *   PET_NPROC_PER_NODE=nproc, PET_NNODES=1    torchrun's --nproc-per-node and --nnodes
 *                                             defaults: bare `torchrun train.py` starts one
 *                                             process per granted GPU
 *   MASTER_ADDR=127.0.0.1, MASTER_PORT=port   the rendezvous of env:// (one node: loopback)
 *   TORCH_NCCL_ASYNC_ERROR_HANDLING=1         a failed NCCL collective aborts the process
 *                                             group instead of hanging the job
 * No RANK or LOCAL_RANK: each process has its own, set by its launcher. The reservation's own
 * variables are gpum_reservation_env's; a launcher sets these too when the job is distributed
 * (gpum run: more than one GPU, or --distributed; gpumd's setup-pytorch answer likewise).
 * master_port 0 means GPUM_DISTRIBUTED_MASTER_PORT. Returns 0, GPUM_EINVAL (nproc 0, port
 * above 65535, vars or count NULL) or GPUM_ENOSPC (cap < GPUM_DISTRIBUTED_ENV_MAX).
 * Thread-safe. */
GPUM_API int gpum_distributed_env(unsigned nproc, unsigned master_port, gpum_env_var_t *vars,
                                  size_t cap, size_t *count);
/* Sets gpum_distributed_env's variables in this process where the environment has none
 * (setenv without overwrite). Returns 0, its errors, or GPUM_ENOMEM when setenv fails. Not
 * thread-safe (setenv). */
GPUM_API int gpum_distributed_setenv(unsigned nproc, unsigned master_port);

/* --- Sessions ------------------------------------------------------------------------------- */

typedef enum {
  GPUM_SESSION_EV_QUEUED = 1, /* queued, or the position changed (reservation->queue_position) */
  GPUM_SESSION_EV_GRANTED,    /* the wait is over: reservation is GRANTED */
  GPUM_SESSION_EV_ENDED,      /* the reservation ended under the session (expired, failed, released
                                 by someone else): reservation->state and reason say how */
  GPUM_SESSION_EV_PRESSURE,   /* device's memory passed pressure.high (level "high") or
                                 pressure.critical ("critical"); attached pools were trimmed.
                                 Level "none": it went back under pressure.high (nothing
                                 trimmed) */
  GPUM_SESSION_EV_LOST,       /* the connection to gpumd was lost (error); re-attaching */
  GPUM_SESSION_EV_REATTACHED, /* gpumd is back and the reservation re-attached */
  GPUM_SESSION_EV_GAVE_UP,    /* gpumd did not come back within the grace: reservation lost */
} gpum_session_event_kind_t;

typedef struct {
  gpum_session_event_kind_t kind;
  const gpum_reservation_t *reservation; /* the session's reservation as last seen */
  int error;                             /* LOST: why (GPUM_ECLOSED, GPUM_EIO, ...) */
  int device;                            /* PRESSURE: gpumd's device index */
  double used_ratio;                     /* PRESSURE */
  const char *level;                     /* PRESSURE: "high", "critical" or "none" */
  uint64_t trimmed;                      /* PRESSURE: bytes the attached pools gave back */
  int64_t grace_ms;                      /* LOST, GAVE_UP: the re-attach window */
} gpum_session_event_t;

typedef void (*gpum_session_event_fn)(const gpum_session_event_t *ev, void *user);
/* Nonzero: stop waiting (gpum_session_reserve and gpum_session_process return GPUM_EINTR). */
typedef int (*gpum_session_interrupted_fn)(void *user);

typedef struct {
  const char *socket;          /* gpumd's socket; NULL: gpum_socket_path(cfg) */
  const gpum_config_t *cfg;    /* for the socket and lease.grace; NULL: environment, defaults */
  unsigned connect_timeout_ms; /* connect and hello, and the client's call timeout; 0: 5 s */
  int64_t grace_ms;            /* how long to re-attach after losing gpumd; < 0: the
                                  lease.grace option (30 s by default) */
  gpum_session_event_fn on_event;
  gpum_session_interrupted_fn interrupted;
  void *user; /* passed to on_event and interrupted */
} gpum_session_opts_t;

typedef struct gpum_session gpum_session_t;

/* Defaults: everything 0/NULL, grace_ms -1. */
GPUM_API void gpum_session_opts_init(gpum_session_opts_t *opts);

/* Connects to gpumd (opts may be NULL: the defaults). Returns 0, or gpum_client_connect's
 * errors (GPUM_ENOENT / GPUM_ECLOSED when gpumd is not running, GPUM_EPERM, GPUM_ETIMEDOUT,
 * GPUM_EPROTO). The caller closes *out with gpum_session_close. */
GPUM_API int gpum_session_open(const gpum_session_opts_t *opts, gpum_session_t **out);

/* Asks for req and waits until it is granted, up to timeout_ms (-1: as long as it takes),
 * reporting QUEUED (each new position) and GRANTED. If gpumd goes away meanwhile the session
 * connects again and re-attaches the queued reservation within the grace (LOST, REATTACHED;
 * the queue survives a restart). Returns 0 when GRANTED; the daemon's error when the request
 * is refused (GPUM_ENEVERFIT, GPUM_EBUSY for no_wait, GPUM_EINVAL, GPUM_EPERM, ...);
 * GPUM_ETIMEDOUT after timeout_ms (the queued reservation is cancelled); GPUM_EINTR when
 * `interrupted` said so (cancelled too; when gpumd is away at that moment it cannot be told,
 * and cancels the reservation itself once lease.grace passes); GPUM_ESTATE when the
 * reservation ended in the queue (expired by the daemon's queue timeout, failed); GPUM_ECLOSED
 * when gpumd did not come back within the grace (GAVE_UP). One reservation per session:
 * GPUM_ESTATE when the session already has one. */
GPUM_API int gpum_session_reserve(gpum_session_t *s, const gpum_reserve_req_t *req,
                                  int64_t timeout_ms);

/* The session's reservation as last seen (id "" before gpum_session_reserve). Valid until the
 * next call on s. */
GPUM_API const gpum_reservation_t *gpum_session_reservation(const gpum_session_t *s);

/* The connection's fd for poll(2) (POLLIN: call gpum_session_process), or -1 while gpumd is
 * away: then call gpum_session_process at least every GPUM_SESSION_RETRY_MS. */
#define GPUM_SESSION_RETRY_MS 250
GPUM_API int gpum_session_fd(const gpum_session_t *s);

/* Serves the session while its job runs: reads gpumd's events (waiting up to timeout_ms for
 * one; 0: only what has arrived; -1: until something happens), trims attached pools on
 * pressure, and while gpumd is away re-attaches the reservation (GRANTED or QUEUED) within the
 * grace. Returns 0 while the reservation lives (also while gpumd is away within the grace);
 * GPUM_ESTATE once it ended (ENDED was reported); GPUM_ECLOSED when gpumd did not come back in
 * time (GAVE_UP); GPUM_EINTR when `interrupted` said so. */
GPUM_API int gpum_session_process(gpum_session_t *s, int timeout_ms);

/* Renews the reservation's TTL lease (ttl_ms 0: keep its TTL). GPUM_ESTATE without a live
 * reservation, GPUM_ECLOSED while gpumd is away, else the daemon's error. */
GPUM_API int gpum_session_renew(gpum_session_t *s, uint64_t ttl_ms);

/* Releases (or, when still queued, cancels) the reservation. 0 also when it had ended already;
 * GPUM_ECLOSED while gpumd is away (gpumd ends a connection-bound reservation itself when the
 * session's connection does not come back). */
GPUM_API int gpum_session_release(gpum_session_t *s);

/* Trims pool whenever gpumd reports pressure on device (gpumd's index, as in
 * reservation->devices[k].index; -1: any device of the reservation): its cached but unused
 * segments are given back (gpum_pool_trim to 0), so the memory returns to the GPU's other
 * jobs; blocks in use stay. The pool must outlive the attachment (gpum_session_detach_pool or
 * gpum_session_close). At most 16 pools: GPUM_ENOSPC. */
GPUM_API int gpum_session_attach_pool(gpum_session_t *s, gpum_pool_t *pool, int device);
/* Forgets pool. GPUM_ENOENT when it was not attached. */
GPUM_API int gpum_session_detach_pool(gpum_session_t *s, gpum_pool_t *pool);

/* The underlying client (for other calls, such as gpum_client_status), or NULL while gpumd is
 * away. Owned by the session; do not close it or replace its event callback. */
GPUM_API gpum_client_t *gpum_session_client(gpum_session_t *s);

/* Closes the connection and frees the session. A reservation with the default lease (the
 * connection) is then released by gpumd; one with a TTL or pid lease lives on. NULL is fine. */
GPUM_API void gpum_session_close(gpum_session_t *s);

/* --- Enforcement ----------------------------------------------------------------------------- */

/* Creates the memory fence (gpum/fence.h) of a granted reservation r of the gpumd at
 * socket_path: limit r->bytes_per_gpu on every device, growing up to max_limit when that is
 * larger (elastic), under a fresh random name with gpumd's prefix and the id (gpumd finds it by
 * them and by its owner, the caller, and removes it when the reservation ends). The name goes
 * to name (GPUM_FENCE_NAME_MAX bytes is enough). A name that exists is never reused: another
 * is drawn. The region is mode 0600, or 0640 in the socket's group when gpumd runs as another
 * user than the caller and root (so that it can read the job's usage). */
GPUM_API int gpum_reservation_fence(const gpum_reservation_t *r, const char *socket_path,
                                    uint64_t max_limit, char *name, size_t len, gpum_fence **out);
/* The same for the session's granted reservation, on the session's socket; and while the
 * session is served, gpumd's pressure on one of its GPUs asks the job to shrink back toward its
 * base (gpum_fence_want_shrink). The caller closes and unlinks the fence (after the session
 * is closed or the job ended). GPUM_ESTATE without a grant, GPUM_EEXIST when fenced already. */
GPUM_API int gpum_session_fence(gpum_session_t *s, uint64_t max_limit, char *name, size_t len,
                                gpum_fence **out);

#ifdef __cplusplus
}
#endif
#endif /* GPUM_SESSION_H */
