// `provisioner run` without oclif: bin/run.js comes here first for `run`. oclif's config, manifest
// and parser are ~700 KB of bundled code that a node agent would keep in memory for its whole life
// (about 8 MiB RSS, docs/benchmarks.md). This entry parses the common, valid command lines itself;
// anything else (help, an unknown or repeated flag, a bad value, a usage error) returns undefined
// and bin/run.js hands the same argv to oclif, so help, errors and exit codes stay oclif's own.
import { readFile } from 'node:fs/promises';
import { UsageError } from '../core/errors.js';
import { asError } from '../core/unknown-values.js';
import { errorOutput } from './error-output.js';
import { RUN_FLAGS, type RunFlagName, type RunFlagSpec } from './run-flags.js';
import type { RunAgentProcessOptions } from './run-agent.js';
import { runAgentOptions, type RunContext, type RunFlagValues } from './run-options.js';

function isRunFlag(name: string): name is RunFlagName {
  return Object.hasOwn(RUN_FLAGS, name);
}

/**
 * `run`'s arguments as flag values, or undefined when oclif must judge them: only `--name value`
 * and `--name=value` of known flags, each at most once, non-empty values that oclif would accept as
 * they are.
 */
export function parseRunArgs(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): RunFlagValues | undefined {
  const given = givenFlags(argv);
  if (given === undefined) return undefined;
  const reader = flagReader(given, env);
  const flags = readFlags(reader);
  return reader.invalid.length === 0 ? flags : undefined;
}

/** The flags on the command line by name, or undefined for anything but `--name value` and `--name=value` once. */
function givenFlags(argv: readonly string[]): Map<RunFlagName, string> | undefined {
  const given = new Map<RunFlagName, string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    if (!arg.startsWith('--')) return undefined;
    const eq = arg.indexOf('=');
    const name = eq < 0 ? arg.slice(2) : arg.slice(2, eq);
    // A switch (`--[no-]publish-status`) is oclif's to parse.
    if (!isRunFlag(name) || given.has(name) || RUN_FLAGS[name].kind === 'boolean') return undefined;
    let value: string;
    if (eq >= 0) value = arg.slice(eq + 1);
    else {
      const next = argv[i + 1];
      if (next === undefined || next.startsWith('-')) return undefined;
      value = next;
      i++;
    }
    if (value === '') return undefined;
    given.set(name, value);
  }
  return given;
}

/** Reads one flag's value by its kind; every value oclif would refuse lands in `invalid`. */
interface FlagReader {
  readonly invalid: readonly RunFlagName[];
  readonly str: (name: RunFlagName) => string | undefined;
  readonly required: (name: RunFlagName) => string;
  readonly int: (name: RunFlagName) => number;
}

function flagReader(
  given: ReadonlyMap<RunFlagName, string>,
  env: Readonly<Record<string, string | undefined>>,
): FlagReader {
  const text = (name: RunFlagName): string | undefined => {
    const spec: RunFlagSpec = RUN_FLAGS[name];
    // oclif reads a flag's env var when the flag is absent and the variable is not empty.
    const envValue = spec.kind === 'string' && spec.env !== undefined ? env[spec.env] : undefined;
    return given.get(name) ?? (envValue === undefined || envValue === '' ? undefined : envValue);
  };
  const invalid: RunFlagName[] = [];
  const str = (name: RunFlagName): string | undefined => {
    const spec: RunFlagSpec = RUN_FLAGS[name];
    const value = text(name);
    if (spec.kind !== 'string') {
      invalid.push(name);
      return undefined;
    }
    if (value !== undefined && spec.options !== undefined && !spec.options.includes(value)) invalid.push(name);
    return value ?? spec.default;
  };
  const required = (name: RunFlagName): string => {
    const value = str(name);
    if (value === undefined) invalid.push(name);
    return value ?? '';
  };
  const int = (name: RunFlagName): number => {
    const spec: RunFlagSpec = RUN_FLAGS[name];
    const value = text(name);
    if (spec.kind !== 'integer') {
      invalid.push(name);
      return 0;
    }
    if (value === undefined) return spec.default;
    const n = Number(value);
    if (!/^\d+$/u.test(value) || !Number.isSafeInteger(n) || n < spec.min) invalid.push(name);
    return n;
  };
  return { invalid, str, required, int };
}

type FlagRead<K extends keyof RunFlagValues> = (reader: FlagReader, name: K) => RunFlagValues[K];

const requiredText = (reader: FlagReader, name: RunFlagName): string => reader.required(name);
const integer = (reader: FlagReader, name: RunFlagName): number => reader.int(name);
const optionalText = (reader: FlagReader, name: RunFlagName): string | undefined => reader.str(name);

/** How each flag of `run` is read, in RunFlagValues' order. */
const RUN_FLAG_READS: { readonly [K in keyof RunFlagValues]: FlagRead<K> } = {
  'config-dir': requiredText,
  'config-source': requiredText,
  'listen-address': requiredText,
  'metrics-path': requiredText,
  'admin-socket': requiredText,
  'discovery-period': requiredText,
  'config-sync-period': requiredText,
  'config-debounce': requiredText,
  'reload-guard': requiredText,
  'drain-timeout': requiredText,
  'start-timeout': requiredText,
  'change-poll-interval': requiredText,
  'mount-grace-period': requiredText,
  'min-pass-interval': requiredText,
  'create-concurrency': integer,
  'cleanup-concurrency': integer,
  'volume-stats-max-series': integer,
  'kube-api-qps': integer,
  'kube-api-burst': integer,
  kubeconfig: optionalText,
  sandbox: optionalText,
  'shutdown-timeout': requiredText,
  // A switch on the command line goes to oclif, so here it is always its default.
  'publish-status': () => RUN_FLAGS['publish-status'].default,
  'status-name': requiredText,
  'status-heartbeat': requiredText,
  'log-level': requiredText,
  'log-format': requiredText,
};

function readFlag<K extends keyof RunFlagValues>(reader: FlagReader, name: K): RunFlagValues[K] {
  return RUN_FLAG_READS[name](reader, name);
}

/** Every flag read by its entry; the table's type holds one entry per key, which the cast restates. */
function readFlags(reader: FlagReader): RunFlagValues {
  const names = Object.keys(RUN_FLAG_READS) as (keyof RunFlagValues)[];
  return Object.fromEntries(names.map((name) => [name, readFlag(reader, name)])) as unknown as RunFlagValues;
}

/**
 * Runs the agent when `argv` (the arguments after `run`) is for the lean path and resolves to the
 * process's exit code; resolves to undefined, having done nothing, when oclif must take over.
 */
export async function runLean(argv: readonly string[], packageJson: URL): Promise<number | undefined> {
  const env = process.env;
  const flags = parseRunArgs(argv, env);
  if (flags === undefined) return undefined;
  try {
    const options = await leanOptions(flags, { argv, env, product: await packageProduct(packageJson) });
    if (options === undefined) return undefined;
    const { runAgentProcess } = await import('./run-agent.js');
    await runAgentProcess(options);
    return 0;
  } catch (err) {
    const out = errorOutput(asError(err), false, env['DEBUG'] !== undefined);
    (out.stream === 'stdout' ? process.stdout : process.stderr).write(out.text);
    return out.exitCode;
  }
}

async function leanOptions(flags: RunFlagValues, context: RunContext): Promise<RunAgentProcessOptions | undefined> {
  try {
    return await runAgentOptions(flags, context);
  } catch (err) {
    if (err instanceof UsageError) return undefined; // oclif reports it, the same way
    throw err;
  }
}

/** The package's name and version, as oclif reads them for `this.config.name` and `.version`. */
async function packageProduct(packageJson: URL): Promise<{ readonly name: string; readonly version: string }> {
  const pkg: unknown = JSON.parse(await readFile(packageJson, 'utf8'));
  const record: object = typeof pkg === 'object' && pkg !== null ? pkg : {};
  const field = (key: 'name' | 'version'): string => {
    const value: unknown = Reflect.get(record, key);
    return typeof value === 'string' ? value : '';
  };
  return { name: field('name'), version: field('version') };
}
