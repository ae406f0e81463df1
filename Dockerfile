# The provisioner image: the agent (`provisioner run`, the DaemonSet) and the cleaner scripts at
# /scripts (cleanup Jobs run this image with a script as their command).
#
#   docker build -t local-volume-provisioner-ts:0.1.0 .
#
# Both stages use the same Node 24 base, pinned by tag. For reproducible builds pin the digest as
# well, on both FROM lines:
#   FROM node:24-bookworm-slim@sha256:<digest> AS build
# (`docker buildx imagetools inspect node:24-bookworm-slim` prints the digest of the index).
# The image runs as root and needs a privileged container to clean block devices: docs/install.md.

# ---- build: compile and bundle -----------------------------------------------------------------
FROM node:24-bookworm-slim AS build
WORKDIR /app
ENV npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
COPY package.json package-lock.json ./
# npm ci installs the devDependencies (NODE_ENV is unset in this stage): the build tools and every
# library the bundle is made of. package.json has no runtime dependencies: the bundle contains them.
RUN npm ci
COPY tsconfig.json ./
COPY scripts/bundle.mjs scripts/oclif-manifest.mjs ./scripts/
COPY src ./src
COPY bin ./bin
# The linked source maps stay out of the image: node reads them only with --enable-source-maps, and
# with `run` bundled on its own they were half of /opt/provisioner (25.6 MiB in all).
RUN npm run build && find dist/src/cli -name '*.map' -delete

# ---- runtime: the bundle and the cleaner scripts -----------------------------------------------
FROM node:24-bookworm-slim
# The tools the cleaner scripts run: mkfs (util-linux) with mke2fs (e2fsprogs), wipefs, blkdiscard,
# ionice, findmnt (util-linux), shred, dd, sync, realpath, stat (coreutils). tini: PID 1 (below).
RUN apt-get update \
    && apt-get install -y --no-install-recommends util-linux e2fsprogs coreutils tini \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/provisioner
ENV NODE_ENV=production
# A small young generation: under reload churn (bench/config-fuzz.ts, 1,205 reloads of generated
# configs) the agent's RSS peaked at idle + 52 MiB with Node's default (16 MiB semi-spaces) and at
# idle + 19 MiB with 2 MiB; idle RSS and CPU are about the same (docs/benchmarks.md).
# A small old-generation limit: V8 lets the old generation grow to up to 4× what the last full GC
# kept when its limit is the default (sized from the host's memory), and to about 1.3× when the
# limit is small (V8's heap-controller.cc, MaxGrowingFactor). Under reload churn with 1,000 PVs (bench/reload-churn.ts) the peak RSS went from
# idle + 59 MiB to idle + 22 MiB, at the same CPU per reload; the agent's heap in use is 13-40 MiB.
ENV NODE_OPTIONS="--max-semi-space-size=2 --max-old-space-size=256"
# No node_modules: esbuild bundled every dependency into dist/src/cli (commands.js and its lazily
# loaded chunks), and oclif reads only package.json and the manifest. What runs, and nothing else
# (test/unit/packaging/dockerfile.test.ts starts every command from exactly this layout).
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/oclif.manifest.json ./oclif.manifest.json
COPY --from=build /app/dist/src/cli ./dist/src/cli
COPY --from=build /app/bin/run.js ./bin/run.js
COPY cleaners/ /scripts/
# V8's compile cache (bin/run.js enables it), made here for the files of this image: without it the
# agent compiles its ~23 modules from source on every container start (a container's /tmp starts
# empty). `run` with no cluster to reach loads the modules the agent starts with and stops at the
# connection (exit code 5); the cache is written at exit. Node checks each entry against the file
# it was made from (path, content, Node version and V8 flags: NODE_OPTIONS above and the
# ENTRYPOINT's node flags, so it is made with the ENTRYPOINT's command), so a
# stale or foreign entry is compiled anew, never used; a read-only root filesystem only stops new
# entries.
# Outside the workdir, which holds the bundle only (test/integration/image/image.test.ts).
ENV NODE_COMPILE_CACHE=/var/cache/provisioner/compile-cache
RUN chmod 0755 /scripts/*.sh /opt/provisioner/bin/run.js \
    && ln -s /opt/provisioner/bin/run.js /usr/local/bin/provisioner \
    && provisioner --version \
    && tini --version \
    && { MY_NODE_NAME=image-build KUBECONFIG=/nonexistent node --jitless --optimize-for-size --initial-old-space-size=16 /opt/provisioner/bin/run.js run \
        >/dev/null 2>&1; test $? -eq 5; } \
    && test "$(find /var/cache/provisioner/compile-cache -type f | wc -l)" -ge 20
# tini is PID 1: it reaps the zombies that PID 1 inherits (children of a cleaner that exited before
# them; Node does not reap processes it did not spawn) and forwards SIGTERM to the agent. The
# DaemonSet sets only `args`, so this entrypoint stays. The Jobs' `command` replaces it; there
# `provisioner clean-block` is PID 1 and handles SIGTERM itself (docs/cleanup.md).
# The agent runs without V8's compilers: --jitless took its idle RSS from 79 to 69 MiB (with 50
# PVs; the Node runtime floor is 53) and its idle CPU down, at the same start-up (docs/benchmarks.md).
# --optimize-for-size makes V8 grow its heap less between collections: with 1,000 PVs the idle
# RSS stays within the floor + 16 MiB ("RSS with 1,000 PVs" there).
# --initial-old-space-size=16 lets the old generation reach 16 MiB before V8's first full
# collection: with the flags above, one came ~250 ms into every start, amid the first pass and its
# creates; without it, start → all 50 PVs took 6–8 % less CPU and 3–10 % less time, at the same idle
# RSS with 50 and 1,000 PVs ("Start → first PV, a fourth time" there). After that first collection
# V8 sizes the heap as before.
# On node's command line, not in NODE_OPTIONS, which every `provisioner …` of `kubectl exec` would
# inherit: the dashboard needs WebAssembly, which --jitless removes. bin/run.js gives every command
# other than `run` the compilers back (and V8's default heap sizing), this entrypoint's too.
ENTRYPOINT ["tini", "--", "node", "--jitless", "--optimize-for-size", "--initial-old-space-size=16", "/opt/provisioner/bin/run.js"]
CMD ["run"]
