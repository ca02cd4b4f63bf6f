/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Xid catalogue: a short meaning, the likely cause, a recommended action and whether the
 * GPU itself needs attention, for the Xid errors seen most on compute nodes.
 *
 * Summarised from NVIDIA's "XID Errors" documentation and its Xid catalogue (resolution
 * buckets RESTART_APP / RESET_GPU / RESTART_BM / CONTACT_SUPPORT). "critical" marks the Xids
 * after which the device should not take new work until it is reset or serviced: uncorrectable
 * memory errors (48, 94, 95), a failed row remap or page retirement (64), a halted
 * micro-controller (62), NVLink errors (74), a GPU that fell off the bus (79) and GSP firmware
 * failures (119, 120). Xids that usually come from the application (13, 31, 43, 45, 68, 69,
 * 109) and events that record a successful recovery (63) or an early warning (61, 92) are not
 * critical; an alert rule still reports them (at ERROR with `level auto`).
 */
#include <gpum/xid.h>

/* Sorted by Xid. Keep the wording short: these strings end up in alert messages. */
static const gpum_xid_info_t table[] = {
    {13, "Graphics Engine Exception",
     "An exception in a compute or graphics engine, usually an application error such as an "
     "out-of-bounds access or an illegal instruction; rarely failing hardware.",
     "Check the application (compute-sanitizer); restart it. Suspect the GPU only if it "
     "recurs with several applications.",
     false, true},
    {31, "GPU memory page fault",
     "An MMU fault: the application accessed an invalid GPU address; usually an application "
     "or framework bug, rarely a driver or hardware problem.",
     "Check the application (compute-sanitizer); restart it.", false, true},
    {32, "Invalid or corrupted push buffer stream",
     "The DMA controller read a corrupted command stream over the bus; driver, system memory "
     "or PCIe problems.",
     "Restart the application; if it recurs, check PCIe errors and system memory.", false, true},
    {38, "Driver firmware error", "The driver detected an error in the GPU firmware.",
     "Restart the application; reset the GPU or update the driver if it recurs.", false, true},
    {43, "GPU stopped processing",
     "A channel was stopped after a fault in the application (the driver reset the channel); "
     "the GPU itself is usually fine.",
     "Restart the application; look for an earlier Xid (13, 31) naming the cause.", false, true},
    {45, "Preemptive cleanup, due to previous errors",
     "Channels were torn down because their process exited, was killed or hit an earlier "
     "error; often follows other Xids.",
     "Nothing by itself; look for the Xid that preceded it.", false, true},
    {48, "Double-bit ECC error",
     "An uncorrectable (double-bit) ECC error in GPU memory; the applications using that "
     "memory were stopped.",
     "Drain the GPU and reset it (or reboot); replace it if the error recurs.", true, true},
    {61, "Internal micro-controller breakpoint/warning",
     "The GPU's internal micro-controller (PMU) hit a breakpoint or warning; often followed "
     "by Xid 62.",
     "Watch for Xid 62; reset the GPU if it recurs.", false, true},
    {62, "Internal micro-controller halt",
     "The GPU's internal micro-controller halted; the GPU cannot be trusted until reset.",
     "Drain the GPU and reset it; contact support if it recurs.", true, true},
    {63, "ECC page retirement or row remapping recording event",
     "A bad memory page was retired or a row remapped, and the event recorded in the InfoROM; "
     "the repair takes effect after a GPU reset.",
     "Reset the GPU when convenient; watch the retired page / remapped row counts.", false, true},
    {64, "ECC page retirement or row remapper recording failure",
     "Retiring a bad memory page or remapping a row failed; the memory can no longer protect "
     "itself.",
     "Drain the GPU and reset it; replace it if the failure persists.", true, true},
    {68, "NVDEC0 exception (video processor exception)",
     "The video decoder engine raised an exception; usually the application's video stream "
     "or the application.",
     "Restart the application.", false, true},
    {69, "Graphics Engine class error",
     "The graphics engine received an invalid method; usually an application or driver "
     "problem.",
     "Restart the application.", false, true},
    {74, "NVLink error",
     "An NVLink error (link down, training failure or a fatal link error); the applications "
     "using the link are affected.",
     "Drain the GPU and reset it; check NVLink state (nvidia-smi nvlink -s) and replace "
     "hardware if it recurs.",
     true, true},
    {79, "GPU has fallen off the bus",
     "The GPU stopped answering on PCIe: hardware, power, thermal or PCIe link failure.",
     "Drain the node and reboot it; check power, cooling and seating; replace the GPU if it "
     "recurs.",
     true, true},
    {92, "High single-bit ECC error rate",
     "Correctable (single-bit) ECC errors exceed the driver's rate threshold; the memory may "
     "be degrading.",
     "Watch the ECC counters; plan service if the rate keeps rising.", false, true},
    {94, "Contained ECC error",
     "An uncorrectable ECC error was contained: only the applications using that memory were "
     "stopped; the row remap is pending a GPU reset.",
     "Drain the GPU and reset it when its other jobs finish.", true, true},
    {95, "Uncontained ECC error",
     "An uncorrectable ECC error could not be contained: every application on the GPU is "
     "affected.",
     "Drain the GPU and reset it now; replace it if the error recurs.", true, true},
    {109, "Context switch timeout",
     "A context switch timed out, usually because of an application fault or a long-running "
     "kernel that cannot be preempted.",
     "Restart the application; contact support if it recurs with several applications.", false,
     true},
    {119, "GSP RPC timeout",
     "The GPU System Processor (GSP) firmware did not answer a driver request in time.",
     "Drain the GPU and reset it (or reboot); update the driver if it recurs.", true, true},
    {120, "GSP error", "The GPU System Processor (GSP) firmware reported an error.",
     "Drain the GPU and reset it (or reboot); update the driver if it recurs.", true, true},
};

#define TABLE_LEN (sizeof table / sizeof table[0])

gpum_xid_info_t gpum_xid_info(unsigned xid) {
  size_t lo = 0, hi = TABLE_LEN;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (table[mid].xid == xid)
      return table[mid];
    if (table[mid].xid < xid)
      lo = mid + 1;
    else
      hi = mid;
  }
  gpum_xid_info_t unknown = {
      .xid = xid,
      .name = "unknown Xid",
      .description = "An Xid that is not in gpum's table.",
      .action = "Look it up in NVIDIA's Xid catalogue (docs.nvidia.com/deploy/xid-errors).",
      .critical = false,
      .known = false,
  };
  return unknown;
}

const gpum_xid_info_t *gpum_xid_table(size_t *count) {
  if (count != NULL)
    *count = TABLE_LEN;
  return table;
}
