// The logging port: core emits structured records; the command layer decides where they go.

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export type LogFields = Readonly<Record<string, unknown>>;

export interface Logger {
  log(level: LogLevel, message: string, fields?: LogFields): void;
}

/** A logger that keeps records in memory (tests, simulate). */
export class MemoryLogger implements Logger {
  readonly records: { level: LogLevel; message: string; fields: LogFields }[] = [];
  log(level: LogLevel, message: string, fields: LogFields = {}): void {
    this.records.push({ level, message, fields });
  }
  messages(level?: LogLevel): string[] {
    return this.records.filter((r) => level === undefined || r.level === level).map((r) => r.message);
  }
}

export const silentLogger: Logger = { log: () => undefined };
