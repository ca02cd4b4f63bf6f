# SPDX-License-Identifier: Apache-2.0
# A driver call that hangs (the simulator's slow calls) marks its device unresponsive (ERROR)
# after the watchdog while the other devices keep being sampled at the interval; the device
# recovers when its calls return.
source "$GPUM_SOURCE_DIR/tests/integration/monitor_lib.sh"

m_run hang
