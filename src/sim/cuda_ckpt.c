/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CUDA checkpoint API of the simulated driver (CUDA 12.8, group CUDA_CHECKPOINT; the facts
 * and their sources are in docs/sim.md, "Checkpoint and restore").
 *
 * A process's state is one of CU_PROCESS_STATE_RUNNING, LOCKED, CHECKPOINTED and FAILED:
 *   Lock        RUNNING      -> LOCKED        its CUDA calls wait at the gate; the lock waits
 *                                             for the calls already in flight (timeoutMs: it
 *                                             gives up with CUDA_ERROR_NOT_READY, RUNNING)
 *   Checkpoint  LOCKED       -> CHECKPOINTED  its cuMemAlloc memory moves to host memory, the
 *                                             device pages are released (the addresses stay
 *                                             reserved), and the node counts none of its bytes
 *   Restore     CHECKPOINTED -> LOCKED        the memory comes back at the same addresses, on
 *                                             the same GPUs or the ones the pairs name
 *   Unlock      LOCKED       -> RUNNING       its calls go on
 * Any other transition is CUDA_ERROR_ILLEGAL_STATE. An injected fault (`gpum sim inject
 * --ckpt-fail/--restore-fail`) makes a checkpoint or restore fail with CUDA_ERROR_UNKNOWN and
 * leaves the process FAILED, where every CUDA call it makes returns CUDA_ERROR_UNKNOWN.
 *
 * The calls are made by another process (the controller) on the target's pid, so the work is
 * done inside the target by its service thread (the real driver's "restore thread"), started
 * at cuInit: the controller writes a request into the target's slot of the node's checkpoint
 * table and wakes it (a futex on the slot's req word); the service thread performs it and
 * answers (the done word). Requests to one process are served one at a time.
 */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sim_internal.h"

enum {
  OP_LOCK = 1,
  OP_CHECKPOINT = 2,
  OP_RESTORE = 3,
  OP_UNLOCK = 4,
};

/* How long a controller waits in one futex wait before it checks that the target still lives,
 * and how long beyond the lock's own timeout it waits for an answer at most. */
#define SLICE_MS 200u
#define ANSWER_GRACE_MS 30000u

/* ---- the call gate ----
 *
 * Every CUDA call pays for the gate, so its open path is two atomic operations and no lock: a
 * call counts itself in inflight, then looks at gate_closed; the lock sets gate_closed, then
 * looks at inflight. Both are sequentially consistent, so at least one of the two sees the
 * other (Dekker): either the call sees the gate closed and backs out to wait on gate_cv, or the
 * lock sees the call and waits for it. A call that ends or backs out while the gate is closed
 * signals under gate_mu, which the waiting lock holds until it sleeps: no wakeup is lost. */
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static bool gate_closed, gate_failed; /* locked or checkpointed; FAILED */
static unsigned inflight;             /* calls past the gate */
/* This thread's entry points on the stack. Initial-exec: read without a __tls_get_addr call on
 * every CUDA call (4 bytes of the static TLS that glibc keeps for libraries loaded later). */
static _Thread_local unsigned depth __attribute__((tls_model("initial-exec")));

/* The service thread (in this process, serving the controllers' requests). */
static pthread_mutex_t svc_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t svc_cv = PTHREAD_COND_INITIALIZER;
static struct gpum__sim_node *svc_node; /* the node the service thread serves */
static int svc_slot = -1;
static bool svc_ready, svc_running;
static pthread_t svc_thread;
static bool svc_stop; /* set to end the service thread (atomic) */

static bool svc_stopping(void) {
  return __atomic_load_n(&svc_stop, __ATOMIC_ACQUIRE);
}

/* One call less in flight: wakes a lock waiting for the last one. */
static void call_leave(void) {
  if (__atomic_sub_fetch(&inflight, 1, __ATOMIC_SEQ_CST) == 0 &&
      __atomic_load_n(&gate_closed, __ATOMIC_SEQ_CST)) {
    pthread_mutex_lock(&gate_mu);
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
  }
}

int gpum__sim_cu_call_begin(void) {
  if (depth > 0) { /* a nested entry point: its caller is counted */
    depth++;
    return 0;
  }
  for (;;) {
    __atomic_add_fetch(&inflight, 1, __ATOMIC_SEQ_CST);
    if (!__atomic_load_n(&gate_closed, __ATOMIC_SEQ_CST))
      break;
    call_leave(); /* closed: back out and wait for it to open */
    pthread_mutex_lock(&gate_mu);
    while (__atomic_load_n(&gate_closed, __ATOMIC_SEQ_CST) &&
           !__atomic_load_n(&gate_failed, __ATOMIC_SEQ_CST))
      pthread_cond_wait(&gate_cv, &gate_mu);
    bool failed = __atomic_load_n(&gate_failed, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&gate_mu);
    if (failed)
      return -1;
  }
  depth = 1;
  return 1;
}

void gpum__sim_cu_call_end(const int *begun) {
  if (*begun < 0)
    return;
  depth--;
  if (*begun == 1)
    call_leave();
}

unsigned gpum_sim_debug_cu_calls(void) {
  return __atomic_load_n(&inflight, __ATOMIC_SEQ_CST);
}

void gpum__sim_ckpt_atfork(gpum__sim_fork_phase_t ph) {
  gpum__sim_fork_mutex(&gate_mu, ph);
  if (ph == GPUM__SIM_FORK_CHILD) { /* the calls in flight were the parent's threads' */
    svc_running = false;            /* nor is the service thread the child's */
    svc_node = NULL;
    __atomic_store_n(&inflight, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&gate_closed, false, __ATOMIC_SEQ_CST);
    __atomic_store_n(&gate_failed, false, __ATOMIC_SEQ_CST);
  }
}

/* The time ms from now on CLOCK_REALTIME (pthread_cond_timedwait's clock). */
static struct timespec after_ms(uint64_t ms) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  t.tv_sec += (time_t)(ms / 1000u);
  t.tv_nsec += (long)(ms % 1000u) * 1000000L;
  if (t.tv_nsec >= 1000000000L) {
    t.tv_sec++;
    t.tv_nsec -= 1000000000L;
  }
  return t;
}

/* Closes the gate and waits for the calls in flight, at most timeout_ms (0: no bound; it also
 * gives up when the library is being unloaded). */
static CUresult gate_close(uint32_t timeout_ms) {
  uint64_t waited = 0;
  CUresult r = CUDA_SUCCESS;
  pthread_mutex_lock(&gate_mu);
  __atomic_store_n(&gate_closed, true, __ATOMIC_SEQ_CST);
  while (__atomic_load_n(&inflight, __ATOMIC_SEQ_CST) > 0) {
    uint64_t slice = timeout_ms && timeout_ms - waited < 200u ? timeout_ms - waited : 200u;
    struct timespec until = after_ms(slice);
    if (pthread_cond_timedwait(&gate_cv, &gate_mu, &until) == ETIMEDOUT)
      waited += slice;
    if (__atomic_load_n(&inflight, __ATOMIC_SEQ_CST) > 0 &&
        ((timeout_ms && waited >= timeout_ms) || svc_stopping())) {
      __atomic_store_n(&gate_closed, false, __ATOMIC_SEQ_CST); /* the process stays RUNNING */
      pthread_cond_broadcast(&gate_cv);
      r = CUDA_ERROR_NOT_READY;
      break;
    }
  }
  pthread_mutex_unlock(&gate_mu);
  return r;
}

static void gate_set(bool closed, bool failed) {
  pthread_mutex_lock(&gate_mu);
  __atomic_store_n(&gate_failed, failed, __ATOMIC_SEQ_CST);
  __atomic_store_n(&gate_closed, closed, __ATOMIC_SEQ_CST);
  pthread_cond_broadcast(&gate_cv);
  pthread_mutex_unlock(&gate_mu);
}

/* ---- futexes on the node's words ---- */

static void futex_wake(uint32_t *word) {
  syscall(SYS_futex, word, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

/* Waits while *word == seen, at most ms; the caller re-checks. Not FUTEX_PRIVATE: the word is
 * shared between processes. */
static void futex_wait(uint32_t *word, uint32_t seen, uint32_t ms) {
  struct timespec ts = {.tv_sec = (time_t)(ms / 1000u), .tv_nsec = (long)(ms % 1000u) * 1000000L};
  syscall(SYS_futex, word, FUTEX_WAIT, seen, &ts, NULL, 0);
}

/* ---- the service thread (in the target process) ---- */

/* Whether the process of slot c still runs (not gone, not a zombie, not a reused pid). */
static bool slot_alive(const struct gpum__sim_ckpt *c) {
  char st;
  uint64_t start;
  return gpum__sim_proc_stat(c->pid, &st, &start) == 0 && st != 'Z' && st != 'X' &&
         start == c->start_time;
}

/* Takes a slot of the checkpoint table for the calling process (node lock held): its own from
 * an earlier cuInit, else a free one or one of a process that is gone. */
static int slot_claim(struct gpum__sim_node *n) {
  const struct gpum__sim_self *me = gpum__sim_me();
  int free_slot = -1;
  for (unsigned i = 0; i < GPUM__SIM_MAX_PROCS; i++) {
    struct gpum__sim_ckpt *c = &n->ckpt[i];
    if (c->used == GPUM__SIM_A_USED && c->pid == me->pid && c->start_time == me->start_time)
      return (int)i;
    if (free_slot < 0 && (c->used != GPUM__SIM_A_USED || !slot_alive(c)))
      free_slot = (int)i;
  }
  if (free_slot < 0)
    return -1;
  struct gpum__sim_ckpt *c = &n->ckpt[free_slot];
  __atomic_store_n(&c->used, GPUM__SIM_A_FREE, __ATOMIC_RELEASE);
  c->pid = me->pid;
  c->start_time = me->start_time;
  c->tid = 0;
  c->state = CU_PROCESS_STATE_RUNNING;
  c->busy = 0;
  c->op = 0;
  c->result = 0;
  __atomic_store_n(&c->used, GPUM__SIM_A_USED, __ATOMIC_RELEASE);
  return free_slot;
}

/* The device each of this process's entries is on, mapped: checks that the pairs name every
 * device it holds memory on, that each new GPU is of the old one's kind and that no two
 * visible devices end on one GPU (lock held). CUDA_SUCCESS or CUDA_ERROR_INVALID_VALUE. */
static CUresult remap_check(const struct gpum__sim_node *n, const struct gpum__sim_proc *p,
                            const struct gpum__sim_ckpt *c) {
  for (unsigned d = 0; d < n->spec.device_count; d++) {
    if (c->remap_given && p && p->count[d] > 0 && !(c->remap_given & (1u << d)))
      return gpum__sim_err(CUDA_ERROR_INVALID_VALUE, "the GPU pairs omit device %u", d);
    const struct gpum__sim_dev_spec *a = &n->spec.dev[d], *b = &n->spec.dev[c->remap[d]];
    if (c->remap[d] != d && (strcmp(a->name, b->name) != 0 || a->memory != b->memory))
      return gpum__sim_err(CUDA_ERROR_INVALID_VALUE, "device %u and %u are of different kinds", d,
                           c->remap[d]);
  }
  unsigned vis[GPUM__SIM_MAX_DEVICES];
  unsigned nv = gpum__sim_cu_visible(vis);
  for (unsigned i = 0; i < nv; i++)
    for (unsigned j = i + 1; j < nv; j++)
      if (c->remap[vis[i]] == c->remap[vis[j]])
        return gpum__sim_err(CUDA_ERROR_INVALID_VALUE, "two devices would restore onto one");
  return CUDA_SUCCESS;
}

/* Whether each device has room for what the process brings onto it (lock held; the process
 * is away, so its bytes are counted nowhere). */
static bool remap_fits(const struct gpum__sim_node *n, const struct gpum__sim_proc *p,
                       const uint32_t *map) {
  uint64_t need[GPUM__SIM_MAX_DEVICES] = {0};
  for (unsigned d = 0; d < n->spec.device_count; d++)
    need[map[d]] += p->bytes[d];
  for (unsigned d = 0; d < n->spec.device_count; d++)
    if (need[d] > gpum__sim_free(n, d))
      return false;
  return true;
}

/* Moves the process's entries to their new devices and counts them again (lock held). */
static void remap_apply(struct gpum__sim_node *n, struct gpum__sim_proc *p, const uint32_t *map) {
  memset(p->count, 0, sizeof p->count);
  memset(p->bytes, 0, sizeof p->bytes);
  for (uint32_t i = p->head; i != GPUM__SIM_NIL; i = n->allocs[i].next) {
    struct gpum__sim_alloc *a = &n->allocs[i];
    if (a->kind == GPUM__SIM_K_CTX) /* a context's entry names its device */
      a->addr = map[a->device];
    a->device = map[a->device];
    p->count[a->device]++;
    p->bytes[a->device] += a->size;
  }
  p->away = 0;
}

/* Whether an injected fault on one of the devices strikes (spends it; lock held). With
 * restore, the devices are the new ones. */
static bool fault_strikes(struct gpum__sim_node *n, const struct gpum__sim_proc *p,
                          const uint32_t *map, bool restore) {
  for (unsigned d = 0; d < n->spec.device_count; d++) {
    if (!p || p->count[d] == 0)
      continue;
    uint32_t *left = restore ? &n->dev[map[d]].restore_fail : &n->dev[d].ckpt_fail;
    if (*left > 0) {
      (*left)--;
      return true;
    }
  }
  return false;
}

static CUresult do_checkpoint(struct gpum__sim_node *n) {
  if (gpum__sim_lock(n) != 0)
    return CUDA_ERROR_UNKNOWN;
  int s = gpum__sim_proc_mine(n);
  struct gpum__sim_proc *p = s >= 0 ? &n->procs[s] : NULL;
  bool fault = fault_strikes(n, p, NULL, false);
  gpum__sim_unlock(n);
  if (fault)
    return CUDA_ERROR_UNKNOWN;
  int saved = gpum__sim_mem_save();
  if (saved != 0) /* -2: an allocation's range was lost: the process cannot go on */
    return saved == -2 ? CUDA_ERROR_UNKNOWN : CUDA_ERROR_OUT_OF_MEMORY;
  if (gpum__sim_lock(n) != 0)
    return CUDA_ERROR_UNKNOWN;
  s = gpum__sim_proc_mine(n);
  if (s >= 0)
    n->procs[s].away = 1;
  gpum__sim_unlock(n);
  return CUDA_SUCCESS;
}

static CUresult do_restore(struct gpum__sim_node *n, struct gpum__sim_ckpt *c) {
  if (gpum__sim_lock(n) != 0)
    return CUDA_ERROR_UNKNOWN;
  int s = gpum__sim_proc_mine(n);
  struct gpum__sim_proc *p = s >= 0 ? &n->procs[s] : NULL;
  uint32_t map[GPUM__SIM_MAX_DEVICES];
  memcpy(map, c->remap, sizeof map);
  bool moved = false;
  for (unsigned d = 0; d < GPUM__SIM_MAX_DEVICES; d++)
    moved |= map[d] != d;
  CUresult r = remap_check(n, p, c);
  if (r == CUDA_SUCCESS && p && !remap_fits(n, p, map))
    r = gpum__sim_err(CUDA_ERROR_OUT_OF_MEMORY, "no room to restore onto");
  if (r == CUDA_SUCCESS && fault_strikes(n, p, map, true))
    r = CUDA_ERROR_UNKNOWN;
  if (r == CUDA_SUCCESS && p)
    remap_apply(n, p, map);
  gpum__sim_unlock(n);
  if (r != CUDA_SUCCESS)
    return r;
  if (gpum__sim_mem_load() != 0)
    return CUDA_ERROR_UNKNOWN; /* the memory could not be mapped again: FAILED */
  if (moved) {
    gpum__sim_ctx_remap(map);
    gpum__sim_mem_remap(map);
    gpum__sim_pool_remap(map);
    gpum__sim_vmm_remap(map);
  }
  return CUDA_SUCCESS;
}

/* Serves one request (the state was checked by the controller and is checked again here). */
static void serve(struct gpum__sim_node *n, struct gpum__sim_ckpt *c, uint32_t op,
                  uint32_t timeout_ms, uint32_t state) {
  CUresult r = CUDA_ERROR_ILLEGAL_STATE;
  uint32_t next = state;
  switch (op) {
  case OP_LOCK:
    if (state == CU_PROCESS_STATE_RUNNING && (r = gate_close(timeout_ms)) == CUDA_SUCCESS)
      next = CU_PROCESS_STATE_LOCKED;
    break;
  case OP_CHECKPOINT:
    if (state == CU_PROCESS_STATE_LOCKED) {
      r = do_checkpoint(n);
      next = r == CUDA_SUCCESS               ? CU_PROCESS_STATE_CHECKPOINTED
             : r == CUDA_ERROR_OUT_OF_MEMORY ? CU_PROCESS_STATE_LOCKED
                                             : CU_PROCESS_STATE_FAILED;
    }
    break;
  case OP_RESTORE:
    if (state == CU_PROCESS_STATE_CHECKPOINTED) {
      r = do_restore(n, c);
      next = r == CUDA_SUCCESS         ? CU_PROCESS_STATE_LOCKED
             : r == CUDA_ERROR_UNKNOWN ? CU_PROCESS_STATE_FAILED
                                       : CU_PROCESS_STATE_CHECKPOINTED;
    }
    break;
  case OP_UNLOCK:
    if (state == CU_PROCESS_STATE_LOCKED) {
      gate_set(false, false);
      r = CUDA_SUCCESS;
      next = CU_PROCESS_STATE_RUNNING;
    }
    break;
  default:
    r = CUDA_ERROR_INVALID_VALUE;
    break;
  }
  if (next == CU_PROCESS_STATE_FAILED)
    gate_set(true, true);
  if (gpum__sim_lock(n) != 0)
    return; /* the node is unusable: the controller sees no answer */
  c->result = r;
  c->state = next;
  c->busy = 0;
  __atomic_add_fetch(&c->done, 1, __ATOMIC_RELEASE);
  gpum__sim_unlock(n);
  futex_wake(&c->done);
}

static void *service(void *arg) {
  struct gpum__sim_node *n = arg;
  pthread_mutex_lock(&svc_mu);
  struct gpum__sim_ckpt *c = &n->ckpt[svc_slot];
  pthread_mutex_unlock(&svc_mu);
  if (gpum__sim_lock(n) == 0) {
    c->tid = (int32_t)syscall(SYS_gettid);
    gpum__sim_unlock(n);
  }
  uint32_t served = __atomic_load_n(&c->req, __ATOMIC_ACQUIRE);
  pthread_mutex_lock(&svc_mu);
  svc_ready = true;
  pthread_cond_broadcast(&svc_cv);
  pthread_mutex_unlock(&svc_mu);
  while (!__atomic_load_n(&n->hdr.stopped, __ATOMIC_ACQUIRE) && !svc_stopping()) {
    uint32_t req = __atomic_load_n(&c->req, __ATOMIC_ACQUIRE);
    if (req == served) {
      futex_wait(&c->req, served, 1000u); /* wakes on a request; checks `stopped` each second */
      continue;
    }
    served = req;
    if (gpum__sim_lock(n) != 0)
      break;
    uint32_t op = c->op, timeout_ms = c->timeout_ms, state = c->state;
    gpum__sim_unlock(n);
    serve(n, c, op, timeout_ms, state);
  }
  return NULL;
}

/* Ends the service thread and gives its slot up (svc_mu held): a restart of the driver on
 * another node, and the library's unloading. */
static void svc_end(void) {
  if (!svc_running)
    return;
  __atomic_store_n(&svc_stop, true, __ATOMIC_RELEASE);
  futex_wake(&svc_node->ckpt[svc_slot].req); /* others waiting on it re-check and wait again */
  pthread_join(svc_thread, NULL);
  if (!__atomic_load_n(&svc_node->hdr.stopped, __ATOMIC_ACQUIRE) && gpum__sim_lock(svc_node) == 0) {
    __atomic_store_n(&svc_node->ckpt[svc_slot].used, GPUM__SIM_A_FREE, __ATOMIC_RELEASE);
    gpum__sim_unlock(svc_node);
  }
  __atomic_store_n(&svc_stop, false, __ATOMIC_RELEASE);
  svc_running = false;
  svc_node = NULL;
}

void gpum__sim_ckpt_start(struct gpum__sim_node *n) {
  pthread_mutex_lock(&svc_mu);
  if (svc_node == n) { /* already served */
    pthread_mutex_unlock(&svc_mu);
    return;
  }
  svc_end(); /* the thread of a node that was stopped */
  int slot = -1;
  if (gpum__sim_lock(n) == 0) {
    slot = slot_claim(n);
    gpum__sim_unlock(n);
  }
  svc_slot = slot;
  svc_ready = false;
  /* Without a slot or a thread the process cannot be checkpointed: the calls on its pid answer
   * CUDA_ERROR_NOT_INITIALIZED (no CUDA process of the node by that pid). */
  if (slot >= 0 && pthread_create(&svc_thread, NULL, service, n) == 0) {
    svc_node = n;
    svc_running = true;
    while (!svc_ready)
      pthread_cond_wait(&svc_cv, &svc_mu);
  } else if (slot >= 0 && gpum__sim_lock(n) == 0) {
    __atomic_store_n(&n->ckpt[slot].used, GPUM__SIM_A_FREE, __ATOMIC_RELEASE);
    gpum__sim_unlock(n);
  }
  pthread_mutex_unlock(&svc_mu);
}

/* The service thread runs code of this library: it ends before the library is unloaded (a
 * dlclose of the last reference; also at exit, where it costs at most one futex wake and the
 * request being served). */
__attribute__((destructor)) static void svc_unload(void) {
  pthread_mutex_lock(&svc_mu);
  svc_end();
  pthread_mutex_unlock(&svc_mu);
}

/* ---- the controller's side ---- */

/* The slot of pid's process with a service thread, or NULL (lock held). */
static struct gpum__sim_ckpt *slot_find(struct gpum__sim_node *n, int pid) {
  for (unsigned i = 0; i < GPUM__SIM_MAX_PROCS; i++) {
    struct gpum__sim_ckpt *c = &n->ckpt[i];
    if (c->used == GPUM__SIM_A_USED && c->pid == pid && c->tid != 0)
      return slot_alive(c) ? c : NULL;
  }
  return NULL;
}

/* What the controller needs first: an initialised driver (CUDA_ERROR_NOT_INITIALIZED before
 * cuInit), the node locked, and pid's slot: CUDA_ERROR_NOT_INITIALIZED for a pid that is no
 * CUDA process of the node, as the real driver answers for a live process that never
 * initialised CUDA (driver 580, docs/hardware.md); CUDA_ERROR_INVALID_VALUE for pid 0 or below.
 * On CUDA_SUCCESS the node lock is held. */
static CUresult enter(int pid, struct gpum__sim_node **out, struct gpum__sim_ckpt **slot) {
  if (gpum__sim_cu_forked())
    return CUDA_ERROR_NOT_INITIALIZED;
  CUresult r = gpum__sim_cu_check(true, GPUM__SIM_CU_LIVE);
  if (r != CUDA_SUCCESS)
    return r;
  struct gpum__sim_node *n = gpum__sim_attached();
  if (!n || gpum__sim_lock(n) != 0)
    return CUDA_ERROR_UNKNOWN;
  struct gpum__sim_ckpt *c = pid > 0 ? slot_find(n, pid) : NULL;
  if (!c) {
    gpum__sim_unlock(n);
    if (pid <= 0)
      return gpum__sim_err(CUDA_ERROR_INVALID_VALUE, "pid %d is no process", pid);
    return gpum__sim_err(CUDA_ERROR_NOT_INITIALIZED, "pid %d is no CUDA process of the node", pid);
  }
  *out = n;
  *slot = c;
  return CUDA_SUCCESS;
}

/* The state each operation starts from. */
static uint32_t op_from(uint32_t op) {
  switch (op) {
  case OP_LOCK:
    return CU_PROCESS_STATE_RUNNING;
  case OP_CHECKPOINT:
  case OP_UNLOCK:
    return CU_PROCESS_STATE_LOCKED;
  default:
    return CU_PROCESS_STATE_CHECKPOINTED;
  }
}

/* Sends op to pid's service thread and waits for its answer. remap: restore's device map
 * (NULL: identity), given: the devices the pairs named. */
static CUresult request(int pid, uint32_t op, uint32_t timeout_ms, const uint32_t *remap,
                        uint32_t given) {
  struct gpum__sim_node *n;
  struct gpum__sim_ckpt *c;
  CUresult r = enter(pid, &n, &c);
  if (r != CUDA_SUCCESS)
    return r;
  /* One request at a time: wait for the one being served. */
  while (c->busy) {
    uint32_t done = __atomic_load_n(&c->done, __ATOMIC_ACQUIRE);
    gpum__sim_unlock(n);
    futex_wait(&c->done, done, SLICE_MS);
    if ((r = enter(pid, &n, &c)) != CUDA_SUCCESS)
      return r;
  }
  if (c->state != op_from(op)) {
    gpum__sim_unlock(n);
    return CUDA_ERROR_ILLEGAL_STATE;
  }
  c->op = op;
  c->timeout_ms = timeout_ms;
  for (unsigned d = 0; d < GPUM__SIM_MAX_DEVICES; d++)
    c->remap[d] = remap ? remap[d] : d;
  c->remap_given = given;
  c->busy = 1;
  uint32_t done = __atomic_load_n(&c->done, __ATOMIC_ACQUIRE);
  __atomic_add_fetch(&c->req, 1, __ATOMIC_RELEASE);
  gpum__sim_unlock(n);
  futex_wake(&c->req);
  /* The answer: bounded by the lock's timeout and a grace; a lock without one, and the other
   * operations, wait as long as the target lives. */
  uint64_t waited = 0, bound = timeout_ms ? (uint64_t)timeout_ms + ANSWER_GRACE_MS : 0;
  while (__atomic_load_n(&c->done, __ATOMIC_ACQUIRE) == done) {
    if (bound && waited >= bound)
      return gpum__sim_err(CUDA_ERROR_UNKNOWN, "pid %d did not answer", pid);
    if (!slot_alive(c))
      return gpum__sim_err(CUDA_ERROR_NOT_INITIALIZED, "pid %d exited", pid);
    futex_wait(&c->done, done, SLICE_MS);
    waited += SLICE_MS;
  }
  if (gpum__sim_lock(n) != 0)
    return CUDA_ERROR_UNKNOWN;
  r = c->result;
  gpum__sim_unlock(n);
  return r;
}

static bool zero(const void *p, size_t len) {
  const unsigned char *b = p;
  for (size_t i = 0; i < len; i++)
    if (b[i])
      return false;
  return true;
}

CUresult cuCheckpointProcessGetState(int pid, CUprocessState *state) {
  struct gpum__sim_node *n;
  struct gpum__sim_ckpt *c;
  if (!state)
    return CUDA_ERROR_INVALID_VALUE;
  CUresult r = enter(pid, &n, &c);
  if (r != CUDA_SUCCESS)
    return r;
  *state = (CUprocessState)c->state;
  gpum__sim_unlock(n);
  return CUDA_SUCCESS;
}

CUresult cuCheckpointProcessGetRestoreThreadId(int pid, int *tid) {
  struct gpum__sim_node *n;
  struct gpum__sim_ckpt *c;
  if (!tid)
    return CUDA_ERROR_INVALID_VALUE;
  CUresult r = enter(pid, &n, &c);
  if (r != CUDA_SUCCESS)
    return r;
  *tid = c->tid;
  gpum__sim_unlock(n);
  return CUDA_SUCCESS;
}

CUresult cuCheckpointProcessLock(int pid, CUcheckpointLockArgs *args) {
  if (args && (args->reserved0 || !zero(args->reserved1, sizeof args->reserved1)))
    return CUDA_ERROR_INVALID_VALUE;
  return request(pid, OP_LOCK, args ? args->timeoutMs : 0, NULL, 0);
}

CUresult cuCheckpointProcessCheckpoint(int pid, CUcheckpointCheckpointArgs *args) {
  if (args && !zero(args->reserved, sizeof args->reserved))
    return CUDA_ERROR_INVALID_VALUE;
  return request(pid, OP_CHECKPOINT, 0, NULL, 0);
}

CUresult cuCheckpointProcessUnlock(int pid, CUcheckpointUnlockArgs *args) {
  if (args && !zero(args->reserved, sizeof args->reserved))
    return CUDA_ERROR_INVALID_VALUE;
  return request(pid, OP_UNLOCK, 0, NULL, 0);
}

/* The node device whose CUDA UUID is u (an NVIDIA GPU or MIG instance), or -1. */
static int device_of_uuid(const struct gpum__sim_node *n, const CUuuid *u) {
  for (unsigned d = 0; d < n->spec.device_count; d++) {
    CUuuid v;
    if (n->spec.dev[d].vendor == GPUM__SIM_V_NVIDIA && gpum__sim_cu_uuid(n, d, &v) &&
        memcmp(v.bytes, u->bytes, sizeof v.bytes) == 0)
      return (int)d;
  }
  return -1;
}

/* The device map of the pairs: CUDA_ERROR_INVALID_VALUE for a UUID that is no GPU of the node
 * or a GPU named twice on either side. */
static CUresult pairs_map(const CUcheckpointGpuPair *pairs, unsigned count, uint32_t *map,
                          uint32_t *given) {
  struct gpum__sim_node *n = gpum__sim_attached();
  if (!n)
    return CUDA_ERROR_NOT_INITIALIZED;
  uint32_t taken = 0;
  for (unsigned d = 0; d < GPUM__SIM_MAX_DEVICES; d++)
    map[d] = d;
  *given = 0;
  for (unsigned i = 0; i < count; i++) {
    int from = device_of_uuid(n, &pairs[i].oldUuid), to = device_of_uuid(n, &pairs[i].newUuid);
    if (from < 0 || to < 0)
      return gpum__sim_err(CUDA_ERROR_INVALID_VALUE, "GPU pair %u names an unknown GPU", i);
    if ((*given & (1u << from)) || (taken & (1u << to)))
      return gpum__sim_err(CUDA_ERROR_INVALID_VALUE, "GPU pair %u names a GPU twice", i);
    *given |= 1u << from;
    taken |= 1u << to;
    map[from] = (uint32_t)to;
  }
  return CUDA_SUCCESS;
}

CUresult cuCheckpointProcessRestore(int pid, CUcheckpointRestoreArgs *args) {
  if (args &&
      (!zero(args->reserved, sizeof args->reserved) || args->reserved1 ||
       (args->gpuPairsCount && !args->gpuPairs) || args->gpuPairsCount > GPUM__SIM_MAX_DEVICES))
    return CUDA_ERROR_INVALID_VALUE;
  if (!args || args->gpuPairsCount == 0)
    return request(pid, OP_RESTORE, 0, NULL, 0);
  CUresult r = gpum__sim_cu_check(true, GPUM__SIM_CU_LIVE);
  if (r != CUDA_SUCCESS)
    return r;
  uint32_t map[GPUM__SIM_MAX_DEVICES], given;
  if ((r = pairs_map(args->gpuPairs, args->gpuPairsCount, map, &given)) != CUDA_SUCCESS)
    return r;
  return request(pid, OP_RESTORE, 0, map, given);
}
