/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpum run [FLAGS] -- CMD ARGS...`: reserves GPU memory from gpumd, waits for the grant
 * (showing the queue position on stderr), runs CMD with the grant's environment
 * (gpum_reservation_env: CUDA_VISIBLE_DEVICES set to the granted GPUs' UUIDs,
 * CUDA_DEVICE_ORDER, GPUM_RESERVATION_ID, GPUM_MEM_LIMIT, ...; with more than one GPU or
 * --distributed also gpum_distributed_env: WORLD_SIZE, MASTER_PORT, ...), forwards SIGINT, SIGTERM
 * and SIGHUP to it, and releases the reservation when CMD exits. The reservation is bound to this
 * process's connection, so even if gpum run is killed the daemon releases it; and CMD is tied
 * to gpum run (PR_SET_PDEATHSIG): it is killed when gpum run dies, so it never runs on without
 * its reservation. When gpumd restarts while CMD runs, gpum run reconnects and re-attaches the
 * reservation with its token (within the daemon's lease.grace); the reservation session of
 * libgpum (gpum/session.h) does that.
 *
 * Exit code: CMD's exit status, or 128+N when CMD was killed by signal N; 1 when the
 * reservation failed (daemon not running, request can never fit, timeout), 2 for usage errors,
 * 126/127 when CMD cannot be executed / found.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gpum/clock.h>
#include <gpum/error.h>
#include <gpum/fence.h>
#include <gpum/session.h>
#include <gpum/size.h>

#include "args.h"
#include "cli.h"
#include "client_cli.h"

enum {
  OPT_ESTIMATE = 1,
  OPT_ENFORCE,
  OPT_NO_ENFORCE,
  OPT_MAX_MEM,
  OPT_ON_END,
  OPT_FALLBACK,
  OPT_DISTRIBUTED,
  OPT_NO_DISTRIBUTED,
  OPT_MASTER_PORT,
};

static const cli_arg_t run_args[] = {
    CLI_RESERVE_ARGS,
    {OPT_ESTIMATE, "--estimate", 0, "SPEC",
     "reserve what 'gpum estimate SPEC' says per GPU, plus estimate.margin percent, instead of "
     "--mem; e.g. 'llama-7b,mode=lora,batch=4,precision=bf16'",
     0},
    {OPT_ENFORCE, "--enforce", 0, NULL, "fence CMD to the reservation with the shim (run.enforce)",
     0},
    {OPT_NO_ENFORCE, "--no-enforce", 0, NULL, "do not, whatever run.enforce says", 0},
    {OPT_MAX_MEM, "--max-mem", 0, "SIZE",
     "an elastic reservation (implies --enforce): an allocation past --mem asks gpumd to grow "
     "it, up to SIZE per GPU, waiting at most run.grow_timeout",
     0},
    {OPT_ON_END, "--on-end", 0, "term|keep",
     "when the reservation ends under CMD: term (default, run.on_end) signals CMD, keep lets it "
     "run on unreserved",
     0},
    {OPT_FALLBACK, "--fallback", 0, "cpu",
     "CMD can run on the CPU: when no GPU can serve it (none could ever hold the request, the "
     "wait timed out, gpumd is not there), run it anyway with CUDA_VISIBLE_DEVICES=\"\", "
     "GPUM_FALLBACK=cpu and GPUM_FALLBACK_REASON set, instead of failing",
     0},
    {OPT_DISTRIBUTED, "--distributed", 0, NULL, "set the torchrun/NCCL variables even for one GPU",
     0},
    {OPT_NO_DISTRIBUTED, "--no-distributed", 0, NULL, "do not set them, even for several GPUs", 0},
    {OPT_MASTER_PORT, "--master-port", 0, "N", "MASTER_PORT for them (1-65535; default 29500)", 0},
    {0},
};

static const cli_cmd_spec_t run_spec = {
    .name = "run",
    .usage = "--mem SIZE | --estimate SPEC [--gpus N] [--type TYPE] [--priority P]\n"
             " [--timeout DURATION] [--label L] [--no-wait] [--preemptible] [-q]\n"
             " [--enforce | --no-enforce] [--max-mem SIZE] [--on-end term|keep]\n"
             " [--distributed | --no-distributed] [--master-port N] [--fallback cpu]\n"
             " [--] CMD [ARGS...]",
    .summary = "Run a command on GPUs reserved from gpumd (it waits its turn in the queue).",
    .text = "Reserves GPU memory from gpumd, waits until it is granted (showing the queue\n"
            "position on stderr), then runs CMD with:\n"
            "  CUDA_VISIBLE_DEVICES   the granted NVIDIA GPUs' UUIDs, comma-separated (empty\n"
            "                         for AMD or Intel GPUs and on the host backend)\n"
            "  CUDA_DEVICE_ORDER      PCI_BUS_ID, so CUDA numbers GPUs as nvidia-smi does\n"
            "  ROCR_VISIBLE_DEVICES   AMD GPUs: their UUIDs (GPU-...)\n"
            "  HIP_VISIBLE_DEVICES    AMD GPUs: 0,1,...\n"
            "  ZE_AFFINITY_MASK       Intel GPUs: their Level Zero numbers\n"
            "  GPUM_RESERVATION_ID    the reservation's id (see 'gpum jobs')\n"
            "  GPUM_MEM_LIMIT         the reserved bytes per GPU\n"
            "  GPUM_RESERVATION_DEVICES  gpumd's names (UUIDs) of the granted devices\n"
            "and, unless already set, TF_FORCE_GPU_ALLOW_GROWTH=true and\n"
            "XLA_PYTHON_CLIENT_PREALLOCATE=false (TensorFlow and JAX take memory as needed).\n"
            "With more than one GPU (or --distributed), also, unless already set, what torchrun\n"
            "and torch.distributed need for one process per GPU on this node: WORLD_SIZE,\n"
            "LOCAL_WORLD_SIZE, PET_NPROC_PER_NODE (the GPU count), PET_NNODES=1,\n"
            "MASTER_ADDR=127.0.0.1, MASTER_PORT (--master-port, 29500) and\n"
            "TORCH_NCCL_ASYNC_ERROR_HANDLING=1; --no-distributed sets none of them.\n"
            "With --enforce (or run.enforce: true, GPUM_RUN_ENFORCE=1) CMD and every process it\n"
            "starts are kept inside the reservation by the enforcement shim (libgpum_enforce.so,\n"
            "preloaded): an allocation past GPUM_MEM_LIMIT on a GPU fails with CUDA's\n"
            "out-of-memory error, and CUDA and NVML report the reservation as the GPU's size\n"
            "(docs/enforce.md).\n"
            "SIGINT, SIGTERM and SIGHUP sent to gpum run are forwarded to CMD. The reservation\n"
            "is released when CMD exits (and by gpumd if gpum run itself dies); CMD is killed\n"
            "(SIGKILL) if gpum run dies, so it never runs on unreserved. If the reservation ends\n"
            "under CMD (its GPU is gone: FAILED; an admin released it; lost across a gpumd\n"
            "restart), CMD gets SIGTERM (SIGKILL 10 s later) unless --on-end keep.",
    .args = run_args,
    .examples = "gpum run --mem 20GiB -- python train.py\n"
                "gpum run --gpus 2 --mem 40GiB --enforce -- torchrun --nproc-per-node 2 t.py\n"
                "gpum run --estimate 'llama-7b,mode=lora' --fallback cpu -- python t.py",
    .exit_status = "CMD's, or 128+N when CMD was killed by signal N; 1 when no reservation was "
                   "granted; 2 for usage errors; 126/127 when CMD cannot be run / is not found.",
};

static bool term_on_end = true;
/* --distributed (1) / --no-distributed (0); -1: when the grant has more than one GPU. */
static int distributed = -1;
static unsigned master_port; /* --master-port; 0: gpum_distributed_env's default */
static bool fallback_cpu;    /* --fallback cpu */

static int parse(const gpum_config_t *cfg, int argc, char **argv, cli_reserve_opts_t *o,
                 int *cmd_at, int *enforce, uint64_t *max_mem) {
  const char *estimate = NULL;
  term_on_end = strcmp(gpum_config_get_string(cfg, "run.on_end"), "keep") != 0;
  cli_args_t p;
  cli_args_init(&p, &run_spec, argc, argv);
  p.stop_at_pos = true; /* CMD and its arguments are CMD's */
  for (int id; *cmd_at == 0 && (id = cli_args_next(&p)) != CLI_ARGS_END;) {
    const char *v = p.value;
    unsigned long long port = 0;
    switch (id) {
    case CLI_ARGS_HELP:
      return CLI_EXIT_OK;
    case CLI_ARGS_ERR:
      return CLI_EXIT_USAGE;
    case CLI_ARGS_POS:
      *cmd_at = p.i;
      break;
    case OPT_ENFORCE:
    case OPT_NO_ENFORCE:
      *enforce = id == OPT_ENFORCE;
      break;
    case OPT_DISTRIBUTED:
    case OPT_NO_DISTRIBUTED:
      distributed = id == OPT_DISTRIBUTED;
      break;
    case OPT_MASTER_PORT:
      if (cli_parse_uint(v, 1, 65535, false, &port) != 0)
        return cli_args_error(&run_spec, "--master-port needs a port from 1 to 65535");
      master_port = (unsigned)port;
      break;
    case OPT_FALLBACK:
      if (strcmp(v, "cpu") != 0)
        return cli_args_error(&run_spec,
                              "--fallback needs cpu (the only place CMD may fall back to)");
      fallback_cpu = true;
      break;
    case OPT_ON_END:
      if (strcmp(v, "term") && strcmp(v, "keep"))
        return cli_args_error(&run_spec, "--on-end needs term or keep");
      term_on_end = !strcmp(v, "term");
      break;
    case OPT_MAX_MEM:
      if (gpum_size_parse(v, max_mem) != 0 || *max_mem == 0)
        return cli_args_error(&run_spec, "--max-mem needs a size such as 16GiB");
      break;
    case OPT_ESTIMATE: /* instead of --mem */
      if (!*v)
        return cli_args_error(&run_spec, "--estimate needs a spec such as 'llama-7b,batch=4'");
      estimate = v;
      break;
    default:
      if (cli_reserve_option("run", id, v, o) < 0)
        return CLI_EXIT_USAGE;
      break;
    }
  }
  if (*cmd_at <= 0 || *cmd_at >= argc) {
    fprintf(stderr, "gpum run: no command given (usage: gpum run --mem SIZE -- CMD ARGS...)\n");
    return CLI_EXIT_USAGE;
  }
  if (estimate && o->req.bytes_per_gpu) {
    fprintf(stderr, "gpum run: give --mem or --estimate, not both\n");
    return CLI_EXIT_USAGE;
  }
  if (estimate) {
    int rc = cli_estimate_bytes("run", estimate, gpum_config_get_int(cfg, "estimate.margin"),
                                &o->req.bytes_per_gpu);
    if (rc != 0)
      return rc;
  }
  if (o->req.bytes_per_gpu == 0) {
    fprintf(stderr, "gpum run: --mem SIZE is required (the GPU memory CMD needs per GPU; or "
                    "--estimate SPEC)\n");
    return CLI_EXIT_USAGE;
  }
  if (*max_mem && *max_mem < o->req.bytes_per_gpu) {
    fprintf(stderr, "gpum run: --max-mem must be at least --mem\n");
    return CLI_EXIT_USAGE;
  }
  if (!o->req.label) {
    const char *slash = strrchr(argv[*cmd_at], '/');
    o->req.label = slash ? slash + 1 : argv[*cmd_at];
  }
  return -1;
}

static pid_t child_pid;
static int chld_pipe[2] = {-1, -1};

/* Forwards signals sent to gpum run (kill, systemd, a scheduler) to CMD. A signal the terminal
 * generated (Ctrl-C: si_code SI_KERNEL) already reached CMD, which shares our process group,
 * so it is not sent twice. */
static void forward(int sig, siginfo_t *si, void *ctx) {
  (void)ctx;
  if (child_pid > 0 && (si == NULL || si->si_code != SI_KERNEL))
    kill(child_pid, sig);
}

static void on_chld(int sig) {
  (void)sig;
  int saved = errno;
  if (write(chld_pipe[1], "x", 1) < 0) {
    /* the pipe is full: a wake-up is already pending */
  }
  errno = saved;
}

static void install_forwarding(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = forward;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_chld;
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGCHLD, &sa, NULL);
}

/* In the child: CMD dies with gpum run (PR_SET_PDEATHSIG), so that killing gpum run (even
 * with SIGKILL, which it cannot forward) never leaves CMD running without its reservation.
 * A parent that died before prctl took effect is seen as a changed parent pid. */
static void tie_to_parent(pid_t parent) {
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
    _exit(CLI_EXIT_FAIL);
}

/* The shim and the fence's name when CMD runs fenced. */
typedef struct {
  char shim[4096];
  char fence[GPUM_FENCE_NAME_MAX];
  gpum_fence *f;
  uint64_t max_mem;  /* elastic: GPUM_MEM_MAX */
  char socket[4096]; /* elastic: where the shim asks gpumd (GPUM_SOCKET) */
  char grow_timeout[32];
} run_fence_t;

/* The shim's environment for an elastic reservation. */
static int elastic_setenv(const run_fence_t *f) {
  char max[24];
  snprintf(max, sizeof max, "%llu", (unsigned long long)f->max_mem);
  if (setenv("GPUM_MEM_MAX", max, 1) != 0 || setenv("GPUM_SOCKET", f->socket, 1) != 0 ||
      setenv("GPUM_GROW_TIMEOUT", f->grow_timeout, 1) != 0)
    return gpum_error(GPUM_ENOMEM, "cannot set the elastic reservation's environment");
  return 0;
}

static void child_exec(char **cmd, const gpum_reservation_t *r, const run_fence_t *fence,
                       const sigset_t *mask, pid_t parent) {
  static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD};
  tie_to_parent(parent);
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    signal(sigs[i], SIG_DFL);
  sigprocmask(SIG_SETMASK, mask, NULL);
  bool dist = distributed < 0 ? r->ndevices > 1 : distributed == 1;
  if (gpum_reservation_setenv(r) != 0 ||
      (dist && gpum_distributed_setenv((unsigned)r->ndevices, master_port) != 0) ||
      (fence->f && gpum_enforce_setenv(fence->shim, fence->fence) != 0) ||
      (fence->f && fence->max_mem && elastic_setenv(fence) != 0)) {
    fprintf(stderr, "gpum run: cannot set the environment: %s\n", gpum_last_error());
    _exit(CLI_EXIT_FAIL);
  }
  execvp(cmd[0], cmd);
  int err = errno;
  fprintf(stderr, "gpum run: cannot run '%s': %s\n", cmd[0], strerror(err));
  _exit(err == ENOENT ? 127 : 126);
}

#define KILL_AFTER_MS 10000 /* --on-end term: SIGKILL when CMD outlives SIGTERM this long */

/* Waits for CMD, serving the session meanwhile (events, re-attaching after a restart of
 * gpumd within lease.grace). When the reservation ends under CMD (the session has said why),
 * CMD gets SIGTERM, then SIGKILL KILL_AFTER_MS later, unless --on-end keep. Returns CMD's wait
 * status. */
/* --fallback cpu: no GPU could serve CMD (the reservation failed: said above by the session),
 * so CMD runs in gpum run's place, seeing no GPU. Exits 126/127 when CMD cannot be run. */
static void __attribute__((noreturn)) run_on_cpu(char **cmd) {
  const char *why = *gpum_last_error() ? gpum_last_error() : "no reservation";
  fprintf(stderr, "gpum run: no GPU for %s (%s): running it on the CPU (--fallback cpu)\n", cmd[0],
          why);
  if (setenv("CUDA_VISIBLE_DEVICES", "", 1) != 0 || setenv("GPUM_FALLBACK", "cpu", 1) != 0 ||
      setenv("GPUM_FALLBACK_REASON", why, 1) != 0) {
    fprintf(stderr, "gpum run: cannot set CMD's environment: %s\n", strerror(errno));
    exit(CLI_EXIT_FAIL);
  }
  unsetenv("GPUM_RESERVATION_ID");
  unsetenv("GPUM_MEM_LIMIT");
  fflush(NULL);
  execvp(cmd[0], cmd);
  int e = errno;
  fprintf(stderr, "gpum run: %s: %s\n", cmd[0], strerror(e));
  exit(e == ENOENT ? 127 : 126);
}

static int supervise(gpum_session_t *s) {
  bool held = true;     /* the session still has something to serve */
  uint64_t kill_at = 0; /* monotonic ms: SIGKILL then; 0 none */
  for (;;) {
    int status = 0;
    pid_t p = waitpid(child_pid, &status, WNOHANG);
    if (p == child_pid)
      return status;
    if (p < 0 && errno != EINTR)
      return 0;
    uint64_t now = gpum_clock_mono_ns() / 1000000;
    if (kill_at && now >= kill_at) {
      fprintf(stderr, "gpum run: CMD outlived SIGTERM by %d s: SIGKILL\n", KILL_AFTER_MS / 1000);
      kill(child_pid, SIGKILL);
      kill_at = 0;
    }
    int fd = held ? gpum_session_fd(s) : -1;
    struct pollfd fds[2] = {{chld_pipe[0], POLLIN, 0}, {fd, POLLIN, 0}};
    int wait_ms = held && fd < 0 ? GPUM_SESSION_RETRY_MS : -1;
    if (kill_at && (wait_ms < 0 || kill_at - now < (uint64_t)wait_ms))
      wait_ms = (int)(kill_at - now);
    if (poll(fds, 2, wait_ms) < 0)
      continue;
    if (fds[0].revents) {
      char buf[64];
      while (read(chld_pipe[0], buf, sizeof buf) > 0) {
      }
    }
    if (held && (fd < 0 || fds[1].revents)) {
      int rc = gpum_session_process(s, 0);
      if (rc == GPUM_ESTATE || rc == GPUM_ECLOSED) { /* ended or lost: the session said so */
        held = false;
        if (term_on_end) {
          fprintf(stderr, "gpum run: CMD has no reservation now: SIGTERM to it (--on-end term; "
                          "--on-end keep lets it run on)\n");
          kill(child_pid, SIGTERM);
          kill_at = gpum_clock_mono_ns() / 1000000 + KILL_AFTER_MS;
        } else {
          fprintf(stderr, "gpum run: CMD runs on without a reservation (--on-end keep)\n");
        }
      }
      gpum_error_clear();
    }
  }
}

int cmd_run(gpum_config_t *cfg, int argc, char **argv) {
  cli_reserve_opts_t o;
  memset(&o, 0, sizeof o);
  int cmd_at = 0, enforce = -1;
  static run_fence_t fence; /* static: the paths are long */
  int code = parse(cfg, argc, argv, &o, &cmd_at, &enforce, &fence.max_mem);
  if (code >= 0)
    return code;
  if (enforce < 0)
    enforce = fence.max_mem || gpum_config_get_bool(cfg, "run.enforce");
  if (!enforce && fence.max_mem) {
    fprintf(stderr, "gpum run: --max-mem needs the shim: drop --no-enforce\n");
    return CLI_EXIT_USAGE;
  }
  gpum_duration_format(gpum_config_get_duration(cfg, "run.grow_timeout"), fence.grow_timeout,
                       sizeof fence.grow_timeout);
  if (enforce && gpum_enforce_library(fence.shim, sizeof fence.shim) != 0) {
    fprintf(stderr, "gpum run: --enforce: %s\n", gpum_last_error());
    return CLI_EXIT_FAIL;
  }
  cli_session_ui_t ui = {.cmd = "run", .quiet = o.quiet};
  gpum_session_t *s = NULL;
  code = cli_session_start(cfg, &ui, &o, &s);
  if (code == CLI_EXIT_FAIL && fallback_cpu && !cli_signal_caught)
    run_on_cpu(argv + cmd_at); /* does not return */
  if (code != 0)
    return code;
  const gpum_reservation_t *r = gpum_session_reservation(s);
  if (cli_signal_caught) { /* a signal right as the grant came: do not start CMD */
    gpum_session_release(s);
    fprintf(stderr, "gpum run: interrupted; %s released before CMD started\n", r->id);
    gpum_session_close(s);
    return 128 + cli_signal_caught;
  }
  if (enforce &&
      (gpum_socket_path(cfg, fence.socket, sizeof fence.socket) != 0 ||
       gpum_session_fence(s, fence.max_mem, fence.fence, sizeof fence.fence, &fence.f) != 0)) {
    fprintf(stderr, "gpum run: --enforce: cannot set up the fence of %s: %s; CMD not started\n",
            r->id, gpum_last_error());
    gpum_session_release(s);
    gpum_session_close(s);
    return CLI_EXIT_FAIL;
  }
  if (pipe2(chld_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    fprintf(stderr, "gpum run: pipe: %s\n", strerror(errno));
    gpum_session_close(s);
    return CLI_EXIT_FAIL;
  }
  ui.phase = CLI_PHASE_RUN;
  /* The forwarded signals are blocked until child_pid is known, so none is lost in between;
   * the child unblocks them after restoring the default handlers. */
  sigset_t fwd, old_mask;
  sigemptyset(&fwd);
  sigaddset(&fwd, SIGINT);
  sigaddset(&fwd, SIGTERM);
  sigaddset(&fwd, SIGHUP);
  sigprocmask(SIG_BLOCK, &fwd, &old_mask);
  install_forwarding();
  fflush(NULL);
  pid_t parent = getpid();
  gpum_reservation_t granted = *r;
  child_pid = fork();
  if (child_pid == 0)
    child_exec(argv + cmd_at, &granted, &fence, &old_mask, parent);
  sigprocmask(SIG_SETMASK, &old_mask, NULL);
  if (child_pid < 0) {
    fprintf(stderr, "gpum run: fork: %s\n", strerror(errno));
    gpum_session_close(s);
    return CLI_EXIT_FAIL;
  }
  int status = supervise(s);
  if (gpum_session_client(s)) {
    gpum_client_set_timeout(gpum_session_client(s), 2000);
    if (gpum_session_release(s) != 0)
      gpum_error_clear(); /* the daemon is gone: nothing to do */
  }
  gpum_session_close(s);
  if (fence.f) {
    gpum_fence_close(fence.f);
    (void)gpum_fence_unlink(fence.fence);
  }
  close(chld_pipe[0]);
  close(chld_pipe[1]);
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : CLI_EXIT_FAIL;
}
