/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HIP ordinals to the fence's devices, and the sizes HIP allocations are charged
 * (docs/enforce.md, "AMD (HIP)"). Pure functions of their arguments, so that the unit test
 * (tests/unit/test_enforce_hip.c) checks them without a runtime.
 *
 * HIP numbers the devices ROCR_VISIBLE_DEVICES leaves (AMD device indices or "GPU-" UUIDs),
 * then HIP_VISIBLE_DEVICES picks among those by index (CUDA_VISIBLE_DEVICES stands for it when
 * it is unset, as HIP on AMD does). gpum run names a grant's AMD devices by UUID in
 * ROCR_VISIBLE_DEVICES and lists every granted device in GPUM_RESERVATION_DEVICES, whose
 * positions are the fence's devices; a device found there is charged at its position. Anything
 * else (GPUM_MEM_LIMIT alone, index lists) charges HIP ordinal n on fence device n.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "enforce_internal.h"

#define HIP_GRAN (2ull << 20)
#define HIP_PAGE 4096ull

uint64_t gpum__enf_hip_round(uint64_t bytes) {
  uint64_t m = bytes >= HIP_GRAN ? HIP_GRAN : HIP_PAGE;
  return bytes > UINT64_MAX - (m - 1) ? UINT64_MAX : (bytes + m - 1) / m * m;
}

/* Entry k of a comma-separated list into buf (len bytes); false when there is none. */
static bool list_entry(const char *list, unsigned k, char *buf, size_t len) {
  const char *p = list;
  for (unsigned i = 0; i < k; i++) {
    p = strchr(p, ',');
    if (!p)
      return false;
    p++;
  }
  size_t n = strcspn(p, ",");
  if (n == 0 || n >= len)
    return false;
  memcpy(buf, p, n);
  buf[n] = '\0';
  return true;
}

/* A plain decimal index, or -1. */
static long index_of(const char *s) {
  if (*s < '0' || *s > '9')
    return -1;
  char *end;
  long v = strtol(s, &end, 10);
  return *end == '\0' && v < GPUM_FENCE_MAX_DEVICES * 64 ? v : -1;
}

int gpum__enf_hip_fence_dev(const char *rocr, const char *hvd, const char *resdevs, int ord,
                            const char *runtime_uuid) {
  if (ord < 0)
    return -1;
  /* The ROCR entry the ordinal stands on. */
  long k = ord;
  char tok[96];
  if (hvd && *hvd) {
    if (!list_entry(hvd, (unsigned)ord, tok, sizeof tok) || (k = index_of(tok)) < 0)
      return -1;
  }
  const char *uuid = runtime_uuid && *runtime_uuid ? runtime_uuid : NULL;
  if (rocr && *rocr) {
    if (!list_entry(rocr, (unsigned)k, tok, sizeof tok))
      return -1;
    if (!strncasecmp(tok, "GPU-", 4))
      uuid = tok;
  }
  if (!uuid || !resdevs || !*resdevs)
    return ord;
  char ent[96];
  for (unsigned i = 0; list_entry(resdevs, i, ent, sizeof ent); i++)
    if (!strcasecmp(ent, uuid))
      return (int)i;
  return ord;
}
