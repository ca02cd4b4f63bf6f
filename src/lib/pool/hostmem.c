/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Host memory for the pool's own bookkeeping (block nodes and pointer-map tables): zeroed and
 * cache-line aligned. From 2 MiB up it comes straight from mmap, 2 MiB aligned and advised to
 * use transparent huge pages: with 100,000 live blocks the nodes and the map span tens of MiB
 * that are touched at random, and with 4 KiB pages most of those touches would also miss the
 * TLB. Zeroed pages come from the kernel as they are first touched, so a large table costs
 * nothing up front.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "pool/pool_internal.h"

#define LINE 64
#define HUGE_PAGE ((size_t)2 << 20)

void *gpum__pool_hostmem_alloc(size_t bytes) {
  if (bytes == 0 || bytes > SIZE_MAX / 2)
    return NULL;
  if (bytes < HUGE_PAGE) {
    size_t n = (bytes + LINE - 1) & ~(size_t)(LINE - 1);
    void *m = aligned_alloc(LINE, n);
    if (m != NULL)
      memset(m, 0, n);
    return m;
  }
  size_t n = (bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
  /* Map one huge page more, then cut the unaligned head and the tail off. */
  uint8_t *m =
      mmap(NULL, n + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED)
    return NULL;
  size_t head = (HUGE_PAGE - ((uintptr_t)m & (HUGE_PAGE - 1))) & (HUGE_PAGE - 1);
  if (head != 0)
    munmap(m, head);
  munmap(m + head + n, HUGE_PAGE - head);
#ifdef MADV_HUGEPAGE
  madvise(m + head, n, MADV_HUGEPAGE); /* advice only: small pages still work */
#endif
  return m + head;
}

void gpum__pool_hostmem_free(void *ptr, size_t bytes) {
  if (ptr == NULL)
    return;
  if (bytes < HUGE_PAGE) {
    free(ptr);
    return;
  }
  munmap(ptr, (bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1));
}
