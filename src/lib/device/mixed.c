/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The backend auto opens: every vendor backend whose library loads and finds a device, behind
 * one list. Each vendor's devices keep their order and come in a fixed vendor order (NVIDIA
 * through NVML, then AMD through ROCm SMI, then Intel through Level Zero), so an index names
 * the same device on every run of the same node, and on a node with NVIDIA GPUs the first
 * indexes are nvidia-smi's. Each vendor backend runs in a session of its own (its own lock,
 * retry policy and driver state); a call on device i goes to the session of i's vendor with
 * i's number there, which gpum_device_info_t.vendor_index gives.
 *
 * Device events come from the vendors that deliver them (NVML's XIDs and ECC errors; the
 * others answer ENOTSUP): with one such vendor its wait is used as it is, with several each is
 * waited on in turn for a short slice until the caller's timeout.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gpum/error.h>
#include <gpum/log.h>

#include "device/device_internal.h"
#include "os_internal.h"

#define EVENT_SLICE_MS 50u /* several vendors with events: how long each is waited on in turn */

typedef struct {
  unsigned child; /* index into mixed_t.child */
  unsigned local; /* the device's index in that child's session */
} slot_t;

struct gpum__mixed {
  unsigned nchild;
  gpum_device_session_t *child[GPUM__MIXED_MAX];
  slot_t *slot;                 /* one per device of the list */
  bool events[GPUM__MIXED_MAX]; /* events_enable succeeded on the child */
  unsigned next_event;          /* several vendors with events: whose turn it is */
};

static struct gpum__mixed *mixed_of(gpum_device_session_t *s) {
  return (struct gpum__mixed *)s->impl;
}

static void free_mixed(struct gpum__mixed *m) {
  if (!m)
    return;
  for (unsigned i = 0; i < m->nchild; i++)
    gpum_device_close(m->child[i]);
  free(m->slot);
  free(m);
}

int gpum__mixed_adopt(gpum_device_session_t *s, gpum_device_session_t *const *children,
                      unsigned n) {
  if (n == 0 || n > GPUM__MIXED_MAX)
    return gpum_error(GPUM_EINVAL, "a device list of %u vendor sessions (1..%d)", n,
                      GPUM__MIXED_MAX);
  struct gpum__mixed *m = calloc(1, sizeof *m);
  unsigned total = 0;
  for (unsigned i = 0; i < n; i++)
    total += gpum_device_count(children[i]);
  if (m)
    m->slot = calloc(total ? total : 1, sizeof *m->slot);
  if (!m || !m->slot) {
    free(m);
    return gpum_error(GPUM_ENOMEM, "cannot allocate the device list");
  }
  unsigned k = 0;
  size_t off = 0, voff = 0;
  s->detail[0] = '\0';
  s->driver_version[0] = '\0';
  s->simulated = false;
  for (unsigned i = 0; i < n; i++) {
    gpum_device_session_t *c = children[i];
    m->child[i] = c;
    for (unsigned j = 0; j < c->count; j++)
      m->slot[k++] = (slot_t){i, j};
    int w = snprintf(s->detail + off, sizeof s->detail - off, "%s%s: %s", i ? "; " : "",
                     c->ops->name, c->detail);
    off = w < 0 ? off : off + (size_t)w < sizeof s->detail ? off + (size_t)w : sizeof s->detail - 1;
    if (c->driver_version[0]) {
      w = snprintf(s->driver_version + voff, sizeof s->driver_version - voff, "%s%s %s",
                   voff ? "; " : "", c->ops->name, c->driver_version);
      voff = w < 0                                         ? voff
             : voff + (size_t)w < sizeof s->driver_version ? voff + (size_t)w
                                                           : sizeof s->driver_version - 1;
    }
    s->simulated = s->simulated || c->simulated;
  }
  /* One vendor: its version as it is, as a session of that backend alone would say it. */
  if (n == 1)
    snprintf(s->driver_version, sizeof s->driver_version, "%s", children[0]->driver_version);
  m->nchild = n;
  s->impl = m;
  s->count = total;
  return 0;
}

gpum_backend_kind_t gpum__mixed_kind(const gpum_device_session_t *s) {
  const struct gpum__mixed *m = (const struct gpum__mixed *)s->impl;
  return m && m->nchild == 1 ? m->child[0]->ops->kind : GPUM_BACKEND_MIXED;
}

static int mixed_open(gpum_device_session_t *s, const gpum_device_open_opts_t *opts) {
  (void)s, (void)opts;
  return gpum_error(GPUM_EINVAL, "the mixed backend is opened by auto only");
}

static void mixed_close(gpum_device_session_t *s) {
  free_mixed(mixed_of(s));
  s->impl = NULL;
}

static int mixed_get_info(gpum_device_session_t *s, unsigned index, gpum_device_info_t *out) {
  const slot_t *sl = &mixed_of(s)->slot[index];
  int rc = gpum_device_get_info(mixed_of(s)->child[sl->child], sl->local, out);
  out->index = index;
  out->vendor_index = sl->local;
  return rc;
}

static int mixed_sample(gpum_device_session_t *s, unsigned index, gpum_device_sample_t *out) {
  const slot_t *sl = &mixed_of(s)->slot[index];
  return gpum_device_sample(mixed_of(s)->child[sl->child], sl->local, out);
}

static int mixed_memory_health(gpum_device_session_t *s, unsigned index,
                               gpum_memory_health_t *out) {
  const slot_t *sl = &mixed_of(s)->slot[index];
  return gpum_device_memory_health(mixed_of(s)->child[sl->child], sl->local, out);
}

static int mixed_processes(gpum_device_session_t *s, unsigned index, gpum__rawproc_t **out,
                           size_t *n) {
  const slot_t *sl = &mixed_of(s)->slot[index];
  gpum_device_session_t *c = mixed_of(s)->child[sl->child];
  gpum__session_lock(c);
  int rc = c->ops->processes(c, sl->local, out, n);
  gpum__session_unlock(c);
  return rc;
}

static int mixed_process_util(gpum_device_session_t *s, unsigned index, uint64_t since_us,
                              gpum_process_util_t **out, size_t *n) {
  const slot_t *sl = &mixed_of(s)->slot[index];
  gpum_device_session_t *c = mixed_of(s)->child[sl->child];
  if (!c->ops->process_util)
    return gpum_error(GPUM_ENOTSUP, "the %s backend gives no per-process utilisation",
                      c->ops->name);
  gpum__session_lock(c);
  int rc = c->ops->process_util(c, sl->local, since_us, out, n);
  gpum__session_unlock(c);
  return rc;
}

/* The list's index of child's device local. */
static unsigned global_index(const struct gpum__mixed *m, unsigned child, unsigned local) {
  unsigned k = 0;
  for (unsigned i = 0; i < child; i++)
    k += m->child[i]->count;
  return k + local;
}

static int mixed_events_enable(gpum_device_session_t *s) {
  struct gpum__mixed *m = mixed_of(s);
  bool any = false;
  for (unsigned i = 0; i < m->nchild; i++) {
    if (m->events[i]) {
      any = true;
      continue;
    }
    int rc = gpum_device_events_enable(m->child[i]);
    if (rc == 0)
      m->events[i] = any = true;
    else if (rc != GPUM_ENOTSUP)
      return rc;
  }
  if (!any)
    return gpum_error(GPUM_ENOTSUP, "no device of this node delivers events");
  return 0;
}

static int mixed_event_wait(gpum_device_session_t *s, gpum_device_event_t *ev,
                            unsigned timeout_ms) {
  struct gpum__mixed *m = mixed_of(s);
  unsigned with[GPUM__MIXED_MAX], nwith = 0;
  for (unsigned i = 0; i < m->nchild; i++)
    if (m->events[i])
      with[nwith++] = i;
  if (nwith == 0)
    return gpum_error(GPUM_ESTATE, "device events are not enabled");
  if (nwith == 1) {
    int rc = gpum_device_event_wait(m->child[with[0]], ev, timeout_ms);
    if (rc == 0)
      ev->device = global_index(m, with[0], ev->device);
    return rc;
  }
  uint64_t end = gpum__os_mono_ns() + (uint64_t)timeout_ms * 1000000u;
  for (;;) {
    unsigned c = with[m->next_event++ % nwith];
    uint64_t now = gpum__os_mono_ns();
    unsigned left = now >= end ? 0 : (unsigned)((end - now) / 1000000u);
    int rc = gpum_device_event_wait(m->child[c], ev, left < EVENT_SLICE_MS ? left : EVENT_SLICE_MS);
    if (rc == 0) {
      ev->device = global_index(m, c, ev->device);
      return 0;
    }
    if (rc != GPUM_ETIMEDOUT)
      return rc;
    if (gpum__os_mono_ns() >= end)
      return gpum_error(GPUM_ETIMEDOUT, "no device event within %u ms", timeout_ms);
  }
}

const struct gpum__backend gpum__backend_mixed = {
    .name = "mixed",
    .kind = GPUM_BACKEND_MIXED,
    .open = mixed_open,
    .close = mixed_close,
    .get_info = mixed_get_info,
    .sample = mixed_sample,
    .memory_health = mixed_memory_health,
    .processes = mixed_processes,
    .process_util = mixed_process_util,
    .events_enable = mixed_events_enable,
    .event_wait = mixed_event_wait,
};
