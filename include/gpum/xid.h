/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The XID catalogue: what an NVIDIA Xid error number means and what to do about it.
 *
 * The driver reports Xid errors in the kernel log ("NVRM: Xid (PCI:0000:3b:00): 79, ...") and as
 * NVML XID events (gpum_device_event_t with kind GPUM_DEVEV_XID). This table covers the common
 * ones, summarised from NVIDIA's "XID Errors" catalogue; an Xid missing from it gets a generic
 * entry that is never marked critical. "critical" means the GPU itself needs attention: a reset,
 * a reboot or service (uncorrectable ECC errors, a GPU that fell off the bus, a halted
 * micro-controller...). Xids that are usually caused by the application (13, 31, 43, 45, 68) are
 * not critical: the process is at fault and the next job usually runs fine.
 *
 * All functions are pure and thread-safe; returned strings are static.
 */
#ifndef GPUM_XID_H
#define GPUM_XID_H

#include <stdbool.h>
#include <stddef.h>

#include <gpum/export.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  unsigned xid;
  const char *name;        /* short meaning: "GPU has fallen off the bus" */
  const char *description; /* one or two sentences: the likely cause */
  const char *action;      /* the recommended action */
  bool critical;           /* the device needs a reset, a reboot or service */
  bool known;              /* false: the generic entry for an Xid not in the table */
} gpum_xid_info_t;

/* The entry for xid; an Xid not in the table yields a generic entry ("unknown Xid", not
 * critical, known = false) with .xid set. Never fails. */
GPUM_API gpum_xid_info_t gpum_xid_info(unsigned xid);

/* The whole table in ascending Xid order (for documentation and `gpum alerts --xids`): sets
 * *count and returns the first entry. The table is static. */
GPUM_API const gpum_xid_info_t *gpum_xid_table(size_t *count);

#ifdef __cplusplus
}
#endif
#endif /* GPUM_XID_H */
