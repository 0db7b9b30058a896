/** Reading the JSON log lines a controller's threads write to `--log-file` (pino format). */
import { existsSync, readFileSync } from "node:fs";

export interface LogLine {
  readonly msg?: string;
  /** The line's `err` field as JSON text (an error crosses threads as plain data). */
  readonly err?: string;
  readonly [field: string]: unknown;
}

/** Every complete JSON line of `file` so far; none while the file does not exist. */
export function readLogFile(file: string): LogLine[] {
  if (!existsSync(file)) return [];
  const lines: LogLine[] = [];
  for (const text of readFileSync(file, "utf8").split("\n")) {
    if (!text.startsWith("{")) continue;
    try {
      const parsed = JSON.parse(text) as Record<string, unknown>;
      lines.push({ ...parsed, ...(parsed["err"] !== undefined ? { err: JSON.stringify(parsed["err"]) } : {}) });
    } catch {
      // a line still being written
    }
  }
  return lines;
}
