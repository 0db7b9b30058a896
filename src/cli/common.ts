/**
 * What every operator command shares: kubectl-like local cluster selection
 * (`--kubeconfig`, `--context`, `-n`), `-o table|json|yaml` output, aligned tables,
 * progress on stderr, and the exit-code contract (0 ok, 1 failure, 2 usage error).
 *
 * Operator commands are short-lived and run on the main thread; they talk to the API
 * servers with the project's lean client (src/kube/client.ts), so they share its error
 * types and its kubeconfig policy (src/supervisor/registration.ts).
 */
import { existsSync, readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { dumpYaml } from "@kubernetes/client-node";
import { flagsHelp, parseRunConfig } from "../config.ts";
import type { ConnectionSpec } from "../core/connection.ts";
import { ConfigError, parseDuration } from "../flag-values.ts";
import { KubeApiError, KubeClient, KubeTransportError } from "../kube/client.ts";
import { connectionFromKubeconfig } from "../kube/kubeconfig.ts";
import { loadLocalConnection } from "../kube/local-connection.ts";
import { rbacManifestPath } from "../kube/rbac-manifest.ts";
import { PROGRAM } from "./program.ts";
import { untilSignal } from "./signals.ts";

export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

/** A problem with the command line: reported with the command's help, exit code 2. */
export class UsageError extends Error {
  override name = "UsageError";
}

/** A failure the command already explained: reported as is (no stack), exit code 1. */
export class CommandError extends Error {
  override name = "CommandError";
}

export interface FlagSpec {
  readonly type: "string" | "boolean";
  readonly short?: string;
  readonly default?: string | boolean;
  readonly description: string;
  readonly multiple?: false;
}
export type FlagSpecs = Readonly<Record<string, FlagSpec>>;

/** Local cluster selection, as kubectl spells it. */
export const localFlags = {
  kubeconfig: {
    type: "string",
    description: "kubeconfig of the local cluster (default: $KUBECONFIG, then ~/.kube/config, then in-cluster)",
  },
  context: { type: "string", description: "kubeconfig context of the local cluster (default: the current context)" },
  namespace: {
    type: "string",
    short: "n",
    description: "namespace of the credentials Secrets (default: as `run`: $POD_NAMESPACE, else fleet-mirror)",
  },
} as const satisfies FlagSpecs;

export const outputFlag = {
  output: { type: "string", short: "o", description: "output format: table|json|yaml" },
} as const satisfies FlagSpecs;

export const helpFlag = { help: { type: "boolean", short: "h", description: "show this help" } } as const;

export type OutputFormat = "table" | "json" | "yaml";

export type FlagValues = Readonly<Record<string, string | boolean | undefined>>;

export interface ParsedCommandLine {
  readonly values: FlagValues;
  readonly positionals: readonly string[];
}

/**
 * Parses `argv` against `flags` (plus --help). Returns "help" when --help was given.
 * @throws UsageError for an unknown flag, a missing value, or too many positionals.
 */
export function parseCommandLine(
  argv: readonly string[],
  flags: FlagSpecs,
  maxPositionals = 0,
): ParsedCommandLine | "help" {
  let parsed: { values: Record<string, unknown>; positionals: string[] };
  try {
    parsed = parseArgs({ args: [...argv], options: { ...flags, ...helpFlag }, strict: true, allowPositionals: true });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  if (parsed.values["help"] === true) return "help";
  if (parsed.positionals.length > maxPositionals)
    throw new UsageError(`unexpected argument(s): ${parsed.positionals.slice(maxPositionals).join(" ")}`);
  const values: Record<string, string | boolean | undefined> = {};
  for (const [name, value] of Object.entries(parsed.values)) {
    if (typeof value === "string" || typeof value === "boolean") values[name] = value;
  }
  return { values, positionals: parsed.positionals };
}

export function stringFlag(values: FlagValues, name: string): string | undefined {
  const value = values[name];
  return typeof value === "string" ? value : undefined;
}

/** @throws UsageError naming the flag when it is missing or empty. */
export function requiredFlag(values: FlagValues, name: string): string {
  const value = stringFlag(values, name);
  if (value === undefined || value === "") throw new UsageError(`--${name} is required`);
  return value;
}

export function outputFormat(values: FlagValues): OutputFormat {
  const value = stringFlag(values, "output") ?? "table";
  if (value === "table" || value === "wide" || value === "") return "table";
  if (value === "json" || value === "yaml") return value;
  throw new UsageError(`-o/--output: ${JSON.stringify(value)} must be one of table, json, yaml`);
}

/**
 * Parses `30s`, `2m`, ... like `run`'s duration flags; a usage error otherwise, or when
 * the value is below `minMs` (default 1 ms: a timeout of 0 would fail at once).
 */
export function durationFlag(values: FlagValues, name: string, fallback: string, minMs = 1): number {
  const text = stringFlag(values, name) ?? fallback;
  let ms: number;
  try {
    ms = parseDuration(text, name);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  if (ms < minMs) throw new UsageError(`--${name}: ${JSON.stringify(text)} is below the minimum of ${minMs} ms`);
  return ms;
}

/**
 * The credentials namespace: `-n` if given, else exactly `run`'s default (so an operator
 * command and the controller in the same Pod or shell look at the same Secrets). The
 * default is taken from `parseRunConfig` rather than re-implemented.
 */
export function credentialsNamespace(values: FlagValues, env: NodeJS.ProcessEnv = process.env): string {
  const given = stringFlag(values, "namespace");
  if (given !== undefined) return given;
  const defaults = parseRunConfig([], env);
  if (defaults === "help") throw new ConfigError("unreachable");
  return defaults.namespace;
}

/** The local cluster's connection from --kubeconfig/--context (kubectl's order). */
export function localConnection(values: FlagValues, env: NodeJS.ProcessEnv = process.env): ConnectionSpec {
  try {
    return loadLocalConnection(stringFlag(values, "kubeconfig"), stringFlag(values, "context"), env);
  } catch (error) {
    throw new CommandError(`local cluster: ${(error as Error).message}`);
  }
}

/**
 * A connection from an operator-supplied kubeconfig file (the operator's own: file
 * paths allowed, programs never — the same policy as the local kubeconfig).
 */
export function connectionFromFile(path: string, context: string | undefined, what: string): ConnectionSpec {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new CommandError(`${what}: cannot read ${path}: ${(error as Error).message}`);
  }
  try {
    return connectionFromKubeconfig(text, { allowFilePaths: true, allowInsecure: true }, context);
  } catch (error) {
    throw new CommandError(`${what}: kubeconfig ${path}: ${(error as Error).message}`);
  }
}

/**
 * The text and path of `deploy/rbac/<side>.yaml`, the one description of the
 * controller's permissions. From a source checkout it sits where the sandbox finds it;
 * from a build (`dist/src/...`) it is the package's own `deploy/` one level further up.
 */
export function readRbacManifest(side: "local" | "remote"): { readonly path: string; readonly text: string } {
  const candidates = [rbacManifestPath(side), new URL(`../../../deploy/rbac/${side}.yaml`, import.meta.url).pathname];
  for (const path of candidates) {
    if (existsSync(path)) return { path, text: readFileSync(path, "utf8") };
  }
  throw new CommandError(`deploy/rbac/${side}.yaml not found (looked at ${candidates.join(", ")})`);
}

/** A lean client with a short timeout: an operator waits at a prompt. */
export function cliClient(connection: ConnectionSpec, timeoutMs = 15_000): KubeClient {
  return new KubeClient(connection, { requestTimeoutMs: timeoutMs, userAgent: "fleet-mirror-cli" });
}

export function isNotFound(error: unknown): boolean {
  return error instanceof KubeApiError && error.status === 404;
}

export function isAlreadyExists(error: unknown): boolean {
  return error instanceof KubeApiError && error.status === 409 && error.reason === "AlreadyExists";
}

/** Lists every item of a collection, following `continue` tokens (500 a page). */
export async function listAll<T>(
  client: KubeClient,
  path: string,
  query: Readonly<Record<string, string | number | undefined>> = {},
): Promise<T[]> {
  const items: T[] = [];
  let token: string | undefined;
  do {
    const page = await client.request<{ items?: T[]; metadata?: { continue?: string } }>("GET", path, {
      query: { limit: 500, ...query, continue: token },
    });
    items.push(...(page?.items ?? []));
    token = page?.metadata?.continue || undefined;
  } while (token);
  return items;
}

// -- output ---------------------------------------------------------------------------

/** Columns separated by three spaces, left-aligned, like kubectl's tables. The last column is not padded. */
export function formatTable(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
      .join("   ")
      .trimEnd();
  return `${[headers.map((h) => h.toUpperCase()), ...rows].map(line).join("\n")}\n`;
}

/** Data as JSON (2-space indent) or YAML, ending with a newline. */
export function formatData(data: unknown, format: "json" | "yaml"): string {
  return format === "json" ? `${JSON.stringify(data, null, 2)}\n` : dumpYaml(data, { noRefs: true, lineWidth: -1 });
}

/** `5s`, `3m`, `2h`, `4d` ago-style ages, as kubectl prints them. */
export function formatAge(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 120) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h`;
  return `${Math.floor(h / 24)}d`;
}

export function writeOut(text: string): void {
  process.stdout.write(text);
}

export function writeErr(text: string): void {
  process.stderr.write(text);
}

// -- progress -------------------------------------------------------------------------

export interface Progress {
  /** Changes the text shown next to the spinner. */
  update(text: string): void;
  /** Clears the spinner line (a no-op when nothing is shown). */
  done(): void;
}

const SPINNER = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/**
 * A spinner with elapsed seconds on stderr, only when stderr is a terminal (so `-o json`
 * stdout and captured logs stay clean), and only after the first second: a quick step
 * shows nothing.
 */
export function startProgress(text: string, stream: NodeJS.WriteStream = process.stderr): Progress {
  if (!stream.isTTY) return { update: () => {}, done: () => {} };
  const started = Date.now();
  let current = text;
  let frame = 0;
  let shown = false;
  const draw = (): void => {
    const elapsed = Date.now() - started;
    if (elapsed < 1_000) return;
    shown = true;
    frame = (frame + 1) % SPINNER.length;
    stream.write(`\r\x1b[2K${SPINNER[frame] ?? ""} ${current} (${Math.floor(elapsed / 1000)}s)`);
  };
  const timer = setInterval(draw, 100);
  timer.unref();
  return {
    update(next: string): void {
      current = next;
    },
    done(): void {
      clearInterval(timer);
      if (shown) stream.write("\r\x1b[2K");
      shown = false;
    },
  };
}

// -- running a command ----------------------------------------------------------------

export interface CommandDefinition {
  readonly name: string;
  readonly help: string;
  readonly flags: FlagSpecs;
  readonly maxPositionals?: number;
  run(command: ParsedCommandLine): Promise<number>;
}

export function commandHelp(usage: string, description: string, flags: FlagSpecs): string {
  return `Usage: ${PROGRAM} ${usage}\n\n${description.trim()}\n\nFlags:\n${flagsHelp({ ...flags, ...helpFlag })}\n`;
}

/**
 * Parses and runs one command: --help → help on stdout, exit 0; a usage error → message
 * and help on stderr, exit 2; a CommandError → its message on stderr, exit 1. Anything
 * else is a bug and propagates (main prints its stack).
 */
export async function runCli(definition: CommandDefinition, argv: readonly string[]): Promise<number> {
  // main.ts records SIGINT/SIGTERM so that `run` can stop cleanly; an operator command
  // has nothing to finish, so Ctrl-C ends it at once (130, as a shell reports SIGINT).
  void untilSignal().then(() => {
    if (process.stderr.isTTY) process.stderr.write("\r\x1b[2K");
    process.exit(130);
  });
  try {
    const parsed = parseCommandLine(argv, definition.flags, definition.maxPositionals ?? 0);
    if (parsed === "help") {
      writeOut(definition.help);
      return EXIT_OK;
    }
    return await definition.run(parsed);
  } catch (error) {
    if (error instanceof UsageError || error instanceof ConfigError) {
      writeErr(`${PROGRAM} ${definition.name}: ${error.message}\n\n${definition.help}`);
      return EXIT_USAGE;
    }
    if (error instanceof CommandError || error instanceof KubeApiError || error instanceof KubeTransportError) {
      writeErr(`${PROGRAM} ${definition.name}: ${error.message}\n`);
      return EXIT_FAILURE;
    }
    throw error;
  }
}
