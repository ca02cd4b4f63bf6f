/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NVML's memory info as the job sees it (docs/enforce.md): for a GPU the job's CUDA sees, the
 * reservation's limit is the total, used is what the job's processes hold, free the rest (never
 * more than the GPU has free). Other GPUs are reported as they are.
 *
 * NVML numbers GPUs physically; the fence numbers them as the job's CUDA does, through
 * CUDA_VISIBLE_DEVICES (indices, or UUIDs and their prefixes) in PCI bus order, the order gpum
 * run asks for (CUDA_DEVICE_ORDER=PCI_BUS_ID).
 */
#include <stdlib.h>
#include <string.h>

#include "enforce_internal.h"

/* The CUDA ordinal of an NVML device, or -1 when the job's CUDA does not see it. */
static int cuda_ordinal(nvmlDevice_t device) {
  unsigned idx = 0;
  if (!gpum__enf_real.nvmlDeviceGetIndex || gpum__enf_real.nvmlDeviceGetIndex(device, &idx) != 0)
    return -1;
  const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
  if (!cvd)
    return (int)idx;
  char uuid[96] = "";
  if (gpum__enf_real.nvmlDeviceGetUUID)
    (void)gpum__enf_real.nvmlDeviceGetUUID(device, uuid, sizeof uuid);
  int ord = 0;
  for (const char *p = cvd; *p;) {
    size_t n = strcspn(p, ",");
    char tok[96];
    if (n >= sizeof tok)
      return -1;
    memcpy(tok, p, n);
    tok[n] = '\0';
    char *end;
    unsigned long v = strtoul(tok, &end, 10);
    if (end != tok && *end == '\0') {
      if (v == idx)
        return ord;
    } else if (!strncmp(tok, "GPU-", 4)) {
      if (*uuid && !strncmp(uuid, tok, n))
        return ord;
    } else {
      return -1; /* CUDA stops at the first entry it cannot read */
    }
    ord++;
    p += n;
    if (*p == ',')
      p++;
  }
  return -1;
}

static bool job_view(nvmlDevice_t device, uint64_t *limit, uint64_t *used) {
  int ord = cuda_ordinal(device);
  return ord >= 0 && gpum__enf_view((unsigned)ord, limit, used);
}

/* The device's memory as the job sees it when it runs fenced: total at most its limit, used
 * what it holds, free what is left of the limit (never more than the device has free).
 * Returns false (nothing changed) when the job is not fenced on device. */
static bool clamp_to_job(nvmlDevice_t device, unsigned long long *total, unsigned long long *used,
                         unsigned long long *free_b) {
  uint64_t limit, held;
  if (!job_view(device, &limit, &held))
    return false;
  *total = limit < *total ? limit : *total;
  unsigned long long left = *total > held ? *total - held : 0;
  *used = held;
  *free_b = left < *free_b ? left : *free_b;
  return true;
}

GPUM_ENFORCE_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device,
                                                         nvmlMemory_t *memory) {
  if (!gpum__enf_nvml_ready(NULL) || !gpum__enf_real.nvmlDeviceGetMemoryInfo)
    return NVML_ERROR_UNINITIALIZED;
  nvmlReturn_t r = gpum__enf_real.nvmlDeviceGetMemoryInfo(device, memory);
  if (r == NVML_SUCCESS)
    (void)clamp_to_job(device, &memory->total, &memory->used, &memory->free);
  return r;
}

GPUM_ENFORCE_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device,
                                                            nvmlMemory_v2_t *memory) {
  if (!gpum__enf_nvml_ready(NULL) || !gpum__enf_real.nvmlDeviceGetMemoryInfo_v2)
    return NVML_ERROR_UNINITIALIZED;
  nvmlReturn_t r = gpum__enf_real.nvmlDeviceGetMemoryInfo_v2(device, memory);
  if (r == NVML_SUCCESS && clamp_to_job(device, &memory->total, &memory->used, &memory->free))
    memory->reserved = 0;
  return r;
}
