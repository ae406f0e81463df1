#!/bin/bash
# Removes every entry inside LOCAL_PV_FILESYSTEM and keeps the directory itself. Never crosses into
# another mount: a nested mount point (another filesystem, or a bind mount of the same one) is
# skipped, and the directories above it stay because they are not empty. Exits non-zero when an
# entry could not be removed (skipped mount points are not failures).

source "$(dirname -- "${BASH_SOURCE[0]}")/common.sh"

validateFilesystem
volume="$(realpath -e -- "$LOCAL_PV_FILESYSTEM")"
volume_device="$(stat -c %d -- "$volume")"

# Mount points strictly below the volume, from the mount table (findmnt escapes odd bytes as \xNN).
mounts=()
while IFS= read -r target; do
  target="$(printf '%b' "$target")"
  if [[ "$target" == "$volume"/* ]]; then mounts+=("$target"); fi
done < <(findmnt -rn -o TARGET)

is_mount_point() {
  local m
  for m in "${mounts[@]}"; do [[ "$m" == "$1" ]] && return 0; done
  # Another filesystem mounted here after we read the table.
  [[ -d "$1" && ! -L "$1" && "$(stat -c %d -- "$1")" != "$volume_device" ]]
}

contains_mount_point() {
  local m
  for m in "${mounts[@]}"; do [[ "$m" == "$1"/* ]] && return 0; done
  return 1
}

failed=0
# Empties directory $1: entries without a mount point below them go with `rm -rf
# --one-file-system`; a directory with one inside is emptied the same way and kept.
empty_directory() {
  local entry
  while IFS= read -r -d '' entry; do
    if is_mount_point "$entry"; then
      echo "Skipping mount point $entry"
    elif [[ -d "$entry" && ! -L "$entry" ]] && contains_mount_point "$entry"; then
      empty_directory "$entry"
      echo "Keeping $entry: a mount point is inside"
    else
      run rm -rf --one-file-system -- "$entry" || failed=1
    fi
  done < <(find "$1" -mindepth 1 -maxdepth 1 -print0)
}

empty_directory "$volume"
if ((failed != 0)); then
  die "some entries of $volume could not be removed"
fi
echo "Emptied $volume"
