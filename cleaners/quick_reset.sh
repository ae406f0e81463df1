#!/bin/bash
# The default block cleaner: makes a fresh filesystem on the device, then wipes every signature
# from it, so neither the old filesystem nor the new one is recognised any more (blkid finds
# nothing). mkfs discards the device first when the device supports discard, which also drops the
# old data; on a device without discard the old data blocks stay readable: this is a reset, not
# an erase (use shred.sh, dd_zero.sh or blkdiscard.sh for that).

source "$(dirname -- "${BASH_SOURCE[0]}")/common.sh"

validateBlockDevice
run mkfs -F "$LOCAL_PV_BLKDEVICE"
run wipefs -a "$LOCAL_PV_BLKDEVICE"
echo "Quick reset of $LOCAL_PV_BLKDEVICE done"
