/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What happens to a simulated device over time and when something goes wrong: the thermal and
 * power model (both follow utilisation with a first-order lag, computed lazily from
 * timestamps, so no background thread is needed), injected and scheduled faults, and the
 * delivery of NVML events to the event sets of every process (a futex on the shared event
 * counter wakes the waiters).
 *
 * XIDs and their effects (docs/sim.md lists them):
 *   79                     the GPU has fallen off the bus: every NVML call on it returns
 *                          NVML_ERROR_GPU_IS_LOST, CUDA calls CUDA_ERROR_UNKNOWN;
 *   48, 74, 94, 95         the GPU needs a reset: NVML_ERROR_RESET_REQUIRED, CUDA calls
 *                          CUDA_ERROR_ECC_UNCORRECTABLE (48, 94, 95) or CUDA_ERROR_UNKNOWN (74);
 *   63                     the record of a bad row or page: a row remapping is pending
 *                          (nvmlDeviceGetRemappedRows isPending=1, one more uncorrectable row)
 *                          on Ampere and later, a page retirement on older GPUs
 *                          (nvmlDeviceGetRetiredPagesPendingStatus enabled); the spec makes
 *                          only the call of the device's generation supported;
 *   64                     a row remapping failed (failureOccurred=1; like the real flag it
 *                          survives resets, so `gpum sim clear` keeps it);
 *   any                    an nvmlEventTypeXidCriticalError event carrying the number.
 */
#include <linux/futex.h>
#include <math.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <gpum/error.h>

#include "sim_internal.h"

void gpum__sim_wake(struct gpum__sim_node *n) {
  __atomic_add_fetch(&n->event_seq, 1, __ATOMIC_RELEASE);
  syscall(SYS_futex, &n->event_seq, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

void gpum__sim_wait(struct gpum__sim_node *n, uint32_t seen, uint64_t timeout_ms) {
  struct timespec ts = {.tv_sec = (time_t)(timeout_ms / 1000),
                        .tv_nsec = (long)(timeout_ms % 1000) * 1000000L};
  /* Not FUTEX_PRIVATE: the word is shared between processes. Returns at once if the counter
   * already moved on, on a wake, on a signal or at the timeout; the caller re-checks. */
  syscall(SYS_futex, &n->event_seq, FUTEX_WAIT, seen, &ts, NULL, 0);
}

void gpum__sim_post_event(struct gpum__sim_node *n, unsigned dev, uint64_t type, uint64_t data) {
  for (uint32_t i = 0; i < GPUM__SIM_MAX_EVSETS; i++) {
    struct gpum__sim_evset *e = &n->evsets[i];
    if (e->state != GPUM__SIM_A_USED || !(e->mask[dev] & type))
      continue;
    if (e->head - e->tail >= GPUM__SIM_EVQ) /* full: the oldest event is dropped */
      e->tail++;
    e->q[e->head % GPUM__SIM_EVQ] =
        (struct gpum__sim_event){.device = dev, .type = type, .data = data};
    __atomic_store_n(&e->head, e->head + 1, __ATOMIC_RELEASE);
  }
  gpum__sim_wake(n);
}

/* First-order lag: x moves towards target by 1 - exp(-dt/tau). */
static double approach(double x, double target, double dt_s, double tau_s) {
  if (tau_s <= 0)
    return target;
  return target + (x - target) * exp(-dt_s / tau_s);
}

static void model_advance(struct gpum__sim_node *n, unsigned i, uint64_t now) {
  const struct gpum__sim_dev_spec *s = &n->spec.dev[i];
  struct gpum__sim_dev_state *d = &n->dev[i];
  if (now <= d->model_ns)
    return;
  double dt = (double)(now - d->model_ns) / 1e9, u = d->util_gpu / 100.0;
  double t_target = s->temp_idle + (double)(s->temp_max - s->temp_idle) * u;
  double p_target = s->power_idle_mw + ((double)s->power_max_mw - s->power_idle_mw) * u;
  double p0 = d->power_mw;
  d->temp_c = approach(d->temp_c, t_target, dt, s->thermal_tau_s);
  d->power_mw = approach(d->power_mw, p_target, dt, s->power_tau_s);
  /* Level Zero's counters: energy at the mean of the interval's ends (mW x s = mJ), busy time
   * at the utilisation set for the interval. */
  d->energy_uj += (p0 + d->power_mw) / 2.0 * dt * 1000.0;
  d->busy_us += u * dt * 1e6;
  d->model_ns = now;
}

void gpum__sim_tick(struct gpum__sim_node *n) {
  uint64_t now = gpum__sim_now_ns();
  for (unsigned i = 0; i < n->spec.device_count; i++)
    model_advance(n, i, now);
  uint64_t since_ms = (now - n->hdr.created_ns) / 1000000ull;
  for (unsigned i = 0; i < n->spec.sched_count; i++) {
    struct gpum__sim_sched_fault *f = &n->spec.sched[i];
    if (f->fired || since_ms < f->at_ms)
      continue;
    f->fired = 1;
    gpum__sim_fault_apply(n, f->device, &f->fault);
  }
}

uint64_t gpum__sim_next_fault_ms(const struct gpum__sim_node *n) {
  uint64_t since_ms = (gpum__sim_now_ns() - n->hdr.created_ns) / 1000000ull, next = UINT64_MAX;
  for (unsigned i = 0; i < n->spec.sched_count; i++) {
    const struct gpum__sim_sched_fault *f = &n->spec.sched[i];
    uint64_t in = f->at_ms > since_ms ? f->at_ms - since_ms : 0;
    if (!f->fired && in < next)
      next = in;
  }
  return next;
}

unsigned gpum__sim_temp(const struct gpum__sim_node *n, unsigned dev) {
  const struct gpum__sim_dev_state *d = &n->dev[dev];
  if (d->temp_override > -1000)
    return d->temp_override < 0 ? 0 : (unsigned)d->temp_override;
  return (unsigned)lround(d->temp_c);
}

unsigned gpum__sim_power_mw(const struct gpum__sim_node *n, unsigned dev) {
  const struct gpum__sim_dev_state *d = &n->dev[dev];
  unsigned p = (unsigned)lround(d->power_mw);
  unsigned limit = n->spec.dev[dev].power_limit_mw;
  return p > limit ? limit : p;
}

unsigned gpum__sim_clock(const struct gpum__sim_node *n, unsigned dev, int type, bool max) {
  const struct gpum__sim_dev_spec *s = &n->spec.dev[dev];
  unsigned lo, hi;
  switch (type) {
  case NVML_CLOCK_MEM:
    lo = s->clock_mem_idle, hi = s->clock_mem_max;
    break;
  case NVML_CLOCK_VIDEO:
    lo = s->clock_sm_idle, hi = s->clock_video_max;
    break;
  default: /* graphics and SM run together */
    lo = s->clock_sm_idle, hi = s->clock_sm_max;
    break;
  }
  if (max)
    return hi;
  double u = n->dev[dev].util_gpu / 100.0;
  unsigned c = lo + (unsigned)lround((double)(hi > lo ? hi - lo : 0) * u);
  /* Thermal slowdown: clocks drop by a third above the slowdown threshold. */
  if (gpum__sim_temp(n, dev) >= s->temp_slowdown)
    c = c * 2 / 3;
  return c;
}

/* The driver's answer to an uncorrectable memory error: the bad row is remapped at the next
 * reset (Ampere and later), the bad page retired at the next driver load (older GPUs). Both
 * are recorded; which one a client sees depends on the device's generation (spec.c). */
static void mark_bad_row(struct gpum__sim_dev_state *d) {
  d->remap_pending = 1;
  d->retired_pending = 1;
  d->remap_unc++;
}

static void apply_xid(struct gpum__sim_node *n, unsigned dev, int xid) {
  struct gpum__sim_dev_state *d = &n->dev[dev];
  switch (xid) {
  case 79:
    d->lost = 1;
    break;
  case 48:
  case 74:
  case 94:
  case 95:
    d->reset_required = (uint32_t)xid;
    break;
  case 63:
    mark_bad_row(d);
    break;
  case 64:
    d->remap_failure = 1;
    break;
  default:
    break;
  }
  d->last_xid = xid;
  d->xid_count++;
  gpum__sim_post_event(n, dev, nvmlEventTypeXidCriticalError, (uint64_t)xid);
}

int gpum__sim_fault_apply(struct gpum__sim_node *n, unsigned dev, const gpum_sim_fault_t *f) {
  struct gpum__sim_dev_state *d = &n->dev[dev];
  switch (f->kind) {
  case GPUM_SIM_FAULT_XID:
    if (f->value < 1 || f->value > 999)
      return gpum__sim_err(GPUM_EINVAL, "bad Xid %lld (expected 1..999)", (long long)f->value);
    apply_xid(n, dev, (int)f->value);
    return 0;
  case GPUM_SIM_FAULT_ECC_SINGLE:
  case GPUM_SIM_FAULT_ECC_DOUBLE: {
    if (f->value < 1 || f->value > 1000000)
      return gpum__sim_err(GPUM_EINVAL, "bad ECC error count %lld (expected 1..1000000)",
                           (long long)f->value);
    uint64_t k = (uint64_t)f->value;
    bool single = f->kind == GPUM_SIM_FAULT_ECC_SINGLE;
    if (single) {
      d->ecc_sbe_volatile += k;
      d->ecc_sbe_aggregate += k;
    } else {
      d->ecc_dbe_volatile += k;
      d->ecc_dbe_aggregate += k;
      if (n->spec.dev[dev].ecc)
        mark_bad_row(d);
    }
    gpum__sim_post_event(
        n, dev, single ? nvmlEventTypeSingleBitEccError : nvmlEventTypeDoubleBitEccError, 0);
    return 0;
  }
  case GPUM_SIM_FAULT_TEMP:
    if (f->value < -50 || f->value > 200)
      return gpum__sim_err(GPUM_EINVAL, "bad temperature %lld C (expected -50..200)",
                           (long long)f->value);
    d->temp_override = (int32_t)f->value;
    return 0;
  case GPUM_SIM_FAULT_ERROR_RATE:
    if (!(f->rate >= 0 && f->rate <= 1))
      return gpum__sim_err(GPUM_EINVAL, "bad error rate %g (expected 0..1)", f->rate);
    d->error_rate_ppm = (uint32_t)lround(f->rate * 1e6);
    return 0;
  case GPUM_SIM_FAULT_SLOW:
    if (f->value < 0 || f->value > 86400000)
      return gpum__sim_err(GPUM_EINVAL, "bad delay %lld ms (expected 0..86400000)",
                           (long long)f->value);
    d->slow_ms = (uint32_t)f->value;
    return 0;
  case GPUM_SIM_FAULT_FAIL_AFTER:
    if (f->value < 0)
      return gpum__sim_err(GPUM_EINVAL, "bad byte count %lld", (long long)f->value);
    d->fail_after_left = (uint64_t)f->value;
    d->fail_after_set = 1;
    return 0;
  case GPUM_SIM_FAULT_CKPT_FAIL:
  case GPUM_SIM_FAULT_RESTORE_FAIL:
    if (f->value < 1 || f->value > 1000)
      return gpum__sim_err(GPUM_EINVAL, "bad failure count %lld (expected 1..1000)",
                           (long long)f->value);
    if (f->kind == GPUM_SIM_FAULT_CKPT_FAIL)
      d->ckpt_fail = (uint32_t)f->value;
    else
      d->restore_fail = (uint32_t)f->value;
    return 0;
  }
  return gpum__sim_err(GPUM_EINVAL, "unknown fault kind %d", (int)f->kind);
}

void gpum__sim_fault_clear(struct gpum__sim_node *n, unsigned dev) {
  struct gpum__sim_dev_state *d = &n->dev[dev];
  /* Like a GPU reset: faults go, volatile ECC counters restart, aggregate ones stay; pending
   * row remaps and page retirements take effect (the remapped-row counts stay), and a failed
   * remap stays recorded, as it does in a real GPU's InfoROM. */
  d->lost = 0;
  d->reset_required = 0;
  d->temp_override = -1000;
  d->error_rate_ppm = 0;
  d->slow_ms = 0;
  d->fail_after_set = 0;
  d->fail_after_left = 0;
  d->ckpt_fail = 0;
  d->restore_fail = 0;
  d->ecc_sbe_volatile = 0;
  d->ecc_dbe_volatile = 0;
  d->remap_pending = 0;
  d->retired_pending = 0;
  d->last_xid = 0;
}
