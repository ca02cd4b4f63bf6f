/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pure parts of the ROCm SMI backend (src/lib/device/rocm.c), for the unit tests: the
 * status mapping and the decoders of what ROCm SMI hands back. Never installed.
 */
#ifndef GPUM_ROCM_INTERNAL_H
#define GPUM_ROCM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rocm_smi_abi.h"

/* True for the statuses retried with the session's backoff: RSMI_STATUS_BUSY (a sysfs read met
 * EBUSY: the SMU or a device mutex was taken) and RSMI_STATUS_INTERRUPT (EINTR). Pure. */
bool gpum__rsmi_is_transient(rsmi_status_t st);
/* The gpum error for a status (0 for success): transient ones GPUM_EAGAIN,
 * RSMI_STATUS_UNKNOWN_ERROR GPUM_ELOST (what a device that is gone answers: amdgpu's ENODEV
 * has no status of its own), NOT_SUPPORTED and NOT_YET_IMPLEMENTED GPUM_ENOTSUP, INIT_ERROR
 * GPUM_EDRIVER, ... Pure. */
int gpum__rsmi_map_error(rsmi_status_t st);
/* True for statuses that fail a whole read rather than one field: lost, not initialised,
 * and transient ones that outlasted the retries. Pure. */
bool gpum__rsmi_is_fatal(rsmi_status_t st);
/* Formats rsmi_dev_pci_id_get's BDFID (domain in bits 63-32, bus 15-8, device 7-3, function
 * 2-0) as NVML writes a bus id, "0000ABCD:BB:DD.F" in upper-case hex. Pure. */
void gpum__rsmi_format_bdf(uint64_t bdfid, char *out, size_t len);
/* The current clock of a frequency table in MHz; false when the table is empty or its current
 * index is out of range. Pure. */
bool gpum__rsmi_current_mhz(const rsmi_frequencies_t *f, unsigned *mhz);

#endif /* GPUM_ROCM_INTERNAL_H */
