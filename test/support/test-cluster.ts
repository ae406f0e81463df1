/**
 * Access to the control plane that scripts/run-tests.mjs starts once per test run and hands to the
 * `node --test` child process through the LVP_TEST_CONTROL_PLANE environment variable.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { KubeConfig } from '@kubernetes/client-node';
import { errorMessage, isRecord } from '../../src/core/unknown-values.js';

export const CONTROL_PLANE_ENV = 'LVP_TEST_CONTROL_PLANE';

/** The JSON object stored in LVP_TEST_CONTROL_PLANE. */
export interface TestControlPlane {
  readonly server: string;
  readonly caFile: string;
  readonly adminToken: string;
  readonly kubeconfigPath: string;
  /** Optional: the bin dir the control plane was started from (lets tests start another one). */
  readonly binDir?: string;
}

/** Parses LVP_TEST_CONTROL_PLANE; null when it is not set. Throws when it is set but malformed. */
export function getTestControlPlane(env: NodeJS.ProcessEnv = process.env): TestControlPlane | null {
  const raw = env[CONTROL_PLANE_ENV];
  if (raw === undefined || raw.trim() === '') return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (error) {
    throw new Error(`${CONTROL_PLANE_ENV} is not valid JSON: ${errorMessage(error)}`, { cause: error });
  }
  if (!isRecord(parsed)) throw new Error(`${CONTROL_PLANE_ENV} must be a JSON object`);
  const field = (name: keyof TestControlPlane): string => {
    const value = parsed[name];
    if (typeof value !== 'string' || value === '') {
      throw new Error(`${CONTROL_PLANE_ENV}.${name} must be a non-empty string`);
    }
    return value;
  };
  const binDir = parsed['binDir'];
  return {
    server: field('server'),
    caFile: field('caFile'),
    adminToken: field('adminToken'),
    kubeconfigPath: field('kubeconfigPath'),
    ...(typeof binDir === 'string' && binDir !== '' ? { binDir } : {}),
  };
}

/** Like getTestControlPlane, but throws a clear error when the variable is absent. */
export function requireTestControlPlane(env: NodeJS.ProcessEnv = process.env): TestControlPlane {
  const plane = getTestControlPlane(env);
  if (plane === null) {
    throw new Error(
      `${CONTROL_PLANE_ENV} is not set: integration tests need the real control plane started by ` +
        '`node scripts/run-tests.mjs` (see docs/testing.md)',
    );
  }
  return plane;
}

/** A KubeConfig for `server` that trusts `caFile` and authenticates with a bearer token. */
export function tokenKubeConfig(server: string, caFile: string, token: string, userName = 'lvp-test'): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'lvp-test', server, caFile, skipTLSVerify: false }],
    users: [{ name: userName, token }],
    contexts: [{ name: 'lvp-test', cluster: 'lvp-test', user: userName, namespace: 'default' }],
    currentContext: 'lvp-test',
  });
  return kc;
}

/** A KubeConfig for the admin (system:masters) user of the test control plane. */
export function adminKubeConfig(plane: TestControlPlane = requireTestControlPlane()): KubeConfig {
  return tokenKubeConfig(plane.server, plane.caFile, plane.adminToken, 'lvp-test-admin');
}

/**
 * The dir of the kube binaries, for a test that starts a control plane of its own:
 * LVP_TEST_CONTROL_PLANE.binDir or LVP_KUBE_BIN_DIR when the runner passes it, else the build
 * script (a warm run only prints the cached bin dir).
 */
export function kubeBinDir(env: NodeJS.ProcessEnv = process.env): string {
  const fromPlane = getTestControlPlane(env)?.binDir;
  if (fromPlane !== undefined) return fromPlane;
  const fromEnv = env['LVP_KUBE_BIN_DIR'];
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
  const script = fileURLToPath(new URL('../../../scripts/build-kube-binaries.sh', import.meta.url));
  const out = execFileSync('bash', [existsSync(script) ? script : 'scripts/build-kube-binaries.sh'], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const last = out.trim().split('\n').at(-1);
  if (last === undefined || last === '') throw new Error('build-kube-binaries.sh printed no bin dir');
  return last;
}
