// Test runner: `--unit` runs the fast unit tests; `--all` also builds (or reuses) the real
// kube-apiserver and etcd, starts one control plane for the whole run, runs the integration tests
// against it, and always tears it down.
import { spawn, spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const mode = process.argv.includes('--all') ? 'all' : 'unit';
const filter = process.argv.slice(2).filter((a) => !a.startsWith('--'));

function testFiles(dir) {
  const abs = join(root, dir);
  let names;
  try {
    names = readdirSync(abs);
  } catch {
    return [];
  }
  return names.flatMap((name) => {
    const path = join(abs, name);
    if (statSync(path).isDirectory()) return testFiles(relative(root, path));
    return name.endsWith('.test.js') ? [path] : [];
  });
}

const suites = mode === 'all' ? ['dist/test/unit', 'dist/test/integration'] : ['dist/test/unit'];
let files = suites.flatMap(testFiles).sort();
if (filter.length > 0) files = files.filter((f) => filter.some((p) => f.includes(p)));
if (files.length === 0) {
  console.error(`run-tests: no test files found under ${suites.join(', ')} (did the build run?)`);
  process.exit(1);
}

let controlPlane;
const env = { ...process.env };
if (mode === 'all') {
  const build = spawnSync('bash', [join(root, 'scripts/build-kube-binaries.sh')], {
    stdio: ['ignore', 'pipe', 'inherit'],
    encoding: 'utf8',
  });
  if (build.status !== 0) {
    console.error(
      `run-tests: building the kube binaries (scripts/build-kube-binaries.sh) failed (exit ${build.status})`,
    );
    process.exit(1);
  }
  const binDir = build.stdout.trim().split('\n').pop();
  // The real-node tests (test/integration/node-real): containerd, runc, the CNI plugins (apt-get
  // when missing) and the node images built locally. Root on Linux only.
  if (process.platform === 'linux' && process.getuid?.() === 0) {
    const node = spawnSync('bash', [join(root, 'scripts/prepare-node.sh')], {
      stdio: ['ignore', 'pipe', 'inherit'],
      encoding: 'utf8',
    });
    if (node.status !== 0) {
      console.error(`run-tests: preparing the test node (scripts/prepare-node.sh) failed (exit ${node.status})`);
      process.exit(1);
    }
    env.LVP_NODE_KIT_DIR = node.stdout.trim().split('\n').pop();
  }
  // The image (scripts/build-image.sh: the Dockerfile built with podman, cached by content; needs
  // root) for the tests that run it, in podman or on the test node; LVP_IMAGE is the script's last
  // stdout line (JSON).
  const runsImage = (f) =>
    f.includes('/integration/image/') ||
    f.includes('/integration/node-real/chart-on-node') ||
    f.includes('/integration/node-real/chaos-soak') ||
    f.includes('/integration/node-real/disk-rules-on-node');
  if (process.getuid?.() === 0 && files.some(runsImage)) {
    const image = spawnSync('bash', [join(root, 'scripts/build-image.sh')], {
      stdio: ['ignore', 'pipe', 'inherit'],
      encoding: 'utf8',
    });
    if (image.status !== 0) {
      console.error(`run-tests: building the image (scripts/build-image.sh) failed (exit ${image.status})`);
      process.exit(1);
    }
    env.LVP_IMAGE = image.stdout.trim().split('\n').pop();
  }
  const { startControlPlane } = await import(pathToFileURL(join(root, 'dist/test/support/control-plane.js')).href);
  const started = Date.now();
  controlPlane = await startControlPlane({ binDir });
  console.error(`run-tests: control plane ready at ${controlPlane.server} in ${Date.now() - started} ms`);
  env.LVP_TEST_CONTROL_PLANE = JSON.stringify({
    server: controlPlane.server,
    caFile: controlPlane.caFile,
    adminToken: controlPlane.adminToken,
    kubeconfigPath: controlPlane.kubeconfigPath,
  });
  env.LVP_KUBE_BIN_DIR = binDir;
}

let stopping;
async function stop() {
  stopping ??= controlPlane?.stop();
  await stopping;
}

const child = spawn(process.execPath, ['--test', '--test-reporter=spec', ...files], { stdio: 'inherit', env });
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => {
    child.kill(signal);
  });
}
const code = await new Promise((resolve) => {
  child.on('exit', (status, signal) => resolve(status ?? (signal ? 1 : 0)));
});
await stop();
process.exit(code);
