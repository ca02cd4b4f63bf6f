/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The JSON snapshot of a pool, written by hand (libgpum does not link a JSON library):
 *
 *   {"name": "train", "strategy": "BALANCED", "source": "cuda", "device": 0,
 *    "options": {"limit_bytes": ..., "limit_fraction": ..., "max_split_size": ...,
 *                "gc_threshold": ..., "expandable_segments": true, "cache_limit_bytes": ...,
 *                "cache_limit_fraction": ..., "no_reservation_limit": false},
 *    "stats": {"allocated_bytes": {"current": .., "peak": .., "allocated": .., "freed": ..},
 *              ..., "num_alloc_retries": .., "fragmentation": 0.12, "limit": ..,
 *              "cache_limit": ..},
 *    "segments": [{"address": "0x7f0000000000", "size": 2097152, "pool": "small",
 *                  "expandable": false, "reserved_size": 0,
 *                  "blocks": [{"address": "0x7f0000000000", "size": 512,
 *                              "requested_size": 100, "state": "allocated", "stream": 0},
 *                             {..., "state": "free", "stream": null}]}]}
 *
 * Addresses are hex strings (JSON numbers lose precision past 2^53); sizes are numbers. A free
 * block's stream is the stream that may reuse it at once, or null when any stream may.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>

#include "core/options_internal.h"
#include "pool/pool_internal.h"

static void put_string(gpum__strbuf_t *b, const char *s) {
  gpum__strbuf_json(b, s, strlen(s));
}

static void put_stat(gpum__strbuf_t *b, const char *name, const gpum_pool_stat_t *s) {
  gpum__strbuf_printf(b,
                      "\"%s\": {\"current\": %llu, \"peak\": %llu, \"allocated\": %llu, "
                      "\"freed\": %llu}, ",
                      name, (unsigned long long)s->current, (unsigned long long)s->peak,
                      (unsigned long long)s->allocated, (unsigned long long)s->freed);
}

static void put_stats(gpum__strbuf_t *b, const gpum_pool_stats_t *st) {
  gpum__strbuf_puts(b, "\"stats\": {");
  put_stat(b, "allocated_bytes", &st->allocated_bytes);
  put_stat(b, "requested_bytes", &st->requested_bytes);
  put_stat(b, "reserved_bytes", &st->reserved_bytes);
  put_stat(b, "active_bytes", &st->active_bytes);
  put_stat(b, "inactive_split_bytes", &st->inactive_split_bytes);
  put_stat(b, "allocation", &st->allocation);
  put_stat(b, "segment", &st->segment);
  put_stat(b, "active", &st->active);
  put_stat(b, "inactive_split", &st->inactive_split);
  const struct {
    const char *name;
    uint64_t v;
  } n[] = {{"num_alloc_retries", st->num_alloc_retries},
           {"num_ooms", st->num_ooms},
           {"num_source_allocs", st->num_source_allocs},
           {"num_source_frees", st->num_source_frees},
           {"largest_free_block", st->largest_free_block},
           {"free_cached", st->free_cached},
           {"limit", st->limit},
           {"cache_limit", st->cache_limit},
           {"num_splits", st->num_splits},
           {"num_merges", st->num_merges},
           {"num_gc_frees", st->num_gc_frees},
           {"num_stream_merges", st->num_stream_merges},
           {"num_maps", st->num_maps},
           {"num_unmaps", st->num_unmaps}};
  for (size_t i = 0; i < sizeof(n) / sizeof(n[0]); i++)
    gpum__strbuf_printf(b, "\"%s\": %llu, ", n[i].name, (unsigned long long)n[i].v);
  gpum__strbuf_printf(b, "\"fragmentation\": %.6f}", st->fragmentation);
}

static const char *state_name(int state) {
  return state == GPUM__B_ALLOC ? "allocated" : state == GPUM__B_AWAIT ? "awaiting_free" : "free";
}

static void put_segment(gpum__strbuf_t *b, const gpum__seg_t *s) {
  gpum__strbuf_printf(b,
                      "{\"address\": \"0x%llx\", \"size\": %llu, \"pool\": \"%s\", "
                      "\"expandable\": %s, \"reserved_size\": %llu, \"blocks\": [",
                      (unsigned long long)s->base, (unsigned long long)s->size,
                      s->kind == GPUM__KIND_SMALL ? "small" : "large",
                      s->va_size ? "true" : "false", (unsigned long long)s->va_size);
  for (const gpum__block_t *k = s->first; k != NULL; k = k->next_phys) {
    gpum__strbuf_printf(b,
                        "%s{\"address\": \"0x%llx\", \"size\": %llu, \"requested_size\": %llu, "
                        "\"state\": \"%s\", \"stream\": ",
                        k == s->first ? "" : ", ", (unsigned long long)k->addr,
                        (unsigned long long)k->size, (unsigned long long)k->requested,
                        state_name(k->state));
    if (k->state != GPUM__B_FREE)
      gpum__strbuf_printf(b, "%llu}", (unsigned long long)k->stream);
    else if (k->owner->shared)
      gpum__strbuf_puts(b, "null}");
    else
      gpum__strbuf_printf(b, "%llu}", (unsigned long long)k->owner->stream);
  }
  gpum__strbuf_puts(b, "]}");
}

int gpum_pool_snapshot_json(gpum_pool_t *p, char **out) {
  if (p == NULL || out == NULL)
    return gpum_error(GPUM_EINVAL, "gpum_pool_snapshot_json: %s is NULL", p ? "out" : "pool");
  *out = NULL;
  gpum__strbuf_t b = {0};
  pthread_mutex_lock(&p->lock);
  gpum__strbuf_puts(&b, "{\"name\": ");
  put_string(&b, p->name);
  gpum__strbuf_printf(&b,
                      ", \"strategy\": \"%s\", \"source\": ", gpum_pool_strategy_name(p->strategy));
  put_string(&b, p->src->name);
  gpum__strbuf_printf(&b,
                      ", \"device\": %d, \"options\": {\"limit_bytes\": %llu, "
                      "\"limit_fraction\": %.6f, \"max_split_size\": %llu, \"gc_threshold\": "
                      "%.6f, \"expandable_segments\": %s, \"cache_limit_bytes\": %llu, "
                      "\"cache_limit_fraction\": %.6f, \"no_reservation_limit\": %s}, ",
                      p->opts.device, (unsigned long long)p->opts.limit_bytes,
                      p->opts.limit_fraction, (unsigned long long)p->max_split, p->gc_threshold,
                      p->expandable ? "true" : "false",
                      (unsigned long long)p->opts.cache_limit_bytes, p->opts.cache_limit_fraction,
                      p->opts.no_reservation_limit ? "true" : "false");
  gpum_pool_stats_t st;
  gpum__pool_stats_locked(p, &st);
  put_stats(&b, &st);
  gpum__strbuf_puts(&b, ", \"segments\": [");
  for (const gpum__seg_t *s = p->segs; s != NULL; s = s->next) {
    if (s != p->segs)
      gpum__strbuf_puts(&b, ", ");
    put_segment(&b, s);
  }
  gpum__strbuf_puts(&b, "]}");
  pthread_mutex_unlock(&p->lock);
  return gpum__strbuf_finish(&b, out);
}
