// Where core's structured log records go: stderr, one line each, as logfmt text or JSON.
import type { LogFields, Logger, LogLevel } from '../core/log.js';

const RANK: Readonly<Record<LogLevel, number>> = { debug: 0, info: 1, warn: 2, error: 3 };

function value(v: unknown): string {
  const s = typeof v === 'string' ? v : ((JSON.stringify(v) as string | undefined) ?? 'undefined');
  return /^[^\s"=]+$/u.test(s) ? s : JSON.stringify(s);
}

export class StderrLogger implements Logger {
  constructor(
    private readonly minimum: LogLevel = 'info',
    private readonly format: 'text' | 'json' = 'text',
    private readonly write: (line: string) => void = (line) => process.stderr.write(line),
  ) {}

  log(level: LogLevel, message: string, fields: LogFields = {}): void {
    if (RANK[level] < RANK[this.minimum]) return;
    const time = new Date().toISOString();
    if (this.format === 'json') {
      this.write(`${JSON.stringify({ time, level, msg: message, ...fields })}\n`);
      return;
    }
    const rest = Object.entries(fields)
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => ` ${k}=${value(v)}`)
      .join('');
    this.write(`${time} ${level.toUpperCase().padEnd(5)} ${message}${rest}\n`);
  }
}
