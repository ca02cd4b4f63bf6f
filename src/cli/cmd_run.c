/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpum run [FLAGS] -- CMD ARGS...`: reserves GPU memory from gpumd, waits for the grant
 * (showing the queue position on stderr), runs CMD with CUDA_VISIBLE_DEVICES set to the granted
 * GPUs' UUIDs, GPUM_RESERVATION_ID and GPUM_MEM_LIMIT (bytes per GPU), forwards SIGINT, SIGTERM
 * and SIGHUP to it, and releases the reservation when CMD exits. The reservation is bound to
 * this process's connection, so even if gpum run is killed the daemon releases it. When
 * gpumd restarts while CMD runs, gpum run reconnects and re-attaches the reservation with its
 * token (within the daemon's lease.grace).
 *
 * Exit code: CMD's exit status, or 128+N when CMD was killed by signal N; 1 when the
 * reservation failed (daemon not running, request can never fit, timeout), 2 for usage errors,
 * 126/127 when CMD cannot be executed / found.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gpum/error.h>
#include <gpum/size.h>

#include "cli.h"
#include "client_cli.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: gpum run --mem SIZE [--gpus N] [--type PATTERN] [--priority P]\n"
          "                [--timeout DURATION] [--label L] [--no-wait] [-q] -- CMD [ARGS...]\n"
          "\n"
          "Reserves GPU memory from gpumd, waits until it is granted (showing the queue\n"
          "position on stderr), then runs CMD with:\n"
          "  CUDA_VISIBLE_DEVICES   the granted GPUs' UUIDs, comma-separated\n"
          "  GPUM_RESERVATION_ID    the reservation's id (see 'gpum jobs')\n"
          "  GPUM_MEM_LIMIT         the reserved bytes per GPU\n"
          "SIGINT, SIGTERM and SIGHUP sent to gpum run are forwarded to CMD. The reservation\n"
          "is released when CMD exits (and by gpumd if gpum run itself dies).\n"
          "\n"
          "options:\n"
          "%s"
          "\n"
          "Exit status: CMD's, or 128+N when CMD was killed by signal N; 1 when no reservation\n"
          "was granted; 2 for usage errors; 126/127 when CMD cannot be run / is not found.\n",
          cli_reserve_flags_help);
}

/* Returns -1 to go on (with *cmd_at the index of CMD), else an exit code. */
static int parse(int argc, char **argv, cli_reserve_opts_t *o, int *cmd_at) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return CLI_EXIT_OK;
    }
    if (!strcmp(a, "--") || a[0] != '-') {
      *cmd_at = strcmp(a, "--") ? i : i + 1;
      break;
    }
    int t = cli_take_reserve_flag("run", argc, argv, &i, o);
    if (t < 0)
      return CLI_EXIT_USAGE;
    if (t == 0)
      return cli_bad_option("run", a);
  }
  if (*cmd_at <= 0 || *cmd_at >= argc) {
    fprintf(stderr, "gpum run: no command given (usage: gpum run --mem SIZE -- CMD ARGS...)\n");
    return CLI_EXIT_USAGE;
  }
  if (o->req.bytes_per_gpu == 0) {
    fprintf(stderr, "gpum run: --mem SIZE is required (the GPU memory CMD needs per GPU)\n");
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

static void child_exec(char **cmd, const gpum_reservation_t *r, const sigset_t *mask) {
  static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    signal(sigs[i], SIG_DFL);
  sigprocmask(SIG_SETMASK, mask, NULL);
  char cvd[GPUM_CLIENT_MAX_DEVICES * 100], limit[32];
  cli_res_visible_devices(r, cvd, sizeof cvd);
  snprintf(limit, sizeof limit, "%llu", (unsigned long long)r->bytes_per_gpu);
  setenv("CUDA_VISIBLE_DEVICES", cvd, 1);
  setenv("GPUM_RESERVATION_ID", r->id, 1);
  setenv("GPUM_MEM_LIMIT", limit, 1);
  execvp(cmd[0], cmd);
  int err = errno;
  fprintf(stderr, "gpum run: cannot run '%s': %s\n", cmd[0], strerror(err));
  _exit(err == ENOENT ? 127 : 126);
}

typedef struct {
  const char *id;
} watch_t;

/* While CMD runs: tell the user when the reservation changes under it. */
static void on_event(const gpum_client_event_t *ev, void *user) {
  watch_t *w = user;
  if (ev->kind == GPUM_CLIENT_EV_PRESSURE) {
    fprintf(stderr, "gpum run: memory pressure on GPU %d: %.0f%% used (%s)\n", ev->device,
            ev->used_ratio * 100.0, ev->level ? ev->level : "high");
    return;
  }
  const gpum_reservation_t *r = ev->reservation;
  if (r && !strcmp(r->id, w->id) && gpum_res_state_is_final(r->state))
    fprintf(stderr, "gpum run: reservation %s is %s%s%s\n", r->id, gpum_res_state_name(r->state),
            r->reason[0] ? ": " : "", r->reason);
}

#define RECONNECT_MS 250

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* After gpumd went away: connects again and re-attaches the reservation with its token. */
static gpum_client_t *reattach(const gpum_config_t *cfg, const gpum_reservation_t *r) {
  gpum_client_t *c = NULL;
  cli_reattach("run", cfg, r, &c, NULL);
  return c;
}

/* Waits for CMD, serving the daemon connection meanwhile; when gpumd restarts, re-attaches
 * the reservation within the lease.grace option. Returns CMD's wait status; *cp is the live
 * connection (NULL when lost). */
static int supervise(const gpum_config_t *cfg, gpum_client_t **cp, const gpum_reservation_t *r) {
  watch_t w = {r->id};
  gpum_client_set_event_cb(*cp, on_event, &w);
  int64_t grace = cli_lease_grace_ms(cfg);
  int64_t lost_at = 0;
  bool gave_up = false;
  for (;;) {
    int status = 0;
    pid_t p = waitpid(child_pid, &status, WNOHANG);
    if (p == child_pid)
      return status;
    if (p < 0 && errno != EINTR)
      return 0;
    gpum_client_t *c = *cp;
    struct pollfd fds[2] = {{chld_pipe[0], POLLIN, 0}, {c ? gpum_client_fd(c) : -1, POLLIN, 0}};
    if (poll(fds, 2, c || gave_up ? -1 : RECONNECT_MS) < 0)
      continue;
    if (fds[0].revents) {
      char buf[64];
      while (read(chld_pipe[0], buf, sizeof buf) > 0) {
      }
    }
    if (c && fds[1].revents && gpum_client_process(c, 0) < 0) {
      fprintf(stderr,
              "gpum run: lost the connection to gpumd (%s); %s keeps running, "
              "re-attaching when gpumd is back\n",
              cli_reason(GPUM_ECLOSED), r->id);
      gpum_client_close(c);
      *cp = NULL;
      lost_at = now_ms();
    } else if (!c && !gave_up) {
      *cp = reattach(cfg, r);
      if (*cp) {
        gpum_client_set_event_cb(*cp, on_event, &w);
      } else if (now_ms() - lost_at > grace) {
        fprintf(stderr,
                "gpum run: gpumd did not come back within %lld ms; %s runs on "
                "without a reservation\n",
                (long long)grace, r->id);
        gave_up = true;
      }
    }
  }
}

int cmd_run(gpum_config_t *cfg, int argc, char **argv) {
  cli_reserve_opts_t o;
  memset(&o, 0, sizeof o);
  int cmd_at = 0;
  int code = parse(argc, argv, &o, &cmd_at);
  if (code >= 0)
    return code;
  gpum_client_t *c = NULL;
  code = cli_client_connect(cfg, "run", 0, &c);
  if (code != 0)
    return code;
  cli_catch_signals();
  gpum_reservation_t r;
  code = cli_reserve_and_wait("run", cfg, &c, &o, &r);
  if (code == 0 && cli_signal_caught) { /* a signal right as the grant came: do not start CMD */
    gpum_client_release(c, r.id, NULL);
    fprintf(stderr, "gpum run: interrupted; %s released before CMD started\n", r.id);
    code = 128 + cli_signal_caught;
  }
  if (code != 0) {
    gpum_client_close(c);
    return code;
  }
  if (pipe2(chld_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    fprintf(stderr, "gpum run: pipe: %s\n", strerror(errno));
    gpum_client_close(c);
    return CLI_EXIT_FAIL;
  }
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
  child_pid = fork();
  if (child_pid == 0)
    child_exec(argv + cmd_at, &r, &old_mask);
  sigprocmask(SIG_SETMASK, &old_mask, NULL);
  if (child_pid < 0) {
    fprintf(stderr, "gpum run: fork: %s\n", strerror(errno));
    gpum_client_close(c);
    return CLI_EXIT_FAIL;
  }
  int status = supervise(cfg, &c, &r);
  if (c) {
    gpum_client_set_timeout(c, 2000);
    if (gpum_client_release(c, r.id, NULL) != 0)
      gpum_error_clear(); /* already released or expired, or the daemon is gone: nothing to do */
    gpum_client_close(c);
  }
  close(chld_pipe[0]);
  close(chld_pipe[1]);
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : CLI_EXIT_FAIL;
}
