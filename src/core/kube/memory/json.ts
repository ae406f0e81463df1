// Reading and comparing JSON objects by path: the in-memory cluster keeps every object as the
// plain JSON the API carries.
import { isRecord } from '../../unknown-values.js';

export type JsonObject = Record<string, unknown>;

/** The object at `key`, created when missing (or not an object). */
export function child(parent: JsonObject, key: string): JsonObject {
  const existing = parent[key];
  if (isRecord(existing)) return existing;
  const created: JsonObject = {};
  parent[key] = created;
  return created;
}

export function objectAt(parent: unknown, ...path: string[]): JsonObject | undefined {
  let current: unknown = parent;
  for (const key of path) {
    if (!isRecord(current)) return undefined;
    current = current[key];
  }
  return isRecord(current) ? current : undefined;
}

export function valueAt(parent: unknown, ...path: string[]): unknown {
  let current: unknown = parent;
  for (const key of path) {
    if (!isRecord(current)) return undefined;
    current = current[key];
  }
  return current;
}

export function stringAt(parent: unknown, ...path: string[]): string | undefined {
  const value = valueAt(parent, ...path);
  return typeof value === 'string' ? value : undefined;
}

export function arrayAt(parent: unknown, ...path: string[]): unknown[] | undefined {
  const value = valueAt(parent, ...path);
  return Array.isArray(value) ? value : undefined;
}

/** Structural equality of JSON values (key order ignored). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((item, i) => jsonEqual(item, b[i]));
  }
  if (isRecord(a) && isRecord(b)) {
    const aKeys = Object.keys(a).filter((k) => a[k] !== undefined);
    const bKeys = Object.keys(b).filter((k) => b[k] !== undefined);
    return aKeys.length === bKeys.length && aKeys.every((k) => Object.hasOwn(b, k) && jsonEqual(a[k], b[k]));
  }
  return false;
}
