# SPDX-License-Identifier: Apache-2.0
# A 30% transient NVML error rate never marks a device ERROR; a 100% rate does after N tries, with
# backoff, and the device recovers once the errors stop.
source "$GPUM_SOURCE_DIR/tests/integration/monitor_lib.sh"

m_run transient30
m_run transient100
