#!/usr/bin/env bash
# Build the real Kubernetes control-plane binaries used by the integration tests
# (kube-apiserver, etcd, kube-controller-manager, kube-scheduler), the kubelet, plus helm, from
# the Go module proxy, with the local Go toolchain. Binaries are cached in a
# directory keyed by the Kubernetes, etcd and helm versions and are only rebuilt
# when missing (each one on its own: a cache dir made before the controllers or the
# kubelet were added keeps what it has and gains only the new binaries).
#
# The LAST line of stdout is the absolute path of the bin dir; everything else
# goes to stderr.
#
# Environment:
#   LVP_KUBE_BIN_CACHE  override the cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/lvp-kube-bin)
#   GO                  go binary to use (default: `go` on PATH, else /usr/local/go/bin/go)
#   LVP_MIN_FREE_MB     free disk required before a cold build (default 4096)
set -euo pipefail

log() { printf '[build-kube-binaries] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODS="$ROOT/test/kube-bin"

GO="${GO:-}"
if [[ -z "$GO" ]]; then
  if command -v go >/dev/null 2>&1; then GO="$(command -v go)"
  elif [[ -x /usr/local/go/bin/go ]]; then GO=/usr/local/go/bin/go
  else die "no Go toolchain found (install Go >= 1.26 or set GO=/path/to/go)"; fi
fi

# Never let a module switch the toolchain behind our back; never add -u anywhere.
export GOTOOLCHAIN=local
export CGO_ENABLED=0

# Read "require <module> <version>" from a wrapper go.mod.
mod_version() {
  local gomod="$1" module="$2" v
  v="$(awk -v m="$module" '$1 == "require" && $2 == m { print $3; exit } $1 == m && $2 ~ /^v/ { print $2; exit }' "$gomod")"
  [[ -n "$v" ]] || die "cannot find $module in $gomod"
  printf '%s' "$v"
}

K8S_VERSION="$(mod_version "$MODS/apiserver/go.mod" k8s.io/kubernetes)"
ETCD_VERSION="$(mod_version "$MODS/etcd/go.mod" go.etcd.io/etcd/server/v3)"
HELM_VERSION="$(mod_version "$MODS/helm/go.mod" helm.sh/helm/v3)"
# kube-controller-manager and kube-scheduler have a wrapper module of their own, so that their
# dependencies cannot move the apiserver's; both must be the apiserver's Kubernetes version (the
# cache key names only one).
CONTROLLERS_VERSION="$(mod_version "$MODS/controllers/go.mod" k8s.io/kubernetes)"
[[ "$CONTROLLERS_VERSION" == "$K8S_VERSION" ]] \
  || die "test/kube-bin/controllers requires k8s.io/kubernetes $CONTROLLERS_VERSION, test/kube-bin/apiserver $K8S_VERSION: they must match"
# The kubelet has a wrapper module of its own too (its extra dependencies would rewrite the
# controllers' go.mod/go.sum); same rule.
KUBELET_VERSION="$(mod_version "$MODS/kubelet/go.mod" k8s.io/kubernetes)"
[[ "$KUBELET_VERSION" == "$K8S_VERSION" ]] \
  || die "test/kube-bin/kubelet requires k8s.io/kubernetes $KUBELET_VERSION, test/kube-bin/apiserver $K8S_VERSION: they must match"

CACHE_ROOT="${LVP_KUBE_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lvp-kube-bin}"
BIN_DIR="$CACHE_ROOT/k8s-${K8S_VERSION}_etcd-${ETCD_VERSION}_helm-${HELM_VERSION}"
mkdir -p "$BIN_DIR"
BIN_DIR="$(cd "$BIN_DIR" && pwd)"

log "go: $("$GO" version)"
log "versions: kubernetes $K8S_VERSION, etcd $ETCD_VERSION, helm $HELM_VERSION"
log "bin dir: $BIN_DIR"

# Serialize concurrent runs on the same cache dir.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$BIN_DIR/.lock"
  flock 9
fi

BINARIES="etcd kube-apiserver helm kube-controller-manager kube-scheduler kubelet"
have() { [[ -x "$BIN_DIR/$1" && -s "$BIN_DIR/$1" ]]; }

missing=()
for b in $BINARIES; do have "$b" || missing+=("$b"); done
if [[ ${#missing[@]} -eq 0 ]]; then
  log "all binaries cached"
  printf '%s\n' "$BIN_DIR"
  exit 0
fi
log "to build: ${missing[*]}"

# Free disk check: module + build caches and the bin dir need a few GB on a cold machine.
free_mb() {
  local p="$1"
  while [[ ! -e "$p" ]]; do p="$(dirname "$p")"; done
  df -Pm "$p" | awk 'NR == 2 { print $4 }'
}
MIN_FREE_MB="${LVP_MIN_FREE_MB:-4096}"
for d in "$BIN_DIR" "$("$GO" env GOMODCACHE)" "$("$GO" env GOCACHE)"; do
  f="$(free_mb "$d")"
  log "free disk at $d: ${f} MB"
  (( f >= MIN_FREE_MB )) || die "need at least ${MIN_FREE_MB} MB free at $d, have ${f} MB"
done

TMP_OUT=""
cleanup() { [[ -n "$TMP_OUT" ]] && rm -f "$TMP_OUT"; return 0; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# build <name> <module dir> <package> <ldflags...>
build() {
  local name="$1" dir="$2" pkg="$3" ldflags="$4" start end
  if have "$name"; then log "$name: cached"; return 0; fi
  TMP_OUT="$BIN_DIR/.${name}.tmp.$$"
  rm -f "$TMP_OUT"
  log "$name: building $pkg (module $dir)"
  start="$(date +%s)"
  (cd "$dir" && "$GO" build -trimpath -ldflags "-s -w $ldflags" -o "$TMP_OUT" "$pkg") >&2 \
    || die "$name: go build failed"
  "$TMP_OUT" --version >/dev/null 2>&1 || "$TMP_OUT" version >/dev/null 2>&1 \
    || die "$name: built binary does not run"
  mv -f "$TMP_OUT" "$BIN_DIR/$name"
  TMP_OUT=""
  end="$(date +%s)"
  log "$name: built in $((end - start))s"
}

K8S_MAJOR_MINOR="${K8S_VERSION#v}"
K8S_MAJOR="${K8S_MAJOR_MINOR%%.*}"
K8S_MINOR="$(printf '%s' "$K8S_MAJOR_MINOR" | cut -d. -f2)"
BUILD_DATE="1970-01-01T00:00:00Z"
k8s_ldflags=""
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  k8s_ldflags+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=$K8S_MAJOR -X $p.gitMinor=$K8S_MINOR"
  k8s_ldflags+=" -X $p.gitCommit=module-proxy -X $p.gitTreeState=clean -X $p.buildDate=$BUILD_DATE"
done

build etcd "$MODS/etcd" go.etcd.io/etcd/server/v3 \
  "-X go.etcd.io/etcd/api/v3/version.GitSHA=module-proxy-$ETCD_VERSION"
build kube-apiserver "$MODS/apiserver" k8s.io/kubernetes/cmd/kube-apiserver "$k8s_ldflags"
build helm "$MODS/helm" helm.sh/helm/v3/cmd/helm \
  "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
build kube-controller-manager "$MODS/controllers" k8s.io/kubernetes/cmd/kube-controller-manager "$k8s_ldflags"
build kube-scheduler "$MODS/controllers" k8s.io/kubernetes/cmd/kube-scheduler "$k8s_ldflags"
build kubelet "$MODS/kubelet" k8s.io/kubernetes/cmd/kubelet "$k8s_ldflags"

for b in $BINARIES; do have "$b" || die "$b missing after build"; done
log "done"
printf '%s\n' "$BIN_DIR"
