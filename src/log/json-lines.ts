/**
 * A small JSON-lines logger for the remote-cluster actor threads, writing the same bytes
 * pino writes for the calls the actors make, without loading pino and its dependencies
 * into every actor thread (≈ 1 MB of RSS per thread; measured in bench/HISTORY.md, "the thread
 * floor"). The main thread and the local writer keep pino (src/log.ts); the relay on the
 * main thread cannot tell the two apart.
 *
 * The lines are pino's for a logger made as `createLogger` makes one (`base` = pid and the
 * bindings, default level numbers, `msg` key, epoch-millisecond `time`, pino's default
 * `err` serializer) and for calls of the form `log.<level>(fields, message?)`:
 *
 *   {"level":30,"time":<ms>,"pid":<pid>,<bindings…>,<child bindings…>,<fields…>,"msg":<message>}
 *
 * Fields whose value is undefined or a function are left out; a non-finite number is
 * written as null; an `err` field that looks like an error (a string `message`) is written
 * as pino's serializer writes it: `type` (its constructor's name), `message` and `stack`
 * with the messages and stacks of its causes appended, then its other fields (a `cause`
 * that looks like an error is left out, being in `message` and `stack` already).
 * test/unit/json-lines.test.ts compares the output with pino's, byte for byte.
 *
 * Not reproduced, because the actors never do it: a message as the first argument,
 * printf-style interpolation of further arguments, custom levels, serializers or
 * formatters, and values that JSON.stringify rejects (circular data or a BigInt: such a
 * field is written as a string saying so, where pino would write another rendering).
 */

/** What the actors need of a logger; a pino Logger fits it too (in-process tests use one). */
export interface LineLogger {
  trace(fields: object, message?: string): void;
  debug(fields: object, message?: string): void;
  info(fields: object, message?: string): void;
  warn(fields: object, message?: string): void;
  error(fields: object, message?: string): void;
  fatal(fields: object, message?: string): void;
  /** A logger whose lines carry `bindings` after this one's. */
  child(bindings: Record<string, unknown>): LineLogger;
}

/** pino's level numbers; `silent` writes nothing. */
export const LEVELS = Object.freeze({ trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 });
export type LevelName = keyof typeof LEVELS;

/** Where a logger's lines go and what time they carry. */
export interface LineSink {
  /** Takes one whole line, newline included. Never throws. */
  write(line: string): void;
  /** Milliseconds since the epoch. */
  now(): number;
}

/**
 * A string as pino writes it: JSON.stringify's rendering, except that a string of at most
 * 100 characters with no control character gets only `"` and `\` escaped (so a lone
 * surrogate stays as it is, as in pino on Node 24).
 */
function quote(text: string): string {
  if (text.length > 100) return JSON.stringify(text);
  let out = "";
  let from = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 32) return JSON.stringify(text);
    if (code === 34 || code === 92) {
      out += `${text.slice(from, i)}\\`;
      from = i;
    }
  }
  return `"${from === 0 ? text : out + text.slice(from)}"`;
}

function stringify(value: unknown): string | undefined {
  try {
    return JSON.stringify(value);
  } catch (error) {
    return quote(`[unable to serialize: ${error instanceof Error ? error.message : String(error)}]`);
  }
}

/** pino's test for an error: anything with a string `message`. */
function errorLike(value: unknown): value is { readonly message: string } & Record<string, unknown> {
  return typeof value === "object" && value !== null && typeof (value as { message?: unknown }).message === "string";
}

/** An error's cause, when it looks like an error itself (a cause given as a function is called, as pino does). */
function causeOf(error: Record<string, unknown>): (Record<string, unknown> & { message: string }) | undefined {
  const cause = typeof error["cause"] === "function" ? (error["cause"] as () => unknown)() : error["cause"];
  return errorLike(cause) ? cause : undefined;
}

function messageWithCauses(
  error: Record<string, unknown> & { message: string },
  seen: Set<object>,
  skip = false,
): string {
  const message = skip ? "" : error.message;
  if (seen.has(error)) return `${message}: ...`;
  const cause = causeOf(error);
  if (!cause) return message;
  seen.add(error);
  const functionCause = typeof error["cause"] === "function";
  return message + (functionCause ? "" : ": ") + messageWithCauses(cause, seen, functionCause);
}

function stackWithCauses(error: Record<string, unknown>, seen: Set<object>): string {
  const stack = typeof error["stack"] === "string" && error["stack"] !== "" ? error["stack"] : "";
  if (seen.has(error)) return `${stack}\ncauses have become circular...`;
  const cause = causeOf(error);
  if (!cause) return stack;
  seen.add(error);
  return `${stack}\ncaused by: ${stackWithCauses(cause, seen)}`;
}

/** The fields pino's error serializer writes first, or never copies from the error. */
const ERROR_OWN = new Set(["type", "message", "stack", "raw"]);

/** An `err` value as pino's default serializer renders it (see the module's comment). */
function serializeErrorField(error: Record<string, unknown> & { message: string }, within: Set<object>): object {
  within.add(error);
  const made = (error as { constructor?: unknown }).constructor;
  const out: Record<string, unknown> = {
    type: typeof made === "function" ? made.name : error["name"],
    message: messageWithCauses(error, new Set()),
    stack: stackWithCauses(error, new Set()),
  };
  if (Array.isArray(error["errors"]))
    out["aggregateErrors"] = error["errors"].map((e: unknown) => (errorLike(e) ? serializeErrorField(e, within) : e));
  for (const key in error) {
    if (ERROR_OWN.has(key) || key in out) continue;
    const value = error[key];
    if (!errorLike(value)) out[key] = value;
    else if (key !== "cause" && !within.has(value)) out[key] = serializeErrorField(value, within);
  }
  within.delete(error);
  return out;
}

/** `,"key":value` for each field pino writes, in the fields' order. */
function renderFields(fields: object): string {
  let out = "";
  for (const [key, raw] of Object.entries(fields)) {
    let value: unknown = raw;
    if (key === "err" && errorLike(value)) value = serializeErrorField(value, new Set());
    let rendered: string | undefined;
    switch (typeof value) {
      case "undefined":
      case "function":
        continue;
      case "number":
        rendered = Number.isFinite(value) ? String(value) : "null";
        break;
      case "boolean":
        rendered = String(value);
        break;
      case "string":
        rendered = quote(value);
        break;
      default:
        rendered = stringify(value);
    }
    if (rendered !== undefined) out += `,${quote(key)}:${rendered}`;
  }
  return out;
}

/** Binding names pino takes as options of a child, not as bindings. */
const IGNORED_BINDINGS = new Set(["level", "serializers", "formatters", "customLevels"]);

/** `,"key":value` for bindings, as pino renders a logger's base and a child's bindings. */
function renderBindings(bindings: Record<string, unknown>): string {
  let out = "";
  for (const [key, value] of Object.entries(bindings)) {
    if (value === undefined || IGNORED_BINDINGS.has(key)) continue;
    const rendered = stringify(value);
    if (rendered !== undefined) out += `,"${key}":${rendered}`;
  }
  return out;
}

const NOTHING = (): void => {};

export class JsonLineLogger implements LineLogger {
  readonly trace: (fields: object, message?: string) => void;
  readonly debug: (fields: object, message?: string) => void;
  readonly info: (fields: object, message?: string) => void;
  readonly warn: (fields: object, message?: string) => void;
  readonly error: (fields: object, message?: string) => void;
  readonly fatal: (fields: object, message?: string) => void;
  readonly #threshold: number;
  readonly #sink: LineSink;
  /** The rendered bindings, base and every ancestor's, each `,"key":value`. */
  readonly #bindings: string;

  /**
   * @param level the least level written (`silent`: none); one of `LEVELS`' names or `silent`.
   * @param bindings written in every line after `time`, in their order (pino's `base`).
   * @param rendered for `child` only: the bindings already rendered (then `bindings` is not read).
   * @throws when `level` is not a level name.
   */
  constructor(level: string, bindings: Record<string, unknown>, sink: LineSink, rendered?: string) {
    const threshold = level === "silent" ? Number.POSITIVE_INFINITY : LEVELS[level as LevelName];
    if (threshold === undefined) throw new Error(`unknown log level ${JSON.stringify(level)}`);
    this.#threshold = threshold;
    this.#sink = sink;
    this.#bindings = rendered ?? renderBindings(bindings);
    // Methods below the level are no-ops, decided once (as pino does): a disabled call
    // costs one function call and renders nothing.
    const method = (name: LevelName): ((fields: object, message?: string) => void) =>
      LEVELS[name] >= this.#threshold ? (fields, message) => this.#write(LEVELS[name], fields, message) : NOTHING;
    this.trace = method("trace");
    this.debug = method("debug");
    this.info = method("info");
    this.warn = method("warn");
    this.error = method("error");
    this.fatal = method("fatal");
  }

  child(bindings: Record<string, unknown>): LineLogger {
    const level = Object.entries(LEVELS).find(([, n]) => n === this.#threshold)?.[0] ?? "silent";
    return new JsonLineLogger(level, {}, this.#sink, this.#bindings + renderBindings(bindings));
  }

  #write(level: number, fields: object, message: string | undefined): void {
    const msg = message === undefined ? "" : `,"msg":${quote(message)}`;
    this.#sink.write(`{"level":${level},"time":${this.#sink.now()}${this.#bindings}${renderFields(fields)}${msg}}\n`);
  }
}
