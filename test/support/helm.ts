/**
 * The real helm binary (v3.22.0, built by scripts/build-kube-binaries.sh; scripts/run-tests.mjs
 * passes its directory in LVP_KUBE_BIN_DIR) applied to the chart in helm/provisioner.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { REPO_ROOT } from './cli.js';
import { isRecord } from '../../src/core/unknown-values.js';

export const CHART_DIR = join(REPO_ROOT, 'helm/provisioner');

/** A rendered Kubernetes object (only the fields every test reads are typed). */
export interface RenderedObject {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: { readonly name: string; readonly namespace?: string } & Record<string, unknown>;
  readonly [field: string]: unknown;
}

export interface HelmResult {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Path of the helm binary; throws when the test runner did not provide one. */
export function helmBinary(env: NodeJS.ProcessEnv = process.env): string {
  const dir = env['LVP_KUBE_BIN_DIR'];
  if (dir === undefined || dir === '') {
    throw new Error(
      'LVP_KUBE_BIN_DIR is not set: the chart tests need the helm binary that `node scripts/run-tests.mjs --all` builds',
    );
  }
  return join(dir, 'helm');
}

/** Runs helm with its cache, config and data homes in a throw-away directory (and `env` added, e.g. KUBECONFIG). */
export function runHelm(args: readonly string[], env: Readonly<Record<string, string>> = {}): HelmResult {
  const home = mkdtempSync(join(tmpdir(), 'lvp-helm-home-'));
  try {
    const r = spawnSync(helmBinary(), args, {
      cwd: REPO_ROOT,
      encoding: 'utf8',
      env: {
        PATH: process.env['PATH'] ?? '/usr/bin:/bin',
        HOME: home,
        HELM_CACHE_HOME: join(home, 'cache'),
        HELM_CONFIG_HOME: join(home, 'config'),
        HELM_DATA_HOME: join(home, 'data'),
        ...env,
      },
      timeout: 60_000,
    });
    if (r.error) throw r.error;
    return { status: r.status, stdout: r.stdout, stderr: r.stderr };
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

export interface RenderOptions {
  readonly release?: string;
  readonly namespace?: string;
  /** Values files (paths). */
  readonly valuesFiles?: readonly string[];
  /** Values as YAML text, written to a temp file and passed after valuesFiles. */
  readonly values?: string;
  /** `--set` expressions. */
  readonly set?: readonly string[];
  /** `--show-only` templates (paths relative to the chart, e.g. `templates/configmap.yaml`). */
  readonly showOnly?: readonly string[];
}

function helmArgs(options: RenderOptions, dir: string): string[] {
  const args: string[] = [];
  for (const file of options.valuesFiles ?? []) args.push('--values', file);
  if (options.values !== undefined) {
    const file = join(dir, 'values.yaml');
    writeFileSync(file, options.values);
    args.push('--values', file);
  }
  for (const expr of options.set ?? []) args.push('--set', expr);
  for (const template of options.showOnly ?? []) args.push('--show-only', template);
  return args;
}

/** `helm template`: the raw result, for tests of a failing render. */
export function templateChart(options: RenderOptions = {}): HelmResult {
  const dir = mkdtempSync(join(tmpdir(), 'lvp-helm-values-'));
  try {
    return runHelm([
      'template',
      options.release ?? 'lvp-test',
      CHART_DIR,
      '--namespace',
      options.namespace ?? 'default',
      ...helmArgs(options, dir),
    ]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export interface Rendered {
  readonly text: string;
  readonly objects: readonly RenderedObject[];
  /** The one object of this kind (and name, if given); throws when there is not exactly one. */
  one(kind: string, name?: string): RenderedObject;
  all(kind: string): RenderedObject[];
}

/** Parses multi-document manifests into objects (empty documents skipped). */
export function parseManifests(text: string): RenderedObject[] {
  const objects: RenderedObject[] = [];
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length > 0) throw new Error(`invalid YAML: ${doc.errors.map((e) => e.message).join('; ')}`);
    const value: unknown = doc.toJS();
    if (value === null || value === undefined) continue;
    if (
      !isRecord(value) ||
      typeof value['kind'] !== 'string' ||
      typeof value['apiVersion'] !== 'string' ||
      !isRecord(value['metadata']) ||
      typeof value['metadata']['name'] !== 'string'
    ) {
      throw new Error(`not a Kubernetes object: ${JSON.stringify(value).slice(0, 200)}`);
    }
    objects.push(value as RenderedObject);
  }
  return objects;
}

/** `helm template` that must succeed, parsed. */
export function renderChart(options: RenderOptions = {}): Rendered {
  const r = templateChart(options);
  if (r.status !== 0) throw new Error(`helm template failed (exit ${String(r.status)}): ${r.stderr}`);
  const objects = parseManifests(r.stdout);
  const all = (kind: string): RenderedObject[] => objects.filter((o) => o.kind === kind);
  return {
    text: r.stdout,
    objects,
    all,
    one: (kind, name) => {
      const found = all(kind).filter((o) => name === undefined || o.metadata.name === name);
      if (found.length !== 1) throw new Error(`expected one ${kind}${name ? ` ${name}` : ''}, found ${found.length}`);
      const [object] = found;
      if (object === undefined) throw new Error(`no ${kind}`);
      return object;
    },
  };
}
