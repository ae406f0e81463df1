// Where commands read the node's config when given none (no oclif here: the lean `run` entry uses it).

/** The node's config source (the mounted ConfigMap) when a command is given none. */
export const DEFAULT_CONFIG_DIR = '/etc/provisioner/config';
/** Overrides DEFAULT_CONFIG_DIR for every command (`run --config-dir` reads it as its env). */
export const CONFIG_DIR_ENV = 'PROVISIONER_CONFIG_DIR';

export function defaultConfigDir(): string {
  const value = process.env[CONFIG_DIR_ENV];
  return value === undefined || value === '' ? DEFAULT_CONFIG_DIR : value;
}
