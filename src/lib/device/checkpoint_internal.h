/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The checkpoint handle's internals (gpum/checkpoint.h), for the unit tests: a handle over a
 * driver table the caller built (a fake driver whose checkpoint calls return chosen results, or
 * one without them, as an old driver is), and the UUID parser.
 */
#ifndef GPUM_CHECKPOINT_INTERNAL_H
#define GPUM_CHECKPOINT_INTERNAL_H

#include <stdint.h>

#include <gpum/checkpoint.h>

#include "device/cuda_loader.h"

/* A handle over cu. It takes cu over: gpum_ckpt_close unloads it (gpum__cuda_unload), also
 * when this fails. Returns 0, GPUM_EDRIVERVER (cu lacks a checkpoint call) or GPUM_ENOMEM. */
int gpum__ckpt_wrap(gpum__cuda_t *cu, gpum_ckpt **out);
/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (hex case-insensitive) -> 16 bytes. 0 or
 * GPUM_EINVAL with the detail naming the string and what is wrong with it. */
int gpum__ckpt_parse_uuid(const char *s, uint8_t out[16]);

#endif /* GPUM_CHECKPOINT_INTERNAL_H */
