/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpum status` with gpumd running: asks the daemon (short timeout, silent when there is none)
 * for its status and every reservation, and draws under each GPU the bytes reserved and
 * committed there and its reservations, and the queue at the end. JSON: the "gpumd" member is
 * the daemon's status document plus "reservations" (docs/protocol.md), or null.
 */
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/client.h>
#include <gpum/error.h>
#include <gpum/size.h>
#include <jansson.h>

#include "client_cli.h"
#include "status.h"

#define GPUMD_STATUS_TIMEOUT_MS 500

unsigned cli_status_timeout_ms(const gpum_config_t *cfg) {
  uint64_t timeout = gpum_config_get_duration(cfg, "status.timeout");
  return timeout > 3600000 ? 3600000u : timeout == 0 ? 1u : (unsigned)timeout;
}

json_t *cli_gpumd_ask(gpum_client_t *c, const char *op, const char *args) {
  char *text = NULL;
  if (gpum_client_call_json(c, op, args, &text) != 0)
    return NULL;
  json_t *doc = json_loads(text, 0, NULL);
  free(text);
  json_object_del(doc, "id");
  json_object_del(doc, "ok");
  return doc;
}

void cli_snapshot_add_gpumd(cli_snapshot_t *snap, const char *socket) {
  gpum_client_t *c = NULL;
  if (socket == NULL || *socket == '\0' ||
      gpum_client_connect(socket, GPUMD_STATUS_TIMEOUT_MS, &c) != 0) {
    gpum_error_clear();
    return;
  }
  json_t *st = cli_gpumd_ask(c, "status", NULL);
  json_t *list = st ? cli_gpumd_list_all(c) : NULL; /* every page */
  gpum_client_close(c);
  gpum_error_clear();
  if (st && list)
    json_object_set(st, "reservations", json_object_get(list, "reservations"));
  json_decref(list);
  json_decref(snap->gpumd);
  snap->gpumd = st;
}

static const json_t *find_res(const cli_snapshot_t *snap, const char *id) {
  size_t i;
  const json_t *r;
  const json_t *all = json_object_get(snap->gpumd, "reservations");
  for (i = 0; i < json_array_size(all) && (r = json_array_get(all, i)); i++) {
    const char *rid = json_string_value(json_object_get(r, "id"));
    if (rid && !strcmp(rid, id))
      return r;
  }
  return NULL;
}

static uint64_t num(const json_t *o, const char *key) {
  json_int_t v = json_integer_value(json_object_get(o, key));
  return v > 0 ? (uint64_t)v : 0;
}

/* "r-1 alice train 8.00 GiB" */
static void res_line(const cli_out_t *o, const json_t *r, const char *id) {
  char user[64], size[GPUM_SIZE_BUFSZ];
  if (r == NULL) {
    cli_styled(o, CLI_DIM, "      %s\n", id);
    return;
  }
  const char *label = json_string_value(json_object_get(r, "label"));
  cli_user_name((int64_t)num(r, "uid"), user, sizeof user);
  /* Run under the enforcement shim: what its processes hold, over all its GPUs. */
  const json_t *fenced = json_object_get(r, "fenced");
  char held[GPUM_SIZE_BUFSZ + 16] = "";
  if (json_is_object(fenced)) {
    char b[GPUM_SIZE_BUFSZ];
    snprintf(held, sizeof held, " (fenced, holds %s)",
             gpum_size_format(num(fenced, "used"), b, sizeof b));
  }
  fprintf(o->f, "      %-8s %-10s %10s/GPU  pid %-7llu %s%s\n", id, user,
          gpum_size_format(num(r, "bytes_per_gpu"), size, sizeof size),
          (unsigned long long)num(r, "pid"), label && *label ? label : "", held);
}

/* gpumd's lines for its device d: accounting, its DISABLED or OVERCOMMITTED, reservations. */
static void gpumd_device_lines(const cli_out_t *o, const cli_snapshot_t *snap, const json_t *d) {
  {
    char res[GPUM_SIZE_BUFSZ], com[GPUM_SIZE_BUFSZ];
    const json_t *ids = json_object_get(d, "reservations");
    cli_styled(o, CLI_DIM, "    gpumd: reserved %s, committed %s, %zu reservation%s\n",
               gpum_size_format(num(d, "reserved"), res, sizeof res),
               gpum_size_format(num(d, "committed"), com, sizeof com), json_array_size(ids),
               json_array_size(ids) == 1 ? "" : "s");
    const char *st = json_string_value(json_object_get(d, "state"));
    const char *why = json_string_value(json_object_get(d, "reason"));
    if (st && !strcmp(st, "DISABLED")) /* the operator's switch lives in gpumd only */
      cli_styled(o, CLI_YELLOW, "    gpumd: DISABLED (%s): no new reservations on this GPU\n",
                 why && *why ? why : "by the operator");
    else if (st && !strcmp(st, "OVERCOMMITTED"))
      cli_styled(o, CLI_BOLD_RED, "    gpumd: OVERCOMMITTED: %s\n", why && *why ? why : "");
    size_t k;
    const json_t *id;
    for (k = 0; k < json_array_size(ids) && (id = json_array_get(ids, k)); k++) {
      const char *s = json_string_value(id);
      if (s)
        res_line(o, find_res(snap, s), s);
    }
  }
}

void cli_render_gpumd_device(const cli_out_t *o, const cli_snapshot_t *snap,
                             const cli_dev_snap_t *dev) {
  const json_t *d = cli_gpumd_device_of(snap->gpumd, dev);
  if (d)
    gpumd_device_lines(o, snap, d);
}

void cli_render_gpumd_strangers(const cli_out_t *o, const cli_snapshot_t *snap) {
  size_t i;
  const json_t *d;
  json_array_foreach(json_object_get(snap->gpumd, "devices"), i, d) {
    bool seen = false;
    for (size_t k = 0; k < snap->ndevs && !seen; k++)
      seen = cli_gpumd_device_of(snap->gpumd, &snap->devs[k]) == d;
    if (seen)
      continue;
    const char *uuid = json_string_value(json_object_get(d, "uuid"));
    const char *name = json_string_value(json_object_get(d, "name"));
    cli_styled(o, CLI_YELLOW,
               "gpumd's GPU %llu (%s, %s) is not among the devices seen here: gpumd and this "
               "gpum read different drivers (GPUM_SIM_NODE, CUDA_VISIBLE_DEVICES?)\n",
               (unsigned long long)num(d, "index"), name ? name : "?", uuid ? uuid : "?");
    gpumd_device_lines(o, snap, d);
  }
}

void cli_render_gpumd_queue(const cli_out_t *o, const cli_snapshot_t *snap) {
  const json_t *queue = json_object_get(snap->gpumd, "queue");
  if (snap->gpumd == NULL)
    return;
  json_int_t susp =
      json_integer_value(json_object_get(json_object_get(snap->gpumd, "node"), "suspended"));
  if (susp > 0) /* their GPU memory is in host memory (docs/suspend.md) */
    fprintf(o->f, "gpumd: %lld suspended (gpum jobs --all --state SUSPENDED)\n", (long long)susp);
  if (json_array_size(queue) == 0) {
    cli_styled(o, CLI_DIM, "gpumd: queue empty\n");
    return;
  }
  /* gpumd sends the head of a long queue (what one message holds); node.queued counts it. */
  json_int_t all =
      json_integer_value(json_object_get(json_object_get(snap->gpumd, "node"), "queued"));
  size_t shown = json_array_size(queue);
  fprintf(o->f, "gpumd: %zu queued\n", all > 0 && (size_t)all > shown ? (size_t)all : shown);
  size_t i;
  const json_t *r;
  for (i = 0; i < json_array_size(queue) && (r = json_array_get(queue, i)); i++) {
    const char *id = json_string_value(json_object_get(r, "id"));
    const char *why = json_string_value(json_object_get(r, "waiting_for"));
    res_line(o, r, id ? id : "?");
    if (why && *why)
      cli_styled(o, CLI_DIM, "        waiting for %s\n", why);
  }
  if (all > 0 && (size_t)all > shown)
    cli_styled(o, CLI_DIM, "  ... and %zu more (gpum jobs --all --state QUEUED)\n",
               (size_t)all - shown);
}
