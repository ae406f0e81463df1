#!/usr/bin/env bash
# Build upstream's agent (kubernetes-sigs/sig-storage-local-static-provisioner,
# cmd/local-volume-provisioner) from its source with the local Go toolchain, for the benchmark that
# sets this agent beside it (bench/vs-upstream.ts, issue 35). Not used by `npm test` or .ci/run.
#
# The source is a git repository (a bare mirror or a clone) read with `git archive`; upstream
# vendors its dependencies, so the build needs no network. The binary is cached in a directory
# keyed by the commit and rebuilt only when missing.
#
# The LAST line of stdout is the absolute path of the binary; everything else goes to stderr.
#
# Environment:
#   LVP_UPSTREAM_GIT    git dir of upstream's repository
#                       (default /work/.mirror/kubernetes-sigs+sig-storage-local-static-provisioner/repo)
#   LVP_UPSTREAM_REF    what to build (default master)
#   LVP_UPSTREAM_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/lvp-upstream)
#   GO                  go binary to use (default: `go` on PATH, else /usr/local/go/bin/go)
set -euo pipefail

log() { printf '[build-upstream-agent] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

GIT_DIR_UP="${LVP_UPSTREAM_GIT:-/work/.mirror/kubernetes-sigs+sig-storage-local-static-provisioner/repo}"
REF="${LVP_UPSTREAM_REF:-master}"
CACHE_ROOT="${LVP_UPSTREAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lvp-upstream}"

GO="${GO:-}"
if [[ -z "$GO" ]]; then
  if command -v go >/dev/null 2>&1; then GO="$(command -v go)"
  elif [[ -x /usr/local/go/bin/go ]]; then GO=/usr/local/go/bin/go
  else die "no Go toolchain found (install Go or set GO=/path/to/go)"; fi
fi

git --git-dir="$GIT_DIR_UP" rev-parse --verify --quiet "$REF^{commit}" >/dev/null \
  || die "no commit $REF in $GIT_DIR_UP (set LVP_UPSTREAM_GIT to upstream's git dir)"
COMMIT="$(git --git-dir="$GIT_DIR_UP" rev-parse "$REF^{commit}")"
OUT_DIR="$CACHE_ROOT/$COMMIT"
BIN="$OUT_DIR/local-volume-provisioner"

if [[ -x "$BIN" ]]; then
  log "cached: $BIN ($REF = $COMMIT)"
  printf '%s\n' "$BIN"
  exit 0
fi

mkdir -p "$OUT_DIR"
SRC="$(mktemp -d "$CACHE_ROOT/src.XXXXXX")"
trap 'rm -rf "$SRC"' EXIT
log "building $REF ($COMMIT) with $("$GO" version)"
git --git-dir="$GIT_DIR_UP" archive "$COMMIT" | tar -x -C "$SRC"

# As upstream's Makefile builds it (static, no cgo), from its vendor directory; the go.mod's `go`
# line may ask for a newer toolchain than the local one: never download one behind our back.
(
  cd "$SRC"
  GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=vendor "$GO" build \
    -ldflags "-X main.version=$COMMIT" -o "$BIN.tmp" ./cmd/local-volume-provisioner
) >&2 || die "go build failed (see above)"
mv "$BIN.tmp" "$BIN"
printf '%s\n' "$COMMIT" >"$OUT_DIR/COMMIT"
log "built $BIN"
printf '%s\n' "$BIN"
