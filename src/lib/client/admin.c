/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gpumd client's operator calls: disabling and enabling a device (the "disable" and
 * "enable" ops of docs/protocol.md), which only admins may make.
 */
#include <stdio.h>

#include <gpum/error.h>

#include "client/client_internal.h"
#include "client/protocol_internal.h"

int gpum_client_set_device_disabled(gpum_client_t *c, const char *device, bool disabled,
                                    const char *reason, char *state, size_t state_len) {
  if (state && state_len)
    state[0] = '\0';
  if (device == NULL || device[0] == '\0')
    return gpum_error(GPUM_EINVAL, "no device given (an index such as \"0\", or a UUID)");
  json_t *req = json_pack("{s:s, s:s}", GPUM_PROTO_F_OP,
                          disabled ? GPUM_PROTO_OP_DISABLE : GPUM_PROTO_OP_ENABLE,
                          GPUM_PROTO_F_DEVICE, device);
  if (req && disabled && reason && reason[0] &&
      json_object_set_new(req, GPUM_PROTO_F_REASON, json_string(reason)) != 0) {
    json_decref(req);
    req = NULL;
  }
  json_t *reply = NULL;
  int rc = gpum__client_call_consume(c, req, &reply);
  if (rc != 0)
    return rc;
  const char *st = json_string_value(
      json_object_get(json_object_get(reply, GPUM_PROTO_F_DEVICE), GPUM_PROTO_F_STATE));
  if (st == NULL)
    rc = gpum_error(GPUM_EPROTO, "gpumd's reply has no device state");
  else if (state && state_len)
    snprintf(state, state_len, "%s", st);
  json_decref(reply);
  return rc;
}
