/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-process GPU memory from NVML, and the process-list stride problem; at the end, the
 * per-process utilisation (nvmlDeviceGetProcessUtilization).
 *
 * The _v3 process calls normally write 24-byte entries, but early R535 drivers (535.43 up to
 * below 535.86) wrote 32-byte entries with no version bump, which scrambles pids and sizes
 * (fact sheet §0.3). What we do, in order:
 *   1. nvmlDeviceGetRunningProcessDetailList when exported: its entries are versioned
 *      (nvmlProcessDetail_v1_t, 32 bytes, list version 0x01000018), so there is no guessing.
 *      A driver that rejects it (FUNCTION_NOT_FOUND, NOT_SUPPORTED, version mismatch) is not
 *      asked again in this session.
 *   2. _v3: the buffer is sized for 32-byte entries and filled with 0xAA before the call; the
 *      stride actually written is measured from the bytes past 24 * n (nvitop PR#226). When
 *      nothing can be measured (no process), the symbol-presence rule of nvitop is the hint.
 *   3. _v2 (24-byte entries), then the plain v1 call (16-byte entries).
 * Each list is asked first with a count of 0; NVML answers INSUFFICIENT_SIZE with the count
 * needed, the buffer gets slack because the list changes between calls, and a list that keeps
 * growing is retried a bounded number of times. Compute and graphics lists are merged, each
 * pid once.
 */
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>
#include <gpum/log.h>

#include "device/nvml_internal.h"

#define GROW_ATTEMPTS 5

unsigned gpum__proc_stride_hint(bool has_conf_compute_mem, bool has_detail_list) {
  return has_conf_compute_mem && !has_detail_list ? 32u : 24u;
}

unsigned gpum__proc_detect_stride(const unsigned char *buf, size_t len, unsigned n, unsigned hint) {
  if (n == 0 || len < (size_t)n * 32)
    return hint;
  for (size_t i = (size_t)n * 24; i < (size_t)n * 32; i++) {
    if (buf[i] != GPUM__PROC_FILL)
      return 32;
  }
  return 24;
}

void gpum__proc_decode(const unsigned char *buf, unsigned n, unsigned stride,
                       gpum__rawproc_t *out) {
  for (unsigned i = 0; i < n; i++) {
    const unsigned char *e = buf + (size_t)i * stride;
    unsigned pid;
    unsigned long long mem;
    memcpy(&pid, e, sizeof pid);
    memcpy(&mem, e + 8, sizeof mem); /* usedGpuMemory is at offset 8 in every version */
    out[i].pid = pid;
    out[i].memory_valid = mem != NVML_VALUE_NOT_AVAILABLE_ULL;
    out[i].memory = out[i].memory_valid ? mem : 0;
  }
}

int gpum__proc_merge(gpum__rawproc_t **list, size_t *n, const gpum__rawproc_t *add, size_t nadd) {
  for (size_t j = 0; j < nadd; j++) {
    size_t k;
    for (k = 0; k < *n; k++) {
      if ((*list)[k].pid == add[j].pid)
        break;
    }
    if (k < *n) {
      gpum__rawproc_t *p = &(*list)[k];
      if (add[j].memory_valid && (!p->memory_valid || add[j].memory > p->memory)) {
        p->memory = add[j].memory;
        p->memory_valid = true;
      }
      continue;
    }
    gpum__rawproc_t *grown = realloc(*list, (*n + 1) * sizeof **list);
    if (!grown)
      return gpum_error(GPUM_ENOMEM, "cannot grow the process list to %zu entries", *n + 1);
    *list = grown;
    grown[(*n)++] = add[j];
  }
  return 0;
}

typedef enum { COMPUTE_V3, COMPUTE_V2, COMPUTE_V1, GRAPHICS_V3 } list_kind_t;

static const char *const kind_names[] = {
    "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2",
    "nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses_v3"};

static int call_list(const gpum__nvml_t *nv, list_kind_t k, nvmlDevice_t h, unsigned *count,
                     void *buf) {
  switch (k) {
  case COMPUTE_V3:
    return nv->f.nvmlDeviceGetComputeRunningProcesses_v3(h, count, buf);
  case COMPUTE_V2:
    return nv->f.nvmlDeviceGetComputeRunningProcesses_v2(h, count, buf);
  case COMPUTE_V1:
    return nv->f.nvmlDeviceGetComputeRunningProcesses(h, count, buf);
  case GRAPHICS_V3:
    return nv->f.nvmlDeviceGetGraphicsRunningProcesses_v3(h, count, buf);
  }
  return NVML_ERROR_INVALID_ARGUMENT;
}

/* Sets *rv to the NVML result; on success *out and *nout hold the decoded entries. */
static int query_list(gpum_device_session_t *s, gpum__nvml_t *nv, unsigned i, nvmlDevice_t h,
                      list_kind_t k, int *rv, gpum__rawproc_t **out, unsigned *nout) {
  unsigned need = 0;
  *out = NULL;
  *nout = 0;
  GPUM__NV_DEV(s, nv, i, *rv, call_list(nv, k, h, &need, NULL));
  if (*rv == NVML_SUCCESS && need == 0)
    return 0;
  if (*rv != NVML_SUCCESS && *rv != NVML_ERROR_INSUFFICIENT_SIZE)
    return 0;
  for (int attempt = 0; attempt < GROW_ATTEMPTS; attempt++) {
    unsigned cap = need + need / 2 + 8;
    size_t bytes = (size_t)cap * 32; /* room for the 32-byte stride, whatever the version */
    unsigned char *buf = malloc(bytes);
    if (!buf)
      return gpum_error(GPUM_ENOMEM, "cannot allocate a process list of %u entries", cap);
    memset(buf, GPUM__PROC_FILL, bytes);
    unsigned got = cap;
    GPUM__NV_DEV(s, nv, i, *rv, call_list(nv, k, h, &got, buf));
    if (*rv == NVML_ERROR_INSUFFICIENT_SIZE) {
      free(buf);
      need = got > need ? got : need + 16;
      continue;
    }
    if (*rv != NVML_SUCCESS || got == 0) {
      free(buf);
      return 0;
    }
    if (got > cap)
      got = cap;
    unsigned stride = k == COMPUTE_V1 ? 16
                      : k == COMPUTE_V2
                          ? 24
                          : gpum__proc_detect_stride(buf, bytes, got, nv->stride_hint);
    if ((k == COMPUTE_V3 || k == GRAPHICS_V3) && stride != 24)
      gpum_log(GPUM_LOG_DEBUG, "device", "process list stride=%u call=%s", stride, kind_names[k]);
    *out = calloc(got, sizeof **out);
    if (!*out) {
      free(buf);
      return gpum_error(GPUM_ENOMEM, "cannot allocate %u process entries", got);
    }
    gpum__proc_decode(buf, got, stride, *out);
    *nout = got;
    free(buf);
    return 0;
  }
  return gpum_error(GPUM_EAGAIN, "%s on device %u: the process list kept growing", kind_names[k],
                    i);
}

/* nvmlDeviceGetRunningProcessDetailList for mode (0 compute, 1 graphics). */
static int query_detail(gpum_device_session_t *s, gpum__nvml_t *nv, unsigned i, nvmlDevice_t h,
                        unsigned mode, int *rv, gpum__rawproc_t **out, unsigned *nout) {
  nvmlProcessDetailList_t l;
  *out = NULL;
  *nout = 0;
  memset(&l, 0, sizeof l);
  l.version = nvmlProcessDetailList_v1;
  l.mode = mode;
  GPUM__NV_DEV(s, nv, i, *rv, nv->f.nvmlDeviceGetRunningProcessDetailList(h, &l));
  if (*rv != NVML_ERROR_INSUFFICIENT_SIZE)
    return 0; /* success means no process; any error goes back to the caller */
  unsigned need = l.numProcArrayEntries;
  for (int attempt = 0; attempt < GROW_ATTEMPTS; attempt++) {
    unsigned cap = need + need / 2 + 8;
    nvmlProcessDetail_v1_t *arr = calloc(cap, sizeof *arr);
    if (!arr)
      return gpum_error(GPUM_ENOMEM, "cannot allocate a process list of %u entries", cap);
    l.version = nvmlProcessDetailList_v1;
    l.mode = mode;
    l.numProcArrayEntries = cap;
    l.procArray = arr;
    GPUM__NV_DEV(s, nv, i, *rv, nv->f.nvmlDeviceGetRunningProcessDetailList(h, &l));
    if (*rv == NVML_ERROR_INSUFFICIENT_SIZE) {
      need = l.numProcArrayEntries > need ? l.numProcArrayEntries : need + 16;
      free(arr);
      continue;
    }
    unsigned got = l.numProcArrayEntries < cap ? l.numProcArrayEntries : cap;
    if (*rv == NVML_SUCCESS && got > 0) {
      *out = calloc(got, sizeof **out);
      if (!*out) {
        free(arr);
        return gpum_error(GPUM_ENOMEM, "cannot allocate %u process entries", got);
      }
      gpum__proc_decode((const unsigned char *)arr, got, sizeof *arr, *out);
      *nout = got;
    }
    free(arr);
    return 0;
  }
  return gpum_error(GPUM_EAGAIN,
                    "nvmlDeviceGetRunningProcessDetailList on device %u: the list kept growing", i);
}

static bool rejects_call(int rv) {
  return rv == NVML_ERROR_FUNCTION_NOT_FOUND || rv == NVML_ERROR_NOT_SUPPORTED ||
         rv == NVML_ERROR_ARGUMENT_VERSION_MISMATCH || rv == NVML_ERROR_INVALID_ARGUMENT;
}

/* Adds one list to the result; a non-fatal error on the graphics list is ignored. */
static int add_list(gpum__nvml_t *nv, unsigned i, const char *call, int rc, int rv,
                    gpum__rawproc_t *part, unsigned npart, bool optional, gpum__rawproc_t **out,
                    size_t *n) {
  if (rc == 0 && rv != NVML_SUCCESS && (!optional || gpum__nvml_is_fatal(rv)))
    rc = gpum__nvml_fail(nv, call, i, rv);
  if (rc == 0)
    rc = gpum__proc_merge(out, n, part, npart);
  free(part);
  return rc;
}

static int via_detail_list(gpum_device_session_t *s, gpum__nvml_t *nv, unsigned i, nvmlDevice_t h,
                           gpum__rawproc_t **out, size_t *n, bool *done) {
  gpum__rawproc_t *part;
  unsigned np;
  int rv, rc = query_detail(s, nv, i, h, 0, &rv, &part, &np);
  *done = false;
  if (rc == 0 && rejects_call(rv)) {
    nv->detail_list_off = true;
    gpum_log(GPUM_LOG_DEBUG, "device", "process detail list rejected nvml=%d: using _v3", rv);
    return 0;
  }
  *done = true;
  rc = add_list(nv, i, "nvmlDeviceGetRunningProcessDetailList", rc, rv, part, np, false, out, n);
  if (rc)
    return rc;
  rc = query_detail(s, nv, i, h, 1, &rv, &part, &np);
  return add_list(nv, i, "nvmlDeviceGetRunningProcessDetailList", rc, rv, part, np, true, out, n);
}

int gpum__nvml_processes(gpum_device_session_t *s, unsigned index, gpum__rawproc_t **out,
                         size_t *n) {
  gpum__nvml_t *nv = s->impl;
  *out = NULL;
  *n = 0;
  nvmlDevice_t h;
  int rc = gpum__nvml_handle(s, nv, index, &h);
  if (rc)
    return rc;
  if (nv->f.nvmlDeviceGetRunningProcessDetailList && !nv->detail_list_off) {
    bool done;
    rc = via_detail_list(s, nv, index, h, out, n, &done);
    if (rc || done)
      goto out_check;
  }
  list_kind_t k;
  if (nv->f.nvmlDeviceGetComputeRunningProcesses_v3)
    k = COMPUTE_V3;
  else if (nv->f.nvmlDeviceGetComputeRunningProcesses_v2)
    k = COMPUTE_V2;
  else if (nv->f.nvmlDeviceGetComputeRunningProcesses)
    k = COMPUTE_V1;
  else
    return gpum_error(GPUM_ENOTSUP, "%s exports no nvmlDeviceGetComputeRunningProcesses call",
                      nv->path);
  gpum__rawproc_t *part;
  unsigned np;
  int rv;
  rc = query_list(s, nv, index, h, k, &rv, &part, &np);
  rc = add_list(nv, index, kind_names[k], rc, rv, part, np, false, out, n);
  if (rc == 0 && nv->f.nvmlDeviceGetGraphicsRunningProcesses_v3) {
    rc = query_list(s, nv, index, h, GRAPHICS_V3, &rv, &part, &np);
    rc = add_list(nv, index, kind_names[GRAPHICS_V3], rc, rv, part, np, true, out, n);
  }
out_check:
  if (rc) {
    free(*out);
    *out = NULL;
    *n = 0;
  }
  return rc;
}

/* ---- per-process utilisation ---- */

/* Keeps, of samples[0..n), the newest per pid and none over 100 % (a driver bug nvtop drops
 * too); returns how many are left at the front, in the order of their first appearance. */
size_t gpum__proc_util_reduce(gpum_process_util_t *samples, size_t n) {
  size_t kept = 0;
  for (size_t i = 0; i < n; i++) {
    const gpum_process_util_t *x = &samples[i];
    if (x->sm_util > 100 || x->mem_util > 100 || x->enc_util > 100 || x->dec_util > 100)
      continue;
    size_t k = 0;
    while (k < kept && samples[k].pid != x->pid)
      k++;
    if (k == kept)
      samples[kept++] = *x;
    else if (x->timestamp_us > samples[k].timestamp_us)
      samples[k] = *x;
  }
  return kept;
}

int gpum__nvml_process_util(gpum_device_session_t *s, unsigned index, uint64_t since_us,
                            gpum_process_util_t **out, size_t *n) {
  static const char call[] = "nvmlDeviceGetProcessUtilization";
  gpum__nvml_t *nv = s->impl;
  *out = NULL;
  *n = 0;
  if (!nv->f.nvmlDeviceGetProcessUtilization)
    return gpum_error(GPUM_ENOTSUP, "%s exports no %s", nv->path, call);
  if (nv->dev[index].mig >= 0) /* NVML has no per-process figures for an instance */
    return gpum_error(GPUM_ENOTSUP, "device %u is a MIG instance: %s does not serve it", index,
                      call);
  nvmlDevice_t h;
  int rc = gpum__nvml_handle(s, nv, index, &h);
  if (rc)
    return rc;
  unsigned need = 0;
  int rv;
  GPUM__NV_DEV(s, nv, index, rv,
               nv->f.nvmlDeviceGetProcessUtilization(h, NULL, &need, (unsigned long long)since_us));
  if (rv == NVML_ERROR_NOT_FOUND || (rv == NVML_SUCCESS && need == 0))
    return 0; /* no sample since since_us */
  if (rv != NVML_SUCCESS && rv != NVML_ERROR_INSUFFICIENT_SIZE)
    return gpum__nvml_fail(nv, call, index, rv);
  for (int attempt = 0; attempt < GROW_ATTEMPTS; attempt++) {
    unsigned cap = need + need / 2 + 8; /* processes start between the two calls */
    nvmlProcessUtilizationSample_t *buf = calloc(cap, sizeof *buf);
    if (!buf)
      return gpum_error(GPUM_ENOMEM, "cannot allocate %u process samples", cap);
    unsigned got = cap;
    GPUM__NV_DEV(s, nv, index, rv,
                 nv->f.nvmlDeviceGetProcessUtilization(h, buf, &got, (unsigned long long)since_us));
    if (rv == NVML_ERROR_INSUFFICIENT_SIZE) {
      free(buf);
      need = got > need ? got : need + 16;
      continue;
    }
    if (rv != NVML_SUCCESS) {
      free(buf);
      return rv == NVML_ERROR_NOT_FOUND ? 0 : gpum__nvml_fail(nv, call, index, rv);
    }
    if (got > cap)
      got = cap;
    gpum_process_util_t *v = got ? calloc(got, sizeof *v) : NULL;
    if (got && !v) {
      free(buf);
      return gpum_error(GPUM_ENOMEM, "cannot allocate %u process samples", got);
    }
    for (unsigned i = 0; i < got; i++)
      v[i] = (gpum_process_util_t){.pid = buf[i].pid,
                                   .timestamp_us = buf[i].timeStamp,
                                   .sm_util = buf[i].smUtil,
                                   .mem_util = buf[i].memUtil,
                                   .enc_util = buf[i].encUtil,
                                   .dec_util = buf[i].decUtil};
    free(buf);
    *n = gpum__proc_util_reduce(v, got);
    *out = v;
    if (*n == 0) {
      free(v);
      *out = NULL;
    }
    return 0;
  }
  return gpum_error(GPUM_EAGAIN, "%s on device %u: the list kept growing", call, index);
}
