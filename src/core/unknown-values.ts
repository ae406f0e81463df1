// Narrowing of values whose type the program does not know: parsed JSON and YAML, API bodies,
// and what a `catch` or a rejected promise hands over. One definition each, used everywhere.

/** A plain object (not null, not an array): a JSON or YAML mapping. */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The message of a thrown value: an Error's message, anything else as text. */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** A thrown value as an Error: itself, or an Error whose message is the value as text. */
export function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}

/** The errno code of a Node.js system error (ENOENT, EACCES …), or undefined. */
export function errnoCode(error: unknown): string | undefined {
  if (error instanceof Error && 'code' in error && typeof error.code === 'string') return error.code;
  return undefined;
}
