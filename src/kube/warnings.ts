/**
 * `Warning` response headers of the API server (e.g. "v1 Endpoints is deprecated"):
 * parsed, logged once per distinct text and client, and counted.
 *
 * Header format: `<3-digit code> <agent> "<text>" [<date>]`, the text a quoted string
 * with `\` escapes; the API server uses code 299 and agent `-`. A header that does not
 * parse is kept whole as its own text.
 */

/** What a client counted; plain data. */
export interface ApiWarningCounts {
  /** Every warning header received. */
  readonly total: number;
  /** By text, for at most `MAX_DISTINCT_WARNINGS` texts (later new texts count in `total` only). */
  readonly byText: Readonly<Record<string, number>>;
}

/** Distinct texts remembered per client: a remote could send a new text with every answer. */
export const MAX_DISTINCT_WARNINGS = 50;
/** Longest text kept; longer ones are cut (they end up in logs and statuses). */
const MAX_TEXT = 500;

/** The text of one `Warning` header value. */
export function warningText(value: string): string {
  const match = /^\s*\d{3}\s+\S+\s+"((?:[^"\\]|\\.)*)"/.exec(value);
  const text = match?.[1] !== undefined ? match[1].replace(/\\(.)/g, "$1") : value.trim();
  return text.length > MAX_TEXT ? `${text.slice(0, MAX_TEXT)}…` : text;
}

/**
 * The `Warning` values among a response's raw headers (`[name, value, name, value, …]`,
 * names in any case), or undefined when there is none. Not `res.headersDistinct`: Node
 * builds that object (every header, each value in an array) on first access and caches
 * it on the response, and a watch's response lives as long as the watch: ≈ 2 KB per
 * watch held for nothing.
 */
export function warningValues(rawHeaders: readonly string[]): string[] | undefined {
  let values: string[] | undefined;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    if (rawHeaders[i]?.toLowerCase() !== "warning") continue;
    values ??= [];
    values.push(rawHeaders[i + 1] ?? "");
  }
  return values;
}

export interface WarningLogger {
  warn(fields: Record<string, unknown>, message: string): void;
}

/** Counts the warnings of one client and logs the first sighting of each text. */
export class WarningTracker {
  readonly #logger: WarningLogger | undefined;
  readonly #byText = new Map<string, number>();
  #total = 0;

  constructor(logger: WarningLogger | undefined) {
    this.#logger = logger;
  }

  /** Records the `Warning` header values of one answer to `method path`. */
  observe(values: readonly string[] | undefined, method: string, path: string): void {
    for (const value of values ?? []) {
      const text = warningText(value);
      this.#total += 1;
      const seen = this.#byText.get(text);
      if (seen !== undefined) {
        this.#byText.set(text, seen + 1);
        continue;
      }
      if (this.#byText.size < MAX_DISTINCT_WARNINGS) {
        this.#byText.set(text, 1);
        this.#logger?.warn({ warning: text, method, path }, `API server warning: ${text}`);
      }
    }
  }

  get counts(): ApiWarningCounts {
    return { total: this.#total, byText: Object.fromEntries(this.#byText) };
  }
}
