/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/monitor's measuring program: what a gpum_monitor_t costs. Run against a simulated node
 * (GPUM_SIM_NODE). Modes:
 *
 *   sampler_cpu monitor HZ SECONDS   CPU time of the process (all monitor threads) while a
 *                                    monitor samples every device at HZ for SECONDS of wall time
 *   sampler_cpu loop HZ SECONDS      baseline: the same number of gpum_device_sample calls
 *                                    (devices x HZ x SECONDS) in a plain loop on one session
 *   sampler_cpu idle 0 SECONDS       baseline: a process that only sleeps
 *   sampler_cpu memory HZ SECONDS    heap allocated by a monitor keeping SECONDS of history at
 *                                    HZ (mallinfo2: allocated, whether touched or not)
 *   sampler_cpu fill 0 RECORDS       RSS growth of a monitor whose rings hold RECORDS samples
 *                                    per device, once they are full (1 ms interval)
 *   sampler_cpu cgmonitor HZ SECONDS under valgrind --tool=callgrind: as monitor, the counts
 *                                    zeroed once the monitor runs (after its first rounds) and
 *                                    dumped after SECONDS, so the dump holds the steady state
 *   sampler_cpu cgloop HZ SECONDS    under callgrind: the loop's calls alone (counts zeroed
 *                                    after one call per device, dumped after the others)
 *
 * The cg modes need valgrind's callgrind.h when built (they fail with a message without it);
 * bench/monitor/run.sh divides the dump's instruction count by the samples printed.
 *
 * Prints one line of key=value pairs. CPU figures come from CLOCK_PROCESS_CPUTIME_ID, wall time
 * from CLOCK_MONOTONIC; "share" is CPU seconds per wall second in percent of one core.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gpum/device.h>
#include <gpum/monitor.h>

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define HAVE_CALLGRIND 1
#endif
#endif

static double now_s(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

static long rss_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kib = -1;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "VmRSS:", 6) == 0)
      kib = strtol(line + 6, NULL, 10);
  if (f)
    fclose(f);
  return kib;
}

static size_t heap_bytes(void) {
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

static gpum_monitor_t *make(unsigned interval_ms, unsigned history_s) {
  gpum_monitor_opts_t o;
  gpum_monitor_opts_init(&o);
  o.interval_ms = interval_ms;
  o.history_seconds = history_s;
  gpum_monitor_t *mon = NULL;
  if (gpum_monitor_create(NULL, &o, &mon) != 0) {
    fprintf(stderr, "sampler_cpu: cannot create the monitor (is GPUM_SIM_NODE set?)\n");
    exit(1);
  }
  return mon;
}

static uint64_t samples_taken(gpum_monitor_t *mon) {
  uint64_t samples = 0;
  for (unsigned i = 0; i < gpum_monitor_device_count(mon); i++) {
    unsigned dev = 0;
    uint64_t n = 0;
    gpum_monitor_device_index(mon, i, &dev);
    gpum_monitor_sample_count(mon, dev, &n);
    samples += n;
  }
  return samples;
}

static int run_monitor(double hz, double secs) {
  gpum_monitor_t *mon = make((unsigned)(1000.0 / hz + 0.5), 3600);
  double w0 = now_s(CLOCK_MONOTONIC), c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
  if (gpum_monitor_start(mon) != 0)
    return 1;
  sleep_s(secs);
  double w1 = now_s(CLOCK_MONOTONIC), c1 = now_s(CLOCK_PROCESS_CPUTIME_ID);
  uint64_t samples = samples_taken(mon);
  printf("mode=monitor devices=%u hz=%g wall_s=%.3f cpu_s=%.6f share_pct=%.4f samples=%llu\n",
         gpum_monitor_device_count(mon), hz, w1 - w0, c1 - c0, 100.0 * (c1 - c0) / (w1 - w0),
         (unsigned long long)samples);
  gpum_monitor_destroy(mon);
  return 0;
}

#ifdef HAVE_CALLGRIND
/* The monitor's steady state under callgrind: started, given two rounds (the static info, the
 * first samples, the event registration), then counted for secs. */
static int run_cg_monitor(double hz, double secs) {
  gpum_monitor_t *mon = make((unsigned)(1000.0 / hz + 0.5), 3600);
  if (gpum_monitor_start(mon) != 0)
    return 1;
  sleep_s(2.0 / hz + 0.5);
  uint64_t s0 = samples_taken(mon);
  CALLGRIND_ZERO_STATS;
  sleep_s(secs);
  CALLGRIND_DUMP_STATS_AT("steady");
  uint64_t s1 = samples_taken(mon);
  printf("mode=cgmonitor devices=%u hz=%g samples=%llu\n", gpum_monitor_device_count(mon), hz,
         (unsigned long long)(s1 - s0));
  gpum_monitor_destroy(mon);
  return 0;
}

/* The driver's calls alone: devices x hz x secs gpum_device_sample calls, one per device first
 * (outside the count). */
static int run_cg_loop(double hz, double secs) {
  gpum_device_session_t *s = NULL;
  if (gpum_device_open(NULL, &s) != 0) {
    fprintf(stderr, "sampler_cpu: cannot open the device layer\n");
    return 1;
  }
  unsigned n = gpum_device_count(s);
  unsigned long calls = (unsigned long)(n * hz * secs + 0.5);
  gpum_device_sample_t smp;
  for (unsigned k = 0; k < n; k++)
    gpum_device_sample(s, k, &smp);
  CALLGRIND_ZERO_STATS;
  for (unsigned long k = 0; k < calls; k++)
    gpum_device_sample(s, (unsigned)(k % n), &smp);
  CALLGRIND_DUMP_STATS_AT("steady");
  printf("mode=cgloop devices=%u samples=%lu\n", n, calls);
  gpum_device_close(s);
  return 0;
}
#endif

static int run_loop(double hz, double secs) {
  gpum_device_session_t *s = NULL;
  if (gpum_device_open(NULL, &s) != 0) {
    fprintf(stderr, "sampler_cpu: cannot open the device layer\n");
    return 1;
  }
  unsigned n = gpum_device_count(s);
  unsigned long calls = (unsigned long)(n * hz * secs + 0.5);
  double c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
  for (unsigned long k = 0; k < calls; k++) {
    gpum_device_sample_t smp;
    gpum_device_sample(s, (unsigned)(k % n), &smp);
  }
  double c1 = now_s(CLOCK_PROCESS_CPUTIME_ID);
  /* the share is taken over the wall time the monitor would have needed for those calls */
  printf("mode=loop devices=%u hz=%g wall_s=%.3f cpu_s=%.6f share_pct=%.4f samples=%lu\n", n, hz,
         secs, c1 - c0, 100.0 * (c1 - c0) / secs, calls);
  gpum_device_close(s);
  return 0;
}

static int run_idle(double secs) {
  double w0 = now_s(CLOCK_MONOTONIC), c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
  sleep_s(secs);
  double w1 = now_s(CLOCK_MONOTONIC), c1 = now_s(CLOCK_PROCESS_CPUTIME_ID);
  printf("mode=idle wall_s=%.3f cpu_s=%.6f share_pct=%.4f\n", w1 - w0, c1 - c0,
         100.0 * (c1 - c0) / (w1 - w0));
  return 0;
}

static int run_memory(double hz, double secs) {
  size_t h0 = heap_bytes();
  gpum_monitor_t *mon = make((unsigned)(1000.0 / hz + 0.5), (unsigned)secs);
  size_t h1 = heap_bytes();
  printf("mode=memory devices=%u hz=%g history_s=%g heap_bytes=%zu\n",
         gpum_monitor_device_count(mon), hz, secs, h1 - h0);
  gpum_monitor_destroy(mon);
  return 0;
}

/* RSS growth with full rings: a 1 ms interval and RECORDS/1000 s of history, run until every
 * ring has wrapped. Thread stacks and the driver's own state are part of the figure. */
static int run_fill(double records) {
  unsigned hist_s = (unsigned)(records / 1000.0 + 0.5);
  long r0 = rss_kib();
  gpum_monitor_t *mon = make(1, hist_s);
  unsigned ndev = gpum_monitor_device_count(mon);
  if (gpum_monitor_start(mon) != 0)
    return 1;
  double deadline = now_s(CLOCK_MONOTONIC) + 60;
  for (;;) {
    uint64_t least = UINT64_MAX;
    for (unsigned i = 0; i < ndev; i++) {
      unsigned dev = 0;
      uint64_t n = 0;
      gpum_monitor_device_index(mon, i, &dev);
      gpum_monitor_sample_count(mon, dev, &n);
      least = n < least ? n : least;
    }
    if (least >= (uint64_t)hist_s * 1000u || now_s(CLOCK_MONOTONIC) > deadline)
      break;
    sleep_s(0.05);
  }
  long r1 = rss_kib();
  printf("mode=fill devices=%u records_per_device=%u rss_delta_bytes=%ld\n", ndev, hist_s * 1000u,
         (r1 - r0) * 1024);
  gpum_monitor_destroy(mon);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr,
            "usage: sampler_cpu monitor|loop|idle|memory|fill|cgmonitor|cgloop HZ SECONDS\n");
    return 2;
  }
  double hz = strtod(argv[2], NULL), secs = strtod(argv[3], NULL);
  if (!strcmp(argv[1], "monitor") && hz > 0)
    return run_monitor(hz, secs);
  if (!strcmp(argv[1], "loop") && hz > 0)
    return run_loop(hz, secs);
  if (!strcmp(argv[1], "idle"))
    return run_idle(secs);
  if (!strcmp(argv[1], "memory") && hz > 0)
    return run_memory(hz, secs);
  if (!strcmp(argv[1], "fill"))
    return run_fill(secs);
  if ((!strcmp(argv[1], "cgmonitor") || !strcmp(argv[1], "cgloop")) && hz > 0) {
#ifdef HAVE_CALLGRIND
    return argv[1][2] == 'm' ? run_cg_monitor(hz, secs) : run_cg_loop(hz, secs);
#else
    fprintf(stderr, "sampler_cpu: built without valgrind/callgrind.h: no instruction counts\n");
    return 3;
#endif
  }
  fprintf(stderr, "sampler_cpu: bad arguments\n");
  return 2;
}
