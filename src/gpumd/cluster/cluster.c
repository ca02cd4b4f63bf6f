/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cluster's GPU nodes, cached (cluster.h): a thread that every cluster.slurm_refresh runs
 * gpumd again as a child to ask Slurm (`gpumd --slurm-nodes-query`, whose main is here too),
 * reads its one JSON line through a pipe within a timeout, and swaps the decoded list into the
 * cache; the loop thread copies the cache into the seed's node entries under the same lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gpum/error.h>
#include <gpum/log.h>

#include "cluster.h"
#include "os_internal.h"

extern char **environ;

#define MAX_OUTPUT (8u << 20) /* a child's output; a 10,000-node cluster prints ~2 MiB */
#define SUMMARY_MAX 512       /* the nodes as the debug log line shows them */

struct gpumd_cluster {
  pthread_t thread;
  bool running;
  pthread_mutex_t lock;
  pthread_cond_t wake; /* on the monotonic clock */
  bool stop;
  pid_t child; /* the query running now; 0: none */
  uint64_t interval_ms;
  char local[GPUM_SLURM_NODE_NAME_MAX]; /* this host's name up to the first dot */
  /* The cache, under lock. */
  gpum_slurm_node_t *nodes;
  size_t n;
  uint64_t fetched_ns; /* when nodes was read (monotonic); 0: never */
  /* The thread's own. */
  char last_error[256];
  char summary[SUMMARY_MAX];
};

/* ---- the child: gpumd --slurm-nodes-query ---- */

int gpumd_cluster_query_main(void) {
  close_range(3, ~0u, 0); /* what gpumd's fds were not close-on-exec has no business here */
  gpum_slurm_node_t *nodes = NULL;
  size_t n = 0;
  int rc = gpum_slurm_gpu_nodes(&nodes, &n);
  json_t *doc = rc == 0 ? json_pack("{s:i, s:[]}", "rc", 0, "nodes")
                        : json_pack("{s:i, s:s}", "rc", rc, "error", gpum_last_error());
  json_t *arr = json_object_get(doc, "nodes");
  for (size_t i = 0; arr && i < n; i++) {
    json_t *gpus = json_array();
    for (size_t j = 0; gpus && j < nodes[i].ntypes; j++)
      json_array_append_new(gpus, json_pack("{s:s, s:I, s:I}", "type", nodes[i].gpus[j].type,
                                            "total", (json_int_t)nodes[i].gpus[j].total, "used",
                                            (json_int_t)nodes[i].gpus[j].used));
    json_array_append_new(arr,
                          json_pack("{s:s, s:s, s:b, s:I, s:o*}", "name", nodes[i].name, "state",
                                    nodes[i].state, "usable", nodes[i].usable, "real_memory_mib",
                                    (json_int_t)nodes[i].real_memory_mib, "gpus", gpus));
  }
  gpum_slurm_nodes_free(nodes);
  char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
  json_decref(doc);
  if (!text)
    return 1;
  int ok = printf("\n%s\n", text) > 0 && fflush(stdout) == 0;
  free(text);
  return ok ? 0 : 1;
}

/* ---- the parent: one query ---- */

/* Copies a JSON string of at most len - 1 bytes; false when it is not one. */
static bool copy_str(json_t *v, char *buf, size_t len) {
  const char *s = json_string_value(v);
  if (!s || strlen(s) >= len)
    return false;
  memcpy(buf, s, strlen(s) + 1);
  return true;
}

static bool count_of(json_t *v, uint32_t *out) {
  if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > UINT32_MAX)
    return false;
  *out = (uint32_t)json_integer_value(v);
  return true;
}

/* The child's answer, the last line of its output that is a JSON object (libslurm may print
 * its own lines before it). Returns the answer's rc (its error in why), or GPUM_EPROTO. */
static int decode(char *text, gpum_slurm_node_t **out, size_t *n, char *why, size_t wlen) {
  char *line = NULL;
  for (char *p = text; (p = strstr(p, "\n{")) != NULL; p++)
    line = p + 1;
  json_t *doc = line ? json_loads(line, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
  json_t *rcv = json_object_get(doc, "rc"), *arr = json_object_get(doc, "nodes");
  int rc = json_is_integer(rcv) ? (int)json_integer_value(rcv) : GPUM_EPROTO;
  if (rc != 0 || !json_is_array(arr)) {
    const char *e = json_string_value(json_object_get(doc, "error"));
    /* No answer: the last line the child wrote (libslurm's "fatal: ..."). */
    char *last = text + strlen(text);
    while (last > text && last[-1] == '\n')
      *--last = '\0';
    last = strrchr(text, '\n') ? strrchr(text, '\n') + 1 : text;
    snprintf(why, wlen, "%s", e ? e : *last ? last : "the query printed nothing");
    json_decref(doc);
    return rc != 0 ? rc : GPUM_EPROTO;
  }
  size_t cnt = json_array_size(arr), k = 0;
  gpum_slurm_node_t *v = cnt ? calloc(cnt, sizeof *v) : NULL;
  if (cnt && !v) {
    json_decref(doc);
    snprintf(why, wlen, "out of memory");
    return GPUM_ENOMEM;
  }
  size_t i, j;
  json_t *e, *g;
  json_array_foreach(arr, i, e) {
    gpum_slurm_node_t *nd = &v[k];
    bool ok = copy_str(json_object_get(e, "name"), nd->name, sizeof nd->name) &&
              copy_str(json_object_get(e, "state"), nd->state, sizeof nd->state);
    nd->usable = json_is_true(json_object_get(e, "usable"));
    nd->real_memory_mib = (uint64_t)json_integer_value(json_object_get(e, "real_memory_mib"));
    json_array_foreach(json_object_get(e, "gpus"), j, g) {
      if (!ok || nd->ntypes == GPUM_SLURM_NODE_TYPES_MAX)
        break;
      gpum_slurm_gpus_t *t = &nd->gpus[nd->ntypes++];
      ok = copy_str(json_object_get(g, "type"), t->type, sizeof t->type) &&
           count_of(json_object_get(g, "total"), &t->total) &&
           count_of(json_object_get(g, "used"), &t->used) && t->used <= t->total;
    }
    if (ok && nd->ntypes > 0)
      k++;
    else
      memset(nd, 0, sizeof *nd);
  }
  json_decref(doc);
  if (k == 0) {
    free(v);
    v = NULL;
  }
  *out = v;
  *n = k;
  return 0;
}

/* Reads the child's output until it ends or the deadline passes. Returns 0, GPUM_ETIMEDOUT,
 * GPUM_EIO or GPUM_ENOMEM; *text is malloc'd and NUL-terminated (also on failure). */
static int read_child(int fd, uint64_t deadline_ns, char **text) {
  size_t len = 0, cap = 4096;
  char *buf = malloc(cap);
  if (!buf)
    return GPUM_ENOMEM;
  int rc = 0;
  for (;;) {
    uint64_t now = gpum__os_mono_ns();
    if (now >= deadline_ns) {
      rc = GPUM_ETIMEDOUT;
      break;
    }
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r = poll(&p, 1, (int)((deadline_ns - now) / 1000000u) + 1);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      rc = GPUM_EIO;
      break;
    }
    if (r == 0)
      continue; /* the deadline check above ends it */
    if (len + 1 == cap) {
      char *nb = cap < MAX_OUTPUT ? realloc(buf, cap * 2) : NULL;
      if (!nb) {
        rc = cap < MAX_OUTPUT ? GPUM_ENOMEM : GPUM_EIO;
        break;
      }
      buf = nb;
      cap *= 2;
    }
    ssize_t got = read(fd, buf + len, cap - len - 1);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0) {
      rc = got < 0 ? GPUM_EIO : 0;
      break;
    }
    len += (size_t)got;
  }
  buf[len] = '\0';
  *text = buf;
  return rc;
}

/* Starts `gpumd --slurm-nodes-query` with its stdout and stderr on a pipe; *fd the pipe's
 * reading end. The child's signals are the defaults, its stdin /dev/null. */
static int spawn_query(pid_t *pid, int *fd) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0)
    return gpum_error(GPUM_EIO, "pipe: %s", strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&at);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, p[1], 1);
  posix_spawn_file_actions_adddup2(&fa, p[1], 2);
  sigset_t none, dfl;
  sigemptyset(&none);
  sigemptyset(&dfl);
  int sigs[] = {SIGPIPE, SIGTERM, SIGINT, SIGHUP};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    sigaddset(&dfl, sigs[i]);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setsigdefault(&at, &dfl);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  char *argv[] = {(char *)"gpumd", (char *)GPUMD_CLUSTER_QUERY_ARG, NULL};
  int e = posix_spawn(pid, "/proc/self/exe", &fa, &at, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  close(p[1]);
  if (e != 0) {
    close(p[0]);
    return gpum_error(GPUM_EIO, "cannot start gpumd %s: %s", GPUMD_CLUSTER_QUERY_ARG, strerror(e));
  }
  *fd = p[0];
  return 0;
}

/* One query in a child: 0 with the nodes, or a code with the reason in why. */
static int query(struct gpumd_cluster *c, gpum_slurm_node_t **out, size_t *n, char *why,
                 size_t wlen) {
  pid_t pid = 0;
  int fd = -1, rc = spawn_query(&pid, &fd);
  if (rc != 0) {
    snprintf(why, wlen, "%s", gpum_last_error());
    return rc;
  }
  pthread_mutex_lock(&c->lock);
  c->child = pid;
  if (c->stop)
    kill(pid, SIGKILL);
  pthread_mutex_unlock(&c->lock);
  char *text = NULL;
  rc = read_child(fd, gpum__os_mono_ns() + GPUMD_CLUSTER_QUERY_TIMEOUT_MS * 1000000ull, &text);
  close(fd);
  /* Forgotten before it is reaped, so that gpumd_cluster_stop never signals a pid that may
   * have been reused; its output has ended, so it is exiting or killed already. */
  pthread_mutex_lock(&c->lock);
  c->child = 0;
  pthread_mutex_unlock(&c->lock);
  if (rc != 0)
    kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (rc == GPUM_ETIMEDOUT)
    snprintf(why, wlen, "no answer from Slurm within %d s (the query was killed)",
             GPUMD_CLUSTER_QUERY_TIMEOUT_MS / 1000);
  else if (rc != 0)
    snprintf(why, wlen, "reading the query's answer: %s", gpum_strerror(rc));
  else
    rc = decode(text ? text : (char *)"", out, n, why, wlen);
  free(text);
  return rc;
}

/* ---- the thread and the cache ---- */

/* The nodes in a line for the debug log: "gnode a100_80gb 1/2 used, mixed; ...". */
static void summarise(const gpum_slurm_node_t *v, size_t n, char *buf, size_t len) {
  size_t k = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < n && k < len; i++) {
    k += (size_t)snprintf(buf + k, len - k, "%s%s", i ? "; " : "", v[i].name);
    for (size_t j = 0; j < v[i].ntypes && k < len; j++)
      k += (size_t)snprintf(buf + k, len - k, " %s %u/%u used,",
                            v[i].gpus[j].type[0] ? v[i].gpus[j].type : "gpu", v[i].gpus[j].used,
                            v[i].gpus[j].total);
    if (k < len)
      k += (size_t)snprintf(buf + k, len - k, " %s", v[i].state);
  }
}

/* Waits until the next refresh is due or stop is set; true when it is set. */
static bool wait_next(struct gpumd_cluster *c) {
  struct timespec until = gpum__os_mono_timespec(gpum__os_mono_ns() + c->interval_ms * 1000000ull);
  pthread_mutex_lock(&c->lock);
  while (!c->stop && pthread_cond_timedwait(&c->wake, &c->lock, &until) != ETIMEDOUT) {
  }
  bool stop = c->stop;
  pthread_mutex_unlock(&c->lock);
  return stop;
}

static void *refresh_thread(void *arg) {
  struct gpumd_cluster *c = arg;
  bool ever = false;
  do {
    gpum_slurm_node_t *nodes = NULL;
    size_t n = 0;
    char why[256] = "";
    int rc = query(c, &nodes, &n, why, sizeof why);
    pthread_mutex_lock(&c->lock);
    bool stopping = c->stop; /* a query killed by gpumd_cluster_stop is no failure to log */
    pthread_mutex_unlock(&c->lock);
    if (stopping) {
      gpum_slurm_nodes_free(nodes);
      break;
    }
    if (rc == 0) {
      char sum[SUMMARY_MAX];
      summarise(nodes, n, sum, sizeof sum);
      if (!ever || c->last_error[0])
        gpum_log(GPUM_LOG_INFO, "cluster", "%zu GPU node%s from Slurm", n, n == 1 ? "" : "s");
      if (!ever || strcmp(sum, c->summary) != 0)
        gpum_log(GPUM_LOG_DEBUG, "cluster", "Slurm's GPU nodes: %s", n ? sum : "none");
      memcpy(c->summary, sum, sizeof sum);
      c->last_error[0] = '\0';
      ever = true;
      pthread_mutex_lock(&c->lock);
      gpum_slurm_nodes_free(c->nodes);
      c->nodes = nodes;
      c->n = n;
      c->fetched_ns = gpum__os_mono_ns();
      pthread_mutex_unlock(&c->lock);
    } else if (rc == GPUM_ENOTSUP && !ever) {
      gpum_log(GPUM_LOG_INFO, "cluster", "the cluster's nodes are not listed: %s", why);
      break;
    } else if (strcmp(why, c->last_error) != 0) {
      gpum_log(GPUM_LOG_WARN, "cluster", "cannot read the cluster's nodes from Slurm: %s", why);
      snprintf(c->last_error, sizeof c->last_error, "%s", why);
    }
  } while (!wait_next(c));
  return NULL;
}

int gpumd_cluster_start(gpumd_t *d) {
  uint64_t every = gpum_config_get_duration(d->cfg, "cluster.slurm_refresh");
  if (every == 0) {
    gpum_log(GPUM_LOG_INFO, "cluster",
             "the cluster's nodes are not listed: cluster.slurm_refresh "
             "is 0");
    return 0;
  }
  if (!gpum_slurm_conf_path()) {
    gpum_log(GPUM_LOG_INFO, "cluster",
             "the cluster's nodes are not listed: no slurm.conf ($SLURM_CONF, "
             "/etc/slurm/slurm.conf)");
    return 0;
  }
  struct gpumd_cluster *c = calloc(1, sizeof *c);
  if (!c)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  c->interval_ms = every;
  if (gethostname(c->local, sizeof c->local - 1) != 0)
    c->local[0] = '\0';
  c->local[strcspn(c->local, ".")] = '\0';
  pthread_mutex_init(&c->lock, NULL);
  if (gpum__os_cond_init_mono(&c->wake) != 0) {
    pthread_mutex_destroy(&c->lock);
    free(c);
    return gpum_error(GPUM_ENOMEM, "cannot create a condition variable");
  }
  if (pthread_create(&c->thread, NULL, refresh_thread, c) != 0) {
    pthread_cond_destroy(&c->wake);
    pthread_mutex_destroy(&c->lock);
    free(c);
    return gpum_error(GPUM_ENOMEM, "cannot start the cluster's refresh thread");
  }
  c->running = true;
  d->cluster = c;
  return 0;
}

void gpumd_cluster_stop(gpumd_t *d) {
  struct gpumd_cluster *c = d->cluster;
  if (!c)
    return;
  pthread_mutex_lock(&c->lock);
  c->stop = true;
  if (c->child > 0)
    kill(c->child, SIGKILL);
  pthread_cond_broadcast(&c->wake);
  pthread_mutex_unlock(&c->lock);
  if (c->running)
    pthread_join(c->thread, NULL);
  gpum_slurm_nodes_free(c->nodes);
  pthread_cond_destroy(&c->wake);
  pthread_mutex_destroy(&c->lock);
  free(c);
  d->cluster = NULL;
}

json_t *gpumd_cluster_seed_nodes(gpumd_t *d, const char *gpu_type, double min_memory_gb,
                                 unsigned min_gpus) {
  struct gpumd_cluster *c = d->cluster;
  if (!c)
    return json_array();
  pthread_mutex_lock(&c->lock);
  uint64_t stale_ms =
      c->interval_ms * 3 > GPUMD_CLUSTER_STALE_MS ? c->interval_ms * 3 : GPUMD_CLUSTER_STALE_MS;
  bool fresh = c->fetched_ns && gpum__os_mono_ns() - c->fetched_ns <= stale_ms * 1000000ull;
  json_t *out =
      fresh ? gpumd_cluster_seed_json(c->nodes, c->n, c->local, gpu_type, min_memory_gb, min_gpus)
            : json_array();
  pthread_mutex_unlock(&c->lock);
  return out;
}
