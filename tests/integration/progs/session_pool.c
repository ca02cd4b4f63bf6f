/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test program for a pool attached to a reservation session: reserves BYTES on gpumd's device
 * 0 (socket from GPUM_SOCKET), makes a pool over the simulated CUDA driver on that device,
 * allocates and frees COUNT blocks of 1 GiB (the pool then caches them), writes "cached N" to
 * READY_FILE, and serves the session until a pressure event arrives (20 s at most). Prints
 * "pressure trimmed=T reserved=R" (R: the pool's reserved bytes after the trim) and exits 0,
 * or 1 on any failure. usage: session_pool BYTES COUNT READY_FILE
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gpum/gpum.h>

static int pressure_seen;
static uint64_t trimmed;

static void on_event(const gpum_session_event_t *ev, void *user) {
  (void)user;
  if (ev->kind == GPUM_SESSION_EV_PRESSURE && ev->device == 0) {
    pressure_seen = 1;
    trimmed += ev->trimmed;
  }
}

static int fail(const char *what, int rc) {
  fprintf(stderr, "session_pool: %s: %s: %s\n", what, gpum_err_name(rc), gpum_last_error());
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: session_pool BYTES COUNT READY_FILE\n");
    return 2;
  }
  uint64_t bytes = 0;
  int count = (int)strtol(argv[2], NULL, 10);
  if (gpum_size_parse(argv[1], &bytes) != 0 || count <= 0 || count > 64)
    return 2;
  gpum_session_opts_t so;
  gpum_session_opts_init(&so);
  so.on_event = on_event;
  gpum_session_t *s = NULL;
  int rc = gpum_session_open(&so, &s);
  if (rc != 0)
    return fail("open", rc);
  const char *dev0[] = {"0"};
  gpum_reserve_req_t req = {.bytes_per_gpu = bytes, .devices = dev0, .ndevices = 1};
  if ((rc = gpum_session_reserve(s, &req, 10000)) != 0)
    return fail("reserve", rc);
  gpum_pool_source_t *src = NULL;
  gpum_pool_t *pool = NULL;
  if ((rc = gpum_pool_source_cuda(0, &src)) != 0)
    return fail("cuda source", rc);
  gpum_pool_opts_t po;
  gpum_pool_opts_init(&po);
  if ((rc = gpum_pool_create(src, &po, &pool)) != 0)
    return fail("pool", rc);
  if ((rc = gpum_session_attach_pool(s, pool, 0)) != 0)
    return fail("attach", rc);
  gpum_devptr_t p[64];
  for (int i = 0; i < count; i++)
    if ((rc = gpum_pool_alloc(pool, 1ull << 30, 0, &p[i])) != 0)
      return fail("alloc", rc);
  for (int i = 0; i < count; i++)
    gpum_pool_free(pool, p[i]);
  gpum_pool_stats_t st;
  gpum_pool_stats(pool, &st);
  FILE *f = fopen(argv[3], "w");
  if (!f)
    return 1;
  fprintf(f, "cached %llu\n", (unsigned long long)st.reserved_bytes.current);
  fclose(f);
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while (!pressure_seen) {
    if ((rc = gpum_session_process(s, 200)) != 0)
      return fail("process", rc);
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (t.tv_sec - t0.tv_sec > 20) {
      fprintf(stderr, "session_pool: no pressure event within 20 s\n");
      return 1;
    }
  }
  gpum_pool_stats(pool, &st);
  printf("pressure trimmed=%llu reserved=%llu\n", (unsigned long long)trimmed,
         (unsigned long long)st.reserved_bytes.current);
  gpum_session_release(s);
  gpum_session_close(s);
  gpum_pool_destroy(pool);
  gpum_pool_source_destroy(src);
  return 0;
}
