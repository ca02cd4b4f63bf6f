# SPDX-License-Identifier: Apache-2.0
# The monitor under concurrency (also run under ThreadSanitizer, label "threads"): readers of
# history, statistics, health and events, an operator toggling DISABLED and (un)subscribing,
# while the sampler, the device workers and the event thread handle a 50% error rate and an
# XID 79 with recovery; every event reaches the subscriber exactly once.
source "$GPUM_SOURCE_DIR/tests/integration/monitor_lib.sh"

m_run threads
