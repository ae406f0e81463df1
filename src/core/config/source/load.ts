// Reading a source once, for the one-shot commands (diff-config, simulate, rollout status, the
// sandbox's start): through the same port and reader as the running agent, so the same snapshot
// rule and bounds hold. Throws what the read or the decode found.
import { parseConfigSnapshot } from '../decode/parse.js';
import { DirectoryConfigSource } from './directory.js';
import type { ConfigSnapshot, ConfigSource, LoadedConfig } from './port.js';

/** One read of a source → its snapshot. Throws ConfigSourceError or InvalidConfigError. */
export async function readSnapshot(source: ConfigSource): Promise<ConfigSnapshot> {
  const read = await source.read();
  if (!read.ok) throw read.error;
  return read.snapshot;
}

/** One read of a directory or file source (a mounted ConfigMap, a directory of keys, a YAML file or manifest). */
export function readConfigSnapshot(path: string): Promise<ConfigSnapshot> {
  return readSnapshot(new DirectoryConfigSource(path));
}

/** One read of a directory or file source, decoded. Throws ConfigSourceError or InvalidConfigError. */
export async function loadConfig(path: string): Promise<LoadedConfig> {
  return parseConfigSnapshot(await readConfigSnapshot(path));
}
