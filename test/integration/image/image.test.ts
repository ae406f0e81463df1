// The shipped image, for real: the project's Dockerfile built unchanged with podman
// (scripts/build-image.sh; LVP_IMAGE when the test runner passes the build) and run as the
// DaemonSet and the cleanup Jobs run it, with `--network none`. Through the ENTRYPOINT (tini --
// node --jitless bin/run.js): `--version`, every command's `--help`, simulate, diff-config, a kubeconfig's
// server reached; `run --sandbox` under tini as PID 1 (metrics, dashboard, reload, a config edit,
// the live dashboard in a terminal, an orphan reaped, SIGTERM forwarded: exit 0 within the grace
// period). With a cleaner script as the command, as a Job runs it: every block cleaner on a loop
// device and fsclean.sh on a directory; a Job as buildCleanupJob makes it (`provisioner clean-block`
// guarding dd_zero.sh, privileged, /dev and the class's hostDir mounted): the expected disk wiped, a
// re-bound loop device and one whose backing file the container cannot see refused (exit 7)
// untouched. The layout: the bundle only, no node_modules, the cleaner
// scripts and every tool they run. Every container is named and removed, also when a test fails.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { buildCleanupJob } from '../../../src/core/cleanup/jobs.js';
import { snapshotFromFileText } from '../../../src/core/config/decode/layout.js';
import { parseConfigSnapshot } from '../../../src/core/config/decode/parse.js';
import type { Job } from '../../../src/core/kube/objects.js';
import { LinuxVolumes } from '../../../src/core/node/linux-volumes.js';
import { REPO_ROOT } from '../../support/cli.js';
import { eventually } from '../../support/eventually.js';
import { builtImage, Containers, type BuiltImage, type PodmanResult } from '../../support/image.js';
import {
  attachLoopDevice,
  Cleanup,
  detachLoopDevice,
  makeTempDir,
  readAt,
  run,
  skipUnlessRoot,
  writeAt,
} from '../../support/real-node.js';
import { Tmux } from '../../support/tmux.js';

const MiB = 2 ** 20;
const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { name: string; version: string };
const README = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
const CLEANERS = join(REPO_ROOT, 'cleaners');
/** The Node version scripts/setup.sh installs; the image's base carries the same. */
const NODE24_VERSION = /^NODE24_VERSION=(\S+)$/mu.exec(readFileSync(join(REPO_ROOT, 'scripts/setup.sh'), 'utf8'))?.[1];
const WORKDIR = '/opt/provisioner';
/** What a pod gets when it sets no terminationGracePeriodSeconds. */
const GRACE_SECONDS = 30;

function show(r: PodmanResult): string {
  return `exit ${String(r.status ?? r.signal)}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`;
}

/** The commands of the README's Commands table, as typed: `rollout status`. */
function readmeCommands(): string[] {
  return [...README.matchAll(/^\| `provisioner ([^`]+)` \|/gmu)].map((m) => m[1] ?? '');
}

/** Runs the promises' makers at most `limit` at a time (containers start in parallel, on 2 cores). */
async function limited<T>(limit: number, makers: readonly (() => Promise<T>)[]): Promise<T[]> {
  const results: T[] = new Array<T>(makers.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < makers.length) {
      const index = next++;
      const make = makers[index];
      if (make !== undefined) results[index] = await make();
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, makers.length) }, worker));
  return results;
}

const sha256 = (bytes: Buffer | string): string => createHash('sha256').update(bytes).digest('hex');

/** One file of a tar archive, as text. */
function tarFile(archive: string, path: string): string {
  const r = spawnSync('tar', ['-xOf', archive, path], { encoding: 'utf8', maxBuffer: 16 * MiB });
  assert.equal(r.status, 0, `tar -xOf ${archive} ${path}: ${r.stderr}`);
  return r.stdout;
}

/** length bytes at offset of a device, past the page cache (the Job wrote them from its container). */
function readPastCache(device: string, length: number, offset: number): Buffer {
  run('blockdev', ['--flushbufs', device]);
  return readAt(device, offset, length);
}

/** A cleanup Job as the agent builds it (buildCleanupJob): class `raw` with hostDir = mountDir = classDir. */
function cleanupJob(classDir: string, cleaner: readonly string[], device: string, identity: string): Job {
  const config = parseConfigSnapshot(
    snapshotFromFileText(
      'config.yaml',
      `storageClassMap:\n  raw:\n    hostDir: ${classDir}\n    mountDir: ${classDir}\n    volumeMode: Block\n    blockCleanerCommand: ${JSON.stringify(cleaner)}\nuseJobForCleaning: true\n`,
    ),
  ).config;
  const classConfig = config.storageClassMap['raw'];
  assert.ok(classConfig);
  return buildCleanupJob({
    pvName: 'local-pv-image',
    pvUid: 'uid-image',
    nodeName: 'node',
    namespace: 'default',
    image: 'the image',
    classConfig,
    config,
    devicePath: device,
    identity,
    startTime: new Date().toISOString(),
  });
}

/** The `podman run` of a Job's container: its command (replacing the entrypoint), env, privilege, hostPath volumes. */
function podmanOfJob(job: Job): { readonly args: string[]; readonly entrypoint: string; readonly flags: string[] } {
  const pod = job.spec?.template.spec;
  const [container] = pod?.containers ?? [];
  const [entrypoint = '', ...args] = container?.command ?? [];
  assert.equal(container?.securityContext?.privileged, true);
  const hostPaths = new Map((pod?.volumes ?? []).map((v) => [v.name, v.hostPath?.path ?? '']));
  const flags = [
    '--privileged',
    ...(container.env ?? []).flatMap((e) => ['--env', `${e.name}=${e.value ?? ''}`]),
    ...(container.volumeMounts ?? []).flatMap((m) => ['--volume', `${hostPaths.get(m.name) ?? ''}:${m.mountPath}`]),
  ];
  return { args, entrypoint, flags };
}

/** The path of an OCI blob in the layout. */
function blob(digest: string | undefined): string {
  assert.ok(digest?.startsWith('sha256:') === true, `a sha256 digest: ${String(digest)}`);
  return `blobs/sha256/${digest.slice('sha256:'.length)}`;
}

describe('the image, built from the Dockerfile with podman', { skip: skipUnlessRoot() }, () => {
  const cleanup = new Cleanup();
  let image: BuiltImage;
  let containers: Containers;
  let built = false;

  before(() => {
    image = builtImage();
    containers = new Containers(image, cleanup);
    built = true;
  });

  after(() => {
    cleanup.run();
    if (built) assert.deepEqual(containers.leftovers(), [], 'no container of this test is left');
  });

  const inspect = (ref: string, format: string): string => {
    const r = containers.podman(['image', 'inspect', '--format', format, ref]);
    assert.equal(r.status, 0, r.stderr);
    return r.stdout.trim();
  };

  it('is the image the build script reports (id, size), saved as an OCI archive that names it', (t) => {
    assert.equal(inspect(image.image, '{{.Id}} {{.Size}}'), `${image.id} ${String(image.size)}`);
    assert.equal(inspect(image.base, '{{.Id}}'), image.baseId, `${image.base} is the base the image was built on`);
    assert.equal(statSync(image.archive).size, image.archiveSize);
    const list = spawnSync('tar', ['-tf', image.archive], { encoding: 'utf8', maxBuffer: 16 * MiB });
    assert.equal(list.status, 0, list.stderr);
    assert.ok(list.stdout.split('\n').includes('oci-layout'), 'an OCI image layout');
    const manifests = (
      JSON.parse(tarFile(image.archive, 'index.json')) as { manifests: { annotations?: Record<string, string> }[] }
    ).manifests;
    assert.deepEqual(
      manifests.map((m) => m.annotations?.['org.opencontainers.image.ref.name']),
      [image.image],
      'index.json names the image (containerd imports it under that name)',
    );
    const baseSize = Number(inspect(image.baseId, '{{.Size}}'));
    const added = image.size - baseSize;
    t.diagnostic(
      `image ${image.image}: ${(image.size / MiB).toFixed(1)} MiB (base ${(baseSize / MiB).toFixed(1)} MiB, ` +
        `runtime stage adds ${(added / MiB).toFixed(1)} MiB); OCI archive ${(image.archiveSize / MiB).toFixed(1)} MiB`,
    );
    // The runtime stage adds the bundle (under 20 MiB, below) and the cleaners' few Debian packages,
    // nothing like node_modules (118 MiB) or a second copy of the base.
    assert.ok(added > 0 && added < 48 * MiB, `the runtime stage adds ${String(added)} bytes to the base`);
  });

  it("adds to the base only the runtime stage's files: nothing of the build-time mounts, nothing of the build stage", (t) => {
    const baseLayers = Number(inspect(image.baseId, '{{len .RootFS.Layers}}'));
    const index = JSON.parse(tarFile(image.archive, 'index.json')) as { manifests: { digest: string }[] };
    const manifest = JSON.parse(tarFile(image.archive, blob(index.manifests[0]?.digest))) as {
      layers: { digest: string }[];
    };
    assert.ok(
      manifest.layers.length > baseLayers,
      `${String(manifest.layers.length)} layers over ${String(baseLayers)}`,
    );
    const files = manifest.layers.slice(baseLayers).flatMap((layer) => {
      const list = spawnSync('sh', ['-c', 'tar -xOf "$1" "$2" | tar -tzf -', 'sh', image.archive, blob(layer.digest)], {
        encoding: 'utf8',
        maxBuffer: 64 * MiB,
      });
      assert.equal(list.status, 0, list.stderr);
      return list.stdout.split('\n').filter((entry) => entry !== '' && !entry.endsWith('/'));
    });
    for (const path of [
      'opt/provisioner/package.json',
      'opt/provisioner/bin/run.js',
      'scripts/common.sh',
      'usr/bin/tini',
    ]) {
      assert.ok(files.includes(path), `the runtime stage adds ${path}`);
    }
    // The build's mounts over /root (npmrc, CA bundle, npm cache) and the build stage's /app leave nothing.
    const stray = files.filter((f) => /^(root|run|app|home|usr\/local\/etc)\//u.test(f));
    assert.deepEqual(stray, [], 'no file of the build-time mounts or of the build stage');
    const tmp = files.filter((f) => f.startsWith('tmp/'));
    if (tmp.length > 0) t.diagnostic(`the image ships ${String(tmp.length)} files under /tmp, e.g. ${tmp[0] ?? ''}`);
  });

  it('runs as the Dockerfile says: ENTRYPOINT tini -- node --jitless --optimize-for-size --initial-old-space-size=16 bin/run.js, CMD run, its workdir and environment', () => {
    const config = JSON.parse(inspect(image.image, '{{json .Config}}')) as {
      Entrypoint: string[];
      Cmd: string[];
      WorkingDir: string;
      Env: string[];
      User?: string;
    };
    assert.deepEqual(config.Entrypoint, [
      'tini',
      '--',
      'node',
      '--jitless',
      '--optimize-for-size',
      '--initial-old-space-size=16',
      `${WORKDIR}/bin/run.js`,
    ]);
    assert.deepEqual(config.Cmd, ['run']);
    assert.equal(config.WorkingDir, WORKDIR);
    assert.ok(config.Env.includes('NODE_ENV=production'), config.Env.join(' '));
    assert.ok(
      config.Env.includes('NODE_OPTIONS=--max-semi-space-size=2 --max-old-space-size=256'),
      config.Env.join(' '),
    );
    assert.ok(!config.Env.some((e) => e.startsWith('NODE_PATH=')), 'no NODE_PATH');
    assert.ok(
      config.User === undefined || config.User === '' || config.User === 'root',
      `runs as root: ${String(config.User)}`,
    );
  });

  it("`provisioner --version` through the entrypoint: package.json's version, on scripts/setup.sh's Node 24", async () => {
    assert.match(NODE24_VERSION ?? '', /^24\.\d+\.\d+$/u, 'NODE24_VERSION in scripts/setup.sh');
    const r = await containers.run(['--version']);
    assert.equal(r.status, 0, show(r));
    assert.equal(r.stdout, `${pkg.name}/${pkg.version} linux-x64 node-v${NODE24_VERSION ?? ''}\n`);
    assert.equal(r.stderr, '');
  });

  it('builds on a stand-in for node:24-bookworm-slim: Debian 12 slimmed, node, npm and npx in /usr/local/bin', async () => {
    const script = [
      '. /etc/os-release && echo "os: $ID $VERSION_ID $VERSION_CODENAME"',
      'echo "node: $(command -v node) $(node --version)"',
      'echo "npm: $(command -v npm) $(npm --version)"',
      'echo "npx: $(command -v npx) $(npx --version)"',
      'echo "man pages: $(find /usr/share/man -type f | wc -l)"',
      'echo "user: $(id -u node):$(id -g node)"',
    ].join('\n');
    const r = await containers.run(['-c', script], { image: image.baseId, entrypoint: '/bin/sh' });
    assert.equal(r.status, 0, show(r));
    assert.match(r.stdout, /^os: debian 12 bookworm$/mu);
    assert.match(
      r.stdout,
      new RegExp(`^node: /usr/local/bin/node v${(NODE24_VERSION ?? '').replaceAll('.', '\\.')}$`, 'mu'),
    );
    assert.match(r.stdout, /^npm: \/usr\/local\/bin\/npm \d+\.\d+\.\d+$/mu);
    assert.match(r.stdout, /^npx: \/usr\/local\/bin\/npx \d+\.\d+\.\d+$/mu);
    assert.match(r.stdout, /^man pages: 0$/mu, 'slim: no man pages (dpkg excludes them)');
    assert.match(r.stdout, /^user: 1000:1000$/mu, "the official image's node user");
  });

  it("every command of the built manifest (the README's Commands table) answers `--help` through the entrypoint", async () => {
    const manifest = await containers.run([`${WORKDIR}/oclif.manifest.json`], { entrypoint: 'cat' });
    assert.equal(manifest.status, 0, show(manifest));
    const ids = Object.keys((JSON.parse(manifest.stdout) as { commands: Record<string, unknown> }).commands);
    // Topics are separated by spaces on the command line: `rollout status`.
    const commands = ids.map((id) => id.split(':').join(' ')).sort();
    assert.deepEqual(commands, [...readmeCommands()].sort(), "the image's commands are the README's");
    assert.ok(commands.length >= 7, commands.join(', '));
    const [rootHelp, ...helps] = await limited(3, [
      () => containers.run(['--help']),
      ...commands.map((command) => () => containers.run([...command.split(' '), '--help'])),
    ]);
    assert.ok(rootHelp);
    assert.equal(rootHelp.status, 0, show(rootHelp));
    for (const command of commands) {
      assert.match(rootHelp.stdout, new RegExp(`\\b${command.split(' ')[0] ?? ''}\\b`, 'u'), `--help lists ${command}`);
    }
    commands.forEach((command, i) => {
      const r = helps[i];
      assert.ok(r);
      assert.equal(r.status, 0, `${command} --help: ${show(r)}`);
      assert.match(r.stdout, new RegExp(`\\$ provisioner ${command}\\b`, 'u'), `${command} --help prints its usage`);
      assert.equal(r.stderr, '', `${command} --help writes nothing to stderr`);
    });
  });

  it('holds the bundle only: no node_modules where the bundle could load from, under 20 MiB', async (t) => {
    const script = [
      `cd ${WORKDIR}`,
      'echo "top: $(ls -A | tr "\\n" " ")"',
      'echo "bin: $(ls -A bin | tr "\\n" " ")"',
      'echo "dist: $(cd dist && find . -maxdepth 2 -mindepth 1 | sort | tr "\\n" " ")"',
      'echo "provisioner: $(readlink /usr/local/bin/provisioner)"',
      `echo "kib: $(du -sk ${WORKDIR} | cut -f1)"`,
      `echo "modules: $(find ${WORKDIR} -name node_modules | tr "\\n" " ")"`,
      // Where require() and import look for a package from the bundle's directory, and Node's global folders.
      `d=${WORKDIR}/dist/src/cli; while :; do [ -e "$d/node_modules" ] && echo "found: $d/node_modules"; [ "$d" = / ] && break; d=$(dirname "$d"); done`,
      'for g in "$HOME/.node_modules" "$HOME/.node_libraries" /usr/local/lib/node; do [ -e "$g" ] && echo "found: $g"; done',
      'echo "NODE_PATH=${NODE_PATH:-}"',
      'echo "apt lists: $(ls -A /var/lib/apt/lists | tr "\\n" " ")"',
    ].join('\n');
    const r = await containers.run(['-c', script], { entrypoint: '/bin/sh' });
    assert.equal(r.status, 0, show(r));
    const line = (key: string): string => new RegExp(`^${key}: ?(.*)$`, 'mu').exec(r.stdout)?.[1]?.trim() ?? '';
    assert.equal(line('top'), 'bin dist oclif.manifest.json package.json');
    assert.equal(line('bin'), 'run.js');
    assert.equal(line('dist'), './src ./src/cli');
    assert.equal(line('provisioner'), `${WORKDIR}/bin/run.js`);
    assert.equal(line('modules'), '', 'no node_modules in the workdir');
    assert.doesNotMatch(r.stdout, /^found: /mu, 'no node_modules up the tree from the bundle, nor a global folder');
    assert.match(r.stdout, /^NODE_PATH=$/mu);
    assert.equal(line('apt lists'), '', 'the runtime stage removed the apt lists it fetched');
    const kib = Number(line('kib'));
    t.diagnostic(`${WORKDIR}: ${(kib / 1024).toFixed(1)} MiB`);
    // The budget catches node_modules (tens of MiB), not the bundle's growth: 16.2 MiB with the staged
    // rollout's controller and commands, about half of it source maps, which the image no longer
    // holds (docs/benchmarks.md "The image").
    assert.ok(kib > 0 && kib < 20 * 1024, `${WORKDIR} is ${String(kib)} KiB; docs/benchmarks.md says about 16 MiB`);
  });

  it('has every tool the cleaner scripts run, on the PATH they set, and tini', async () => {
    // common.sh: PATH gains /usr/local/sbin:/usr/sbin:/sbin; quick_reset: mkfs (ext2: mkfs.ext2 → mke2fs)
    // and wipefs; fsclean: findmnt, realpath, stat, find, rm; shred; dd and sync; blkdiscard; ionice.
    const tools = [
      'bash',
      'mkfs',
      'mkfs.ext2',
      'mkfs.ext4',
      'mke2fs',
      'wipefs',
      'blkdiscard',
      'findmnt',
      'shred',
      'dd',
      'sync',
      'realpath',
      'stat',
      'find',
      'rm',
      'ionice',
      'basename',
      'dirname',
      'grep',
      'tini',
    ];
    const script = [
      'PATH=/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin',
      `for t in ${tools.join(' ')}; do p=$(command -v "$t") && echo "$t $p" || echo "$t MISSING"; done`,
      // Each runs, not just exists (a broken library would fail here).
      'mkfs.ext4 -V 2>&1 | head -n 1; wipefs --version; blkdiscard --version; findmnt --version',
      'shred --version | head -n 1; dd --version | head -n 1; ionice --version; tini --version',
    ].join('\n');
    const r = await containers.run(['-c', script], { entrypoint: '/bin/bash' });
    assert.equal(r.status, 0, show(r));
    for (const tool of tools) {
      assert.match(
        r.stdout,
        new RegExp(`^${tool.replaceAll('.', '\\.')} /\\S+$`, 'mu'),
        `${tool} is on the PATH: ${r.stdout}`,
      );
    }
    assert.match(r.stdout, /^mke2fs \d/mu);
    assert.match(r.stdout, /^tini version \d/mu);
  });

  it('ships cleaners/ at /scripts: the same files, executable, `bash -n` clean; a Job without its device fails clearly', async () => {
    const expected = readdirSync(CLEANERS)
      .sort()
      .map((name) => `${name} 755 ${sha256(readFileSync(join(CLEANERS, name)))} syntax-ok`);
    const script =
      'cd /scripts && for f in *; do s=syntax-bad; bash -n "$f" && s=syntax-ok; ' +
      'echo "$f $(stat -c %a "$f") $(sha256sum < "$f" | cut -d" " -f1) $s"; done';
    const r = await containers.run(['-c', script], { entrypoint: '/bin/bash' });
    assert.equal(r.status, 0, show(r));
    assert.deepEqual(r.stdout.trim().split('\n'), expected);
    assert.ok(
      readdirSync(CLEANERS).every((name) => name.endsWith('.sh')),
      'every cleaner is a .sh script',
    );
    // As a cleanup Job runs it: the script is the command (it replaces the entrypoint).
    const job = await containers.run([], { entrypoint: '/scripts/quick_reset.sh' });
    assert.equal(job.status, 1, show(job));
    assert.match(job.stderr, /LOCAL_PV_BLKDEVICE is not set/u);
  });

  it('runs every block cleaner as a cleanup Job does, on a real loop device', async () => {
    const dir = makeTempDir(cleanup, 'lvp-image-');
    const loop = attachLoopDevice(cleanup, join(dir, 'backing'), 16 * MiB);
    const marker = Buffer.from('LVP-IMAGE-TEST-RAW-MARKER\n'.repeat(40));
    const offset = 5 * MiB + 4321;
    const write = (): void => {
      writeAt(loop.path, offset, marker);
    };
    const read = (): Buffer => readPastCache(loop.path, marker.length, offset);
    const signatures = (): string => {
      const probe = spawnSync('blkid', ['-p', loop.path], { encoding: 'utf8' });
      if (probe.status === 2) return '';
      assert.equal(probe.status, 0, probe.stderr);
      return probe.stdout.trim();
    };
    const job = (script: string, args: readonly string[] = []): Promise<PodmanResult> =>
      containers.run(args, {
        entrypoint: `/scripts/${script}`,
        flags: ['--device', loop.path, '--env', `LOCAL_PV_BLKDEVICE=${loop.path}`],
      });

    run('mkfs.ext4', ['-q', loop.path]);
    assert.match(signatures(), /TYPE="ext4"/u);
    const reset = await job('quick_reset.sh');
    assert.equal(reset.status, 0, show(reset));
    assert.match(reset.stdout, /^\+ (ionice -c 3 )?mkfs -F /mu);
    assert.match(reset.stdout, /Quick reset of .* done$/mu);
    assert.equal(signatures(), '', 'quick_reset.sh left no signature (blkid -p finds nothing)');

    for (const [script, args, done] of [
      ['dd_zero.sh', [], /^Zeroed /mu],
      ['shred.sh', ['1'], /^Shredded /mu],
      ['blkdiscard.sh', [], /^Discarded /mu],
    ] as const) {
      write();
      assert.ok(read().equals(marker), `the marker is on the device before ${script}`);
      const r = await job(script, args);
      assert.equal(r.status, 0, `${script}: ${show(r)}`);
      assert.match(r.stdout, done, script);
      assert.ok(read().equals(Buffer.alloc(marker.length)), `${script} left zeros where the marker was`);
    }
  });

  it('runs a guarded cleanup Job (`provisioner clean-block`) as the agent builds it: the expected disk is wiped, another disk at the device is refused (exit 7) untouched', async (t) => {
    const dir = makeTempDir(cleanup, 'lvp-image-');
    const classDir = join(dir, 'raw');
    const elsewhere = join(dir, 'elsewhere');
    mkdirSync(classDir);
    mkdirSync(elsewhere);
    // The backing file in the class's hostDir: the Job (hostDir mounted at the same path) sees it.
    const loop = attachLoopDevice(cleanup, join(classDir, 'disk-a'), 8 * MiB);
    const marker = Buffer.from('LVP-IMAGE-TEST-GUARD-MARKER\n'.repeat(20));
    const offset = 3 * MiB + 777;
    const marked = (): boolean => readPastCache(loop.path, marker.length, offset).equals(marker);
    const volumes = new LinuxVolumes();
    const hostIdentity = async (): Promise<string> => (await volumes.volumeIdentity(loop.path))?.id ?? 'none';
    const job = (where: string, identity: string): Promise<PodmanResult> => {
      const built = cleanupJob(where, ['/scripts/dd_zero.sh'], loop.path, identity);
      const command = built.spec?.template.spec.containers[0]?.command ?? [];
      assert.deepEqual(command.slice(0, 7), [
        'provisioner',
        'clean-block',
        '--device',
        loop.path,
        '--identity',
        identity,
        '--',
      ]);
      const { args, entrypoint, flags } = podmanOfJob(built);
      return containers.run(args, { entrypoint, flags });
    };

    const diskA = await hostIdentity();
    assert.match(diskA, /^loop:\d+:\d+:\d+:\d+$/u, 'a loop identity with a birth, read on the host');
    writeAt(loop.path, offset, marker);
    assert.ok(marked());
    const cleaned = await job(classDir, diskA);
    assert.equal(cleaned.status, 0, show(cleaned));
    assert.match(cleaned.stdout, /^Zeroed \/dev\/loop\d+ /mu, "the cleaner's output is passed through");
    assert.match(
      cleaned.stdout,
      new RegExp(`^cleaned ${loop.path} \\(disk ${diskA}, the same before and after\\): /scripts/dd_zero\\.sh$`, 'mu'),
    );
    assert.ok(
      readPastCache(loop.path, marker.length, offset).equals(Buffer.alloc(marker.length)),
      'zeros where the marker was',
    );

    // Another disk at the same device node: the loop device re-bound to another file since the check.
    detachLoopDevice(loop);
    writeFileSync(join(classDir, 'disk-b'), '');
    run('truncate', ['-s', String(8 * MiB), join(classDir, 'disk-b')]);
    run('losetup', [loop.path, join(classDir, 'disk-b')]);
    const diskB = await hostIdentity();
    assert.notEqual(diskB, diskA);
    writeAt(loop.path, offset, marker);
    const refused = await job(classDir, diskA);
    assert.equal(refused.status, 7, show(refused));
    assert.equal(refused.stderr, `error: the disk at ${loop.path} is ${diskB}, not ${diskA}; not cleaned\n`);
    assert.doesNotMatch(refused.stdout, /Block device to clean/u, 'the cleaner never started');
    assert.ok(marked(), 'the other disk is untouched');

    // A class whose hostDir does not hold the backing file: in the container the loop device has
    // no readable backing (no /run/udev, the file not there), so its identity is `none` there.
    const unseen = await job(elsewhere, diskB);
    assert.equal(unseen.status, 7, show(unseen));
    assert.equal(unseen.stderr, `error: the disk at ${loop.path} is none, not ${diskB}; not cleaned\n`);
    assert.ok(marked(), 'a disk the Job cannot identify is never wiped');
    t.diagnostic(`loop device: host ${diskB}; in a Job container without its backing file: none`);
  });

  it('runs fsclean.sh as a cleanup Job does, on a directory volume', async () => {
    const dir = makeTempDir(cleanup, 'lvp-image-');
    const volume = join(dir, 'volume');
    for (const path of ['a/b/c', 'd']) mkdirSync(join(volume, path), { recursive: true });
    writeFileSync(join(volume, 'a/b/c/file'), 'data');
    writeFileSync(join(volume, '.hidden'), 'data');
    const r = await containers.run([], {
      entrypoint: '/scripts/fsclean.sh',
      flags: ['--volume', `${volume}:/mnt/volume`, '--env', 'LOCAL_PV_FILESYSTEM=/mnt/volume'],
    });
    assert.equal(r.status, 0, show(r));
    assert.match(r.stdout, /^Emptied \/mnt\/volume$/mu);
    assert.deepEqual(readdirSync(volume), [], 'the volume is empty');
  });

  it("starts `run` from V8's compile cache made at build time: every module it loads before connecting is accepted", async () => {
    const r = await containers.run(['run'], {
      flags: [
        '--env',
        'MY_NODE_NAME=n1',
        '--env',
        'KUBECONFIG=/nonexistent',
        '--env',
        'NODE_DEBUG_NATIVE=COMPILE_CACHE',
      ],
    });
    assert.equal(r.status, 5, show(r));
    const output = `${r.stdout}${r.stderr}`;
    const accepted = output.match(/^\[compile cache\] V8 code cache for ESM \S+ was accepted/gmu) ?? [];
    const rejected = output.match(/^\[compile cache\] V8 code cache for ESM \S+ was (?!accepted)\w+/gmu) ?? [];
    assert.deepEqual(rejected, [], 'no module compiled from source');
    // `run`'s own bundle: 23 modules before it connects (scripts/bundle.mjs).
    assert.ok(accepted.length >= 20, `${String(accepted.length)} modules from the cache:\n${show(r)}`);
  });

  it('runs simulate --demo, diff-config on fixtures, and reaches a kubeconfig server (exit 5, no missing module)', async () => {
    const dir = makeTempDir(cleanup, 'lvp-image-');
    const fixture = readFileSync(join(REPO_ROOT, 'test/fixtures/upstream/helm-configmap.yaml'), 'utf8');
    writeFileSync(join(dir, 'from.yaml'), fixture);
    writeFileSync(join(dir, 'to.yaml'), fixture.replace('fsType: ext4', 'fsType: xfs'));
    writeFileSync(join(dir, 'node.yaml'), readFileSync(join(REPO_ROOT, 'test/fixtures/simulate/basic/node.yaml')));
    writeFileSync(
      join(dir, 'kubeconfig.yaml'),
      [
        'apiVersion: v1',
        'kind: Config',
        'clusters: [{name: c, cluster: {server: "https://127.0.0.1:9", insecure-skip-tls-verify: true}}]',
        'users: [{name: u, user: {token: t}}]',
        'contexts: [{name: x, context: {cluster: c, user: u}}]',
        'current-context: x',
      ].join('\n'),
    );
    const flags = ['--volume', `${dir}:/in:ro`, '--env', 'MY_NODE_NAME=n1'];
    const [demo, same, diff, simulate, agent] = await limited(3, [
      () => containers.run(['simulate', '--demo'], { flags }),
      () => containers.run(['diff-config', '--from', '/in/from.yaml', '--to', '/in/from.yaml'], { flags }),
      () => containers.run(['diff-config', '--from', '/in/from.yaml', '--to', '/in/to.yaml', '-o', 'json'], { flags }),
      () =>
        containers.run(
          [
            'simulate',
            '--kubeconfig',
            '/in/kubeconfig.yaml',
            '--config',
            '/in/from.yaml',
            '--node',
            'n1',
            '--node-facts',
            '/in/node.yaml',
          ],
          { flags },
        ),
      () =>
        containers.run(
          [
            'run',
            '--kubeconfig',
            '/in/kubeconfig.yaml',
            '--config-dir',
            '/in/from.yaml',
            '--listen-address',
            '127.0.0.1:0',
            '--admin-socket',
            '/tmp/kc.sock',
          ],
          { flags },
        ),
    ]);
    assert.ok(demo && same && diff && simulate && agent);
    assert.equal(demo.status, 0, show(demo));
    assert.match(demo.stdout, /^Scenario: demo/u);
    assert.equal(same.status, 0, show(same));
    assert.match(same.stdout, /^No differences/u);
    assert.equal(diff.status, 1, show(diff));
    assert.deepEqual(
      (JSON.parse(diff.stdout) as { changes: { path: string }[] }).changes.map((c) => c.path),
      ['storageClassMap.fast-disks.fsType'],
    );
    for (const [what, r] of [
      ['simulate', simulate],
      ['run', agent],
    ] as const) {
      assert.doesNotMatch(r.stderr, /ERR_MODULE_NOT_FOUND|Cannot find (module|package)/u, what);
      assert.equal(r.status, 5, `${what}: ${show(r)}`);
      assert.match(r.stderr, /^error: cannot .*ECONNREFUSED 127\.0\.0\.1:9/mu, what);
    }
  });

  it('runs `run --sandbox` under tini as PID 1: metrics, dashboard, reload, a config edit, an orphan reaped; SIGTERM stops it (exit 0) within the grace period', async (t) => {
    const socket = '/sandbox/admin.sock';
    const name = containers.start([
      'run',
      '--sandbox',
      '/sandbox',
      '--listen-address',
      '127.0.0.1:8080',
      '--log-format',
      'json',
    ]);
    const logs = (): string => {
      const r = containers.podman(['logs', name]);
      return `${r.stdout}${r.stderr}`;
    };
    const exec = (...args: string[]): PodmanResult => containers.exec(name, args);
    const metrics = (): string => {
      const r = exec(
        'node',
        '-e',
        "fetch('http://127.0.0.1:8080/metrics').then(r => r.text()).then(t => process.stdout.write(t))",
      );
      assert.equal(r.status, 0, show(r));
      return r.stdout;
    };
    try {
      await eventually(
        () => (/"msg":"agent started"/u.test(logs()) ? true : undefined),
        'the agent to start',
        60_000,
        200,
      );

      // PID 1 is tini; the agent is its child.
      const pid1 = exec('cat', '/proc/1/cmdline');
      assert.equal(pid1.status, 0, show(pid1));
      const entrypoint = [
        'node',
        '--jitless',
        '--optimize-for-size',
        '--initial-old-space-size=16',
        '/opt/provisioner/bin/run.js',
        'run',
      ];
      assert.deepEqual(pid1.stdout.split('\0').slice(0, entrypoint.length + 2), ['tini', '--', ...entrypoint]);
      const children = exec('cat', '/proc/1/task/1/children').stdout.trim().split(/\s+/u);
      assert.equal(children.length, 1, `PID 1 has one child: ${children.join(' ')}`);
      // The agent runs without V8's compilers (the Dockerfile says why); a command in exec has them.
      const agent = exec('cat', `/proc/${children[0] ?? ''}/cmdline`).stdout.split('\0');
      assert.deepEqual(agent.slice(0, entrypoint.length), entrypoint, agent.join(' '));

      assert.match(metrics(), /^local_volume_provisioner_config_generation 1$/mu);
      const dashboard = exec('provisioner', 'dashboard', '--once', '--admin-socket', socket);
      assert.equal(dashboard.status, 0, show(dashboard));
      assert.match(dashboard.stdout, /sandbox-node/u);
      const reload = exec('provisioner', 'reload', '--admin-socket', socket);
      assert.equal(reload.status, 0, show(reload));
      assert.match(reload.stdout, /^No change: generation 1 already serves /u);

      // A config edit inside the container: the watcher applies it.
      const edit = exec('sh', '-c', "echo '  fsType: ext4' >> /sandbox/config/storageClassMap");
      assert.equal(edit.status, 0, show(edit));
      await eventually(
        () => (/^local_volume_provisioner_config_generation 2$/mu.test(metrics()) ? true : undefined),
        'generation 2 to serve after the config edit',
        30_000,
        250,
      );

      // The live dashboard (Ink) in a real terminal: `podman exec -it`.
      Tmux.require();
      const tmux = new Tmux(join(makeTempDir(cleanup, 'lvp-image-tmux-'), 'tmux.sock'));
      try {
        const podman = [...image.podman, 'exec', '-it', '--env', 'TERM=screen', name].join(' ');
        tmux.run(
          'new-session',
          '-d',
          '-s',
          'dash',
          '-x',
          '100',
          '-y',
          '30',
          `${podman} provisioner dashboard --admin-socket ${socket}; echo "dashboard exited with $?"; sleep 60`,
        );
        await tmux.waitFor(/^provisioner dashboard {2}connected {2}node sandbox-node/mu, 'the live dashboard', 30_000);
        tmux.keys('q');
        await tmux.waitFor(/^dashboard exited with 0$/mu, 'the dashboard to quit on q', 30_000);
      } finally {
        tmux.kill();
      }

      // An orphan (its parent shell exits at once) is re-parented to PID 1, which reaps it: no zombie.
      const orphan = exec('sh', '-c', 'sleep 3 >/dev/null 2>&1 & echo $!');
      assert.equal(orphan.status, 0, show(orphan));
      const pid = orphan.stdout.trim();
      const state = (): string =>
        exec(
          'sh',
          '-c',
          `if [ -e /proc/${pid} ]; then sed -n 's/^\\(State\\|PPid\\):\\s*//p' /proc/${pid}/status | tr '\\n' ' '; else echo gone; fi`,
        ).stdout.trim();
      assert.match(state(), /^S \(sleeping\) 1$/u, 'the orphan sleeps, re-parented to PID 1');
      await eventually(
        () => (state() === 'gone' ? true : undefined),
        `PID 1 to reap the orphan ${pid} (a zombie stays)`,
        20_000,
        200,
      );

      // `podman stop` sends SIGTERM to PID 1 (tini), which forwards it; kubelet does the same.
      const started = Date.now();
      const stop = containers.podman(['stop', '--time', String(GRACE_SECONDS), name], (GRACE_SECONDS + 30) * 1000);
      const took = Date.now() - started;
      t.diagnostic(`podman stop (SIGTERM to tini, forwarded to the agent) returned in ${String(took)} ms`);
      assert.equal(stop.status, 0, show(stop));
      assert.equal(inspectContainer(name, '{{.State.ExitCode}}'), '0', `exit code; logs:\n${logs()}`);
      assert.ok(
        took < GRACE_SECONDS * 1000,
        `stopped in ${String(took)} ms, within the ${String(GRACE_SECONDS)} s grace period`,
      );
      const log = logs();
      assert.match(log, /"msg":"stopping".*"signal":"SIGTERM"/u, 'the agent got SIGTERM');
      assert.match(log, /"msg":"agent stopped"/u);
    } finally {
      containers.remove(name);
    }
  });

  function inspectContainer(name: string, format: string): string {
    const r = containers.podman(['container', 'inspect', '--format', format, name]);
    assert.equal(r.status, 0, r.stderr);
    return r.stdout.trim();
  }
});
