// The config a replay hands the agent: a path in the runner's temp directory that is swapped
// atomically (a symlink, as kubelet swaps `..data`) to the user's file or to a directory of the
// ConfigMap's keys, inline keys merged into the keys before them.
import { mkdir, rename, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { readConfigSnapshot } from '../config/source/load.js';
import type { ConfigSnapshot } from '../config/source/port.js';
import type { ConfigIssue } from '../errors.js';
import { errorMessage } from '../unknown-values.js';
import type { ConfigInput } from './scenario.js';

function configText(value: unknown): string {
  return typeof value === 'string' ? value : stringify(value, { version: '1.1' });
}

/** ConfigMap keys of a snapshot as texts (for merging inline keys into a file-given config). */
function snapshotKeys(snapshot: ConfigSnapshot): Record<string, string> {
  const keys: Record<string, string> = {};
  for (const e of snapshot.entries) {
    keys[e.key] =
      e.value.kind === 'text'
        ? e.value.text
        : configText(e.value.node === null ? null : (e.value.node.toJS(e.value.yaml.doc) as unknown));
  }
  return keys;
}

export class ConfigFiles {
  private keys: Record<string, string> = {};
  /** The user's file the config path points at now (undefined: inline keys). */
  private file: string | undefined;
  private version = 0;

  /** `tmp`: the runner's own directory (nothing else is written). */
  constructor(private readonly tmp: string) {}

  /** The agent's config path. */
  get path(): string {
    return join(this.tmp, 'config');
  }

  /** The ConfigMap keys the config path holds now, as texts (a staged replay's operator ConfigMap). */
  get data(): Readonly<Record<string, string>> {
    return { ...this.keys };
  }

  /** How the user knows the config path: their file, or `config`. */
  get display(): string {
    return this.file ?? 'config';
  }

  /** Points the config path at the new config (an atomic symlink swap). */
  async write(input: ConfigInput, fail: (text: string) => never): Promise<void> {
    this.version += 1;
    let target: string;
    if (input.kind === 'file') {
      try {
        await stat(input.path);
      } catch (err) {
        fail(`config ${input.display}: ${errorMessage(err)}`);
      }
      target = input.path;
      this.file = input.display;
      this.keys = await readConfigSnapshot(input.path)
        .then(snapshotKeys)
        .catch(() => ({}));
    } else {
      for (const [key, value] of Object.entries(input.keys)) {
        if (!/^[-._a-zA-Z0-9]+$/u.test(key) || key.startsWith('..')) fail(`"${key}" is not a valid ConfigMap key`);
        if (value === null) {
          this.keys = Object.fromEntries(Object.entries(this.keys).filter(([k]) => k !== key));
        } else this.keys[key] = configText(value);
      }
      this.file = undefined;
      target = join(this.tmp, `config-v${this.version}`);
      await mkdir(target);
      for (const [key, text] of Object.entries(this.keys)) await writeFile(join(target, key), text);
    }
    const link = join(this.tmp, `config-link-${this.version}`);
    await symlink(target, link);
    await rename(link, this.path);
  }

  /** The issue with its position in the user's file (or `config/KEY`) instead of the runner's path. */
  userIssue(issue: ConfigIssue): ConfigIssue {
    const file = issue.position?.file;
    if (issue.position === undefined || file === undefined) return issue;
    let display = file;
    if (file.startsWith(`${this.path}/`)) display = `config/${file.slice(this.path.length + 1)}`;
    else if (file === this.path) display = this.display;
    return { ...issue, position: { ...issue.position, file: display } };
  }
}
