/** metav1.MicroTime: RFC 3339 in UTC with six fraction digits (Lease times). */
export function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}
