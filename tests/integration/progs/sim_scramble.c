/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A test aid for the simulated driver's crash recovery: maps a node's shared memory, takes its
 * lock, scrambles everything the process and allocation tables derive from their record (the
 * free list, each process's list of entries, its counts and its bytes) and exits holding the
 * lock, as a process killed in the middle of an update would leave them. The next process to
 * lock the node must rebuild all of it (gpum__sim_repair in src/sim/proc.c).
 *
 *   sim_scramble NODE
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../../src/sim/sim_internal.h"

int main(int argc, char **argv) {
  char path[128];
  if (argc != 2) {
    fprintf(stderr, "usage: sim_scramble NODE\n");
    return 2;
  }
  snprintf(path, sizeof path, "/gpum-sim-%s", argv[1]);
  int fd = shm_open(path, O_RDWR, 0);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    fprintf(stderr, "sim_scramble: %s: %s\n", path, strerror(errno));
    return 1;
  }
  struct gpum__sim_node *n =
      mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (n == MAP_FAILED || n->hdr.layout_version != GPUM__SIM_LAYOUT_VERSION ||
      n->hdr.node_size != (uint64_t)st.st_size) {
    fprintf(stderr, "sim_scramble: %s is not a node of this layout\n", path);
    return 1;
  }
  int rc = pthread_mutex_lock(&n->lock);
  if (rc == EOWNERDEAD)
    pthread_mutex_consistent(&n->lock);
  else if (rc != 0)
    return 1;
  /* The free list now starts at an entry in use, every process seems to hold 1 TiB per device
   * in no entries, and every list link points at entry 0. */
  n->free_head = 0;
  for (uint32_t s = 0; s < n->proc_hw; s++) {
    struct gpum__sim_proc *p = &n->procs[s];
    p->head = GPUM__SIM_NIL;
    p->entries = 0;
    p->evsets = 0;
    for (unsigned d = 0; d < GPUM__SIM_MAX_DEVICES; d++) {
      p->count[d] = 0;
      p->bytes[d] = 1ull << 40;
    }
  }
  for (uint32_t i = 0; i < n->alloc_hw; i++)
    n->allocs[i].next = n->allocs[i].prev = 0;
  _exit(0); /* holding the lock: the kernel marks its owner dead */
}
