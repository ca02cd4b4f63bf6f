/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pure parts of the Level Zero backend (src/lib/device/levelzero.c), for the unit tests:
 * the result mapping and the decoders of what Sysman hands back. Never installed.
 */
#ifndef GPUM_LEVELZERO_INTERNAL_H
#define GPUM_LEVELZERO_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ze_abi.h"

/* True for the results retried with the session's backoff: ZE_RESULT_NOT_READY and
 * ZE_RESULT_ERROR_NOT_AVAILABLE (Sysman's "resource in use, no simultaneous access"). Pure. */
bool gpum__ze_is_transient(ze_result_t r);
/* The gpum error for a result (0 for success): transient ones GPUM_EAGAIN, DEVICE_LOST
 * GPUM_ELOST, DEVICE_REQUIRES_RESET GPUM_ERESET, UNSUPPORTED_FEATURE (and _VERSION)
 * GPUM_ENOTSUP, UNINITIALIZED GPUM_EDRIVER, INSUFFICIENT_PERMISSIONS GPUM_EPERM,
 * INVALID_SIZE GPUM_ENOSPC, the other INVALID_* GPUM_EINVAL, anything else GPUM_EIO. Pure. */
int gpum__ze_map_error(ze_result_t r);
/* True for results that fail a whole read rather than one field: lost, needing a reset, not
 * initialised, and transient ones that outlasted the retries. Pure. */
bool gpum__ze_is_fatal(ze_result_t r);
/* Writes Level Zero's 16-byte device UUID as 8-4-4-4-12 lower-case hex digits, the bytes in
 * their order (36 characters; len must be at least 37, else "" is written). Pure. */
void gpum__ze_format_uuid(const uint8_t id[16], char *out, size_t len);
/* Formats a PCI address as NVML writes a bus id, "0000ABCD:BB:DD.F" in upper-case hex. Pure. */
void gpum__ze_format_bdf(const zes_pci_address_t *a, char *out, size_t len);
/* Utilisation in percent from two reads of an engine group's activity: the busy time's growth
 * over the timestamp's, capped at 100. False (nothing written) when the timestamp did not
 * advance or a counter went backwards (a reset in between). Pure. */
bool gpum__ze_util_percent(const zes_engine_stats_t *prev, const zes_engine_stats_t *cur,
                           unsigned *pct);
/* Mean power in milliwatts between two reads of an energy counter (microjoules over
 * microseconds). False (nothing written) when the timestamp did not advance or the energy
 * went backwards. Pure. */
bool gpum__ze_power_mw(const zes_power_energy_counter_t *prev,
                       const zes_power_energy_counter_t *cur, unsigned *mw);
/* How much an engine group is wanted for the device's utilisation: 0 for ALL, 1 for
 * COMPUTE_ALL, 2 for RENDER_ALL, -1 for any other group. Pure. */
int gpum__ze_engine_rank(zes_engine_group_t type);

#endif /* GPUM_LEVELZERO_INTERNAL_H */
