/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Slurm on a gpum node (docs/slurm.md): the gres.conf and slurm.conf lines that describe the
 * node's GPUs to Slurm (`gpum slurm conf`), and the reservation a job step holds from gpumd on
 * the GPUs Slurm gave it (the SPANK plugin, gpum_spank.so).
 *
 * Slurm places: each GPU is a gres/gpu and, for sharing, a number of gres/shard, one per unit of
 * the memory gpumd may grant on it (1 GiB by default), so that Slurm's own placement bin-packs
 * memory per GPU. gpumd keeps the memory honest: the plugin turns the step's GPUs into a
 * reservation on exactly those devices, and the enforcement shim fences the step to it.
 *
 * Slurm numbers a node's GPUs 0..N-1 in the order of the Name=gpu lines of gres.conf
 * (CUDA_VISIBLE_DEVICES, SLURM_STEP_GPUS); the lines written here are in gpumd's device order,
 * so Slurm's GPU k is gpumd's device k.
 */
#ifndef GPUM_SLURM_H
#define GPUM_SLURM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpum/client.h>
#include <gpum/device.h>
#include <gpum/export.h>
#include <gpum/fence.h>
#include <gpum/session.h>

#ifdef __cplusplus
extern "C" {
#endif

/* --- The node's lines for gres.conf and slurm.conf ---------------------------------------- */

#define GPUM_SLURM_SHARD_UNIT (1ull << 30) /* the default: one shard per GiB */
#define GPUM_SLURM_TYPE_MAX 64

typedef struct {
  uint64_t shard_unit;    /* bytes per shard; 0: GPUM_SLURM_SHARD_UNIT */
  const char *node;       /* the NodeName; NULL or "": this host's name up to its first dot */
  const char *dev_dir;    /* the directory of the device files (nvidiaN, dri/renderDN); NULL:
                             "/dev" */
  double memory_fraction; /* gpumd's admission (the options of the same names): shards count */
  uint64_t safety_margin; /* what gpumd may grant, total x memory_fraction - safety_margin;
                             memory_fraction 0: 1 */
  const char *slurmd_c;   /* the output of `slurmd -C` on this node, or NULL: when it has a
                             usable NodeName line, the slurm.conf NodeName line is that line
                             with Gres= appended (gpum_slurm_node_line) */
} gpum_slurm_conf_opts_t;

/* Slurm's Type= for a device name, as Slurm users write types: its family in lower case
 * (gpum/gputype.h), with "_<N>gb" when the name states its memory ("NVIDIA H100 80GB HBM3" ->
 * "h100_80gb", "Tesla T4" -> "t4", "NVIDIA GeForce RTX 4090" -> "rtx4090"), so that
 * --gres=gpu:a100:1 style requests and gpum's --type name the same cards. A name that states
 * no family: the name without a leading "NVIDIA ", lower case, runs of characters other than
 * letters, digits, '.' and '-' made one '_'. GPUM_EINVAL for a name with nothing left,
 * GPUM_ENOSPC when len is too small. Thread-safe. */
GPUM_API int gpum_slurm_gres_type(const char *device_name, char *buf, size_t len);

/* The shards of a device of memory_total bytes: what gpumd may grant on it divided by the
 * unit, rounded down (0 when it may grant nothing). Thread-safe. */
GPUM_API uint64_t gpum_slurm_shards(uint64_t memory_total, const gpum_slurm_conf_opts_t *opts);

/* The complete NodeName line of slurm.conf for this node: the NodeName= line of slurmd_c (the
 * output of `slurmd -C`, which may hold other lines, such as UpTime=) with its NodeName replaced
 * by node (when node is not NULL or "") and its hardware fields kept in their order (CPUs=,
 * Boards=, SocketsPerBoard=, CoresPerSocket=, ThreadsPerCore=, RealMemory=, each a positive
 * integer; other fields, a Gres= among them, are dropped), then " Gres=" gres. No newline.
 * *line is malloc'd (the caller frees it). GPUM_EINVAL (the detail says why) when slurmd_c has
 * no NodeName= line, the line lacks CPUs= or RealMemory=, a field is not NAME=VALUE, a hardware
 * field's value is not a positive integer, or gres is empty. Thread-safe. */
GPUM_API int gpum_slurm_node_line(const char *slurmd_c, const char *node, const char *gres,
                                  char **line);

/* The node's lines from the devices of session s: gres.conf (AutoDetect=off, a Name=gpu line
 * per GPU with Type= and File=, a Name=shard line per GPU with its Count= and File=) and
 * slurm.conf (GresTypes=gpu,shard, SelectType=select/cons_tres, and the NodeName line:
 * gpum_slurm_node_line's from opts->slurmd_c when that succeeds, else
 * "NodeName=NODE Gres=gpu:TYPE:N,...,shard:M" under a comment saying to merge its Gres= into
 * the node's own NodeName line). File= is DEV_DIR/nvidiaM, M the device's minor number as the
 * NVIDIA driver reports it (/proc/driver/nvidia/gpus), else its index. *gres_conf and
 * *slurm_conf are malloc'd (the caller frees both). GPUM_ENODEV when s has no GPU (the host
 * backend's device is not one), GPUM_EINVAL for a bad option, or the device layer's errors.
 * Not thread-safe for one session (it reads the session's devices). */
GPUM_API int gpum_slurm_conf(gpum_device_session_t *s, const gpum_slurm_conf_opts_t *opts,
                             char **gres_conf, char **slurm_conf);

/* The plugin as installed: LIBDIR/gpum/gpum_spank.so (LIBDIR: the build's install prefix's
 * library directory, /usr/local/lib by default). Thread-safe. */
GPUM_API const char *gpum_slurm_plugin_path(void);

/* `gpum slurm conf --install DIR`: writes gres_conf to DIR/gres.conf (an existing one with other
 * lines is kept as DIR/gres.conf.old; the same lines: left as it is) and adds the line
 * "required PLUGIN" to DIR/plugstack.conf (made when missing) unless a line of it that is not a
 * comment names gpum_spank.so already. plugin is the plugin's path with its arguments
 * ("/usr/local/lib/gpum/gpum_spank.so wait=10s"); NULL or "": gpum_slurm_plugin_path(). Never
 * touches DIR/slurm.conf. *report (malloc'd) says, one line per file, what was done.
 * GPUM_ENOENT when DIR is not a directory, GPUM_EINVAL for a plugin that does not name
 * gpum_spank.so, GPUM_EIO (the detail says which file) when a file cannot be read or written.
 * Files are written through a temporary file renamed over them. */
GPUM_API int gpum_slurm_install(const char *dir, const char *gres_conf, const char *plugin,
                                char **report);

/* --- The cluster's GPU nodes, as Slurm's controller knows them ----------------------------- */

#define GPUM_SLURM_NODE_NAME_MAX 64
#define GPUM_SLURM_STATE_MAX 64
#define GPUM_SLURM_NODE_TYPES_MAX 8 /* GPU types per node; more are left out */

/* One GPU type of a node: its gres "gpu:a100:4(S:0-1)" gives type "a100" and total 4, its
 * gres_used "gpu:a100:2(IDX:0-1)" used 2. An untyped gres ("gpu:4") has type "". */
typedef struct {
  char type[GPUM_SLURM_TYPE_MAX];
  uint32_t total; /* the node's GPUs of this type */
  uint32_t used;  /* of them, allocated to jobs now (at most total) */
} gpum_slurm_gpus_t;

typedef struct {
  char name[GPUM_SLURM_NODE_NAME_MAX]; /* Slurm's NodeName */
  /* Slurm's state in lower case, "idle", "mixed", "allocated", "down", "unknown", "future",
   * with its flags after '+': "+drain", "+completing", "+not_responding", "+fail", "+maint",
   * "+powered_down", "+reserved" ("idle+drain"). */
  char state[GPUM_SLURM_STATE_MAX];
  bool usable;              /* idle, mixed or allocated, and not draining, failing, powered
                               down or silent: Slurm may place new jobs there */
  uint64_t real_memory_mib; /* the node's RealMemory (host memory, MiB) */
  size_t ntypes;            /* 1 or more */
  gpum_slurm_gpus_t gpus[GPUM_SLURM_NODE_TYPES_MAX];
} gpum_slurm_node_t;

/* Slurm's configuration file as libslurm finds it: $SLURM_CONF, else /etc/slurm/slurm.conf
 * (Debian's Slurm), else /etc/slurm-llnl/slurm.conf (older Debian), the first that is a
 * readable file; NULL when none is (gpum then never asks libslurm, which would look for a
 * controller in DNS: configless Slurm is not supported). The string is the environment's or a
 * constant. Thread-safe while the environment does not change. */
GPUM_API const char *gpum_slurm_conf_path(void);

/* The cluster's GPU nodes, in the order slurmctld lists them: every node with a gres named
 * "gpu", its GPU types with their counts and what jobs hold of them, from Slurm 22.05's
 * libslurm (libslurm.so.38, loaded with dlopen on the first call and never unloaded: its
 * plugins need its symbols global, RTLD_GLOBAL) and the controller of gpum_slurm_conf_path().
 * *out is malloc'd (gpum_slurm_nodes_free; NULL when *n is 0).
 * Returns 0; GPUM_ENOTSUP when Slurm is not available here (no slurm.conf, libslurm.so.38
 * absent or lacking a function; the detail says which); GPUM_EAGAIN when slurmctld did not
 * answer (the detail has Slurm's reason); GPUM_ENOMEM.
 * Blocks while libslurm talks to slurmctld: up to its MessageTimeout and retries (tens of
 * seconds when the controller does not answer), so a program with an event loop calls it off
 * that loop. libslurm reads slurm.conf once, on the first call in a process, and ends the
 * process (exit 1) when that file cannot be parsed: a program that must survive a broken
 * slurm.conf calls this in a child process (gpumd does). Thread-safe (calls are serialised). */
GPUM_API int gpum_slurm_gpu_nodes(gpum_slurm_node_t **out, size_t *n);

/* Frees what gpum_slurm_gpu_nodes returned; NULL is a no-op. */
GPUM_API void gpum_slurm_nodes_free(gpum_slurm_node_t *nodes);

/* --- A job step's reservation --------------------------------------------------------------- */

#define GPUM_SLURM_STEP_ENV_MAX (GPUM_RESERVATION_ENV_MAX + 2)

typedef struct {
  const char *socket;     /* gpumd's socket; NULL: gpum_socket_path(NULL) */
  uint64_t bytes_per_gpu; /* > 0 */
  const char *gpus;       /* Slurm's GPUs of the step on this node: "0,2" or "0-1" */
  const char *label;      /* shown by gpum jobs ("slurm job 12 step 0"), or NULL */
  bool enforce;           /* fence the step to the reservation with the shim */
  const char *ld_preload; /* the step's LD_PRELOAD (enforce: the shim goes after it), or NULL */
  int64_t timeout_ms;     /* how long to wait for the grant; < 0: as long as it takes */
  /* The step's Slurm ids, stored with the reservation and shown by gpum jobs, the REST API and
   * /metrics: the job id ("12345") and the step id ("0", "batch", "interactive"); both NULL
   * or both set (gpum_reserve_req_t's slurm_job_id and slurm_step_id). */
  const char *job_id;
  const char *step_id;
} gpum_slurm_step_req_t;

/* What gpum_slurm_step_begin set up: gpum_slurm_step_end undoes it. */
typedef struct {
  char socket[4096];
  gpum_reservation_t reservation;
  char fence[GPUM_FENCE_NAME_MAX]; /* "" when not enforced */
  size_t nenv;                     /* the step's environment, to set in each of its tasks */
  gpum_env_var_t env[GPUM_SLURM_STEP_ENV_MAX];
} gpum_slurm_step_t;

/* Reserves bytes_per_gpu on each of the step's GPUs (gpumd's devices with those indexes, all
 * of them, no other) and waits for the grant up to timeout_ms. The reservation's lease is the
 * calling process (a pid lease): gpumd releases it when that process exits, even killed, so the
 * caller should be the process that lives as long as the step (slurmstepd); no connection is
 * kept open. With enforce, creates the reservation's fence (gpum/fence.h, owned by the caller's
 * effective uid) and adds LD_PRELOAD (the shim after ld_preload) and GPUM_FENCE to the
 * environment, which is gpum_reservation_env's otherwise. Returns 0; GPUM_EINVAL (a bad
 * request, gpus not a device list), gpumd's errors (GPUM_ENEVERFIT, GPUM_ENODEV, GPUM_EPERM,
 * ...), gpum_client_connect's, GPUM_ETIMEDOUT (not granted in time: the request is
 * cancelled), gpum_enforce_library's (no shim: nothing is reserved). The detail says why. */
GPUM_API int gpum_slurm_step_begin(const gpum_slurm_step_req_t *req, gpum_slurm_step_t *out);

/* Releases the step's reservation (as its owner or an admin) and removes its fence. 0 also
 * when it had ended already; gpum_client_connect's errors when gpumd is away (the pid lease
 * then ends it when the step's process exits). */
GPUM_API int gpum_slurm_step_end(const gpum_slurm_step_t *st);

#ifdef __cplusplus
}
#endif
#endif /* GPUM_SLURM_H */
