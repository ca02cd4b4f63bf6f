/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test program: one session shared by threads. A waiter thread blocks in
 * gpum_device_event_wait (up to 3 s) while 4 threads sample and list processes of every
 * device 50 times each; the samplers must all finish while the waiter is still blocked
 * (waiting must not hold the session lock). Prints "ok samplers=4 rounds=50 waiter=blocked"
 * and exits 0, or says what went wrong and exits 1.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include <gpum/device.h>
#include <gpum/error.h>

static gpum_device_session_t *s;
static atomic_int waiter_done, failures;

static void *waiter(void *arg) {
  (void)arg;
  gpum_device_event_t ev;
  int rc = gpum_device_event_wait(s, &ev, 3000);
  if (rc != GPUM_ETIMEDOUT && rc != 0)
    atomic_fetch_add(&failures, 1);
  atomic_store(&waiter_done, 1);
  return NULL;
}

static void *sampler(void *arg) {
  (void)arg;
  for (int r = 0; r < 50; r++) {
    for (unsigned i = 0; i < gpum_device_count(s); i++) {
      gpum_device_sample_t smp;
      gpum_process_t procs[8];
      size_t n;
      if (gpum_device_sample(s, i, &smp) != 0 || gpum_device_processes(s, i, procs, 8, &n) != 0)
        atomic_fetch_add(&failures, 1);
    }
  }
  return NULL;
}

int main(void) {
  gpum_device_open_opts_t o;
  gpum_device_open_opts_init(&o);
  o.backend = GPUM_BACKEND_NVML;
  int rc = gpum_device_open(&o, &s);
  if (rc == 0)
    rc = gpum_device_events_enable(s);
  if (rc) {
    printf("setup rc=%s msg=\"%s\"\n", gpum_err_name(rc), gpum_last_error());
    return 1;
  }
  pthread_t w, t[4];
  pthread_create(&w, NULL, waiter, NULL);
  for (int i = 0; i < 4; i++)
    pthread_create(&t[i], NULL, sampler, NULL);
  for (int i = 0; i < 4; i++)
    pthread_join(t[i], NULL);
  int blocked = !atomic_load(&waiter_done);
  pthread_join(w, NULL);
  gpum_device_close(s);
  if (!blocked || atomic_load(&failures)) {
    printf("FAIL waiter=%s failures=%d\n", blocked ? "blocked" : "returned",
           atomic_load(&failures));
    return 1;
  }
  printf("ok samplers=4 rounds=50 waiter=blocked\n");
  return 0;
}
