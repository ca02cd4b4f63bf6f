#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpum run when gpumd runs on the host backend (no GPU driver: the CPU fallback device
# "host-..."): CMD sees an empty CUDA_VISIBLE_DEVICES (no GPU, so frameworks use the CPU)
# rather than the host device's name, which no CUDA program understands; GPUM_RESERVATION_DEVICES names
# the granted host device.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"

unset GPUM_SIM_NODE
export GPUM_BACKEND=host
gd_start
G="$GPUM_BIN"

t_expect 0 "$G" run --mem 64MiB -- sh -c \
  'printf "%s|%s|%s|%s\n" "${CUDA_VISIBLE_DEVICES-unset}" "$GPUM_RESERVATION_DEVICES" "$GPUM_MEM_LIMIT" "$GPUM_RESERVATION_ID"'
IFS='|' read -r cvd devs limit rid <"$T_OUT"
[ "$cvd" = "" ] || t_fail "CUDA_VISIBLE_DEVICES='$cvd' on the host backend, expected empty"
[[ "$devs" == host-* ]] || t_fail "GPUM_RESERVATION_DEVICES='$devs', expected the host device"
[ "$limit" = 67108864 ] || t_fail "GPUM_MEM_LIMIT='$limit'"
[[ "$rid" =~ ^r-[0-9]+$ ]] || t_fail "GPUM_RESERVATION_ID='$rid'"
t_ok "host grant: CUDA_VISIBLE_DEVICES='' GPUM_RESERVATION_DEVICES=$devs"
