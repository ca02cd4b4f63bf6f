/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What every driver interface of the simulator shares about the node's devices: each vendor's
 * own numbering (NVML and CUDA count only the NVIDIA devices, ROCm SMI only the AMD ones, Level
 * Zero only the Intel ones, each from 0 in node order, as real drivers on one machine each see
 * only their own GPUs), the fault gate a device call passes before it acts
 * (gpum__sim_dev_enter), whose outcome each interface turns into its own return code, and the
 * reading of an Intel device's UUID (gpum__sim_uuid_bytes). A MIG instance (mig_of) is no
 * vendor's numbered device: NVML reaches it through its parent's MIG calls, CUDA through
 * CUDA_VISIBLE_DEVICES.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <gpum/error.h>

#include "sim_internal.h"

unsigned gpum__sim_vendor_count(const struct gpum__sim_node *n, uint32_t vendor) {
  unsigned c = 0;
  for (unsigned i = 0; i < n->spec.device_count; i++)
    c += n->spec.dev[i].vendor == vendor && !n->spec.dev[i].mig_of;
  return c;
}

int gpum__sim_vendor_dev(const struct gpum__sim_node *n, uint32_t vendor, unsigned k) {
  for (unsigned i = 0; i < n->spec.device_count; i++) {
    if (n->spec.dev[i].vendor != vendor || n->spec.dev[i].mig_of)
      continue;
    if (k-- == 0)
      return (int)i;
  }
  return -1;
}

const char *gpum__sim_vendor_name(uint32_t vendor) {
  switch (vendor) {
  case GPUM__SIM_V_NVIDIA:
    return "nvidia";
  case GPUM__SIM_V_AMD:
    return "amd";
  case GPUM__SIM_V_INTEL:
    return "intel";
  default:
    return "unknown";
  }
}

unsigned gpum__sim_vendor_ord(const struct gpum__sim_node *n, unsigned idx) {
  unsigned k = 0;
  for (unsigned i = 0; i < idx && i < n->spec.device_count; i++)
    k += n->spec.dev[i].vendor == n->spec.dev[idx].vendor && !n->spec.dev[i].mig_of;
  return k;
}

int gpum__sim_lib_init(gpum__sim_lib_t *l) {
  int err = 0;
  pthread_mutex_lock(&l->mu);
  if (l->count == 0) {
    struct gpum__sim_node *n = gpum__sim_attach(&err);
    if (!n) {
      err = err ? err : GPUM_ENODEV;
      goto out;
    }
    l->node = n;
  }
  l->count++;
out:
  pthread_mutex_unlock(&l->mu);
  return err;
}

bool gpum__sim_lib_shutdown(gpum__sim_lib_t *l) {
  pthread_mutex_lock(&l->mu);
  bool was = l->count > 0;
  if (was)
    l->count--;
  pthread_mutex_unlock(&l->mu);
  return was;
}

struct gpum__sim_node *gpum__sim_lib_node(gpum__sim_lib_t *l) {
  pthread_mutex_lock(&l->mu);
  struct gpum__sim_node *n = l->count ? l->node : NULL;
  pthread_mutex_unlock(&l->mu);
  return n;
}

#define SLOW_STEP_MS 50u /* --slow: how often a slowed call looks whether the fault is gone */

gpum__sim_enter_t gpum__sim_dev_enter(struct gpum__sim_node *n, unsigned idx, uint32_t metric) {
  if (gpum__sim_lock(n) != 0)
    return GPUM__SIM_ENTER_LOCK;
  gpum__sim_tick(n);
  const struct gpum__sim_dev_state *d = &n->dev[idx];
  gpum__sim_enter_t ret = GPUM__SIM_ENTER_OK;
  if (d->lost)
    ret = GPUM__SIM_ENTER_LOST;
  else if (d->reset_required)
    ret = GPUM__SIM_ENTER_RESET;
  else if (metric & n->spec.dev[idx].unsupported)
    ret = GPUM__SIM_ENTER_UNSUP;
  else if (d->error_rate_ppm && gpum__sim_rand01() * 1e6 < d->error_rate_ppm)
    ret = GPUM__SIM_ENTER_FLAKY;
  if (ret != GPUM__SIM_ENTER_OK) {
    gpum__sim_unlock(n);
    return ret;
  }
  uint32_t slow = d->slow_ms;
  while (slow) {
    /* Never sleep with the lock held: a hanging call must hang only its caller. Slept in
     * steps: a call in progress ends once the fault is cleared (or shortened), as a call
     * of a driver that got unstuck returns. */
    uint32_t step = slow < SLOW_STEP_MS ? slow : SLOW_STEP_MS;
    gpum__sim_unlock(n);
    gpum__sim_sleep_ms(step);
    if (gpum__sim_lock(n) != 0)
      return GPUM__SIM_ENTER_LOCK;
    slow -= step;
    if (slow > d->slow_ms)
      slow = d->slow_ms;
  }
  gpum__sim_tick(n);
  return GPUM__SIM_ENTER_OK;
}

bool gpum__sim_uuid_bytes(const char *uuid, uint8_t out[16]) {
  static const char hex[] = "0123456789abcdef";
  unsigned k = 0;
  for (size_t i = 0; uuid[i]; i++) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (uuid[i] != '-')
        return false;
      continue;
    }
    char ch = uuid[i] >= 'A' && uuid[i] <= 'F' ? (char)(uuid[i] - 'A' + 'a') : uuid[i];
    const char *p = ch ? strchr(hex, ch) : NULL;
    if (!p || k >= 32)
      return false;
    if (out)
      out[k / 2] = (uint8_t)(k % 2 ? out[k / 2] | (p - hex) : (p - hex) << 4);
    k++;
  }
  return k == 32;
}
