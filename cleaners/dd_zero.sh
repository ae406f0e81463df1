#!/bin/bash
# Writes zeros over the whole device N times (default 1). dd stops at the end of the device with
# "No space left on device", which is the expected way for it to finish; any other failure fails
# the cleanup.
# Usage: dd_zero.sh [N]

source "$(dirname -- "${BASH_SOURCE[0]}")/common.sh"

passes="${1:-1}"
validateCount "$passes"
validateBlockDevice

for ((pass = 1; pass <= passes; pass++)); do
  echo "Pass $pass of $passes: zeroing $LOCAL_PV_BLKDEVICE"
  status=0
  output="$(run dd if=/dev/zero of="$LOCAL_PV_BLKDEVICE" bs=1M 2>&1)" || status=$?
  printf '%s\n' "$output"
  if ((status != 0)) && ! grep -q 'No space left on device' <<<"$output"; then
    die "dd failed on $LOCAL_PV_BLKDEVICE (exit status $status) before reaching the end of the device"
  fi
  # dd stops on ENOSPC without flushing: make sure the zeros are on the device.
  run sync "$LOCAL_PV_BLKDEVICE"
done
echo "Zeroed $LOCAL_PV_BLKDEVICE ($passes pass(es))"
