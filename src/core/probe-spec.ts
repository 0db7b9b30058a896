/**
 * What to probe on a gateway and when (SPEC §10), read from the gateway Service: pure.
 *
 * A gateway is probed when it has a port named `mc-probe`: an HTTP GET of
 * `mirror.linkerd.io/probe-path` (default `/ready`) on that port of each of its
 * addresses, every `mirror.linkerd.io/probe-period` seconds (default 3), with a timeout
 * equal to the period.
 *
 * Bad input and its documented fallback (each gives a problem string for the status and
 * the log; nothing throws):
 * - `probe-period` not a whole number of seconds in [1, 3600] (`-1`, `0`, `abc`, `1.5`):
 *   the default period;
 * - `probe-path` not an absolute path of visible ASCII (no `/` first, spaces, control
 *   characters, a `#`, longer than 1 024): the default path;
 * - the `mc-probe` port's number outside 1–65535: the gateway is not probed (it counts
 *   alive, as without the port).
 */
import type { Service } from "./objects.ts";

/** Gateways probed per cluster at most, by default (`--gateway-max-probed`): a remote names its gateways. */
export const DEFAULT_MAX_PROBED_GATEWAYS = 64;
/** Probes in flight per cluster at most, by default (`--gateway-max-probes-in-flight`). */
export const DEFAULT_MAX_PROBES_IN_FLIGHT = 64;

export const PROBE_PORT_NAME = "mc-probe";
export const PROBE_PATH = "mirror.linkerd.io/probe-path";
export const PROBE_PERIOD = "mirror.linkerd.io/probe-period";
export const DEFAULT_PROBE_PATH = "/ready";
export const DEFAULT_PROBE_PERIOD_SECONDS = 3;
export const MAX_PROBE_PERIOD_SECONDS = 3_600;
const MAX_PATH_LENGTH = 1_024;

export interface ProbeSpec {
  readonly port: number;
  readonly path: string;
  /** Also the timeout of one probe, unless `timeoutMs` says otherwise. */
  readonly periodMs: number;
  /** The timeout of one probe; absent: the period (a gateway Service's probe). A Link's probe names it (SPEC §15). */
  readonly timeoutMs?: number;
  /** Consecutive failures after which an address is dead; absent: FAILURES_TO_DEAD (3). A Link's probe names it. */
  readonly failureThreshold?: number;
}

export interface ProbeSpecOutcome {
  /** Absent: the gateway is not probed (its addresses count alive). */
  readonly spec?: ProbeSpec;
  /** Bad annotations or port, with the fallback taken; empty when all is well. */
  readonly problems: readonly string[];
}

const quote = (text: string): string => JSON.stringify(text.length > 64 ? `${text.slice(0, 64)}…` : text);

/** The probe of `gateway`, its fallbacks and their reasons. */
export function probeSpecOf(gateway: Service): ProbeSpecOutcome {
  const port = gateway.spec?.ports?.find((p) => p.name === PROBE_PORT_NAME)?.port;
  if (port === undefined) return { problems: [] };
  if (!Number.isInteger(port) || port < 1 || port > 65_535) {
    return {
      problems: [
        `port ${PROBE_PORT_NAME} has number ${String(port)} (must be 1-65535): gateway not probed, counts alive`,
      ],
    };
  }
  const problems: string[] = [];
  const annotations = gateway.metadata.annotations ?? {};
  let periodSeconds = DEFAULT_PROBE_PERIOD_SECONDS;
  const period = annotations[PROBE_PERIOD];
  if (period !== undefined) {
    const n = /^\d{1,7}$/.test(period.trim()) ? Number(period.trim()) : Number.NaN;
    if (n >= 1 && n <= MAX_PROBE_PERIOD_SECONDS) periodSeconds = n;
    else
      problems.push(
        `annotation ${PROBE_PERIOD} ${quote(period)} is not a whole number of seconds in 1-${MAX_PROBE_PERIOD_SECONDS}: using ${DEFAULT_PROBE_PERIOD_SECONDS}`,
      );
  }
  let path = DEFAULT_PROBE_PATH;
  const given = annotations[PROBE_PATH];
  if (given !== undefined) {
    const why = pathProblem(given);
    if (why) problems.push(`annotation ${PROBE_PATH} ${quote(given)} ${why}: using ${DEFAULT_PROBE_PATH}`);
    else path = given;
  }
  return { spec: { port, path, periodMs: periodSeconds * 1000 }, problems };
}

function pathProblem(path: string): string | undefined {
  if (!path.startsWith("/")) return "does not start with /";
  if (path.length > MAX_PATH_LENGTH) return `is longer than ${MAX_PATH_LENGTH} characters`;
  // Visible ASCII only: HTTP request targets carry no spaces or control characters, and
  // a fragment is never sent.
  if (!/^[\x21-\x7e]+$/.test(path)) return "has spaces, control or non-ASCII characters";
  if (path.includes("#")) return "has a fragment (#)";
  return undefined;
}

/** Delay before an address's first probe: uniform in [0, period), so a fleet does not probe in lockstep. */
export function firstProbeDelayMs(periodMs: number, random: number): number {
  return Math.floor(periodMs * clampUnit(random));
}

/**
 * Delay before the next probe of an address, from the end of the previous one that
 * took `elapsedMs`: probes START a jittered period apart, uniform in [0.9, 1.1) × period,
 * or right after the previous one when it took longer (at most one probe in flight, so
 * starts are never closer than 0.9 × period).
 */
export function nextProbeDelayMs(periodMs: number, elapsedMs: number, random: number): number {
  const interval = periodMs * (0.9 + 0.2 * clampUnit(random));
  return Math.max(0, Math.floor(interval - Math.max(0, elapsedMs)));
}

const clampUnit = (x: number): number => (Number.isFinite(x) ? Math.min(Math.max(x, 0), 0.999_999) : 0);
