/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A listener that cannot accept (accept_internal.h): pause, and say so without flooding the
 * log. Out of descriptors, gpumd used to write one line per 100 ms pause, ten a second for as
 * long as it lasted; now the first failure is logged, then at most one line per
 * GPUMD_ACCEPT_LOG_S with the failures it stands for, and one when accepting works again.
 */
#include <errno.h>
#include <string.h>

#include <gpum/error.h>
#include <gpum/log.h>

#include "accept_internal.h"
#include "os_internal.h"
#include "gpumd.h"
#include "obs_internal.h"

/* The guards in use, found by their listener: the error callback gets the listener's own
 * argument, which for evhttp's listener is evhttp's. */
#define MAX_GUARDS 4
static gpumd_accept_guard_t *guards[MAX_GUARDS];

static void on_resume(evutil_socket_t fd, short what, void *arg) {
  (void)fd, (void)what;
  gpumd_accept_guard_t *g = arg;
  if (g->listener)
    evconnlistener_enable(g->listener);
}

static void on_error(struct evconnlistener *l, void *arg) {
  (void)arg;
  int e = errno;
  gpumd_accept_guard_t *g = NULL;
  for (unsigned i = 0; i < MAX_GUARDS && !g; i++)
    if (guards[i] && guards[i]->listener == l)
      g = guards[i];
  if (!g)
    return;
  g->failures++;
  g->unlogged++;
  gpumd_obs_changed(g->d->obs); /* /metrics counts it */
  g->failing = true;
  uint64_t now = gpum__os_mono_ns();
  if (g->logged_ns == 0 || now - g->logged_ns >= (uint64_t)GPUMD_ACCEPT_LOG_S * 1000000000ull) {
    if (g->logged_ns == 0)
      gpum_log(GPUM_LOG_WARN, "gpumd",
               "%s: accept failed: %s; accepting pauses %d ms after each failure (this is "
               "logged at most every %d s)",
               g->what, strerror(e), GPUMD_ACCEPT_PAUSE_MS, GPUMD_ACCEPT_LOG_S);
    else
      gpum_log(GPUM_LOG_WARN, "gpumd", "%s: accept failed: %s (%llu failures since the last line)",
               g->what, strerror(e), (unsigned long long)g->unlogged);
    g->logged_ns = now ? now : 1;
    g->unlogged = 0;
  }
  evconnlistener_disable(l);
  struct timeval tv = {.tv_sec = 0, .tv_usec = GPUMD_ACCEPT_PAUSE_MS * 1000};
  event_add(g->resume, &tv);
}

void gpumd__accept_guard_recovered(gpumd_accept_guard_t *g) {
  g->failing = false;
  gpum_log(GPUM_LOG_INFO, "gpumd", "%s: accepting again (%llu failed accepts since start)", g->what,
           (unsigned long long)g->failures);
  g->unlogged = 0;
  g->logged_ns = 0; /* the next run of failures is logged at once */
}

int gpumd_accept_guard_init(gpumd_accept_guard_t *g, struct gpumd *d, struct evconnlistener *l,
                            const char *what) {
  memset(g, 0, sizeof *g);
  g->d = d;
  g->what = what;
  g->listener = l;
  unsigned slot = 0;
  while (slot < MAX_GUARDS && guards[slot])
    slot++;
  if (slot == MAX_GUARDS)
    return gpum_error(GPUM_ENOSPC, "more than %d listeners", MAX_GUARDS);
  g->resume = evtimer_new(d->base, on_resume, g);
  if (!g->resume)
    return gpum_error(GPUM_ENOMEM, "out of memory");
  guards[slot] = g;
  evconnlistener_set_error_cb(l, on_error);
  return 0;
}

void gpumd_accept_guard_free(gpumd_accept_guard_t *g) {
  for (unsigned i = 0; i < MAX_GUARDS; i++)
    if (guards[i] == g)
      guards[i] = NULL;
  if (g->resume)
    event_free(g->resume);
  g->resume = NULL;
  g->listener = NULL;
}
