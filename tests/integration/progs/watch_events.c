/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Follows the node's events through libgpum's client (gpum_client_watch, GPUM_CLIENT_EV_NODE),
 * for tests/integration/test_gpumd_watch.sh; also a compact example of the API.
 *
 *   watch_events TYPES UNTIL   TYPES: "default", "all" or a comma-separated list of event types
 *                              (reservation,alert,health,xid,sample), or "bad" (an unknown bit)
 *
 * Prints "watching SEQ" once the watch is on, then a line per node event as it arrives,
 * "node TYPE SEQ device=D reservation=ID:STATE data=JSON" (device -1 and reservation "-" when the
 * event has none), and after the first event of type UNTIL turns the watch off and prints "off
 * SEQ". Checks that the ids grow past the watch's. Exits 0 when all held, 1 otherwise (the reason
 * on stderr); with "bad", prints the error's name (EINVAL) and exits 0.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/client.h>
#include <gpum/error.h>

typedef struct {
  uint64_t last;     /* the newest id seen (the watch's at first) */
  const char *until; /* the type that ends the watch */
  bool done, bad;
} seen_t;

static void on_event(const gpum_client_event_t *ev, void *user) {
  seen_t *s = user;
  if (ev->kind != GPUM_CLIENT_EV_NODE)
    return;
  if (ev->seq <= s->last || ev->type == 0 || ev->data == NULL) {
    fprintf(stderr, "watch_events: event %llu after %llu (type %s)\n", (unsigned long long)ev->seq,
            (unsigned long long)s->last, ev->type_name ? ev->type_name : "?");
    s->bad = true;
  }
  s->last = ev->seq;
  s->done |= ev->type_name && !strcmp(ev->type_name, s->until);
  const gpum_reservation_t *r = ev->reservation;
  printf("node %s %llu device=%d reservation=%s:%s data=%s\n", ev->type_name,
         (unsigned long long)ev->seq, ev->device, r ? r->id : "-",
         r ? gpum_res_state_name(r->state) : "-", ev->data);
  fflush(stdout);
}

static unsigned parse_types(const char *s) {
  if (!strcmp(s, "default"))
    return GPUM_WATCH_DEFAULT;
  if (!strcmp(s, "all"))
    return GPUM_WATCH_DEFAULT | GPUM_WATCH_SAMPLE;
  if (!strcmp(s, "bad"))
    return 1u << 20;
  static const struct {
    const char *name;
    unsigned bit;
  } names[] = {{"reservation", GPUM_WATCH_RESERVATION},
               {"alert", GPUM_WATCH_ALERT},
               {"health", GPUM_WATCH_HEALTH},
               {"xid", GPUM_WATCH_XID},
               {"sample", GPUM_WATCH_SAMPLE}};
  unsigned mask = 0;
  char buf[128];
  snprintf(buf, sizeof buf, "%s", s);
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
      if (!strcmp(t, names[i].name))
        mask |= names[i].bit;
  return mask;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: watch_events TYPES UNTIL\n");
    return 2;
  }
  unsigned types = parse_types(argv[1]);
  gpum_client_t *c = NULL;
  int rc = gpum_client_connect(NULL, 5000, &c);
  if (rc != 0) {
    fprintf(stderr, "watch_events: connect: %s\n", gpum_last_error());
    return 1;
  }
  seen_t seen = {.until = argv[2]};
  gpum_client_set_event_cb(c, on_event, &seen);
  rc = gpum_client_watch(c, types, &seen.last);
  if (rc != 0 || !strcmp(argv[1], "bad")) {
    printf("%s\n", rc ? gpum_err_name(rc) : "accepted");
    gpum_client_close(c);
    return rc == GPUM_EINVAL && !strcmp(argv[1], "bad") ? 0 : 1;
  }
  printf("watching %llu\n", (unsigned long long)seen.last);
  fflush(stdout);
  while (!seen.done && !seen.bad) {
    struct pollfd p = {gpum_client_fd(c), POLLIN, 0};
    if (poll(&p, 1, 60000) <= 0) {
      fprintf(stderr, "watch_events: no event within 60 s (waiting for %s)\n", argv[2]);
      gpum_client_close(c);
      return 1;
    }
    rc = gpum_client_process(c, 0);
    if (rc < 0) {
      fprintf(stderr, "watch_events: %s\n", gpum_last_error());
      gpum_client_close(c);
      return 1;
    }
  }
  uint64_t off = 0;
  rc = gpum_client_watch(c, 0, &off);
  if (rc == 0)
    printf("off %llu\n", (unsigned long long)off);
  gpum_client_close(c);
  return rc == 0 && !seen.bad ? 0 : 1;
}
