/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the tier cache's tests share: a simulated node of one 1 GiB device made through
 * libgpum_sim.so's control API (so the CUDA and pinned sources work without a GPU), its fault
 * injection, and payloads whose every byte follows from a key and a version.
 */
#ifndef GPUM_TIERCACHE_TESTLIB_H
#define GPUM_TIERCACHE_TESTLIB_H

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gpum/sim.h>

typedef int (*tc_sim_create_fn)(const char *, const char *, char *, size_t);
typedef int (*tc_sim_destroy_fn)(const char *);
typedef int (*tc_sim_inject_fn)(const char *, unsigned, const gpum_sim_fault_t *);
typedef int (*tc_sim_clear_fn)(const char *, unsigned);

static struct {
  void *sim;
  tc_sim_destroy_fn destroy;
  tc_sim_inject_fn inject;
  tc_sim_clear_fn clear;
  char node[64];
} tc_sim;

static inline void *tc_sym(const char *name) {
  return dlsym(tc_sim.sim, name);
}

/* Starts the node and points the CUDA loader at it: 0, or -1 (said on stderr). */
static inline int tc_sim_start(const char *tag) {
  const char *lib = getenv("GPUM_SIM_LIBRARY");
  if (!lib || !(tc_sim.sim = dlopen(lib, RTLD_NOW | RTLD_LOCAL))) {
    fprintf(stderr, "cannot load the simulator (GPUM_SIM_LIBRARY=%s)\n", lib ? lib : "");
    return -1;
  }
  tc_sim_create_fn create;
  void *p = tc_sym("gpum_sim_create");
  memcpy(&create, &p, sizeof p);
  p = tc_sym("gpum_sim_destroy");
  memcpy(&tc_sim.destroy, &p, sizeof p);
  p = tc_sym("gpum_sim_inject");
  memcpy(&tc_sim.inject, &p, sizeof p);
  p = tc_sym("gpum_sim_clear");
  memcpy(&tc_sim.clear, &p, sizeof p);
  if (!create || !tc_sim.destroy || !tc_sim.inject || !tc_sim.clear)
    return -1;
  char spec[] = "/tmp/gpum-test-tiercache-XXXXXX";
  int fd = mkstemp(spec);
  if (fd < 0)
    return -1;
  const char text[] = "name: tiercache\ndevices:\n"
                      "  - {count: 1, name: Sim GPU, memory: 1GiB, reserved: 256MiB}\n";
  ssize_t w = write(fd, text, sizeof text - 1);
  close(fd);
  snprintf(tc_sim.node, sizeof tc_sim.node, "%s%d", tag, (int)getpid());
  int rc = w == (ssize_t)(sizeof text - 1) ? create(spec, tc_sim.node, NULL, 0) : -1;
  unlink(spec);
  if (rc)
    return -1;
  setenv("GPUM_SIM_NODE", tc_sim.node, 1);
  unsetenv("GPUM_CUDA_LIBRARY");
  unsetenv("GPUM_MEM_LIMIT");
  return 0;
}

static inline void tc_sim_stop(void) {
  if (tc_sim.destroy)
    tc_sim.destroy(tc_sim.node);
}

/* CUDA allocations on device 0 fail once bytes more were allocated (0: clear the faults). */
static inline int tc_fail_after(uint64_t bytes) {
  if (!bytes)
    return tc_sim.clear(tc_sim.node, 0);
  gpum_sim_fault_t f = {.kind = GPUM_SIM_FAULT_FAIL_AFTER, .value = (int64_t)bytes};
  return tc_sim.inject(tc_sim.node, 0, &f);
}

/* The payload of key k at version v: n bytes of a xorshift stream seeded by both. */
static inline void tc_fill(unsigned char *buf, size_t n, uint64_t k, uint64_t v) {
  uint64_t x = (k + 1) * 0x9e3779b97f4a7c15ull ^ (v + 1) * 0xbf58476d1ce4e5b9ull;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    buf[i] = (unsigned char)x;
  }
}

#endif /* GPUM_TIERCACHE_TESTLIB_H */
