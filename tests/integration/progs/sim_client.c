/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A scriptable client of the simulated driver for the integration tests: it dlopens
 * $GPUM_SIM_LIBRARY directly, as a program would load libnvidia-ml / libcuda, and runs the steps
 * given on its command line in order, e.g.
 *
 *   sim_client cu-init cu-ctx 0 cu-alloc 1GiB ready /tmp/f block
 *
 * Each step checks what the driver returns and exits 1 with "FAIL: ..." on stderr at the first
 * surprise. Expected codes are written as numbers or NVML/CUDA names without the prefix
 * (GPU_IS_LOST, OUT_OF_MEMORY). Readiness is signalled through files, never by sleeping.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuda_abi.h"
#include "nvml_abi.h"
#include "prog_fail.h"

#define NVML_PTR(ret, name, params) static gpum_##name##_fn p_##name;
GPUM_NVML_FUNCS(NVML_PTR)
#define CU_PTR(name, params) static gpum_##name##_fn p_##name;
GPUM_CUDA_FUNCS(CU_PTR)
static void *dl;

static void load(void) {
  const char *path = getenv("GPUM_SIM_LIBRARY");
  if (!path)
    fail("GPUM_SIM_LIBRARY is not set");
  dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!dl)
    fail("dlopen %s: %s", path, dlerror());
#define LOAD(name)                      \
  do {                                  \
    void *s_ = dlsym(dl, #name);        \
    if (!s_)                            \
      fail("missing symbol %s", #name); \
    memcpy(&p_##name, &s_, sizeof s_);  \
  } while (0);
#define NVML_LOAD(ret, name, params) LOAD(name)
#define CU_LOAD(name, params) LOAD(name)
  GPUM_NVML_FUNCS(NVML_LOAD)
  GPUM_CUDA_FUNCS(CU_LOAD)
}

static const struct {
  const char *name;
  int code;
} codes[] = {
    {"SUCCESS", 0},
    {"UNINITIALIZED", 1},
    {"INVALID_ARGUMENT", 2},
    {"NOT_SUPPORTED", 3},
    {"INSUFFICIENT_SIZE", 7},
    {"DRIVER_NOT_LOADED", 9},
    {"TIMEOUT", 10},
    {"FUNCTION_NOT_FOUND", 13},
    {"GPU_IS_LOST", 15},
    {"RESET_REQUIRED", 16},
    {"LIB_RM_VERSION_MISMATCH", 18},
    {"ARGUMENT_VERSION_MISMATCH", 25},
    {"UNKNOWN", 999},
    {"INVALID_VALUE", 1},
    {"OUT_OF_MEMORY", 2},
    {"NOT_INITIALIZED", 3},
    {"DEINITIALIZED", 4},
    {"NO_DEVICE", 100},
    {"INVALID_DEVICE", 101},
    {"INVALID_CONTEXT", 201},
    {"ECC_UNCORRECTABLE", 214},
    {"INVALID_HANDLE", 400},
    {"NOT_FOUND", 500},
};

static int code_of(const char *s) {
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
    if (!strcmp(codes[i].name, s))
      return codes[i].code;
  char *end;
  long v = strtol(s, &end, 10);
  if (*end || end == s)
    fail("unknown code name '%s'", s);
  return (int)v;
}

static unsigned long long num(const char *s) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  unsigned long long mult = 1;
  if (!strcmp(end, "KiB"))
    mult = 1ull << 10;
  else if (!strcmp(end, "MiB"))
    mult = 1ull << 20;
  else if (!strcmp(end, "GiB"))
    mult = 1ull << 30;
  else if (*end)
    fail("bad number '%s'", s);
  return v * mult;
}

static void need(int got, int want, const char *what) {
  if (got != want)
    fail("%s returned %d, expected %d", what, got, want);
}

/* The device's handle, looked up once (like a monitor, which keeps its handles when a GPU is
 * lost later); transient UNKNOWN errors (the error-rate fault) are retried. */
static nvmlDevice_t handle(unsigned idx) {
  static nvmlDevice_t cache[16];
  if (idx < 16 && cache[idx])
    return cache[idx];
  nvmlDevice_t h;
  nvmlReturn_t r;
  for (int k = 0; (r = p_nvmlDeviceGetHandleByIndex_v2(idx, &h)) == NVML_ERROR_UNKNOWN && k < 1000;
       k++)
    ;
  need(r, NVML_SUCCESS, "nvmlDeviceGetHandleByIndex_v2");
  if (idx < 16)
    cache[idx] = h;
  return h;
}

/* The device's processes through the _v3 call, sized the documented way. */
static unsigned procs(nvmlDevice_t h, nvmlProcessInfo_t *out, unsigned cap) {
  unsigned count = 0;
  nvmlReturn_t r = p_nvmlDeviceGetComputeRunningProcesses_v3(h, &count, NULL);
  if (r == NVML_SUCCESS) {
    if (count != 0)
      fail("process query with no buffer: SUCCESS but count %u", count);
    return 0;
  }
  need(r, NVML_ERROR_INSUFFICIENT_SIZE, "process count query");
  if (count == 0 || count > cap)
    fail("process count %u out of range", count);
  unsigned n = cap;
  need(p_nvmlDeviceGetComputeRunningProcesses_v3(h, &n, out), NVML_SUCCESS,
       "nvmlDeviceGetComputeRunningProcesses_v3");
  for (unsigned i = 0; i < n; i++)
    if (out[i].gpuInstanceId != 0xFFFFFFFFu || out[i].computeInstanceId != 0xFFFFFFFFu)
      fail("pid %u: instance ids not 0xFFFFFFFF", out[i].pid);
  return n;
}

/* "self", a number, or "@FILE": the pid written in FILE (by a "ready" step). */
static unsigned pid_arg(const char *s) {
  if (!strcmp(s, "self"))
    return (unsigned)getpid();
  if (s[0] != '@')
    return (unsigned)num(s);
  FILE *f = fopen(s + 1, "r");
  unsigned pid = 0;
  if (!f || fscanf(f, "%u", &pid) != 1)
    fail("no pid in %s", s + 1);
  fclose(f);
  return pid;
}

static CUdeviceptr allocs[256];
static size_t nallocs;
static nvmlEventSet_t evset;

static nvmlReturn_t call_metric(nvmlDevice_t h, const char *f) {
  char buf[96];
  unsigned u;
  unsigned long long ull;
  nvmlMemory_t m1;
  nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
  nvmlUtilization_t ut;
  nvmlPciInfo_t pci;
  nvmlEnableState_t a, b;
  unsigned r1, r2, r3, r4;
  if (!strcmp(f, "name"))
    return p_nvmlDeviceGetName(h, buf, sizeof buf);
  if (!strcmp(f, "uuid"))
    return p_nvmlDeviceGetUUID(h, buf, sizeof buf);
  if (!strcmp(f, "memory"))
    return p_nvmlDeviceGetMemoryInfo(h, &m1);
  if (!strcmp(f, "memory_v2"))
    return p_nvmlDeviceGetMemoryInfo_v2(h, &m2);
  if (!strcmp(f, "utilization"))
    return p_nvmlDeviceGetUtilizationRates(h, &ut);
  if (!strcmp(f, "temperature"))
    return p_nvmlDeviceGetTemperature(h, NVML_TEMPERATURE_GPU, &u);
  if (!strcmp(f, "power"))
    return p_nvmlDeviceGetPowerUsage(h, &u);
  if (!strcmp(f, "clocks"))
    return p_nvmlDeviceGetClockInfo(h, NVML_CLOCK_SM, &u);
  if (!strcmp(f, "ecc"))
    return p_nvmlDeviceGetTotalEccErrors(h, 1, 0, &ull);
  if (!strcmp(f, "eccmode"))
    return p_nvmlDeviceGetEccMode(h, &a, &b);
  if (!strcmp(f, "remapped_rows"))
    return p_nvmlDeviceGetRemappedRows(h, &r1, &r2, &r3, &r4);
  if (!strcmp(f, "pci"))
    return p_nvmlDeviceGetPciInfo_v3(h, &pci);
  if (!strcmp(f, "processes")) {
    u = 0;
    return p_nvmlDeviceGetComputeRunningProcesses_v3(h, &u, NULL);
  }
  fail("unknown metric '%s'", f);
}

static void wait_file(const char *path) {
  for (int i = 0; i < 3000; i++) {
    if (access(path, F_OK) == 0)
      return;
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
  }
  fail("timed out waiting for %s", path);
}

static void write_file(const char *path, const char *text) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f || fputs(text, f) < 0 || fclose(f) != 0 || rename(tmp, path) != 0)
    fail("cannot write %s", path);
}

/* ---- NVML steps ---- */

static void nvml_short_buffers(nvmlDevice_t h) {
  char buf[128];
  need(p_nvmlDeviceGetName(h, buf, 4), NVML_ERROR_INSUFFICIENT_SIZE, "GetName, 4 bytes");
  need(p_nvmlDeviceGetUUID(h, buf, 10), NVML_ERROR_INSUFFICIENT_SIZE, "GetUUID, 10 bytes");
  need(p_nvmlSystemGetDriverVersion(buf, 3), NVML_ERROR_INSUFFICIENT_SIZE,
       "GetDriverVersion, 3 bytes");
  need(p_nvmlDeviceGetUUID(h, buf, NVML_DEVICE_UUID_BUFFER_SIZE), NVML_SUCCESS, "GetUUID");
  need(p_nvmlDeviceGetName(h, NULL, 64), NVML_ERROR_INVALID_ARGUMENT, "GetName(NULL)");
  need(p_nvmlDeviceGetName((nvmlDevice_t)buf, buf, 64), NVML_ERROR_INVALID_ARGUMENT,
       "GetName(foreign handle)");
  need(p_nvmlDeviceGetName(NULL, buf, 64), NVML_ERROR_INVALID_ARGUMENT, "GetName(NULL handle)");
  unsigned count = 0;
  need(p_nvmlDeviceGetComputeRunningProcesses_v3(h, NULL, NULL), NVML_ERROR_INVALID_ARGUMENT,
       "processes(NULL count)");
  nvmlReturn_t r = p_nvmlDeviceGetComputeRunningProcesses_v3(h, &count, NULL);
  if (r != NVML_ERROR_INSUFFICIENT_SIZE || count < 1)
    fail("processes(0, NULL) with a process present: %d, count %u", r, count);
  nvmlProcessDetailList_t pl = {.version = nvmlProcessDetailList_v1, .mode = 0};
  need(p_nvmlDeviceGetRunningProcessDetailList(h, &pl), NVML_ERROR_INSUFFICIENT_SIZE,
       "detail list without array");
  if (pl.numProcArrayEntries != count)
    fail("detail list needs %u entries, process list %u", pl.numProcArrayEntries, count);
  pl.version = 1;
  need(p_nvmlDeviceGetRunningProcessDetailList(h, &pl), NVML_ERROR_ARGUMENT_VERSION_MISMATCH,
       "detail list with version 1");
}

static void nvml_mem_versions(nvmlDevice_t h) {
  nvmlMemory_v2_t m2 = {.version = 2};
  need(p_nvmlDeviceGetMemoryInfo_v2(h, &m2), NVML_ERROR_FUNCTION_NOT_FOUND,
       "GetMemoryInfo_v2 with version=2");
  m2.version = nvmlMemory_v2;
  need(p_nvmlDeviceGetMemoryInfo_v2(h, &m2), NVML_SUCCESS, "GetMemoryInfo_v2");
  nvmlMemory_t m1;
  need(p_nvmlDeviceGetMemoryInfo(h, &m1), NVML_SUCCESS, "GetMemoryInfo");
  if (m1.total != m2.total || m1.free != m2.free || m1.used != m2.used + m2.reserved ||
      m2.reserved == 0 || m2.total != m2.reserved + m2.used + m2.free)
    fail("memory v1 {%llu %llu %llu} and v2 {%llu r%llu %llu %llu} disagree", m1.total, m1.free,
         m1.used, m2.total, m2.reserved, m2.free, m2.used);
  nvmlTemperature_t t = {.version = 1};
  need(p_nvmlDeviceGetTemperatureV(h, &t), NVML_ERROR_ARGUMENT_VERSION_MISMATCH,
       "GetTemperatureV with version=1");
  t.version = nvmlTemperature_v1;
  need(p_nvmlDeviceGetTemperatureV(h, &t), NVML_SUCCESS, "GetTemperatureV");
}

/* The stride the _v3 call writes, measured as nvitop does: fill with 0xAA, see what changed. */
static void nvml_stride(nvmlDevice_t h, unsigned want) {
  unsigned char buf[24 * 16];
  memset(buf, 0xAA, sizeof buf);
  unsigned n = 16;
  need(p_nvmlDeviceGetComputeRunningProcesses_v3(h, &n, (nvmlProcessInfo_t *)(void *)buf),
       NVML_SUCCESS, "processes into 16 entries");
  if (n != 1)
    fail("stride check needs exactly one process, got %u", n);
  unsigned written = sizeof buf;
  while (written > 0 && buf[written - 1] == 0xAA)
    written--;
  /* The last bytes of an entry are 0xFFFFFFFF (24 B) or a zero ull (32 B). */
  unsigned stride = written <= 24 ? 24 : 32;
  if (stride != want)
    fail("process entries are %u bytes, expected %u", stride, want);
}

/* nvmlDeviceGetProcessUtilization as NVML documents it, with pid holding memory on the device
 * (the only one with a sample): a NULL count is refused; a NULL or short buffer gets
 * INSUFFICIENT_SIZE with the count needed; a buffer with room gets pid's sample (smUtil sm,
 * memUtil mem) taken within the last second; lastSeenTimeStamp at or after it gets only newer
 * samples (NOT_FOUND, or one of a later period), one in the future none. */
static void nvml_putil(nvmlDevice_t h, unsigned pid, unsigned sm, unsigned mem) {
  nvmlProcessUtilizationSample_t u[8];
  unsigned n = 0;
  need(p_nvmlDeviceGetProcessUtilization(h, u, NULL, 0), NVML_ERROR_INVALID_ARGUMENT,
       "process utilisation, NULL count");
  need(p_nvmlDeviceGetProcessUtilization(h, NULL, &n, 0), NVML_ERROR_INSUFFICIENT_SIZE,
       "process utilisation, NULL buffer");
  if (n != 1)
    fail("process utilisation needs %u entries, expected 1", n);
  n = 0;
  need(p_nvmlDeviceGetProcessUtilization(h, u, &n, 0), NVML_ERROR_INSUFFICIENT_SIZE,
       "process utilisation, no room");
  if (n != 1)
    fail("process utilisation (no room) needs %u entries, expected 1", n);
  n = 8;
  need(p_nvmlDeviceGetProcessUtilization(h, u, &n, 0), NVML_SUCCESS, "process utilisation");
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  unsigned long long now = (unsigned long long)ts.tv_sec * 1000000ull + ts.tv_nsec / 1000;
  if (n != 1 || u[0].pid != pid || u[0].smUtil != sm || u[0].memUtil != mem || u[0].encUtil ||
      u[0].decUtil)
    fail("process utilisation: %u samples, pid %u sm %u mem %u enc %u dec %u; expected pid %u sm "
         "%u mem %u",
         n, u[0].pid, u[0].smUtil, u[0].memUtil, u[0].encUtil, u[0].decUtil, pid, sm, mem);
  if (u[0].timeStamp > now || u[0].timeStamp + 1000000ull < now)
    fail("process utilisation sample at %llu, now %llu", u[0].timeStamp, now);
  unsigned long long seen = u[0].timeStamp;
  n = 8;
  nvmlReturn_t r = p_nvmlDeviceGetProcessUtilization(h, u, &n, seen);
  if (r != NVML_ERROR_NOT_FOUND && (r != NVML_SUCCESS || n != 1 || u[0].timeStamp <= seen))
    fail("process utilisation since %llu: %d, %u samples at %llu", seen, r, n, u[0].timeStamp);
  n = 8;
  need(p_nvmlDeviceGetProcessUtilization(h, u, &n, now + 60000000ull), NVML_ERROR_NOT_FOUND,
       "process utilisation since a minute ahead");
}

static int step_nvml(int argc, char **argv, int i) {
  const char *s = argv[i];
#define ARG(k) (i + (k) < argc ? argv[i + (k)] : (fail("%s: missing argument", s), ""))
  if (!strcmp(s, "nvml-init")) {
    need(p_nvmlInit_v2(), NVML_SUCCESS, "nvmlInit_v2");
    return i + 1;
  }
  if (!strcmp(s, "nvml-init-expect")) {
    need(p_nvmlInit_v2(), code_of(ARG(1)), "nvmlInit_v2");
    return i + 2;
  }
  if (!strcmp(s, "nvml-uninit")) { /* calls before init and a shutdown too many */
    unsigned c;
    need(p_nvmlDeviceGetCount_v2(&c), NVML_ERROR_UNINITIALIZED, "GetCount before init");
    need(p_nvmlShutdown(), NVML_ERROR_UNINITIALIZED, "Shutdown before init");
    need(p_nvmlInit_v2(), NVML_SUCCESS, "Init");
    need(p_nvmlInit_v2(), NVML_SUCCESS, "Init (2nd)");
    need(p_nvmlShutdown(), NVML_SUCCESS, "Shutdown");
    need(p_nvmlDeviceGetCount_v2(&c), NVML_SUCCESS, "GetCount with one reference left");
    need(p_nvmlShutdown(), NVML_SUCCESS, "Shutdown (2nd)");
    need(p_nvmlDeviceGetCount_v2(&c), NVML_ERROR_UNINITIALIZED, "GetCount after shutdown");
    return i + 1;
  }
  if (!strcmp(s, "nvml-count")) {
    unsigned c;
    need(p_nvmlDeviceGetCount_v2(&c), NVML_SUCCESS, "nvmlDeviceGetCount_v2");
    if (c != num(ARG(1)))
      fail("device count %u, expected %s", c, ARG(1));
    return i + 2;
  }
  if (!strcmp(s, "nvml-expect")) { /* DEV METRIC CODE */
    nvmlDevice_t h = handle((unsigned)num(ARG(1)));
    need(call_metric(h, ARG(2)), code_of(ARG(3)), ARG(2));
    return i + 4;
  }
  if (!strcmp(s, "nvml-handle-expect")) { /* DEV CODE */
    nvmlDevice_t h;
    need(p_nvmlDeviceGetHandleByIndex_v2((unsigned)num(ARG(1)), &h), code_of(ARG(2)),
         "GetHandleByIndex_v2");
    return i + 3;
  }
  if (!strcmp(s, "nvml-rate")) { /* DEV CALLS: both outcomes must occur, nothing else */
    nvmlDevice_t h = handle((unsigned)num(ARG(1)));
    unsigned n = (unsigned)num(ARG(2)), ok = 0, bad = 0;
    for (unsigned k = 0; k < n; k++) {
      nvmlReturn_t r = call_metric(h, "memory");
      if (r == NVML_SUCCESS)
        ok++;
      else if (r == NVML_ERROR_UNKNOWN)
        bad++;
      else
        fail("call %u returned %d", k, r);
    }
    printf("rate: %u ok, %u failed\n", ok, bad);
    if (!ok || !bad)
      fail("error rate: %u ok and %u failed of %u", ok, bad, n);
    return i + 3;
  }
  if (!strcmp(s, "nvml-expect-proc") || !strcmp(s, "nvml-expect-noproc")) {
    bool want = !strcmp(s, "nvml-expect-proc"); /* DEV PID [BYTES] */
    nvmlProcessInfo_t p[64];
    unsigned n = procs(handle((unsigned)num(ARG(1))), p, 64), pid = pid_arg(ARG(2)), k = 0;
    while (k < n && p[k].pid != pid)
      k++;
    if (want && k == n)
      fail("pid %u not in the process list of device %s", pid, ARG(1));
    if (!want && k < n)
      fail("pid %u still in the process list of device %s", pid, ARG(1));
    if (want && p[k].usedGpuMemory != num(ARG(3)))
      fail("pid %u uses %llu bytes, expected %s", pid, p[k].usedGpuMemory, ARG(3));
    return i + (want ? 4 : 3);
  }
  if (!strcmp(s, "nvml-expect-used")) { /* DEV BYTES (v2 used, by processes) */
    nvmlMemory_v2_t m = {.version = nvmlMemory_v2};
    need(p_nvmlDeviceGetMemoryInfo_v2(handle((unsigned)num(ARG(1))), &m), NVML_SUCCESS,
         "GetMemoryInfo_v2");
    if (m.used != num(ARG(2)))
      fail("device %s: %llu bytes used, expected %s", ARG(1), m.used, ARG(2));
    return i + 3;
  }
  if (!strcmp(s, "nvml-print")) { /* DEV: "name|uuid|used|temp|power" for the shell */
    nvmlDevice_t h = handle((unsigned)num(ARG(1)));
    char name[96], uuid[96];
    unsigned t = 0, pw = 0;
    nvmlMemory_v2_t m = {.version = nvmlMemory_v2};
    p_nvmlDeviceGetName(h, name, sizeof name);
    p_nvmlDeviceGetUUID(h, uuid, sizeof uuid);
    p_nvmlDeviceGetMemoryInfo_v2(h, &m);
    p_nvmlDeviceGetTemperature(h, NVML_TEMPERATURE_GPU, &t);
    p_nvmlDeviceGetPowerUsage(h, &pw);
    printf("%s|%s|%llu|%u|%u\n", name, uuid, m.used, t, pw);
    fflush(stdout);
    return i + 2;
  }
  if (!strcmp(s, "nvml-short-buffers")) {
    nvml_short_buffers(handle((unsigned)num(ARG(1))));
    return i + 2;
  }
  if (!strcmp(s, "nvml-mem-versions")) {
    nvml_mem_versions(handle((unsigned)num(ARG(1))));
    return i + 2;
  }
  if (!strcmp(s, "nvml-putil")) { /* DEV PID SM MEM */
    nvml_putil(handle((unsigned)num(ARG(1))), pid_arg(ARG(2)), (unsigned)num(ARG(3)),
               (unsigned)num(ARG(4)));
    return i + 5;
  }
  if (!strcmp(s, "nvml-putil-expect")) { /* DEV CODE: the call with a NULL buffer */
    unsigned n = 0;
    need(p_nvmlDeviceGetProcessUtilization(handle((unsigned)num(ARG(1))), NULL, &n, 0),
         code_of(ARG(2)), "process utilisation");
    return i + 3;
  }
  if (!strcmp(s, "nvml-stride")) {
    nvml_stride(handle((unsigned)num(ARG(1))), (unsigned)num(ARG(2)));
    return i + 3;
  }
  if (!strcmp(s, "nvml-events")) { /* DEV: create a set, register everything supported */
    nvmlDevice_t h = handle((unsigned)num(ARG(1)));
    unsigned long long types;
    need(p_nvmlDeviceGetSupportedEventTypes(h, &types), NVML_SUCCESS, "GetSupportedEventTypes");
    if (!(types & nvmlEventTypeXidCriticalError))
      fail("XID events not supported");
    if (!evset)
      need(p_nvmlEventSetCreate(&evset), NVML_SUCCESS, "EventSetCreate");
    need(p_nvmlDeviceRegisterEvents(h, types, evset), NVML_SUCCESS, "RegisterEvents");
    return i + 2;
  }
  if (!strcmp(s, "nvml-wait")) { /* TIMEOUT_MS TYPE DATA DEV, or TIMEOUT_MS TIMEOUT */
    nvmlEventData_t e;
    nvmlReturn_t r = p_nvmlEventSetWait_v2(evset, &e, (unsigned)num(ARG(1)));
    if (!strcmp(ARG(2), "TIMEOUT")) {
      need(r, NVML_ERROR_TIMEOUT, "EventSetWait_v2 (expecting nothing)");
      return i + 3;
    }
    need(r, NVML_SUCCESS, "EventSetWait_v2");
    if (e.eventType != num(ARG(2)) || e.eventData != num(ARG(3)) ||
        e.device != handle((unsigned)num(ARG(4))))
      fail("event type 0x%llx data %llu, expected %s %s on device %s", e.eventType, e.eventData,
           ARG(2), ARG(3), ARG(4));
    return i + 5;
  }
  return -1;
#undef ARG
}

/* ---- CUDA steps ---- */

static void cu_copy(size_t n) {
  CUdeviceptr a, b;
  need(p_cuMemAlloc_v2(&a, n), CUDA_SUCCESS, "cuMemAlloc_v2 a");
  need(p_cuMemAlloc_v2(&b, n), CUDA_SUCCESS, "cuMemAlloc_v2 b");
  unsigned char *src = malloc(n), *dst = malloc(n);
  if (!src || !dst)
    fail("malloc");
  for (size_t k = 0; k < n; k++)
    src[k] = (unsigned char)(k * 131 + 7);
  need(p_cuMemcpyHtoD_v2(a, src, n), CUDA_SUCCESS, "HtoD");
  need(p_cuMemcpyDtoD_v2(b, a, n), CUDA_SUCCESS, "DtoD");
  need(p_cuMemcpyDtoH_v2(dst, b, n), CUDA_SUCCESS, "DtoH");
  if (memcmp(src, dst, n))
    fail("data read back differs from data written");
  need(p_cuMemsetD8_v2(a + 1, 0x5A, n - 2), CUDA_SUCCESS, "MemsetD8");
  need(p_cuMemcpyDtoH_v2(dst, a, n), CUDA_SUCCESS, "DtoH after memset");
  if (dst[0] != src[0] || dst[1] != 0x5A || dst[n - 2] != 0x5A || dst[n - 1] != src[n - 1])
    fail("memset wrote the wrong bytes");
  need(p_cuMemcpyHtoD_v2(a + 1, src, n), CUDA_ERROR_INVALID_VALUE, "HtoD past the end");
  need(p_cuMemcpyDtoH_v2(dst, 4096, 8), CUDA_ERROR_INVALID_VALUE, "DtoH from a bogus pointer");
  CUdeviceptr base;
  size_t size;
  need(p_cuMemGetAddressRange_v2(&base, &size, a + 5), CUDA_SUCCESS, "GetAddressRange");
  if (base != a || size != n)
    fail("address range wrong");
  need(p_cuMemFree_v2(a), CUDA_SUCCESS, "free a");
  need(p_cuMemFree_v2(a), CUDA_ERROR_INVALID_VALUE, "double free");
  need(p_cuMemFree_v2(b + 8), CUDA_ERROR_INVALID_VALUE, "free of an inner pointer");
  need(p_cuMemFree_v2(b), CUDA_SUCCESS, "free b");
  need(p_cuMemAlloc_v2(&a, 0), CUDA_ERROR_INVALID_VALUE, "cuMemAlloc of 0 bytes");
  free(src);
  free(dst);
}

static void cu_vmm(int ord, unsigned long long *used_after_release) {
  const size_t G = 2u << 20;
  CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                              .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = ord}};
  size_t gran = 0;
  need(p_cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
       CUDA_SUCCESS, "GetAllocationGranularity");
  if (gran != G)
    fail("granularity %zu", gran);
  CUdeviceptr va;
  need(p_cuMemAddressReserve(&va, 4 * G, 0, 0, 1), CUDA_ERROR_INVALID_VALUE, "reserve flags=1");
  need(p_cuMemAddressReserve(&va, G + 1, 0, 0, 0), CUDA_ERROR_INVALID_VALUE, "reserve odd size");
  need(p_cuMemAddressReserve(&va, 4 * G, 0, 0, 0), CUDA_SUCCESS, "AddressReserve");
  if (va % G)
    fail("reservation not aligned");
  CUmemGenericAllocationHandle h;
  need(p_cuMemCreate(&h, G, &prop, 1), CUDA_ERROR_INVALID_VALUE, "create flags=1");
  need(p_cuMemCreate(&h, G / 2, &prop, 0), CUDA_ERROR_INVALID_VALUE, "create half granule");
  need(p_cuMemCreate(&h, 2 * G, &prop, 0), CUDA_SUCCESS, "MemCreate");
  need(p_cuMemMap(va, 2 * G, G, h, 0), CUDA_ERROR_INVALID_VALUE, "map with offset");
  need(p_cuMemMap(va, 2 * G, 0, h, 1), CUDA_ERROR_INVALID_VALUE, "map with flags");
  need(p_cuMemMap(va + 4 * G, 2 * G, 0, h, 0), CUDA_ERROR_INVALID_VALUE, "map outside");
  need(p_cuMemMap(va, 2 * G, 0, h, 0), CUDA_SUCCESS, "MemMap");
  char buf[64] = "vmm data";
  /* Before cuMemSetAccess the range is not usable. */
  need(p_cuMemcpyHtoD_v2(va, buf, sizeof buf), CUDA_ERROR_INVALID_VALUE, "copy before access");
  CUmemAccessDesc acc = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = ord},
                         .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  need(p_cuMemSetAccess(va, 4 * G, &acc, 1), CUDA_ERROR_INVALID_VALUE, "access to unmapped");
  need(p_cuMemSetAccess(va, 2 * G, &acc, 1), CUDA_SUCCESS, "SetAccess");
  need(p_cuMemcpyHtoD_v2(va + G, buf, sizeof buf), CUDA_SUCCESS, "copy into VMM");
  char back[64] = "";
  need(p_cuMemcpyDtoH_v2(back, va + G, sizeof back), CUDA_SUCCESS, "copy out of VMM");
  if (strcmp(back, "vmm data"))
    fail("VMM data lost");
  need(p_cuMemAddressFree(va, 4 * G), CUDA_ERROR_INVALID_VALUE, "free a mapped reservation");
  need(p_cuMemRelease(h), CUDA_SUCCESS, "Release while mapped");
  need(p_cuMemRelease(h), CUDA_ERROR_INVALID_VALUE, "Release twice");
  /* Still mapped: the physical memory stays accounted until unmapped. */
  unsigned long long used_mapped = 0;
  {
    size_t f, t;
    need(p_cuMemGetInfo_v2(&f, &t), CUDA_SUCCESS, "GetInfo");
    used_mapped = t - f;
  }
  need(p_cuMemUnmap(va, 2 * G), CUDA_SUCCESS, "Unmap");
  need(p_cuMemUnmap(va, 2 * G), CUDA_ERROR_INVALID_VALUE, "Unmap twice");
  size_t f, t;
  need(p_cuMemGetInfo_v2(&f, &t), CUDA_SUCCESS, "GetInfo");
  if (used_mapped - (t - f) != 2 * G)
    fail("physical memory not given back after unmap + release (%llu -> %llu)", used_mapped,
         (unsigned long long)(t - f));
  need(p_cuMemAddressFree(va, 4 * G), CUDA_SUCCESS, "AddressFree");
  *used_after_release = t - f;
}

static void cu_misc(void) {
  const char *str;
  need(p_cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &str), CUDA_SUCCESS, "GetErrorName");
  if (strcmp(str, "CUDA_ERROR_OUT_OF_MEMORY"))
    fail("error name %s", str);
  need(p_cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &str), CUDA_SUCCESS, "GetErrorString");
  if (strcmp(str, "out of memory"))
    fail("error string %s", str);
  need(p_cuGetErrorName(12345, &str), CUDA_ERROR_INVALID_VALUE, "GetErrorName(12345)");
  void *fn = NULL;
  CUdriverProcAddressQueryResult q = -1;
  need(p_cuGetProcAddress_v2("cuMemAlloc", &fn, 12000, 0, &q), CUDA_SUCCESS, "proc cuMemAlloc");
  void *direct = dlsym(dl, "cuMemAlloc_v2");
  if (fn != direct || q != CU_GET_PROC_ADDRESS_SUCCESS)
    fail("cuGetProcAddress(cuMemAlloc) is not cuMemAlloc_v2");
  need(p_cuGetProcAddress_v2("cuMemAlloc_v2", &fn, 12000, 0, &q), CUDA_SUCCESS, "proc _v2");
  if (fn != direct)
    fail("cuGetProcAddress(cuMemAlloc_v2) is not cuMemAlloc_v2");
  need(p_cuGetProcAddress_v2("cuNoSuchThing", &fn, 12000, 0, &q), CUDA_ERROR_NOT_FOUND,
       "proc of an unknown name");
  if (fn || q != CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND)
    fail("unknown name: pfn %p status %d", fn, q);
  CUstream st;
  CUevent e1, e2;
  need(p_cuStreamCreate(&st, 0), CUDA_SUCCESS, "StreamCreate");
  need(p_cuEventCreate(&e1, 0), CUDA_SUCCESS, "EventCreate");
  need(p_cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS, "EventCreate");
  need(p_cuEventRecord(e1, st), CUDA_SUCCESS, "EventRecord");
  need(p_cuEventQuery(e1), CUDA_SUCCESS, "EventQuery");
  need(p_cuStreamWaitEvent(st, e1, 0), CUDA_SUCCESS, "StreamWaitEvent");
  need(p_cuStreamSynchronize(st), CUDA_SUCCESS, "StreamSynchronize");
  float ms;
  need(p_cuEventElapsedTime(&ms, e1, e1), CUDA_SUCCESS, "ElapsedTime");
  need(p_cuEventRecord(e2, st), CUDA_SUCCESS, "EventRecord");
  need(p_cuEventElapsedTime(&ms, e1, e2), CUDA_ERROR_INVALID_HANDLE, "ElapsedTime no timing");
  CUdeviceptr d;
  need(p_cuMemAllocAsync(&d, 4096, st), CUDA_SUCCESS, "MemAllocAsync");
  need(p_cuMemFreeAsync(d, st), CUDA_SUCCESS, "MemFreeAsync");
  need(p_cuEventDestroy_v2(e1), CUDA_SUCCESS, "EventDestroy");
  need(p_cuEventDestroy_v2(e2), CUDA_SUCCESS, "EventDestroy");
  need(p_cuEventQuery(e1), CUDA_ERROR_INVALID_HANDLE, "query of a destroyed event");
  need(p_cuStreamDestroy_v2(st), CUDA_SUCCESS, "StreamDestroy");
  need(p_cuStreamSynchronize(st), CUDA_ERROR_INVALID_HANDLE, "sync of a destroyed stream");
  need(p_cuMemAllocAsync(&d, 4096, st), CUDA_ERROR_INVALID_HANDLE, "alloc on a bad stream");
  void *host;
  need(p_cuMemHostAlloc(&host, 1 << 20, CU_MEMHOSTALLOC_PORTABLE), CUDA_SUCCESS, "MemHostAlloc");
  memset(host, 1, 1 << 20);
  need(p_cuMemFreeHost(host), CUDA_SUCCESS, "MemFreeHost");
  need(p_cuMemFreeHost(host), CUDA_ERROR_INVALID_VALUE, "MemFreeHost twice");
  need(p_cuMemAllocHost_v2(&host, 100), CUDA_SUCCESS, "MemAllocHost");
  need(p_cuMemFreeHost(host), CUDA_SUCCESS, "MemFreeHost");
  CUdevice dev;
  need(p_cuCtxGetDevice(&dev), CUDA_SUCCESS, "CtxGetDevice");
  need(p_cuCtxSynchronize(), CUDA_SUCCESS, "CtxSynchronize");
}

/* What the fill steps took: a whole device's worth of 2 MiB pieces (tens of thousands). */
static struct filled {
  bool vmm;
  unsigned long long v; /* the handle, or the device pointer */
} * filled;
static size_t nfilled, capfilled;

/* Takes pieces of G bytes of device ord (VMM handles from cuMemCreate, or cuMemAlloc_v2 in the
 * current context): want of them, or, when full, until the driver says
 * CUDA_ERROR_OUT_OF_MEMORY, which must be after exactly want pieces. */
static void cu_fill(int ord, bool vmm, size_t G, unsigned long long want, bool full) {
  CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                              .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = ord}};
  unsigned long long got = 0;
  CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
  while (full || got < want) {
    if (nfilled == capfilled) {
      capfilled = capfilled ? 2 * capfilled : 65536;
      filled = realloc(filled, capfilled * sizeof *filled);
      if (!filled)
        fail("realloc");
    }
    unsigned long long v = 0;
    if (vmm) {
      CUmemGenericAllocationHandle h = 0;
      r = p_cuMemCreate(&h, G, &prop, 0);
      v = h;
    } else {
      CUdeviceptr d = 0;
      r = p_cuMemAlloc_v2(&d, G);
      v = d;
    }
    if (r != CUDA_SUCCESS)
      break;
    filled[nfilled++] = (struct filled){vmm, v};
    got++;
  }
  const char *what = vmm ? "cuMemCreate" : "cuMemAlloc_v2";
  if (full)
    need(r, CUDA_ERROR_OUT_OF_MEMORY, what); /* the piece beyond a full device */
  else if (got < want)
    need(r, CUDA_SUCCESS, what);
  if (got != want)
    fail("device %d took %llu pieces of %zu bytes (%s), expected %llu", ord, got, G, what, want);
}

static void cu_unfill(void) {
  while (nfilled) {
    struct filled f = filled[--nfilled];
    if (f.vmm)
      need(p_cuMemRelease(f.v), CUDA_SUCCESS, "cuMemRelease");
    else
      need(p_cuMemFree_v2(f.v), CUDA_SUCCESS, "cuMemFree_v2");
  }
}

static int step_cuda(int argc, char **argv, int i) {
  const char *s = argv[i];
#define ARG(k) (i + (k) < argc ? argv[i + (k)] : (fail("%s: missing argument", s), ""))
  if (!strcmp(s, "cu-init")) {
    need(p_cuInit(0), CUDA_SUCCESS, "cuInit");
    return i + 1;
  }
  if (!strcmp(s, "cu-init-expect")) {
    need(p_cuInit(0), code_of(ARG(1)), "cuInit");
    return i + 2;
  }
  if (!strcmp(s, "cu-uninit")) { /* calls before cuInit */
    CUdeviceptr d;
    int n;
    need(p_cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED, "DeviceGetCount before cuInit");
    need(p_cuMemAlloc_v2(&d, 1), CUDA_ERROR_NOT_INITIALIZED, "MemAlloc before cuInit");
    need(p_cuDriverGetVersion(&n), CUDA_SUCCESS, "DriverGetVersion before cuInit");
    return i + 1;
  }
  if (!strcmp(s, "cu-count")) {
    int n;
    need(p_cuDeviceGetCount(&n), CUDA_SUCCESS, "cuDeviceGetCount");
    if ((unsigned long long)n != num(ARG(1)))
      fail("%d CUDA devices, expected %s", n, ARG(1));
    return i + 2;
  }
  if (!strcmp(s, "cu-pci")) { /* ORD BUSID: which device an ordinal is */
    char bus[32];
    need(p_cuDeviceGetPCIBusId(bus, sizeof bus, (int)num(ARG(1))), CUDA_SUCCESS, "GetPCIBusId");
    if (strcmp(bus, ARG(2)))
      fail("ordinal %s is %s, expected %s", ARG(1), bus, ARG(2));
    return i + 3;
  }
  if (!strcmp(s, "cu-ctx")) {
    CUcontext c, cur;
    CUdevice d;
    need(p_cuDeviceGet(&d, (int)num(ARG(1))), CUDA_SUCCESS, "cuDeviceGet");
    need(p_cuDevicePrimaryCtxRetain(&c, d), CUDA_SUCCESS, "PrimaryCtxRetain");
    need(p_cuCtxSetCurrent(c), CUDA_SUCCESS, "CtxSetCurrent");
    need(p_cuCtxGetCurrent(&cur), CUDA_SUCCESS, "CtxGetCurrent");
    if (cur != c)
      fail("current context not set");
    return i + 2;
  }
  if (!strcmp(s, "cu-noctx")) {
    CUdeviceptr d;
    need(p_cuMemAlloc_v2(&d, 1), CUDA_ERROR_INVALID_CONTEXT, "MemAlloc without a context");
    return i + 1;
  }
  if (!strcmp(s, "cu-ctx-release")) {
    need(p_cuDevicePrimaryCtxRelease_v2((int)num(ARG(1))), CUDA_SUCCESS, "PrimaryCtxRelease");
    return i + 2;
  }
  if (!strcmp(s, "cu-alloc") || !strcmp(s, "cu-alloc-expect")) {
    bool expect = s[8] == '-';
    CUdeviceptr d = 0;
    CUresult r = p_cuMemAlloc_v2(&d, num(ARG(1)));
    need(r, expect ? code_of(ARG(2)) : CUDA_SUCCESS, "cuMemAlloc_v2");
    if (r == CUDA_SUCCESS && nallocs < 256)
      allocs[nallocs++] = d;
    return i + (expect ? 3 : 2);
  }
  if (!strcmp(s, "cu-free-all")) {
    while (nallocs)
      need(p_cuMemFree_v2(allocs[--nallocs]), CUDA_SUCCESS, "cuMemFree_v2");
    return i + 1;
  }
  if (!strcmp(s, "cu-free-expect")) { /* frees the last allocation expecting CODE */
    if (!nallocs)
      fail("nothing to free");
    need(p_cuMemFree_v2(allocs[--nallocs]), code_of(ARG(1)), "cuMemFree_v2");
    return i + 2;
  }
  if (!strcmp(s, "cu-free-max")) { /* allocate exactly what cuMemGetInfo says is free */
    size_t f, t;
    need(p_cuMemGetInfo_v2(&f, &t), CUDA_SUCCESS, "cuMemGetInfo_v2");
    CUdeviceptr d;
    need(p_cuMemAlloc_v2(&d, f + 1), CUDA_ERROR_OUT_OF_MEMORY, "alloc of free + 1");
    need(p_cuMemAlloc_v2(&d, f), CUDA_SUCCESS, "alloc of all free memory");
    need(p_cuMemGetInfo_v2(&f, &t), CUDA_SUCCESS, "cuMemGetInfo_v2");
    if (f != 0)
      fail("%zu bytes free after taking everything", f);
    need(p_cuMemAlloc_v2(&allocs[nallocs], 1), CUDA_ERROR_OUT_OF_MEMORY, "alloc when full");
    need(p_cuMemFree_v2(d), CUDA_SUCCESS, "free");
    return i + 1;
  }
  if (!strcmp(s, "cu-expect-free")) {
    size_t f, t;
    need(p_cuMemGetInfo_v2(&f, &t), CUDA_SUCCESS, "cuMemGetInfo_v2");
    if (f != num(ARG(1)))
      fail("%zu bytes free, expected %s", f, ARG(1));
    return i + 2;
  }
  if (!strcmp(s, "cu-expect-lost")) { /* CODE: calls on the current device fail so */
    CUdeviceptr d;
    size_t f, t;
    need(p_cuMemAlloc_v2(&d, 1), code_of(ARG(1)), "cuMemAlloc_v2 on a faulty device");
    need(p_cuMemGetInfo_v2(&f, &t), code_of(ARG(1)), "cuMemGetInfo_v2 on a faulty device");
    return i + 2;
  }
  if (!strcmp(s, "cu-copy")) {
    cu_copy(num(ARG(1)));
    return i + 2;
  }
  if (!strcmp(s, "cu-vmm")) {
    unsigned long long used;
    cu_vmm((int)num(ARG(1)), &used);
    return i + 2;
  }
  if (!strcmp(s, "cu-fill") || !strcmp(s, "cu-take")) { /* DEV vmm|mem|mem=SIZE COUNT */
    const char *kind = ARG(2);
    size_t piece = 2u << 20; /* the VMM granularity */
    if (!strncmp(kind, "mem=", 4))
      piece = num(kind + 4);
    else if (strcmp(kind, "vmm") && strcmp(kind, "mem"))
      fail("%s: vmm, mem or mem=SIZE, not %s", s, kind);
    cu_fill((int)num(ARG(1)), !strcmp(kind, "vmm"), piece, num(ARG(3)), !strcmp(s, "cu-fill"));
    return i + 4;
  }
  if (!strcmp(s, "cu-unfill")) { /* releases and frees everything cu-fill/cu-take took */
    cu_unfill();
    return i + 1;
  }
  if (!strcmp(s, "cu-misc")) {
    cu_misc();
    return i + 1;
  }
  return -1;
#undef ARG
}

static int step_control(int argc, char **argv, int i) {
  const char *s = argv[i];
  if (!strcmp(s, "ready") && i + 1 < argc) { /* FILE: readiness signal */
    char text[32];
    snprintf(text, sizeof text, "%d\n", (int)getpid());
    write_file(argv[i + 1], text);
    return i + 2;
  }
  if (!strcmp(s, "wait-file") && i + 1 < argc) {
    wait_file(argv[i + 1]);
    return i + 2;
  }
  if (!strcmp(s, "block")) {
    for (;;)
      pause();
  }
  if (!strcmp(s, "hold-lock") && i + 2 < argc) { /* NODE FILE: take the lock, signal, block */
    int (*hold)(const char *, int);
    void *p = dlsym(dl, "gpum_sim_debug_hold_lock");
    memcpy(&hold, &p, sizeof p);
    int fd = open(argv[i + 2], O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (!p || fd < 0)
      fail("hold-lock setup");
    hold(argv[i + 1], fd);
    fail("gpum_sim_debug_hold_lock returned");
  }
  return -1;
}

static int step(int argc, char **argv, int i) {
  int next = step_nvml(argc, argv, i);
  if (next < 0)
    next = step_cuda(argc, argv, i);
  if (next < 0)
    next = step_control(argc, argv, i);
  if (next < 0)
    fail("unknown step '%s'", argv[i]);
  return next;
}

int main(int argc, char **argv) {
  load();
  for (int i = 1; i < argc;)
    i = step(argc, argv, i);
  return 0;
}
