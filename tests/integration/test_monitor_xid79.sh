# SPDX-License-Identifier: Apache-2.0
# XID 79 marks the device ERROR with the reason; re-probes back off; after the fault is cleared it
# returns to AVAILABLE after M healthy probes; the other devices keep AVAILABLE; an attached
# alert engine is fed the XID and the transition.
source "$GPUM_SOURCE_DIR/tests/integration/monitor_lib.sh"

m_run xid79
