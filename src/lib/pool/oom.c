/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The end of the OOM ladder: counts the failure, logs it, and writes the message that says why
 * and what is where, e.g.
 *
 *   out of device memory on GPU 0 (pool 'train'): tried to allocate 2.00 GiB; device total
 *   80.00 GiB, free 1.20 GiB; this pool holds 30.50 GiB reserved, of which 27.10 GiB allocated
 *   and 3.40 GiB cached (largest cached block 512.00 MiB, fragmentation 85%); limit 32.00 GiB
 *
 * The device part is left out when the source cannot report memory, the limit when there is
 * none. A request that is larger than the limit by itself says so instead.
 */
#include <stdio.h>

#include <gpum/error.h>
#include <gpum/size.h>

#include "pool/pool_internal.h"

int gpum__pool_oom_error(gpum_pool_t *p, uint64_t size, gpum_stream_t stream, bool over_limit) {
  p->st.num_ooms++;
  if (p->log)
    gpum__pool_log(p, "allocate failure", 0, size, stream);
  char req[GPUM_SIZE_BUFSZ], lim[GPUM_SIZE_BUFSZ];
  gpum_size_format(size, req, sizeof(req));
  gpum_size_format(p->limit, lim, sizeof(lim));
  if (over_limit) {
    if (p->limit == 0 || size > GPUM__POOL_MAX_REQUEST)
      return gpum_error(GPUM_EDEVOOM,
                        "out of device memory on GPU %d (pool '%s'): tried to allocate %s, more "
                        "than any device holds",
                        p->opts.device, p->name, req);
    return gpum_error(GPUM_EDEVOOM,
                      "out of device memory on GPU %d (pool '%s'): tried to allocate %s, more "
                      "than the pool's limit of %s",
                      p->opts.device, p->name, req, lim);
  }
  gpum_pool_stats_t st;
  gpum__pool_stats_locked(p, &st);
  char dev[96] = "";
  uint64_t dfree = 0, dtotal = 0;
  if (p->ops->mem_info != NULL && p->ops->mem_info(p->ctx, &dfree, &dtotal) == 0) {
    char t[GPUM_SIZE_BUFSZ], f[GPUM_SIZE_BUFSZ];
    snprintf(dev, sizeof(dev), "; device total %s, free %s", gpum_size_format(dtotal, t, sizeof(t)),
             gpum_size_format(dfree, f, sizeof(f)));
  }
  uint64_t reserved = st.reserved_bytes.current, allocated = st.allocated_bytes.current;
  char res[GPUM_SIZE_BUFSZ], all[GPUM_SIZE_BUFSZ], cac[GPUM_SIZE_BUFSZ], big[GPUM_SIZE_BUFSZ];
  char limit[64] = "";
  if (p->limit)
    snprintf(limit, sizeof(limit), "; limit %s", lim);
  return gpum_error(GPUM_EDEVOOM,
                    "out of device memory on GPU %d (pool '%s'): tried to allocate %s%s; this "
                    "pool holds %s reserved, of which %s allocated and %s cached (largest cached "
                    "block %s, fragmentation %.0f%%)%s",
                    p->opts.device, p->name, req, dev, gpum_size_format(reserved, res, sizeof(res)),
                    gpum_size_format(allocated, all, sizeof(all)),
                    gpum_size_format(reserved - allocated, cac, sizeof(cac)),
                    gpum_size_format(st.largest_free_block, big, sizeof(big)),
                    st.fragmentation * 100.0, limit);
}
