#!/usr/bin/env bash
# Prepare this machine to run a real kubelet node for the integration tests
# (test/support/kubelet-node.ts):
#
#   1. containerd, runc and the CNI plugins from Debian (apt-get, only when missing);
#   2. the node's two images, built locally and never pulled: a static Go program
#      (test/node-image/testbox) packed by hand as an OCI image layout (a tar layer, a config,
#      a manifest, an index), once as the pod sandbox ("pause") image and once as a
#      busybox-like test image. Cached by the hash of their inputs.
#
# It starts nothing and writes no system configuration: every node the tests start gets its own
# containerd config, socket, root and state dirs under a test-owned temp dir
# (kubelet-node.ts writes them and imports the images at start), so a system containerd, if
# any, is never touched.
#
# The LAST line of stdout is the absolute path of the kit dir, holding `node-kit.json` (paths of
# containerd, ctr, runc, the CNI plugin dir, the image archive and the image names); everything
# else goes to stderr. Idempotent; a second run takes well under a second.
#
# Environment:
#   LVP_NODE_CACHE      override the cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/lvp-node)
#   GO                  go binary to use (default: `go` on PATH, else /usr/local/go/bin/go)
#   LVP_NODE_NO_APT=1   never call apt-get; fail when a package is missing
set -euo pipefail

log() { printf '[prepare-node] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SRC="$ROOT/test/node-image/testbox"
# Bump when the image format written below changes (invalidates the cached kit).
KIT_FORMAT=1
PAUSE_IMAGE="lvp.test/pause:v1"
TESTBOX_IMAGE="lvp.test/testbox:v1"

GO="${GO:-}"
if [[ -z "$GO" ]]; then
  if command -v go >/dev/null 2>&1; then GO="$(command -v go)"
  elif [[ -x /usr/local/go/bin/go ]]; then GO=/usr/local/go/bin/go
  else die "no Go toolchain found (install Go or set GO=/path/to/go)"; fi
fi
export GOTOOLCHAIN=local CGO_ENABLED=0

# ---- 1. packages -------------------------------------------------------------------------------
# binary -> Debian package that provides it
PACKAGES=(containerd runc containernetworking-plugins)
pkg_installed() { [[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" == installed ]]; }
missing=()
for p in "${PACKAGES[@]}"; do pkg_installed "$p" || missing+=("$p"); done
if [[ ${#missing[@]} -gt 0 ]]; then
  [[ "${LVP_NODE_NO_APT:-}" != 1 ]] || die "missing packages: ${missing[*]} (LVP_NODE_NO_APT=1)"
  [[ "$(id -u)" == 0 ]] || die "missing packages: ${missing[*]}; run as root to install them with apt-get"
  command -v apt-get >/dev/null 2>&1 || die "missing packages: ${missing[*]} and no apt-get"
  log "installing ${missing[*]} (apt-get)"
  start="$(date +%s)"
  apt_install() {
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends "$@" >&2
  }
  if ! apt_install "${missing[@]}"; then
    # stale or empty package lists (a fresh machine): refresh once and retry
    log "apt-get install failed; apt-get update, then retrying"
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update -q >&2
    apt_install "${missing[@]}"
  fi
  log "installed in $(($(date +%s) - start))s"
fi

CONTAINERD="$(command -v containerd || true)"
CTR="$(command -v ctr || true)"
RUNC="$(command -v runc || true)"
[[ -x "$CONTAINERD" && -x "$CTR" ]] || die "containerd/ctr not found after installing containerd"
[[ -x "$RUNC" ]] || die "runc not found after installing runc"
CNI_BIN_DIR=""
for d in /usr/lib/cni /opt/cni/bin /usr/libexec/cni; do
  if [[ -x "$d/bridge" && -x "$d/host-local" && -x "$d/loopback" ]]; then CNI_BIN_DIR="$d"; break; fi
done
[[ -n "$CNI_BIN_DIR" ]] || die "no CNI plugin dir with bridge, host-local and loopback (containernetworking-plugins)"
for t in tar sha256sum setpriv mount umount ip; do
  command -v "$t" >/dev/null 2>&1 || die "$t not found"
done

# ---- 2. images ---------------------------------------------------------------------------------
{ read -r GOARCH; read -r GOVERSION; } < <("$GO" env GOARCH GOVERSION)
KEY="$( { printf 'format=%s go=%s arch=%s pause=%s testbox=%s\n' "$KIT_FORMAT" "$GOVERSION" "$GOARCH" \
  "$PAUSE_IMAGE" "$TESTBOX_IMAGE"; cat "$SRC/go.mod" "$SRC/main.go"; } | sha256sum | cut -c1-16)"
CACHE_ROOT="${LVP_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lvp-node}"
mkdir -p "$CACHE_ROOT"
CACHE_ROOT="$(cd "$CACHE_ROOT" && pwd)"
KIT="$CACHE_ROOT/kit-$KEY"

if command -v flock >/dev/null 2>&1; then
  exec 9>"$CACHE_ROOT/.lock"
  flock 9
fi

write_kit_json() {
  cat >"$KIT/node-kit.json.tmp" <<EOF
{
  "containerd": "$CONTAINERD",
  "ctr": "$CTR",
  "runc": "$RUNC",
  "cniBinDir": "$CNI_BIN_DIR",
  "imagesArchive": "$KIT/images.oci.tar",
  "pauseImage": "$PAUSE_IMAGE",
  "testboxImage": "$TESTBOX_IMAGE",
  "containerdVersion": "$("$CONTAINERD" --version | awk '{print $3}')",
  "runcVersion": "$("$RUNC" --version | awk 'NR==1 {print $3}')"
}
EOF
  mv -f "$KIT/node-kit.json.tmp" "$KIT/node-kit.json"
}

if [[ -s "$KIT/images.oci.tar" ]]; then
  log "images cached ($KIT)"
  write_kit_json # package paths or versions may have changed since
  printf '%s\n' "$KIT"
  exit 0
fi

start="$(date +%s)"
WORK="$(mktemp -d "$CACHE_ROOT/.build.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

log "building testbox ($SRC)"
mkdir -p "$WORK/rootfs/tmp"
(cd "$SRC" && "$GO" build -trimpath -ldflags "-s -w" -o "$WORK/rootfs/testbox" .) >&2 || die "go build of testbox failed"
chmod 0755 "$WORK/rootfs/testbox"
chmod 1777 "$WORK/rootfs/tmp"
"$WORK/rootfs/testbox" echo ok >/dev/null || die "testbox does not run"

LAYOUT="$WORK/layout"
BLOBS="$LAYOUT/blobs/sha256"
mkdir -p "$BLOBS"

# blob <file>: moves a file into the layout's blobs, prints "<sha256 hex> <size>"
blob() {
  local hex size
  hex="$(sha256sum "$1" | cut -d' ' -f1)"
  size="$(stat -c %s "$1")"
  mv -f "$1" "$BLOBS/$hex"
  printf '%s %s\n' "$hex" "$size"
}

# One uncompressed layer (so its digest is also its diff_id), reproducible.
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=posix \
  --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
  -C "$WORK/rootfs" -cf "$WORK/layer.tar" testbox tmp
read -r LAYER_HEX LAYER_SIZE < <(blob "$WORK/layer.tar")

# image_manifest <name> <entrypoint json> <cmd json>: writes config + manifest, prints a descriptor
image_manifest() {
  local name="$1" entrypoint="$2" cmd="$3" chex csize mhex msize
  printf '{"architecture":"%s","os":"linux","config":{"Env":["PATH=/"],"Entrypoint":%s,"Cmd":%s,"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created_by":"scripts/prepare-node.sh (test/node-image/testbox)"}]}' \
    "$GOARCH" "$entrypoint" "$cmd" "$LAYER_HEX" >"$WORK/config.json"
  read -r chex csize < <(blob "$WORK/config.json")
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
    "$chex" "$csize" "$LAYER_HEX" "$LAYER_SIZE" >"$WORK/manifest.json"
  read -r mhex msize < <(blob "$WORK/manifest.json")
  printf '{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"%s","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}' \
    "$mhex" "$msize" "$GOARCH" "$name" "${name##*:}"
}

PAUSE_DESC="$(image_manifest "$PAUSE_IMAGE" '["/testbox"]' '["pause"]')"
TESTBOX_DESC="$(image_manifest "$TESTBOX_IMAGE" '["/testbox"]' '["sleep"]')"
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[%s,%s]}' \
  "$PAUSE_DESC" "$TESTBOX_DESC" >"$LAYOUT/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' >"$LAYOUT/oci-layout"

mkdir -p "$KIT"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$LAYOUT" -cf "$KIT/images.oci.tar.tmp" oci-layout index.json blobs
mv -f "$KIT/images.oci.tar.tmp" "$KIT/images.oci.tar"
write_kit_json
log "images $PAUSE_IMAGE and $TESTBOX_IMAGE built in $(($(date +%s) - start))s ($(stat -c %s "$KIT/images.oci.tar") bytes)"
printf '%s\n' "$KIT"
