// Canonical forms of a normalized config: sorted-key JSON (hashed) and YAML (diffed).
import { createHash } from 'node:crypto';
import { stringify } from 'yaml';
import { writtenClass } from './device-rules.js';
import type { ProvisionerConfig } from './model.js';

type Json = null | boolean | number | string | readonly Json[] | { readonly [k: string]: Json };

function sortKeys(value: unknown): Json {
  if (value === null || typeof value === 'boolean' || typeof value === 'number' || typeof value === 'string') {
    return value;
  }
  if (Array.isArray(value)) return value.map(sortKeys);
  if (typeof value === 'object') {
    const out: Record<string, Json> = {};
    for (const k of Object.keys(value).sort()) {
      const v = (value as Record<string, unknown>)[k];
      if (v !== undefined) out[k] = sortKeys(v);
    }
    return out;
  }
  throw new TypeError(`not representable in canonical JSON: ${typeof value}`);
}

export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

/** `sha256:<hex>` of the canonical JSON: equal meaning, equal hash, whatever the source layout. */
export function configHash(config: ProvisionerConfig): string {
  return `sha256:${createHash('sha256').update(canonicalJson(config)).digest('hex')}`;
}

/**
 * Every field, defaults included, keys sorted: the text diff-config compares. Device rules appear as
 * written (`minSize: 100Gi`, `settle: 10s`), so the text reads back as the same config.
 */
export function canonicalYaml(config: ProvisionerConfig): string {
  const storageClassMap = Object.fromEntries(
    Object.entries(config.storageClassMap).map(([name, c]) => [name, writtenClass(c)] as const),
  );
  return stringify(sortKeys({ ...config, storageClassMap }), { version: '1.1', lineWidth: 0, sortMapEntries: true });
}
