# SPDX-License-Identifier: Apache-2.0
# Window statistics (min, max, mean, nearest-rank p50/p95/p99) of every metric equal the values
# computed independently from the raw history; history paging and bad arguments.
source "$GPUM_SOURCE_DIR/tests/integration/monitor_lib.sh"

m_run stats
