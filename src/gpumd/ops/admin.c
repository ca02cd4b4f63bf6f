/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The operator's switch per device: `gpum disable GPU` / `gpum enable GPU` (socket ops
 * "disable" and "enable", REST POST /api/v1/gpu/devices/{ID}/disable|enable). A disabled
 * device is DISABLED in the monitor (with the operator's reason), so the scheduler grants
 * nothing new on it while the reservations already there run on ("drain"); enabling gives it
 * back to the health rules. The switch is stored in the ledger by UUID, in the turn that made
 * it, and applied again whenever gpumd starts (gpumd_engine_apply_disabled).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpum/error.h>
#include <gpum/log.h>

#include "engine.h"
#include "gpumd.h"
#include "json_in.h"
#include "ledger.h"
#include "ops.h"
#include "os_internal.h"
#include "ledger.h"

#define DEFAULT_REASON "disabled by the operator"

/* The device named by the request's "device" (an index as a string or number, or a UUID). */
static int find_device(gpumd_t *d, json_t *req, gpumd_device_t **out) {
  json_t *v = json_object_get(req, GPUM_PROTO_F_DEVICE);
  char spec[128];
  if (json_is_integer(v) && json_integer_value(v) >= 0)
    snprintf(spec, sizeof spec, "%lld", (long long)json_integer_value(v));
  else if (json_is_string(v) && json_string_length(v) > 0 && json_string_length(v) < sizeof spec)
    snprintf(spec, sizeof spec, "%s", json_string_value(v));
  else
    return gpum_error(GPUM_EINVAL, "\"device\" must be a device index or UUID");
  for (unsigned i = 0; i < d->device_count; i++) {
    gpumd_device_t *dev = &d->devices[i];
    char idx[16];
    snprintf(idx, sizeof idx, "%u", dev->index);
    if (!strcmp(spec, idx) || (dev->answered && !strcmp(spec, dev->info.uuid))) {
      *out = dev;
      return 0;
    }
  }
  return gpum_error(GPUM_ENODEV, "no device '%.64s' on this node", spec);
}

/* {"device": D} for dev, as in status. */
static int device_reply(gpumd_t *d, const gpumd_device_t *dev, json_t **out) {
  json_t *all = gpumd_engine_devices_json(d);
  json_t *one = NULL;
  size_t i;
  json_t *o;
  json_array_foreach(all, i, o) {
    if ((unsigned)json_integer_value(json_object_get(o, GPUM_PROTO_F_INDEX)) == dev->index)
      one = json_incref(o);
  }
  json_decref(all);
  *out = one ? json_pack("{s:o}", GPUM_PROTO_F_DEVICE, one) : NULL;
  return *out ? 0 : gpum_error(GPUM_ENOMEM, "out of memory");
}

static int set_switch(gpumd_t *d, const gpumd_actor_t *a, json_t *req, bool disable, json_t **out) {
  static const char *const dis_fields[] = {GPUM_PROTO_F_ID, GPUM_PROTO_F_OP, GPUM_PROTO_F_DEVICE,
                                           GPUM_PROTO_F_REASON, NULL};
  static const char *const en_fields[] = {GPUM_PROTO_F_ID, GPUM_PROTO_F_OP, GPUM_PROTO_F_DEVICE,
                                          NULL};
  int rc = gpumd_check_fields(req, disable ? dis_fields : en_fields);
  if (rc != 0)
    return rc;
  if (!a->admin)
    return gpum_error(GPUM_EPERM,
                      "only an admin (root or admin_group, or the HTTP token) may "
                      "%s a device",
                      disable ? "disable" : "enable");
  json_t *why = json_object_get(req, GPUM_PROTO_F_REASON);
  if (why && (!json_is_string(why) || json_string_length(why) >= GPUMD_RESV_REASON_LEN ||
              strlen(json_string_value(why)) != json_string_length(why)))
    return gpum_error(GPUM_EINVAL, "\"reason\" must be a text of at most %d bytes",
                      GPUMD_RESV_REASON_LEN - 1);
  gpumd_device_t *dev = NULL;
  if ((rc = find_device(d, req, &dev)) != 0)
    return rc;
  if (!dev->answered || !dev->info.uuid[0])
    return gpum_error(GPUM_ESTATE,
                      "device %u has not answered yet: its UUID, by which the "
                      "switch is stored, is unknown",
                      dev->index);
  const char *reason = why && json_string_length(why) ? json_string_value(why) : DEFAULT_REASON;
  rc = gpumd_ledger_set_disabled(d->ledger, dev->info.uuid, disable, reason, a->uid,
                                 gpum__os_real_ns());
  if (rc == 0)
    rc = gpum_monitor_set_disabled(d->mon, dev->index, disable, reason);
  if (rc != 0)
    return rc;
  gpum_log(GPUM_LOG_WARN, "gpumd", "device %u (%s) %s by uid %u%s%s: %s", dev->index,
           dev->info.uuid, disable ? "disabled" : "enabled", a->uid, a->via ? " over " : "",
           a->via ? a->via : "", disable ? reason : "back to the health rules");
  /* The scheduler sees the new state in this turn: nothing is placed on it after the reply. */
  gpumd_engine_device_health(d, dev->index, disable ? GPUM_HEALTH_DISABLED : GPUM_HEALTH_AVAILABLE,
                             reason);
  return device_reply(d, dev, out);
}

int gpumd_op_disable(gpumd_t *d, const gpumd_actor_t *a, json_t *req, json_t **out) {
  return set_switch(d, a, req, true, out);
}

int gpumd_op_enable(gpumd_t *d, const gpumd_actor_t *a, json_t *req, json_t **out) {
  return set_switch(d, a, req, false, out);
}
