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

#include "engine.h"
#include "gpumd.h"
#include "json_in.h"
#include "ops.h"

#define DEFAULT_REASON "disabled by the operator"

/* The device spec names (an index or a UUID). */
static int find_device(gpumd_t *d, const char *spec, gpumd_device_t **out) {
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

static int set_switch(gpumd_t *d, const gpumd_actor_t *a, const gpumd_switch_req_t *req,
                      bool disable, json_t **out) {
  if (!a->admin)
    return gpum_error(GPUM_EPERM,
                      "only an admin (root or admin_group, or the HTTP token) may "
                      "%s a device",
                      disable ? "disable" : "enable");
  gpumd_device_t *dev = NULL;
  int rc = gpumd_req_error_raise(&req->late);
  if (rc != 0 || (rc = find_device(d, req->device, &dev)) != 0)
    return rc;
  if (!dev->answered || !dev->info.uuid[0])
    return gpum_error(GPUM_ESTATE,
                      "device %u has not answered yet: its UUID, by which the "
                      "switch is stored, is unknown",
                      dev->index);
  const char *reason = req->reason ? req->reason : DEFAULT_REASON;
  rc = gpumd_engine_set_disabled(d, a, dev, disable, reason);
  if (rc != 0)
    return rc;
  return device_reply(d, dev, out);
}

int gpumd_op_disable(gpumd_t *d, const gpumd_actor_t *a, const gpumd_switch_req_t *req,
                     json_t **out) {
  return set_switch(d, a, req, true, out);
}

int gpumd_op_enable(gpumd_t *d, const gpumd_actor_t *a, const gpumd_switch_req_t *req,
                    json_t **out) {
  return set_switch(d, a, req, false, out);
}
