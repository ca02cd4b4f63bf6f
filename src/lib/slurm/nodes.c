/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cluster's GPU nodes from Slurm's controller (gpum/slurm.h): libslurm.so.38 (Slurm 22.05)
 * loaded with dlopen on first use, as the device layer loads NVML, so that libgpum neither
 * links nor needs Slurm; our declarations of its few structures and functions are
 * src/abi/slurm_abi.h, checked against slurm.h at build time where libslurm-dev is installed.
 * Each node's gres strings become GPU types with counts (gres.c).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gpum/error.h>
#include <gpum/slurm.h>

#include "slurm/slurm_internal.h"
#include "slurm_abi.h"

#define GPUM__SLURM_ENUM(name, value) GPUM__##name = (value),
enum { GPUM_SLURM_CONSTS(GPUM__SLURM_ENUM) };
#undef GPUM__SLURM_ENUM

/* libslurm's functions, resolved once; never unloaded (its plugins stay loaded too). */
static struct {
#define GPUM__SLURM_PTR(ret, name, params) gpum_##name##_fn name;
  GPUM_SLURM_FUNCS(GPUM__SLURM_PTR)
#undef GPUM__SLURM_PTR
  bool loaded, initialised;
  char why[256]; /* why it did not load */
} lib;
/* Serialises the calls: loading, slurm_init and each query. */
static pthread_mutex_t lib_lock = PTHREAD_MUTEX_INITIALIZER;

const char *gpum_slurm_conf_path(void) {
  const char *env = getenv("SLURM_CONF");
  if (env && *env)
    return access(env, R_OK) == 0 ? env : NULL;
  static const char *const paths[] = {"/etc/slurm/slurm.conf", "/etc/slurm-llnl/slurm.conf"};
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
    if (access(paths[i], R_OK) == 0)
      return paths[i];
  return NULL;
}

/* Loads libslurm.so.38 and resolves its functions; false (lib.why says why) when it cannot.
 * RTLD_GLOBAL: the plugins libslurm loads itself (auth_munge.so, ...) take libslurm's own
 * symbols from the global scope; they are not linked with it. Called with lib_lock held. */
static bool load(void) {
  if (lib.loaded)
    return true;
  if (lib.why[0])
    return false;
  void *h = dlopen(GPUM_SLURM_SONAME, RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    const char *e = dlerror();
    snprintf(lib.why, sizeof lib.why, "%s (Slurm 22.05's libslurm) cannot be loaded: %s",
             GPUM_SLURM_SONAME, e ? e : "not found");
    return false;
  }
  /* memcpy: ISO C has no conversion from dlsym's object pointer to a function pointer. */
#define GPUM__SLURM_SYM(ret, name, params)                                         \
  {                                                                                \
    void *p = dlsym(h, #name);                                                     \
    if (!p) {                                                                      \
      snprintf(lib.why, sizeof lib.why, "%s has no %s", GPUM_SLURM_SONAME, #name); \
      return false;                                                                \
    }                                                                              \
    memcpy(&lib.name, &p, sizeof p);                                               \
  }
  GPUM_SLURM_FUNCS(GPUM__SLURM_SYM)
#undef GPUM__SLURM_SYM
  lib.loaded = true;
  return true;
}

/* Slurm's state in words: the base state, then each flag we know after '+'. */
static void state_text(uint32_t st, char *buf, size_t len) {
  static const char *const base[] = {"unknown", "down",  "idle",  "allocated",
                                     "error",   "mixed", "future"};
  static const struct {
    uint32_t bit;
    const char *name;
  } flags[] = {{GPUM__NODE_STATE_DRAIN, "drain"},
               {GPUM__NODE_STATE_COMPLETING, "completing"},
               {GPUM__NODE_STATE_NO_RESPOND, "not_responding"},
               {GPUM__NODE_STATE_FAIL, "fail"},
               {GPUM__NODE_STATE_MAINT, "maint"},
               {GPUM__NODE_STATE_POWERED_DOWN, "powered_down"},
               {GPUM__NODE_STATE_RES, "reserved"}};
  uint32_t b = st & GPUM__NODE_STATE_BASE;
  size_t k =
      (size_t)snprintf(buf, len, "%s", b < sizeof base / sizeof base[0] ? base[b] : "unknown");
  for (size_t i = 0; i < sizeof flags / sizeof flags[0] && k < len; i++)
    if (st & flags[i].bit)
      k += (size_t)snprintf(buf + k, len - k, "+%s", flags[i].name);
}

static bool state_usable(uint32_t st) {
  uint32_t b = st & GPUM__NODE_STATE_BASE;
  uint32_t off = GPUM__NODE_STATE_DRAIN | GPUM__NODE_STATE_NO_RESPOND | GPUM__NODE_STATE_FAIL |
                 GPUM__NODE_STATE_POWERED_DOWN;
  return (b == GPUM__NODE_STATE_IDLE || b == GPUM__NODE_STATE_MIXED ||
          b == GPUM__NODE_STATE_ALLOCATED) &&
         !(st & off);
}

/* The node's state as scontrol shows it: MIXED, not ALLOCATED, when only some of its CPUs are
 * allocated (slurmctld sends the base state; the split is in the select plugin's data). */
static uint32_t node_state(const gpum_slurm_node_info_t *ni) {
  uint16_t alloc = 0;
  uint32_t st = ni->node_state;
  if (ni->select_nodeinfo &&
      lib.slurm_get_select_nodeinfo(ni->select_nodeinfo, GPUM__SELECT_NODEDATA_SUBCNT,
                                    GPUM__NODE_STATE_ALLOCATED, &alloc) == 0 &&
      alloc > 0 && alloc < ni->cpus_efctv)
    st = (st & ~(uint32_t)GPUM__NODE_STATE_BASE) | GPUM__NODE_STATE_MIXED;
  return st;
}

/* The GPU nodes of msg into *out (malloc'd) and *n. Nodes without a GPU are left out, and so
 * is a node whose gres cannot be parsed (a form Slurm 22.05 does not write). */
static int convert(const gpum_slurm_node_info_msg_t *msg, gpum_slurm_node_t **out, size_t *n) {
  gpum_slurm_node_t *v = msg->record_count ? calloc(msg->record_count, sizeof *v) : NULL;
  if (msg->record_count && !v)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  size_t k = 0;
  for (uint32_t i = 0; i < msg->record_count; i++) {
    const gpum_slurm_node_info_t *ni = &msg->node_array[i];
    gpum_slurm_node_t *node = &v[k];
    if (!ni->name || !*ni->name ||
        gpum__slurm_gres_parse(ni->gres, ni->gres_used, node->gpus, GPUM_SLURM_NODE_TYPES_MAX,
                               &node->ntypes) != 0 ||
        node->ntypes == 0) {
      memset(node, 0, sizeof *node);
      continue;
    }
    snprintf(node->name, sizeof node->name, "%s", ni->name);
    uint32_t st = node_state(ni);
    state_text(st, node->state, sizeof node->state);
    node->usable = state_usable(st);
    node->real_memory_mib = ni->real_memory;
    k++;
  }
  if (k == 0) {
    free(v);
    v = NULL;
  }
  *out = v;
  *n = k;
  return 0;
}

int gpum_slurm_gpu_nodes(gpum_slurm_node_t **out, size_t *n) {
  if (out)
    *out = NULL;
  if (n)
    *n = 0;
  if (!out || !n)
    return gpum_error(GPUM_EINVAL, "gpum_slurm_gpu_nodes: NULL argument");
  const char *conf = gpum_slurm_conf_path();
  if (!conf)
    return gpum_error(GPUM_ENOTSUP,
                      "Slurm not available: no slurm.conf ($SLURM_CONF, /etc/slurm/slurm.conf)");
  pthread_mutex_lock(&lib_lock);
  int rc = 0;
  gpum_slurm_node_info_msg_t *msg = NULL;
  if (!load()) {
    rc = gpum_error(GPUM_ENOTSUP, "Slurm not available: %s", lib.why);
    goto out_unlock;
  }
  if (!lib.initialised) {
    lib.slurm_init(conf); /* exits the process when conf cannot be parsed (gpum/slurm.h) */
    lib.initialised = true;
  }
  /* SHOW_DETAIL: without it slurmctld leaves gres_used empty. */
  if (lib.slurm_load_node(0, &msg, GPUM__SHOW_ALL | GPUM__SHOW_DETAIL) != 0 || !msg) {
    int e = lib.slurm_get_errno();
    const char *why = lib.slurm_strerror(e);
    rc = gpum_error(GPUM_EAGAIN, "slurmctld did not answer (%s): %s", conf,
                    why ? why : "unknown error");
    goto out_unlock;
  }
  rc = convert(msg, out, n);
  lib.slurm_free_node_info_msg(msg);
out_unlock:
  pthread_mutex_unlock(&lib_lock);
  return rc;
}

void gpum_slurm_nodes_free(gpum_slurm_node_t *nodes) {
  free(nodes);
}
