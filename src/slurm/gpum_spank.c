/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpum_spank.so: Slurm's job steps hold gpumd reservations (docs/slurm.md).
 *
 *   plugstack.conf:  required /usr/local/lib/gpum/gpum_spank.so [socket=PATH] [wait=DURATION]
 *                    [enforce]
 *   srun --gres=shard:20 --gpu-mem=20GiB [--gpu-mem-enforce] prog
 *
 * Options for srun, sbatch and salloc: --gpu-mem=SIZE (memory per GPU) and --gpu-mem-enforce
 * (fence the step to it with the enforcement shim; the plugin argument `enforce` makes that the
 * rule for every step with --gpu-mem). A step without --gpu-mem is left alone.
 *
 * In the step (remote context), slurm_spank_user_init runs in slurmstepd as the job's user,
 * before any task starts: the GPUs Slurm gave the step on this node (SLURM_STEP_GPUS, else
 * SLURM_JOB_GPUS, else CUDA_VISIBLE_DEVICES) become a reservation on exactly those devices of
 * gpumd, labelled "slurm job J step S" and carrying the ids J and S (gpum jobs, /metrics),
 * whose lease is slurmstepd's pid (gpum/slurm.h says why), so gpumd releases it even when
 * slurmstepd is killed. The step's environment gets the grant's
 * variables (CUDA_VISIBLE_DEVICES as the devices' UUIDs, GPUM_RESERVATION_ID, GPUM_MEM_LIMIT,
 * ...) and, fenced, LD_PRELOAD and GPUM_FENCE. When gpumd refuses (or does not grant within
 * `wait`, 30 s by default), the step fails with gpumd's reason on srun's stderr.
 * slurm_spank_exit releases the reservation and removes the fence.
 *
 * A step inside a job whose batch script already holds a reservation (sbatch --gpu-mem: the
 * environment carries GPUM_SLURM_JOB with this job's id) runs in it, fenced by the inherited
 * variables.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include <gpum/client.h>
#include <gpum/error.h>
#include <gpum/options.h>
#include <gpum/size.h>
#include <gpum/slurm.h>

/* cppcheck-suppress unknownMacro ; cppcheck does not read slurm/spank.h */
SPANK_PLUGIN(gpum, 1)

#define DEFAULT_WAIT_MS 30000
/* Set in a step that holds a reservation, to its job's id: a step of the same job started from
 * it (srun in a batch script) runs in that reservation. A GPUM_RESERVATION_ID inherited from
 * elsewhere (srun run under gpum run on a login node) does not count. */
#define JOB_MARK "GPUM_SLURM_JOB"

/* The options as parsed (in srun, sbatch, salloc and again in slurmstepd). static: srun has
 * globals of its own (a plugin global named opt once shadowed srun's). */
static uint64_t gpu_mem;
static int enforce;
/* The plugin's arguments. */
static char socket_path[4096];
static int64_t wait_ms = DEFAULT_WAIT_MS;
static int enforce_always;
/* The step's reservation, from user_init to exit. */
static gpum_slurm_step_t step;
static int held;
/* Why the step may not run: user_init's failure, said again by each task (task_init), which
 * then fails, so that srun reports the step as failed. */
static char refused[1024];

static int opt_gpu_mem(int val, const char *arg, int remote) {
  (void)val, (void)remote;
  if (!arg || gpum_size_parse(arg, &gpu_mem) != 0 || gpu_mem == 0) {
    slurm_error("gpum: --gpu-mem needs a size such as 20GiB (got '%s')", arg ? arg : "");
    return -1;
  }
  return 0;
}

static int opt_enforce(int val, const char *arg, int remote) {
  (void)val, (void)arg, (void)remote;
  enforce = 1;
  return 0;
}

static struct spank_option options[] = {
    {"gpu-mem", "SIZE",
     "GPU memory per GPU reserved from gpumd for each step, on the GPUs Slurm gives it "
     "(gpum; ask Slurm for as many shards)",
     1, 0, opt_gpu_mem},
    {"gpu-mem-enforce", NULL,
     "fence each step to --gpu-mem (gpum's shim: allocations past it fail with "
     "CUDA_ERROR_OUT_OF_MEMORY, and CUDA reports it as the GPU's size)",
     0, 0, opt_enforce},
    SPANK_OPTIONS_TABLE_END};

/* socket=PATH, wait=DURATION, enforce. */
static int parse_args(int ac, char **av) {
  for (int i = 0; i < ac; i++) {
    const char *a = av[i];
    uint64_t ms = 0;
    if (strncmp(a, "socket=", 7) == 0 && a[7] == '/' && strlen(a + 7) < sizeof socket_path) {
      snprintf(socket_path, sizeof socket_path, "%s", a + 7);
    } else if (strncmp(a, "wait=", 5) == 0 && gpum_duration_parse(a + 5, &ms) == 0 &&
               ms <= INT32_MAX) {
      wait_ms = (int64_t)ms;
    } else if (strcmp(a, "enforce") == 0) {
      enforce_always = 1;
    } else {
      slurm_error("gpum: plugstack.conf: unknown argument '%s' (there are socket=PATH, "
                  "wait=DURATION and enforce)",
                  a);
      return -1;
    }
  }
  return 0;
}

/* The socket of gpum's configuration (/etc/gpum/gpum.yaml, GPUM_SOCKET), as for root. */
static int system_socket(void) {
  gpum_config_t *cfg = NULL;
  int rc = gpum_config_new(&cfg);
  if (rc == 0)
    rc = gpum_config_load_all(cfg, NULL, NULL, NULL);
  if (rc == 0)
    rc = gpum_socket_path(cfg, socket_path, sizeof socket_path);
  gpum_config_free(cfg);
  if (rc != 0)
    slurm_error("gpum: cannot tell gpumd's socket (give socket=PATH in plugstack.conf): %s",
                gpum_last_error());
  return rc;
}

int slurm_spank_init(spank_t sp, int ac, char **av) {
  spank_context_t ctx = spank_context();
  if (ctx != S_CTX_LOCAL && ctx != S_CTX_REMOTE && ctx != S_CTX_ALLOCATOR)
    return 0;
  if (parse_args(ac, av) != 0)
    return -1;
  for (struct spank_option *o = options; o->name; o++)
    if (spank_option_register(sp, o) != ESPANK_SUCCESS) {
      slurm_error("gpum: cannot register --%s", o->name);
      return -1;
    }
  return 0;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av) {
  (void)ac, (void)av;
  if (enforce && gpu_mem == 0) {
    slurm_error("gpum: --gpu-mem-enforce needs --gpu-mem=SIZE");
    return -1;
  }
  /* gpumd's socket as root sees it (the system gpumd's), resolved while slurmstepd is still
   * root: user_init runs as the job's user, to whom the default is a socket of their own. */
  if (spank_remote(sp) && gpu_mem && !socket_path[0] && system_socket() != 0)
    return -1;
  return 0;
}

/* The step's id as the label says it. */
static void step_name(uint32_t id, char *buf, size_t len) {
  if (id == SLURM_BATCH_SCRIPT)
    snprintf(buf, len, "batch");
  else if (id == SLURM_INTERACTIVE_STEP)
    snprintf(buf, len, "interactive");
  else
    snprintf(buf, len, "%u", id);
}

/* The step's GPUs on this node as Slurm numbers them. */
static int step_gpus(spank_t sp, char *buf, int len) {
  static const char *const vars[] = {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
    if (spank_getenv(sp, vars[i], buf, len) == ESPANK_SUCCESS && buf[0])
      return 0;
  return -1;
}

int slurm_spank_user_init(spank_t sp, int ac, char **av) {
  (void)ac, (void)av;
  if (!spank_remote(sp) || gpu_mem == 0)
    return 0;
  uint32_t job = 0, stepid = 0;
  if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_STEPID, &stepid) != ESPANK_SUCCESS) {
    slurm_error("gpum: cannot read the job and step ids");
    return -1;
  }
  if (stepid == SLURM_EXTERN_CONT)
    return 0;
  char buf[256], jobs[16];
  snprintf(jobs, sizeof jobs, "%u", job);
  if (spank_getenv(sp, JOB_MARK, buf, sizeof buf) == ESPANK_SUCCESS && !strcmp(buf, jobs))
    return 0; /* in the reservation of this job's batch script */
  char gpus[256], label[96], sname[16], tag[32];
  step_name(stepid, sname, sizeof sname);
  snprintf(label, sizeof label, "slurm job %u step %s", job, sname);
  snprintf(tag, sizeof tag, "%u.%s", job, sname);
  if (step_gpus(sp, gpus, sizeof gpus) != 0) {
    snprintf(refused, sizeof refused,
             "gpum: step %s has --gpu-mem but no GPU on this node: ask Slurm for "
             "--gres=shard:N or --gres=gpu:N",
             tag);
    return 0;
  }
  static char preload[GPUM_ENV_VALUE_MAX];
  spank_err_t e = spank_getenv(sp, "LD_PRELOAD", preload, sizeof preload);
  if (e == ESPANK_ENV_NOEXIST) {
    preload[0] = '\0';
  } else if (e != ESPANK_SUCCESS) { /* too long: never drop what the job preloads */
    snprintf(refused, sizeof refused, "gpum: step %s: cannot read LD_PRELOAD: %s", tag,
             spank_strerror(e));
    return 0;
  }
  gpum_slurm_step_req_t req = {.socket = socket_path,
                               .bytes_per_gpu = gpu_mem,
                               .gpus = gpus,
                               .label = label,
                               .enforce = enforce || enforce_always,
                               .ld_preload = preload,
                               .timeout_ms = wait_ms,
                               .job_id = jobs,
                               .step_id = sname};
  if (gpum_slurm_step_begin(&req, &step) != 0) {
    char size[GPUM_SIZE_BUFSZ];
    snprintf(refused, sizeof refused, "gpum: step %s: gpumd did not reserve %s on GPU %s: %s", tag,
             gpum_size_format(gpu_mem, size, sizeof size), gpus, gpum_last_error());
    return 0;
  }
  held = 1;
  if (spank_setenv(sp, JOB_MARK, jobs, 1) != ESPANK_SUCCESS) {
    slurm_error("gpum: step %s: cannot set %s", tag, JOB_MARK);
    return -1; /* exit releases it */
  }
  for (size_t i = 0; i < step.nenv; i++)
    if (spank_setenv(sp, step.env[i].name, step.env[i].value, step.env[i].if_unset ? 0 : 1) !=
            ESPANK_SUCCESS &&
        !step.env[i].if_unset) {
      slurm_error("gpum: step %s: cannot set %s", tag, step.env[i].name);
      return -1; /* exit releases it */
    }
  slurm_info("gpum: step %s holds %s (%s on GPU %s%s)", tag, step.reservation.id,
             gpum_size_format(gpu_mem, buf, sizeof buf), gpus, step.fence[0] ? ", fenced" : "");
  return 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av) {
  (void)sp, (void)ac, (void)av;
  if (!refused[0])
    return 0;
  fprintf(stderr, "%s\n", refused);
  fflush(stderr);
  return -1;
}

int slurm_spank_exit(spank_t sp, int ac, char **av) {
  (void)ac, (void)av;
  if (!spank_remote(sp) || !held)
    return 0;
  held = 0;
  if (gpum_slurm_step_end(&step) != 0)
    slurm_error("gpum: releasing %s: %s (gpumd ends it when slurmstepd exits)", step.reservation.id,
                gpum_last_error());
  return 0;
}
