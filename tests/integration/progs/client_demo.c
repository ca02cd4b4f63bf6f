/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Exercises the gpumd client library (include/gpum/client.h) against a real daemon, for
 * tests/integration/test_client_lib.sh; also a compact example of the API.
 *
 *   client_demo reserve BYTES   blocking reserve; checks list and status; releases
 *   client_demo async BYTES     non-blocking reserve; polls the fd until granted (20 s)
 *   client_demo attach ID TOKEN attach; prints the error name when refused
 *
 * Prints "STATE id" lines on stdout; exits 0 when every check held, 1 otherwise.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/client.h>
#include <gpum/error.h>
#include <gpum/size.h>

static int fail(const char *what, int rc) {
  fprintf(stderr, "client_demo: %s: %s (%s)\n", what, gpum_last_error(), gpum_err_name(rc));
  return 1;
}

static int do_reserve(gpum_client_t *c, uint64_t bytes) {
  gpum_reserve_req_t req = {.bytes_per_gpu = bytes, .label = "client_demo"};
  gpum_reservation_t r;
  int rc = gpum_client_reserve(c, &req, 10000, &r);
  if (rc != 0)
    return fail("reserve", rc);
  printf("%s %s %s\n", gpum_res_state_name(r.state), r.id, r.devices[0].uuid);
  gpum_reservation_t *list = NULL;
  size_t n = 0;
  if ((rc = gpum_client_list(c, false, &list, &n)) != 0)
    return fail("list", rc);
  int found = n == 1 && !strcmp(list[0].id, r.id) && list[0].token[0] != '\0';
  free(list);
  if (!found)
    return fail("list does not show the reservation with its token", GPUM_ENOENT);
  gpum_client_status_t st;
  if ((rc = gpum_client_status(c, &st)) != 0)
    return fail("status", rc);
  int on_device = 0;
  for (size_t i = 0; i < st.ndevices; i++)
    for (size_t k = 0; k < st.devices[i].nreservations; k++)
      if (!strcmp(st.devices[i].reservations[k], r.id) && st.devices[i].reserved >= bytes &&
          st.devices[i].index == r.devices[0].index)
        on_device = 1;
  gpum_client_status_free(&st);
  if (!on_device)
    return fail("status does not show the reservation on its device", GPUM_ENOENT);
  if ((rc = gpum_client_release(c, r.id, &r)) != 0)
    return fail("release", rc);
  printf("%s %s\n", gpum_res_state_name(r.state), r.id);
  return r.state == GPUM_RES_RELEASED ? 0 : 1;
}

static void on_event(const gpum_client_event_t *ev, void *user) {
  (void)user;
  if (ev->reservation)
    printf("event %s %s %s\n", ev->name, ev->reservation->id,
           gpum_res_state_name(ev->reservation->state));
  fflush(stdout);
}

static int do_async(gpum_client_t *c, uint64_t bytes) {
  gpum_client_set_event_cb(c, on_event, NULL);
  gpum_reserve_req_t req = {.bytes_per_gpu = bytes, .label = "client_demo async"};
  gpum_reservation_t r;
  int rc = gpum_client_reserve_async(c, &req, &r);
  if (rc != 0)
    return fail("reserve_async", rc);
  printf("%s %s\n", gpum_res_state_name(r.state), r.id);
  fflush(stdout);
  char id[sizeof r.id];
  snprintf(id, sizeof id, "%s", r.id);
  for (int waited = 0; r.state == GPUM_RES_QUEUED && waited < 20000; waited += 100) {
    struct pollfd p = {gpum_client_fd(c), POLLIN, 0};
    if (poll(&p, 1, 100) == 1)
      rc = gpum_client_wait(c, id, 0, &r); /* dispatches what arrived; 0: do not block */
    if (rc != 0 && rc != GPUM_ETIMEDOUT)
      return fail("wait", rc);
  }
  printf("%s %s\n", gpum_res_state_name(r.state), id);
  return r.state == GPUM_RES_GRANTED ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: client_demo reserve|async BYTES | attach ID TOKEN\n");
    return 2;
  }
  gpum_client_t *c = NULL;
  int rc = gpum_client_connect(NULL, 0, &c);
  if (rc != 0)
    return fail("connect", rc);
  int code = 2;
  uint64_t bytes = 0;
  if (!strcmp(argv[1], "attach") && argc == 4) {
    gpum_reservation_t r;
    rc = gpum_client_attach(c, argv[2], argv[3], &r);
    printf("%s\n", rc == 0 ? gpum_res_state_name(r.state) : gpum_err_name(rc));
    code = rc == 0 ? 0 : 1;
  } else if (gpum_size_parse(argv[2], &bytes) != 0) {
    fprintf(stderr, "client_demo: bad size '%s'\n", argv[2]);
  } else if (!strcmp(argv[1], "reserve")) {
    code = do_reserve(c, bytes);
  } else if (!strcmp(argv[1], "async")) {
    code = do_async(c, bytes);
  }
  gpum_client_close(c);
  return code;
}
