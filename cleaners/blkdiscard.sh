#!/bin/bash
# Discards every block of the device (TRIM/UNMAP): fast, and on most SSDs and thin devices the
# discarded blocks read back as zeros. Fails on a device that does not support discard.

source "$(dirname -- "${BASH_SOURCE[0]}")/common.sh"

validateBlockDevice
name="$(basename -- "$(realpath -e -- "$LOCAL_PV_BLKDEVICE")")"
max="/sys/class/block/$name/queue/discard_max_bytes"
if [[ -r "$max" && "$(<"$max")" == 0 ]]; then
  die "$LOCAL_PV_BLKDEVICE does not support discard ($max is 0): use another blockCleanerCommand, e.g. /scripts/shred.sh or /scripts/dd_zero.sh"
fi
status=0
run blkdiscard -v "$LOCAL_PV_BLKDEVICE" || status=$?
if ((status != 0)); then
  die "blkdiscard failed on $LOCAL_PV_BLKDEVICE (exit status $status); if the device does not support discard, use another blockCleanerCommand"
fi
echo "Discarded $LOCAL_PV_BLKDEVICE"
