/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test program: enables device events, writes READY_FILE, then prints each event as
 *   event kind=xid device=3 xid=79
 *   event kind=gpu_lost device=3 xid=0
 * until COUNT events arrived (exit 0) or TIMEOUT_MS passed without one ("timeout", exit 3).
 * Afterwards each device that had an event is sampled: "after device=3 rc=ELOST".
 * usage: device_events READY_FILE COUNT TIMEOUT_MS
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/device.h>
#include <gpum/error.h>

static const char *kind_name(gpum_device_event_kind_t k) {
  switch (k) {
  case GPUM_DEVEV_XID:
    return "xid";
  case GPUM_DEVEV_ECC_SINGLE:
    return "ecc_single";
  case GPUM_DEVEV_ECC_DOUBLE:
    return "ecc_double";
  case GPUM_DEVEV_GPU_LOST:
    return "gpu_lost";
  }
  return "unknown";
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: device_events READY_FILE COUNT TIMEOUT_MS\n");
    return 2;
  }
  int count = (int)strtol(argv[2], NULL, 10);
  unsigned timeout = (unsigned)strtoul(argv[3], NULL, 10);
  gpum_device_open_opts_t o;
  gpum_device_open_opts_init(&o);
  o.backend = GPUM_BACKEND_NVML;
  gpum_device_session_t *s;
  int rc = gpum_device_open(&o, &s);
  if (rc) {
    printf("open rc=%s msg=\"%s\"\n", gpum_err_name(rc), gpum_last_error());
    return 1;
  }
  gpum_device_event_t ev;
  rc = gpum_device_event_wait(s, &ev, 0);
  printf("wait-before-enable rc=%s\n", gpum_err_name(rc));
  rc = gpum_device_events_enable(s);
  printf("enable rc=%s\n", gpum_err_name(rc));
  fflush(stdout);
  FILE *f = fopen(argv[1], "w");
  if (!f)
    return 1;
  fprintf(f, "ready\n");
  fclose(f);
  unsigned seen[64];
  int nseen = 0;
  for (int got = 0; got < count;) {
    rc = gpum_device_event_wait(s, &ev, timeout);
    if (rc == GPUM_ETIMEDOUT) {
      printf("timeout\n");
      gpum_device_close(s);
      return 3;
    }
    if (rc) {
      printf("wait rc=%s msg=\"%s\"\n", gpum_err_name(rc), gpum_last_error());
      gpum_device_close(s);
      return 1;
    }
    printf("event kind=%s device=%u xid=%llu\n", kind_name(ev.kind), ev.device,
           (unsigned long long)ev.xid);
    fflush(stdout);
    if (nseen < 64)
      seen[nseen++] = ev.device;
    got++;
  }
  for (int i = 0; i < nseen; i++) {
    gpum_device_sample_t smp;
    rc = gpum_device_sample(s, seen[i], &smp);
    printf("after device=%u rc=%s\n", seen[i], gpum_err_name(rc));
  }
  /* A short wait now times out cleanly (no duplicate GPU_LOST). */
  rc = gpum_device_event_wait(s, &ev, 50);
  printf("final rc=%s kind=%s\n", gpum_err_name(rc), rc ? "none" : kind_name(ev.kind));
  gpum_device_close(s);
  return 0;
}
