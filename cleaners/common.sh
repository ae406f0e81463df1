#!/bin/bash
# Shared helpers for the cleaner scripts. Sourced, not run: every script does
#   source "$(dirname -- "${BASH_SOURCE[0]}")/common.sh"
#
# The provisioner runs a block cleaner with LOCAL_PV_BLKDEVICE set to the device to wipe; a
# filesystem cleaner gets LOCAL_PV_FILESYSTEM, the directory to empty. Images ship these scripts
# at /scripts/<name>, like sig-storage-local-static-provisioner's.

set -euo pipefail

# Cleaner images may start with a minimal PATH; the tools below live in /sbin and /usr/sbin.
PATH="${PATH:-/usr/bin:/bin}:/usr/local/sbin:/usr/sbin:/sbin"
export PATH

# Prints a message to stderr and exits with status 1.
die() {
  echo "error: $*" >&2
  exit 1
}

# Checks that LOCAL_PV_BLKDEVICE is set and names a block device.
validateBlockDevice() {
  if [[ -z "${LOCAL_PV_BLKDEVICE:-}" ]]; then
    die "LOCAL_PV_BLKDEVICE is not set: it must name the block device to clean"
  fi
  if [[ ! -e "$LOCAL_PV_BLKDEVICE" ]]; then
    die "LOCAL_PV_BLKDEVICE=$LOCAL_PV_BLKDEVICE does not exist"
  fi
  if [[ ! -b "$LOCAL_PV_BLKDEVICE" ]]; then
    die "LOCAL_PV_BLKDEVICE=$LOCAL_PV_BLKDEVICE is not a block device"
  fi
  echo "Block device to clean: $LOCAL_PV_BLKDEVICE"
}

# Checks that LOCAL_PV_FILESYSTEM is set and names a directory (other than /).
validateFilesystem() {
  if [[ -z "${LOCAL_PV_FILESYSTEM:-}" ]]; then
    die "LOCAL_PV_FILESYSTEM is not set: it must name the directory to empty"
  fi
  if [[ ! -e "$LOCAL_PV_FILESYSTEM" ]]; then
    die "LOCAL_PV_FILESYSTEM=$LOCAL_PV_FILESYSTEM does not exist"
  fi
  if [[ ! -d "$LOCAL_PV_FILESYSTEM" ]]; then
    die "LOCAL_PV_FILESYSTEM=$LOCAL_PV_FILESYSTEM is not a directory"
  fi
  if [[ "$(realpath -e -- "$LOCAL_PV_FILESYSTEM")" == / ]]; then
    die "LOCAL_PV_FILESYSTEM=$LOCAL_PV_FILESYSTEM is the root directory: refusing to empty it"
  fi
  echo "Directory to empty: $LOCAL_PV_FILESYSTEM"
}

# Checks that $1 is a whole number (a pass count), naming the argument in the message.
validateCount() {
  if [[ ! "$1" =~ ^[0-9]+$ ]]; then
    die "the number of passes must be a whole number, got '$1'"
  fi
}

# Runs a command at idle I/O priority (`ionice -c 3`) so cleaning does not starve the node's other
# I/O; runs it as is when ionice is missing or not permitted (some container runtimes).
IONICE=()
if command -v ionice >/dev/null 2>&1 && ionice -c 3 true >/dev/null 2>&1; then
  IONICE=(ionice -c 3)
else
  echo "note: ionice is not available here; running at normal I/O priority" >&2
fi

# Prints a command line, then runs it at idle I/O priority.
run() {
  echo "+ ${IONICE[*]:+${IONICE[*]} }$*"
  "${IONICE[@]}" "$@"
}
