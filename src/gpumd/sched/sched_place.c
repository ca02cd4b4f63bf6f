/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Admission and placement for the gpumd scheduler: which devices match a request, which admit
 * it now (memory, health, job count, pressure), which of those a strategy picks (pack, spread,
 * score), the never-fit check at submit, and the "waiting for" text of a queued request.
 */
#include "sched_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>
#include <gpum/gputype.h>
#include <gpum/size.h>

#define ALL_DEVICES(d) for (unsigned d = 0; d < GPUMD_SCHED_MAX_DEVICES; d++)

char *gpumd__sched_mask_format(uint64_t mask, char *buf, size_t len) {
  size_t off = 0;
  if (len == 0)
    return buf;
  buf[0] = '\0';
  ALL_DEVICES(d) {
    if (!(mask & (1ull << d)))
      continue;
    if (off > 0)
      gpumd_cat(buf, len, &off, ",");
    gpumd_cat_u64(buf, len, &off, d);
  }
  return buf;
}

bool gpumd__sched_matches(const gpumd_sched_t *s, const gpumd_resv_t *r, unsigned d) {
  const sched_slot_t *slot = &s->dev[d];
  if (!slot->known)
    return false;
  if (r->want_mask != 0 && !(r->want_mask & (1ull << d)))
    return false;
  if (r->model[0] != '\0' && !gpum_gpu_type_matches_device(r->model, slot->v.name, slot->v.vendor))
    return false;
  return slot->v.memory_total >= r->min_memory;
}

/* True when device d could take r right now (decide: see gpumd__sched_place). */
static bool admits(const gpumd_sched_t *s, const gpumd_resv_t *r, unsigned d, bool decide) {
  const sched_slot_t *slot = &s->dev[d];
  if (!gpumd__sched_matches(s, r, d))
    return false;
  if (slot->v.health == GPUM_HEALTH_ERROR || slot->v.health == GPUM_HEALTH_DISABLED ||
      slot->v.unanswered)
    return false;
  if (s->opts.max_concurrent_jobs != 0 && slot->jobs >= s->opts.max_concurrent_jobs)
    return false;
  if (slot->pressure == GPUMD_PRESSURE_CRITICAL)
    return false;
  if (r->bytes_per_gpu > gpumd__sched_headroom(s, d))
    return false;
  if (decide && s->opts.require_fresh && !slot->v.fresh) {
    /* It would fit by what was last read: the daemon is asked for a fresh read to decide on.
     * A note for it, not scheduling state: the only write through s here. */
    ((gpumd_sched_t *)s)->want_fresh |= 1ull << d;
    return false;
  }
  return true;
}

static double clamp01(double x) {
  return x < 0.0 ? 0.0 : x > 1.0 ? 1.0 : x;
}

/* The score strategy: higher is better. */
static double score(const gpumd_sched_t *s, const gpumd_resv_t *r, unsigned d) {
  const sched_slot_t *slot = &s->dev[d];
  uint64_t cap = gpumd__sched_capacity(s, &slot->v);
  uint64_t left = gpumd__sched_headroom(s, d) - r->bytes_per_gpu;
  double free_frac = cap ? (double)left / (double)cap : 0.0;
  double idle = slot->v.util_valid ? 1.0 - clamp01(slot->v.util_gpu_pct / 100.0) : 0.5;
  double cool = slot->v.temp_valid ? clamp01(1.0 - (slot->v.temperature_c - 30) / 60.0) : 0.5;
  double health = slot->v.health == GPUM_HEALTH_AVAILABLE ? 1.0 : 0.5;
  return 0.5 * free_frac + 0.25 * idle + 0.15 * cool + 0.1 * health;
}

typedef struct {
  unsigned d;
  uint64_t left; /* headroom after placing */
  double score;
} cand_t;

/* True when a is preferred over b under strategy p. */
static bool better(gpumd_placement_t p, const cand_t *a, const cand_t *b) {
  switch (p) {
  case GPUMD_PLACEMENT_SPREAD:
    if (a->left != b->left)
      return a->left > b->left;
    break;
  case GPUMD_PLACEMENT_SCORE:
    if (a->score != b->score)
      return a->score > b->score;
    break;
  case GPUMD_PLACEMENT_PACK:
  default:
    if (a->left != b->left)
      return a->left < b->left;
    break;
  }
  return a->d < b->d;
}

uint64_t gpumd__sched_usable_mask(const gpumd_sched_t *s, const gpumd_resv_t *r) {
  uint64_t m = 0;
  for (uint64_t known = s->known_mask; known != 0; known &= known - 1) {
    unsigned d = (unsigned)__builtin_ctzll(known);
    gpum_health_t h = s->dev[d].v.health;
    if (h != GPUM_HEALTH_ERROR && h != GPUM_HEALTH_DISABLED && gpumd__sched_matches(s, r, d))
      m |= 1ull << d;
  }
  return m;
}

bool gpumd__sched_place(const gpumd_sched_t *s, const gpumd_resv_t *r, bool decide,
                        uint64_t *mask) {
  return gpumd__sched_place_in(s, r, s->known_mask, decide, mask);
}

bool gpumd__sched_place_in(const gpumd_sched_t *s, const gpumd_resv_t *r, uint64_t allowed,
                           bool decide, uint64_t *mask) {
  cand_t c[GPUMD_SCHED_MAX_DEVICES];
  unsigned n = 0;
  /* Only the known devices (a node has a handful; the table has 64 slots) and, for a request
   * naming its devices, only those (gpumd__sched_matches refuses the others): this is the hot
   * path of every scheduling pass, which visits every queued request, so a request that
   * cannot have enough of them is settled without looking at any device. */
  uint64_t cand = s->known_mask & allowed & (r->want_mask != 0 ? r->want_mask : ~0ull);
  if (cand == 0 || (r->gpus > 1 && (unsigned)__builtin_popcountll(cand) < r->gpus))
    return false;
  for (uint64_t known = cand; known != 0; known &= known - 1) {
    unsigned d = (unsigned)__builtin_ctzll(known);
    if (!admits(s, r, d, decide))
      continue;
    cand_t x = {.d = d, .left = gpumd__sched_headroom(s, d) - r->bytes_per_gpu};
    if (s->opts.placement == GPUMD_PLACEMENT_SCORE)
      x.score = score(s, r, d);
    /* Insertion sort: at most 64 devices. */
    unsigned i = n++;
    while (i > 0 && better(s->opts.placement, &x, &c[i - 1])) {
      c[i] = c[i - 1];
      i--;
    }
    c[i] = x;
  }
  if (n < r->gpus)
    return false;
  /* The GPUs of one reservation are of one vendor (one runtime drives them): the first vendor,
   * in the order of the candidates, that has enough of them. */
  for (unsigned first = 0; first < n; first++) {
    const char *vendor = s->dev[c[first].d].v.vendor;
    bool seen = false;
    for (unsigned i = 0; i < first && !seen; i++)
      seen = strcmp(s->dev[c[i].d].v.vendor, vendor) == 0;
    if (seen)
      continue;
    uint64_t m = 0;
    unsigned k = 0;
    for (unsigned i = first; i < n && k < r->gpus; i++) {
      if (strcmp(s->dev[c[i].d].v.vendor, vendor) == 0) {
        m |= 1ull << c[i].d;
        k++;
      }
    }
    if (k == r->gpus) {
      *mask = m;
      return true;
    }
  }
  return false;
}

/* The most devices of mask (those matching a request) that one vendor has (a reservation's
 * GPUs are of one vendor). */
static unsigned most_of_one_vendor(const gpumd_sched_t *s, uint64_t mask) {
  unsigned most = 0;
  for (uint64_t a = mask; a != 0; a &= a - 1) {
    const char *vendor = s->dev[__builtin_ctzll(a)].v.vendor;
    unsigned k = 0;
    for (uint64_t b = mask; b != 0; b &= b - 1)
      k += strcmp(vendor, s->dev[__builtin_ctzll(b)].v.vendor) == 0;
    most = k > most ? k : most;
  }
  return most;
}

/* ---- Submit-time checks --------------------------------------------------------------- */

int gpumd__sched_resolve_devices(const gpumd_sched_t *s, const char *const *specs, size_t n,
                                 uint64_t *mask) {
  uint64_t m = 0;
  for (size_t i = 0; i < n; i++) {
    const char *spec = specs[i];
    if (spec == NULL || spec[0] == '\0')
      return gpum_error(GPUM_EINVAL, "empty device id in the devices list");
    if (spec[0] >= '0' && spec[0] <= '9') {
      char *end = NULL;
      errno = 0;
      unsigned long v = strtoul(spec, &end, 10);
      if (errno != 0 || *end != '\0')
        return gpum_error(GPUM_EINVAL, "bad device '%s' (expected an index or a UUID)", spec);
      if (v >= GPUMD_SCHED_MAX_DEVICES || !s->dev[v].known)
        return gpum_error(GPUMD_SCHED_ENEVERFIT, "device %s does not exist on this node", spec);
      m |= 1ull << v;
      continue;
    }
    bool found = false;
    ALL_DEVICES(d) {
      if (s->dev[d].known && strcmp(s->dev[d].v.uuid, spec) == 0) {
        m |= 1ull << d;
        found = true;
        break;
      }
    }
    if (!found)
      return gpum_error(GPUMD_SCHED_ENEVERFIT, "device %s does not exist on this node", spec);
  }
  *mask = m;
  return 0;
}

/* " matching model 'A100*', min_memory 40.00 GiB, devices 0,2" (or ""). */
static void constraints_text(const gpumd_resv_t *r, char *buf, size_t len) {
  char mem[GPUM_SIZE_BUFSZ], devs[GPUMD_SCHED_MAX_DEVICES * 4];
  size_t off = 0;
  buf[0] = '\0';
  const char *sep = " matching ";
  if (r->model[0] != '\0' && off < len) {
    off += (size_t)snprintf(buf + off, len - off, "%smodel '%s'", sep, r->model);
    sep = ", ";
  }
  if (r->min_memory != 0 && off < len) {
    gpum_size_format(r->min_memory, mem, sizeof(mem));
    off += (size_t)snprintf(buf + off, len - off, "%smin_memory %s", sep, mem);
    sep = ", ";
  }
  if (r->want_mask != 0 && off < len) {
    gpumd__sched_mask_format(r->want_mask, devs, sizeof(devs));
    off += (size_t)snprintf(buf + off, len - off, "%sdevices %.190s", sep, devs);
  }
}

int gpumd__sched_never_fit(const gpumd_sched_t *s, const gpumd_resv_t *r) {
  unsigned matching = 0, big = 0, best_d = 0;
  uint64_t best = 0, matched = 0;
  ALL_DEVICES(d) {
    if (!gpumd__sched_matches(s, r, d))
      continue;
    matching++;
    matched |= 1ull << d;
    uint64_t cap = gpumd__sched_capacity(s, &s->dev[d].v);
    if (cap >= r->bytes_per_gpu)
      big++;
    if (cap > best || matching == 1) {
      best = cap;
      best_d = d;
    }
  }
  char cons[GPUMD_RESV_REASON_LEN], need[GPUM_SIZE_BUFSZ], have[GPUM_SIZE_BUFSZ];
  constraints_text(r, cons, sizeof(cons));
  if (matching == 0)
    return gpum_error(GPUMD_SCHED_ENEVERFIT, "no device on this node%s", cons[0] ? cons : "");
  if (matching < r->gpus)
    return gpum_error(GPUMD_SCHED_ENEVERFIT, "needs %u GPUs but only %u device%s%s on this node",
                      r->gpus, matching, matching == 1 ? "" : "s",
                      cons[0] ? cons : (matching == 1 ? " exists" : " exist"));
  unsigned one = r->gpus > 1 ? most_of_one_vendor(s, matched) : matching;
  if (one < r->gpus)
    return gpum_error(GPUMD_SCHED_ENEVERFIT,
                      "needs %u GPUs of one vendor but this node has at most %u of one vendor%s "
                      "(a reservation's GPUs are driven by one runtime)",
                      r->gpus, one, cons);
  if (big < r->gpus) {
    gpum_size_format(r->bytes_per_gpu, need, sizeof(need));
    gpum_size_format(best, have, sizeof(have));
    char margin[GPUM_SIZE_BUFSZ];
    gpum_size_format(s->opts.safety_margin, margin, sizeof(margin));
    const gpumd_sched_device_t *v = &s->dev[best_d].v;
    char formula[96];
    if ((long double)v->memory_total * s->opts.memory_fraction + 0.5L >
        (long double)(v->memory_total - (v->memory_reserved < v->memory_total ? v->memory_reserved
                                                                              : v->memory_total))) {
      char res[GPUM_SIZE_BUFSZ];
      snprintf(formula, sizeof formula, "total - %s the driver keeps - %s",
               gpum_size_format(v->memory_reserved, res, sizeof res), margin);
    } else {
      snprintf(formula, sizeof formula, "total x %.2f - %s", s->opts.memory_fraction, margin);
    }
    return gpum_error(GPUMD_SCHED_ENEVERFIT,
                      "needs %s on each of %u GPU%s but only %u device%s%s can ever hold that "
                      "(largest: %s on GPU %u = %s)",
                      need, r->gpus, r->gpus == 1 ? "" : "s", big, big == 1 ? "" : "s", cons, have,
                      best_d, formula);
  }
  return 0;
}

/* ---- Waiting-for text ----------------------------------------------------------------- */

/* The blocked head in front of r that r may not pass, or NULL. */
static const gpumd_resv_t *locked_head_before(const gpumd_sched_t *s, const gpumd_resv_t *r,
                                              uint64_t now_ns) {
  uint64_t ignored;
  for (size_t i = 0; i < s->n_queue && s->queue[i] != r; i++) {
    const gpumd_resv_t *q = s->queue[i];
    if (!gpumd__sched_place(s, q, false, &ignored))
      return gpumd__sched_head_locked(s, q, now_ns) ? q : NULL;
  }
  return NULL;
}

char *gpumd_sched_waiting_for(const gpumd_sched_t *s, uint64_t id, char *buf, size_t len) {
  if (len == 0)
    return buf;
  buf[0] = '\0';
  const gpumd_resv_t *r = gpumd_sched_find(s, id);
  if (r == NULL || r->state != GPUMD_RESV_QUEUED)
    return buf;
  uint64_t mask = 0;
  if (gpumd__sched_place(s, r, false, &mask)) {
    uint64_t stale = 0;
    for (uint64_t m = mask; s->opts.require_fresh && m != 0; m &= m - 1)
      if (!s->dev[__builtin_ctzll(m)].v.fresh)
        stale |= m & -m;
    if (stale != 0) {
      char devs[GPUMD_SCHED_MAX_DEVICES * 4];
      snprintf(buf, len, "fits the devices as last read: decided once GPU %s %s read afresh",
               gpumd__sched_mask_format(stale, devs, sizeof devs),
               (stale & (stale - 1)) ? "are" : "is");
      return buf;
    }
    /* It fits now but was not granted: a head it may not pass blocks it (the passes ran at
     * the head's latest "now", so the head is locked). */
    const gpumd_resv_t *head = locked_head_before(s, r, UINT64_MAX);
    char hid[GPUMD_RESV_ID_BUFSZ];
    snprintf(buf, len, "behind %s (blocked head past the backfill bound)",
             head ? gpumd_resv_id_format(head->id, hid, sizeof(hid)) : "the queue head");
    return buf;
  }
  char need[GPUM_SIZE_BUFSZ], best_s[GPUM_SIZE_BUFSZ], cons[GPUMD_RESV_REASON_LEN];
  gpum_size_format(r->bytes_per_gpu, need, sizeof(need));
  constraints_text(r, cons, sizeof(cons));
  unsigned fit = 0, best_d = 0;
  uint64_t best = 0;
  bool any = false;
  ALL_DEVICES(d) {
    if (!gpumd__sched_matches(s, r, d))
      continue;
    const sched_slot_t *slot = &s->dev[d];
    bool usable = slot->v.health != GPUM_HEALTH_ERROR && slot->v.health != GPUM_HEALTH_DISABLED &&
                  slot->pressure != GPUMD_PRESSURE_CRITICAL &&
                  (s->opts.max_concurrent_jobs == 0 || slot->jobs < s->opts.max_concurrent_jobs) &&
                  !slot->v.unanswered;
    if (!usable)
      continue;
    uint64_t h = gpumd__sched_headroom(s, d);
    if (h >= r->bytes_per_gpu)
      fit++;
    if (!any || h > best) {
      best = h;
      best_d = d;
      any = true;
    }
  }
  size_t off = (size_t)snprintf(buf, len, "%s free on %u device%s%s", need, r->gpus,
                                r->gpus == 1 ? "" : "s", cons);
  if (off >= len)
    return buf;
  if (!any) {
    snprintf(buf + off, len - off,
             "; no matching device is usable now (error, disabled, critical pressure, at "
             "max_concurrent_jobs, or not answering a fresh read)");
    return buf;
  }
  gpum_size_format(best, best_s, sizeof(best_s));
  if (fit > 0)
    snprintf(buf + off, len - off, "; %u of %u fit now, best: %s on GPU %u", fit, r->gpus, best_s,
             best_d);
  else
    snprintf(buf + off, len - off, "; best now: %s on GPU %u", best_s, best_d);
  return buf;
}
