/**
 * The values of command-line flags: durations, numbers within a flag's range, and
 * `host:port`. Each refusal is a ConfigError whose message names the flag, the value
 * and what is allowed, so `run` stops at start-up (exit code 2) instead of crashing or
 * spinning later.
 */

export class ConfigError extends Error {
  override name = "ConfigError";
}

/** Parses `250ms`, `30s`, `10m`, `1h` (or a bare number of seconds). */
export function parseDuration(text: string, flag: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (!match?.[1])
    throw new ConfigError(`--${flag}: ${JSON.stringify(text)} is not a duration (e.g. 500ms, 30s, 10m, 1h)`);
  const value = Number(match[1]);
  const unit = match[2] ?? "s";
  const factor = unit === "ms" ? 1 : unit === "s" ? 1_000 : unit === "m" ? 60_000 : 3_600_000;
  return Math.round(value * factor);
}

const DAY_MS = 24 * 3_600_000;

/**
 * The allowed values of one numeric flag. Checked at start-up, so a value that would
 * crash or spin later (a pool of 2.5 writers, a 0 ms timer, a timer past Node's
 * 24.8-day limit, which fires at once) stops `run` with exit code 2 instead.
 */
export type NumericRule =
  | { readonly kind: "integer" | "decimal"; readonly min: number; readonly max: number; readonly note?: string }
  | { readonly kind: "duration"; readonly minMs: number; readonly maxMs: number };

/** Every numeric flag of `run` (the port of --admin-addr is checked by parseHostPort). */
export const numericFlags = {
  "resync-period": { kind: "duration", minMs: 1_000, maxMs: DAY_MS },
  "gateway-resolve-period": { kind: "duration", minMs: 1_000, maxMs: DAY_MS },
  "blocked-recheck-period": { kind: "duration", minMs: 100, maxMs: DAY_MS },
  "mcs-recheck-period": { kind: "duration", minMs: 1_000, maxMs: DAY_MS },
  "headless-host-grace": { kind: "duration", minMs: 0, maxMs: DAY_MS },
  "failback-delay": { kind: "duration", minMs: 0, maxMs: DAY_MS },
  "stale-after": { kind: "duration", minMs: 0, maxMs: DAY_MS },
  "failover-min-ready": { kind: "integer", min: 1, max: 100_000 },
  "local-priority": { kind: "integer", min: 0, max: 1_000 },
  "write-concurrency": { kind: "integer", min: 1, max: 256 },
  "write-qps": { kind: "decimal", min: 0, max: 100_000, note: "no limit" },
  "write-burst": { kind: "integer", min: 1, max: 100_000 },
  "busy-write-percent": { kind: "integer", min: 1, max: 100 },
  "max-concurrent-starts": { kind: "integer", min: 1, max: 256 },
  "actor-max-old-space-mb": { kind: "integer", min: 16, max: 65_536 },
  "max-threads": { kind: "integer", min: 0, max: 1_024, note: "one per cluster" },
  "packed-thread-max-old-space-mb": { kind: "integer", min: 16, max: 65_536 },
  "leader-election-lease-duration": { kind: "duration", minMs: 1_000, maxMs: DAY_MS },
  "leader-election-renew-deadline": { kind: "duration", minMs: 100, maxMs: DAY_MS },
  "leader-election-retry-period": { kind: "duration", minMs: 100, maxMs: DAY_MS },
  shards: { kind: "integer", min: 1, max: 1_024, note: "not sharded" },
  "expected-replicas": { kind: "integer", min: 0, max: 1_024, note: "unknown" },
  "gateway-max-addresses": { kind: "integer", min: 1, max: 1_000 },
  "gateway-max-probed": { kind: "integer", min: 1, max: 10_000 },
  "gateway-max-probes-in-flight": { kind: "integer", min: 1, max: 10_000 },
  // The limits (config-limits.ts). Per-host Services stop at 1 000: one EndpointSlice holds no more.
  "max-response-mb": { kind: "integer", min: 1, max: 4_096 },
  "max-mirrors-per-cluster": { kind: "integer", min: 0, max: 1_000_000, note: "no limit" },
  "max-hosts-per-headless-service": { kind: "integer", min: 1, max: 1_000 },
  "max-namespaces-per-cluster": { kind: "integer", min: 0, max: 100_000, note: "no limit" },
} as const satisfies Record<string, NumericRule>;

export type NumericFlag = keyof typeof numericFlags;

function formatMs(ms: number): string {
  if (ms === 0) return "0s";
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000}h`;
  if (ms % 60_000 === 0) return `${ms / 60_000}m`;
  if (ms % 1_000 === 0) return `${ms / 1_000}s`;
  return `${ms}ms`;
}

/** "a whole number from 1 to 256", as the error message and docs say it. */
export function allowedRange(rule: NumericRule): string {
  if (rule.kind === "duration") return `a duration from ${formatMs(rule.minMs)} to ${formatMs(rule.maxMs)}`;
  const min = rule.note ? `${rule.min} (${rule.note})` : String(rule.min);
  return `${rule.kind === "integer" ? "a whole number" : "a number"} from ${min} to ${rule.max}`;
}

/** "1–256", "100ms–24h": the range as `--help` shows it. */
export function shortRange(rule: NumericRule): string {
  return rule.kind === "duration" ? `${formatMs(rule.minMs)}–${formatMs(rule.maxMs)}` : `${rule.min}–${rule.max}`;
}

/**
 * Parses one numeric flag by its rule: plain decimal digits only (no sign, exponent, hex
 * or blanks), then the range. The message names the flag, the value and the range.
 */
export function parseNumericFlag(flag: NumericFlag, text: string): number {
  const rule: NumericRule = numericFlags[flag];
  const refuse = (problem: string): ConfigError =>
    new ConfigError(`--${flag}: ${JSON.stringify(text)} ${problem}; allowed: ${allowedRange(rule)}`);
  if (rule.kind === "duration") {
    const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text);
    if (!match) throw refuse("is not a duration (e.g. 500ms, 30s, 10m, 1h)");
    const ms = parseDuration(text, flag);
    if (ms < rule.minMs || ms > rule.maxMs) throw refuse("is out of range");
    return ms;
  }
  const pattern = rule.kind === "integer" ? /^\d+$/ : /^\d+(?:\.\d+)?$/;
  if (!pattern.test(text)) throw refuse(rule.kind === "integer" ? "is not a whole number" : "is not a number");
  const value = Number(text);
  if (value < rule.min || value > rule.max) throw refuse("is out of range");
  return value;
}

/** Parses `host:port`, `:port` (all interfaces) or `[v6]:port`; port 0 picks a free port. */
export function parseHostPort(text: string, flag: string): { readonly host: string; readonly port: number } {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]*)):(\d+)$/.exec(text);
  if (!match?.[3])
    throw new ConfigError(
      `--${flag}: ${JSON.stringify(text)} is not host:port (e.g. :9999, 127.0.0.1:9999); allowed: port 0 to 65535`,
    );
  const port = Number(match[3]);
  if (port > 65_535)
    throw new ConfigError(`--${flag}: ${JSON.stringify(text)} is out of range; allowed: port 0 to 65535`);
  return { host: match[1] ?? match[2] ?? "", port };
}
