/* SPDX-License-Identifier: Apache-2.0 */
/*
 * timeexec: runs a command N times (stdout and stderr to /dev/null) and prints the median,
 * minimum and 90th percentile wall time in microseconds as "median_us=... min_us=... p90_us=...".
 * Used by bench/status/run.sh to time `gpum status --json` beside /bin/true with the same
 * harness, so the fork/exec cost of the harness itself is the same for both. Exits 1 if any run
 * fails.
 */
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static int cmp_u64(const void *a, const void *b) {
  unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
  return x < y ? -1 : x > y;
}

static unsigned long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: timeexec RUNS CMD [ARGS...]\n");
    return 2;
  }
  char *end = NULL;
  long runs = strtol(argv[1], &end, 10);
  if (*end || runs < 1 || runs > 100000) {
    fprintf(stderr, "timeexec: bad RUNS '%s'\n", argv[1]);
    return 2;
  }
  unsigned long long *t = calloc((size_t)runs, sizeof *t);
  if (!t)
    return 1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  for (long i = 0; i < runs; i++) {
    pid_t pid;
    int status;
    unsigned long long t0 = now_ns();
    if (posix_spawn(&pid, argv[2], &fa, NULL, argv + 2, environ) != 0 ||
        waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "timeexec: run %ld of %s failed\n", i, argv[2]);
      return 1;
    }
    t[i] = now_ns() - t0;
  }
  qsort(t, (size_t)runs, sizeof *t, cmp_u64);
  printf("median_us=%llu min_us=%llu p90_us=%llu\n", t[runs / 2] / 1000, t[0] / 1000,
         t[(runs * 9) / 10 < runs ? (runs * 9) / 10 : runs - 1] / 1000);
  posix_spawn_file_actions_destroy(&fa);
  free(t);
  return 0;
}
