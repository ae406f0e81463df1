#!/bin/bash
# Overwrites the whole device N times with random data (default 3), then once with zeros.
# Usage: shred.sh [N]

source "$(dirname -- "${BASH_SOURCE[0]}")/common.sh"

passes="${1:-3}"
validateCount "$passes"
validateBlockDevice
run shred -v -z -f -n "$passes" "$LOCAL_PV_BLKDEVICE"
echo "Shredded $LOCAL_PV_BLKDEVICE ($passes random pass(es), then zeros)"
