/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test program: drives a simulated node through libgpum_sim.so's control API (dlopened from
 * $GPUM_SIM_LIBRARY, as include/gpum/sim.h allows), so the device-layer tests depend only on
 * the simulator library, not on the CLI:
 *   device_simctl start SPEC NAME
 *   device_simctl stop NAME
 *   device_simctl inject NAME DEVICE xid N | ecc_single N | ecc_double N | error_rate P
 *   device_simctl clear NAME DEVICE
 * Exit 0 on success; otherwise the simulator's message on stderr and exit 1.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/sim.h>

typedef int (*create_fn)(const char *, const char *, char *, size_t);
typedef int (*name_fn)(const char *);
typedef int (*inject_fn)(const char *, unsigned, const gpum_sim_fault_t *);
typedef int (*clear_fn)(const char *, unsigned);
typedef const char *(*err_fn)(void);

static void *sym(void *dl, const char *name) {
  void *p = dlsym(dl, name);
  if (!p) {
    fprintf(stderr, "device_simctl: %s not exported\n", name);
    exit(1);
  }
  return p;
}

#define LOAD(type, var, name)      \
  type var;                        \
  do {                             \
    void *p_ = sym(dl, name);      \
    memcpy(&var, &p_, sizeof var); \
  } while (0)

int main(int argc, char **argv) {
  const char *lib = getenv("GPUM_SIM_LIBRARY");
  if (argc < 3 || !lib) {
    fprintf(stderr, "usage: device_simctl start|stop|inject|clear ... (GPUM_SIM_LIBRARY set)\n");
    return 2;
  }
  void *dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    fprintf(stderr, "device_simctl: %s\n", dlerror());
    return 1;
  }
  LOAD(err_fn, last_error, "gpum_sim_last_error");
  int rc = -1;
  if (!strcmp(argv[1], "start") && argc == 4) {
    LOAD(create_fn, create, "gpum_sim_create");
    rc = create(argv[2], argv[3], NULL, 0);
  } else if (!strcmp(argv[1], "stop") && argc == 3) {
    LOAD(name_fn, destroy, "gpum_sim_destroy");
    rc = destroy(argv[2]);
  } else if (!strcmp(argv[1], "clear") && argc == 4) {
    LOAD(clear_fn, clear, "gpum_sim_clear");
    rc = clear(argv[2], (unsigned)strtoul(argv[3], NULL, 10));
  } else if (!strcmp(argv[1], "inject") && argc == 6) {
    LOAD(inject_fn, inject, "gpum_sim_inject");
    gpum_sim_fault_t f;
    memset(&f, 0, sizeof f);
    if (!strcmp(argv[4], "xid"))
      f.kind = GPUM_SIM_FAULT_XID;
    else if (!strcmp(argv[4], "ecc_single"))
      f.kind = GPUM_SIM_FAULT_ECC_SINGLE;
    else if (!strcmp(argv[4], "ecc_double"))
      f.kind = GPUM_SIM_FAULT_ECC_DOUBLE;
    else if (!strcmp(argv[4], "error_rate"))
      f.kind = GPUM_SIM_FAULT_ERROR_RATE;
    else
      return 2;
    f.value = strtoll(argv[5], NULL, 10);
    f.rate = strtod(argv[5], NULL);
    rc = inject(argv[2], (unsigned)strtoul(argv[3], NULL, 10), &f);
  } else {
    return 2;
  }
  if (rc) {
    fprintf(stderr, "device_simctl %s: %d: %s\n", argv[1], rc, last_error());
    return 1;
  }
  return 0;
}
