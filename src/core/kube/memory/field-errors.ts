// field.Error (k8s.io/apimachinery/pkg/util/validation/field) as the apiserver renders it in the
// Status message of a 422 Invalid: what the in-memory cluster answers a write it refuses.
import { goQuote } from '../validation.js';

/** A value as the apiserver shows it in a field error: strings quoted, nothing as null. */
function show(value: unknown): string {
  if (typeof value === 'string') return goQuote(value);
  return value === undefined ? 'null' : JSON.stringify(value);
}

/** One field.Error, rendered like the apiserver renders it in a Status message. */
export interface FieldError {
  /** `spec.capacity`, `metadata.labels`, … */
  readonly field: string;
  /** `Required value`, `Invalid value: "x": detail`, `Forbidden: detail`, … */
  readonly body: string;
}

export const fieldError = {
  required: (field: string, detail = ''): FieldError => ({
    field,
    body: detail === '' ? 'Required value' : `Required value: ${detail}`,
  }),
  invalid: (field: string, value: unknown, detail: string): FieldError => ({
    field,
    body: `Invalid value: ${show(value)}: ${detail}`,
  }),
  forbidden: (field: string, detail: string): FieldError => ({ field, body: `Forbidden: ${detail}` }),
  notSupported: (field: string, value: unknown, supported: readonly string[]): FieldError => ({
    field,
    body: `Unsupported value: ${show(value)}: ` + `supported values: ${supported.map(goQuote).join(', ')}`,
  }),
  tooLong: (field: string, max: number): FieldError => ({
    field,
    body: `Too long: may not be more than ${max} bytes`,
  }),
};

export function formatFieldError(error: FieldError): string {
  return `${error.field}: ${error.body}`;
}
