/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The history ring of one device: samples packed into 64-byte records (see monitor.h for the
 * memory arithmetic), a fixed-capacity ring that overwrites the oldest, and a binary search
 * by timestamp for "samples since" queries and windows.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>

#include "monitor/monitor_internal.h"

_Static_assert(sizeof(gpum__hrec_t) == 64, "history record must stay 64 bytes");
_Static_assert(GPUM_METRIC_COUNT <= 16, "validity bits must fit the record's uint16_t");

static uint32_t sat32(uint64_t v) {
  return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}
static uint16_t sat16(uint64_t v) {
  return v > UINT16_MAX ? UINT16_MAX : (uint16_t)v;
}
static uint8_t sat8(uint64_t v) {
  return v > UINT8_MAX ? UINT8_MAX : (uint8_t)v;
}

void gpum__hrec_pack(const gpum_device_sample_t *s, gpum__hrec_t *r) {
  memset(r, 0, sizeof(*r));
  r->timestamp_ns = s->timestamp_ns;
  r->valid = (uint16_t)(s->valid & ((1u << GPUM_METRIC_COUNT) - 1));
  r->memory_total = s->memory_total;
  r->memory_used = s->memory_used;
  r->memory_free = s->memory_free;
  r->memory_reserved = s->memory_reserved;
  r->util_gpu = sat8(s->util_gpu);
  r->util_memory = sat8(s->util_memory);
  int t = s->temperature_c;
  r->temperature_c = (int16_t)(t > INT16_MAX ? INT16_MAX : t < INT16_MIN ? INT16_MIN : t);
  r->power_mw = sat32(s->power_mw);
  r->clock_sm_mhz = sat16(s->clock_sm_mhz);
  r->clock_mem_mhz = sat16(s->clock_mem_mhz);
  r->ecc_corrected = sat32(s->ecc_corrected);
  r->ecc_uncorrected = sat32(s->ecc_uncorrected);
}

void gpum__hrec_unpack(const gpum__hrec_t *r, gpum_device_sample_t *s) {
  memset(s, 0, sizeof(*s));
  s->timestamp_ns = r->timestamp_ns;
  s->valid = r->valid;
  s->memory_total = r->memory_total;
  s->memory_used = r->memory_used;
  s->memory_free = r->memory_free;
  s->memory_reserved = r->memory_reserved;
  s->util_gpu = r->util_gpu;
  s->util_memory = r->util_memory;
  s->temperature_c = r->temperature_c;
  s->power_mw = r->power_mw;
  s->clock_sm_mhz = r->clock_sm_mhz;
  s->clock_mem_mhz = r->clock_mem_mhz;
  s->ecc_corrected = r->ecc_corrected;
  s->ecc_uncorrected = r->ecc_uncorrected;
}

int gpum__ring_init(gpum__ring_t *r, size_t cap) {
  memset(r, 0, sizeof(*r));
  if (cap == 0)
    return gpum_error(GPUM_EINVAL, "history ring: capacity 0");
  r->recs = calloc(cap, sizeof(*r->recs));
  if (r->recs == NULL)
    return gpum_error(GPUM_ENOMEM, "cannot allocate a history of %zu samples", cap);
  r->cap = cap;
  return 0;
}

void gpum__ring_free(gpum__ring_t *r) {
  free(r->recs);
  memset(r, 0, sizeof(*r));
}

/* Keeps the ring sorted by time (the searches rely on it): a timestamp earlier than the newest
 * stored one (the wall clock stepped back) is stored as that newest one. */
void gpum__ring_push(gpum__ring_t *r, const gpum__hrec_t *rec) {
  r->recs[r->head] = *rec;
  if (r->len > 0) {
    uint64_t last = gpum__ring_at(r, r->len - 1)->timestamp_ns;
    if (r->recs[r->head].timestamp_ns < last)
      r->recs[r->head].timestamp_ns = last;
  }
  r->head = (r->head + 1) % r->cap;
  if (r->len < r->cap)
    r->len++;
  r->total++;
}

const gpum__hrec_t *gpum__ring_at(const gpum__ring_t *r, size_t i) {
  size_t start = (r->head + r->cap - r->len) % r->cap;
  return &r->recs[(start + i) % r->cap];
}

size_t gpum__ring_after(const gpum__ring_t *r, uint64_t t) {
  size_t lo = 0, hi = r->len;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (gpum__ring_at(r, mid)->timestamp_ns > t)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}
