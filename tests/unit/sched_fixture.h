/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The scheduler tests' fixture (test_sched.c, test_sched_settled.c, test_sched_suspend.c): a
 * scheduler that records its transitions and pressure changes, the options most tests use,
 * devices' views, and the state of a reservation, live or ended. Include after cmocka.h and sched.h
 * or sched_internal.h.
 */
#ifndef GPUM_TEST_SCHED_FIXTURE_H
#define GPUM_TEST_SCHED_FIXTURE_H

/* The pressure callback: on_pressure records up to 16 changes; a test whose pressure changes at
 * will (random runs) defines this NULL before including. */
#ifndef SCHED_FIXTURE_PRESSURE
#define SCHED_FIXTURE_PRESSURE on_pressure
#endif

#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)
#define SEC UINT64_C(1000000000)
#define T0 (UINT64_C(1700000000) * SEC)

/* ---- Fixture: a scheduler recording its transitions ------------------------------------- */

#define MAX_EVENTS 256

typedef struct {
  uint64_t id;
  gpumd_resv_state_t from, to;
  uint64_t time_ns;
  uint64_t mask;
  char reason[GPUMD_RESV_REASON_LEN];
  const gpumd_cause_t *cause;
} event_t;

typedef struct {
  unsigned device;
  gpumd_pressure_t from, to;
} pressure_event_t;

typedef struct {
  gpumd_sched_t *s;
  event_t ev[MAX_EVENTS];
  size_t n_ev;
  pressure_event_t pev[16];
  size_t n_pev;
  unsigned count[GPUMD_RESV_SUSPENDED + 1]; /* transitions into each state, never reset */
} fx_t;

static void on_transition(void *user, const gpumd_cause_t *cause, const gpumd_resv_t *r,
                          gpumd_resv_state_t from, gpumd_resv_state_t to, uint64_t time_ns,
                          const char *reason) {
  fx_t *fx = user;
  assert_true(fx->n_ev < MAX_EVENTS);
  assert_int_equal(r->state, to);
  fx->count[to]++;
  event_t *e = &fx->ev[fx->n_ev++];
  e->id = r->id;
  e->from = from;
  e->to = to;
  e->time_ns = time_ns;
  e->mask = r->device_mask;
  snprintf(e->reason, sizeof(e->reason), "%s", reason);
  e->cause = cause;
}

/* inline: unused where SCHED_FIXTURE_PRESSURE says NULL */
static inline void on_pressure(void *user, unsigned device, double ratio, gpumd_pressure_t from,
                               gpumd_pressure_t to) {
  fx_t *fx = user;
  (void)ratio;
  assert_true(fx->n_pev < 16);
  fx->pev[fx->n_pev++] = (pressure_event_t){device, from, to};
}

/* Options used by most tests: fraction 1.0 and no margin, so capacities are round. */
static void plain_opts(gpumd_sched_opts_t *o) {
  gpumd_sched_opts_init(o);
  o->memory_fraction = 1.0;
  o->safety_margin = 0;
}

static fx_t *fx_new(const gpumd_sched_opts_t *opts) {
  fx_t *fx = test_calloc(1, sizeof(*fx));
  gpumd_sched_callbacks_t cb = {on_transition, SCHED_FIXTURE_PRESSURE, fx};
  assert_int_equal(gpumd_sched_create(opts, &cb, &fx->s), 0);
  return fx;
}

static void fx_free(fx_t *fx) {
  gpumd_sched_destroy(fx->s);
  test_free(fx);
}

/* The last transition of reservation id, or NULL. */
static const event_t *last_event(const fx_t *fx, uint64_t id) {
  for (size_t i = fx->n_ev; i-- > 0;)
    if (fx->ev[i].id == id)
      return &fx->ev[i];
  return NULL;
}

static gpumd_resv_state_t state_of(const fx_t *fx, uint64_t id) {
  const gpumd_resv_t *r = gpumd_sched_find(fx->s, id);
  if (r != NULL)
    return r->state;
  const event_t *e = last_event(fx, id);
  assert_non_null(e);
  return e->to;
}

/* Adds or replaces device index's view: name, total memory, memory used outside reservations,
 * health (ERROR: gone, with an Xid's reason). inline: unused in some tests. */
static inline void set_dev(fx_t *fx, unsigned index, const char *name, uint64_t total,
                           uint64_t unmanaged, gpum_health_t health, uint64_t now) {
  gpumd_sched_device_t d;
  memset(&d, 0, sizeof(d));
  d.index = index;
  snprintf(d.uuid, sizeof(d.uuid), "GPU-test-%u", index);
  snprintf(d.name, sizeof(d.name), "%s", name);
  d.memory_total = total;
  d.memory_used = unmanaged;
  d.unmanaged = unmanaged;
  d.health = health;
  if (health == GPUM_HEALTH_ERROR) {
    snprintf(d.reason, sizeof(d.reason), "XID 79: fallen off the bus");
    d.gone = true;
  }
  assert_int_equal(gpumd_sched_update_device(fx->s, NULL, &d, now), 0);
}

#endif /* GPUM_TEST_SCHED_FIXTURE_H */
