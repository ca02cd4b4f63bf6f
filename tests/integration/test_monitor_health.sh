# SPDX-License-Identifier: Apache-2.0
# Operator DISABLED (kept through faults, left only by the operator), BUSY over the utilisation
# and memory thresholds, and ECC: corrected errors are not ERROR, an uncorrectable one is.
source "$GPUM_SOURCE_DIR/tests/integration/monitor_lib.sh"

m_run disabled
m_run busy
m_run ecc
