/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/suspend: what suspending and resuming a job costs on the simulated driver (issue 28),
 * beside a plain memcpy of the same bytes measured in the same run (the floor).
 *
 *   suspend [SIZES_MIB [BUDGET_S [CYCLES]]]
 *     SIZES_MIB  comma-separated sizes in MiB (default 1024,8192,32768)
 *     BUDGET_S   seconds the whole run may take (default 120): a size whose estimated time
 *                (the previous size's, scaled by bytes) would pass it is skipped, with a note
 *     CYCLES     suspend/resume cycles per size (default 5); the lowest time of each is given,
 *                as the other benches do (other work on a shared machine only ever adds time)
 *   suspend target BYTES CHUNK   (the target, run by the controller: not for people)
 *
 * Per size the controller (libgpum's gpum/checkpoint.h only, as gpumd will be) first times a
 * memcpy of BYTES between two host buffers it wrote first (passes of at most 1 GiB between two
 * buffers of that size, so that the floor needs 2 GiB, not twice the size; the lowest of 3),
 * frees them, then starts a target: this program again (fork + exec: the controller has loaded
 * CUDA, and a CUDA process is not fork-safe), which allocates BYTES on its device 0 with the
 * simulated driver's cuMemAlloc_v2 in allocations of CHUNK, writes a pattern that depends on
 * each word's index through cuMemcpyHtoD_v2, and waits. Each cycle: suspend = gpum_ckpt_lock +
 * gpum_ckpt_checkpoint, resume = gpum_ckpt_restore (onto the same GPU) + gpum_ckpt_unlock;
 * between them, untimed, the state must be checkpointed and the node must count none of the
 * target's memory (gpum_sim_status). After the last cycle the target reads everything back
 * through cuMemcpyDtoH_v2 and checks the pattern.
 *
 * The simulated device memory is host memory, so a size needs its bytes resident in the target
 * (plus the 1 GiB buffers of the floor before it): a size that MemAvailable cannot hold with a
 * margin is skipped with the reason, never left to the OOM killer.
 *
 * Output: one line per size, "size=... suspend_s=... resume_s=... memcpy_s=... ..." with the
 * ratios to the memcpy and the rates in GB/s (10^9 bytes); exit 1 when a step or the pattern
 * check failed.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gpum/checkpoint.h>
#include <gpum/error.h>
#include <gpum/sim.h>

#include "cuda_abi.h"

#define DECL(name, params) CUresult name params;
GPUM_CUDA_FUNCS(DECL)

#define MIB (1ull << 20)
#define GIB (1ull << 30)
#define STAGE (64 * MIB)  /* the target's host buffer for writing and checking the pattern */
#define CHUNK (256 * MIB) /* the target's allocations: a job holds many, not one */
#define FLOOR_MAX GIB     /* the floor's buffers */
#define MAX_SIZES 16

/* The controller's live target, killed when the controller gives up (it may be locked or
 * checkpointed, and would wait there). */
static pid_t live_target;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
  if (live_target > 0)
    kill(live_target, SIGKILL);
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "bench/suspend (pid %d): ", (int)getpid());
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The pattern's word at index i of the whole size: every word differs from its neighbours, so
 * a page restored at the wrong place, or not at all (zeros), is found. */
static uint64_t word(uint64_t i) {
  return i * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
}

/* ---- the target ---- */

static void stage_fill(uint64_t *buf, uint64_t first, size_t words) {
  for (size_t k = 0; k < words; k++)
    buf[k] = word(first + k);
}

/* Walks the allocations in STAGE pieces: writes the pattern (check false) or checks it. Returns
 * the byte offset of the first wrong word, or UINT64_MAX when all are right. */
static uint64_t walk(const CUdeviceptr *allocs, size_t nalloc, uint64_t chunk, uint64_t bytes,
                     uint64_t *stage, bool check) {
  uint64_t off = 0;
  for (size_t a = 0; a < nalloc; a++) {
    uint64_t len = bytes - off < chunk ? bytes - off : chunk;
    for (uint64_t in = 0; in < len; in += STAGE) {
      size_t n = (size_t)(len - in < STAGE ? len - in : STAGE);
      uint64_t first = (off + in) / 8;
      if (!check) {
        stage_fill(stage, first, n / 8);
        if (cuMemcpyHtoD_v2(allocs[a] + in, stage, n) != CUDA_SUCCESS)
          die("target: cuMemcpyHtoD_v2");
        continue;
      }
      if (cuMemcpyDtoH_v2(stage, allocs[a] + in, n) != CUDA_SUCCESS)
        die("target: cuMemcpyDtoH_v2");
      for (size_t k = 0; k < n / 8; k++)
        if (stage[k] != word(first + k))
          return (first + k) * 8;
    }
    off += len;
  }
  return UINT64_MAX;
}

/* Allocates bytes in allocations of chunk, writes the pattern, says "ready ALLOCS FILL_S" on
 * stdout; then per 'v' on stdin checks the pattern and says "verified 1" or "verified 0 OFFSET";
 * exits at the end of stdin. */
static int target(uint64_t bytes, uint64_t chunk) {
  CUdevice dev;
  CUcontext ctx;
  if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
      cuCtxSetCurrent(ctx))
    die("target: CUDA setup");
  size_t nalloc = (size_t)((bytes + chunk - 1) / chunk);
  CUdeviceptr *allocs = calloc(nalloc, sizeof *allocs);
  uint64_t *stage = malloc(STAGE);
  if (!allocs || !stage)
    die("target: malloc");
  double t0 = now_s();
  for (size_t a = 0; a < nalloc; a++) {
    uint64_t len = bytes - a * chunk < chunk ? bytes - a * chunk : chunk;
    CUresult r = cuMemAlloc_v2(&allocs[a], (size_t)len);
    if (r != CUDA_SUCCESS)
      die("target: cuMemAlloc_v2 of %llu bytes (allocation %zu): CUDA error %d",
          (unsigned long long)len, a, (int)r);
  }
  walk(allocs, nalloc, chunk, bytes, stage, false);
  printf("ready %zu %.3f\n", nalloc, now_s() - t0);
  fflush(stdout);
  int c;
  while ((c = getchar()) != EOF) {
    if (c != 'v')
      die("target: bad command %c", c);
    double t1 = now_s();
    uint64_t bad = walk(allocs, nalloc, chunk, bytes, stage, true);
    if (bad == UINT64_MAX)
      printf("verified 1 %.3f\n", now_s() - t1);
    else
      printf("verified 0 %llu\n", (unsigned long long)bad);
    fflush(stdout);
  }
  return 0;
}

/* ---- the controller ---- */

struct tgt {
  pid_t pid;
  FILE *to, *from;
};

static struct tgt spawn(uint64_t bytes) {
  int a[2], b[2];
  if (pipe(a) || pipe(b))
    die("pipe: %s", strerror(errno));
  struct tgt t = {0};
  t.pid = fork();
  if (t.pid < 0)
    die("fork: %s", strerror(errno));
  if (t.pid == 0) {
    if (dup2(a[0], 0) < 0 || dup2(b[1], 1) < 0)
      _exit(127);
    close(a[0]);
    close(a[1]);
    close(b[0]);
    close(b[1]);
    char sz[32], ch[32];
    snprintf(sz, sizeof sz, "%llu", (unsigned long long)bytes);
    snprintf(ch, sizeof ch, "%llu", (unsigned long long)CHUNK);
    execl("/proc/self/exe", "suspend", "target", sz, ch, (char *)NULL);
    _exit(127);
  }
  live_target = t.pid;
  close(a[0]);
  close(b[1]);
  t.to = fdopen(a[1], "w");
  t.from = fdopen(b[0], "r");
  if (!t.to || !t.from)
    die("fdopen");
  return t;
}

/* One line of the target's into line; dies when it ended first. */
static void target_line(const struct tgt *t, char *line, size_t len) {
  if (!fgets(line, (int)len, t->from))
    die("the target (pid %d) ended without answering", (int)t->pid);
  line[strcspn(line, "\n")] = '\0';
}

static void target_end(struct tgt *t) {
  fclose(t->to); /* the target exits at the end of its input */
  fclose(t->from);
  int st;
  pid_t got = waitpid(t->pid, &st, 0);
  live_target = 0;
  if (got != t->pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
    die("the target (pid %d) did not exit cleanly", (int)t->pid);
}

/* MemAvailable from /proc/meminfo, in bytes (0 when unreadable). */
static uint64_t mem_available(void) {
  FILE *f = fopen("/proc/meminfo", "r");
  if (!f)
    return 0;
  char line[128];
  unsigned long long kib = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
      break;
  fclose(f);
  return (uint64_t)kib * 1024;
}

/* The bytes a size needs free: the target's (its pattern, every page written, and its host
 * buffer) or the floor's two buffers, whichever is more (one after the other), plus a margin
 * for the rest of a shared machine: a quarter of the size, at least 2 GiB. */
static uint64_t bytes_needed(uint64_t bytes) {
  uint64_t floor_bufs = 2 * (bytes < FLOOR_MAX ? bytes : FLOOR_MAX);
  uint64_t peak = bytes + STAGE > floor_bufs ? bytes + STAGE : floor_bufs;
  uint64_t margin = bytes / 4 > 2 * GIB ? bytes / 4 : 2 * GIB;
  return peak + margin;
}

static void *map_touched(size_t len, int byte) {
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    die("mmap of %zu bytes: %s", len, strerror(errno));
  memset(p, byte, len);
  return p;
}

/* The floor: seconds to memcpy bytes between two buffers written first, the lowest of 3. */
static double floor_memcpy(uint64_t bytes) {
  size_t len = (size_t)(bytes < FLOOR_MAX ? bytes : FLOOR_MAX);
  unsigned char *src = map_touched(len, 0x5a), *dst = map_touched(len, 0xa5);
  double best = 0;
  for (int rep = 0; rep < 3; rep++) {
    double t0 = now_s();
    for (uint64_t done = 0; done < bytes; done += len) {
      size_t n = (size_t)(bytes - done < len ? bytes - done : len);
      memcpy(dst, src, n);
      __asm__ volatile("" : : "r"(dst) : "memory"); /* the copy is not optimised away */
    }
    double t = now_s() - t0;
    if (rep == 0 || t < best)
      best = t;
  }
  if (dst[len - 1] != 0x5a)
    die("memcpy did not copy");
  munmap(src, len);
  munmap(dst, len);
  return best;
}

static void step(const char *what, int rc, int pid) {
  if (rc != 0)
    die("%s of pid %d: %s (%s)", what, pid, gpum_err_name(rc), gpum_last_error());
}

static void expect_state(gpum_ckpt *c, int pid, gpum_ckpt_state_t want) {
  gpum_ckpt_state_t s;
  step("gpum_ckpt_state", gpum_ckpt_state(c, pid, &s), pid);
  if (s != want)
    die("pid %d is %s, expected %s", pid, gpum_ckpt_state_name((int)s),
        gpum_ckpt_state_name((int)want));
}

/* The bytes the node counts for pid on all its GPUs (gpum sim status). */
static uint64_t node_bytes(int pid) {
  static gpum_sim_status_t st;
  st.api_version = GPUM_SIM_API_VERSION;
  if (gpum_sim_status(getenv("GPUM_SIM_NODE"), &st) != 0)
    die("gpum_sim_status: %s", gpum_sim_last_error());
  uint64_t sum = 0;
  for (unsigned i = 0; i < st.process_count; i++)
    if (st.processes[i].pid == (uint32_t)pid)
      sum += st.processes[i].bytes;
  return sum;
}

static void size_name(uint64_t bytes, char *out, size_t len) {
  if (bytes % GIB == 0)
    snprintf(out, len, "%lluGiB", (unsigned long long)(bytes / GIB));
  else
    snprintf(out, len, "%lluMiB", (unsigned long long)(bytes / MIB));
}

/* One size: the floor, then cycles suspend/resume of a target holding bytes, its pattern
 * checked after the last. */
static void run_size(gpum_ckpt *c, uint64_t bytes, int cycles) {
  char name[32], line[256];
  size_name(bytes, name, sizeof name);
  double floor_s = floor_memcpy(bytes);
  uint64_t avail = mem_available();
  if (avail < bytes_needed(bytes)) { /* the machine's memory moved while the floor ran */
    printf("size=%s skipped: MemAvailable %.1f GiB after the floor, %.1f GiB needed\n", name,
           (double)avail / GIB, (double)bytes_needed(bytes) / GIB);
    return;
  }
  struct tgt t = spawn(bytes);
  target_line(&t, line, sizeof line);
  size_t nalloc;
  double fill_s;
  if (sscanf(line, "ready %zu %lf", &nalloc, &fill_s) != 2)
    die("the target said \"%s\"", line);
  int pid = (int)t.pid;
  if (node_bytes(pid) < bytes)
    die("the node counts %llu bytes for the target, not its %llu",
        (unsigned long long)node_bytes(pid), (unsigned long long)bytes);
  double sus = 0, res = 0;
  for (int k = 0; k < cycles; k++) {
    double t0 = now_s();
    step("gpum_ckpt_lock", gpum_ckpt_lock(c, pid, 10000), pid);
    step("gpum_ckpt_checkpoint", gpum_ckpt_checkpoint(c, pid), pid);
    double t1 = now_s();
    expect_state(c, pid, GPUM_CKPT_CHECKPOINTED); /* untimed: the suspend really took it */
    if (node_bytes(pid) != 0)
      die("checkpointed, the node still counts %llu bytes for the target",
          (unsigned long long)node_bytes(pid));
    double t2 = now_s();
    step("gpum_ckpt_restore", gpum_ckpt_restore(c, pid, NULL, NULL, 0), pid);
    step("gpum_ckpt_unlock", gpum_ckpt_unlock(c, pid), pid);
    double t3 = now_s();
    expect_state(c, pid, GPUM_CKPT_RUNNING);
    if (k == 0 || t1 - t0 < sus)
      sus = t1 - t0;
    if (k == 0 || t3 - t2 < res)
      res = t3 - t2;
  }
  fputc('v', t.to);
  fflush(t.to);
  target_line(&t, line, sizeof line);
  int ok = 0;
  double check_s = 0;
  if (sscanf(line, "verified %d %lf", &ok, &check_s) != 2 || ok != 1)
    die("size %s: the pattern is wrong after resume (the target said \"%s\")", name, line);
  target_end(&t);
  double gb = (double)bytes / 1e9;
  printf("size=%s allocs=%zu suspend_s=%.6f resume_s=%.6f memcpy_s=%.4f"
         " suspend/memcpy=%.4f resume/memcpy=%.4f suspend_GBps=%.1f resume_GBps=%.1f"
         " memcpy_GBps=%.2f pattern=intact fill_s=%.2f check_s=%.2f\n",
         name, nalloc, sus, res, floor_s, sus / floor_s, res / floor_s, gb / sus, gb / res,
         gb / floor_s, fill_s, check_s);
  fflush(stdout);
}

static uint64_t parse_u64(const char *s, const char *what) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *end || v == 0)
    die("bad %s \"%s\"", what, s);
  return (uint64_t)v;
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "target"))
    return target(parse_u64(argv[2], "size"), parse_u64(argv[3], "chunk"));
  const char *sizes_arg = argc > 1 ? argv[1] : "1024,8192,32768";
  double budget = argc > 2 ? (double)parse_u64(argv[2], "budget") : 120.0;
  int cycles = argc > 3 ? (int)parse_u64(argv[3], "cycles") : 5;
  uint64_t sizes[MAX_SIZES];
  size_t nsizes = 0;
  char *list = strdup(sizes_arg), *save = NULL;
  if (!list)
    die("strdup");
  for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (nsizes == MAX_SIZES)
      die("at most %d sizes", MAX_SIZES);
    sizes[nsizes++] = parse_u64(tok, "size in MiB") * MIB;
  }
  free(list);

  gpum_ckpt *c = NULL;
  step("gpum_ckpt_open", gpum_ckpt_open(NULL, &c), 0);
  double start = now_s(), per_byte = 0; /* seconds per byte of the last size done, all in */
  for (size_t i = 0; i < nsizes; i++) {
    char name[32];
    size_name(sizes[i], name, sizeof name);
    uint64_t avail = mem_available(), need = bytes_needed(sizes[i]);
    if (avail < need) {
      printf("size=%s skipped: MemAvailable %.1f GiB, %.1f GiB needed (the simulated device"
             " memory is host memory)\n",
             name, (double)avail / GIB, (double)need / GIB);
      continue;
    }
    double left = budget - (now_s() - start), estimate = per_byte * (double)sizes[i];
    if (per_byte > 0 && estimate > left) {
      printf("size=%s skipped: about %.0f s estimated, %.0f s of the %.0f s budget left\n", name,
             estimate, left > 0 ? left : 0, budget);
      continue;
    }
    double t0 = now_s();
    run_size(c, sizes[i], cycles);
    per_byte = (now_s() - t0) / (double)sizes[i];
  }
  gpum_ckpt_close(c);
  return 0;
}
