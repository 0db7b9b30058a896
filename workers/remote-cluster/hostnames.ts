/**
 * Gateway ingress hostnames of one cluster and the IPs they resolve to (SPEC §2: an
 * ingress with a hostname and no IP is resolved to all its addresses, sorted, again
 * every resolve period). Lookups go through the actor's own resolver (resolver.ts),
 * never libuv's pool.
 *
 * Each address family (A, AAAA) is asked and kept apart, so one family failing never
 * hides the other. A family's answer is one of:
 * - addresses, or an authoritative none (NXDOMAIN, NODATA): taken at once;
 * - a transient failure (a timeout, SERVFAIL, a refused connection, …): the family
 *   keeps its last good answer while that answer is at most `maxStaleMs` old, and is
 *   unknown after that. One DNS hiccup at a refresh must not empty the endpoints of
 *   every mirror using the gateway for a whole period; a name that stays unanswerable
 *   must not route to old addresses for ever either.
 *
 * Invariants: a hostname is resolved at most once at a time from `track` (the periodic
 * round may overlap it; the later answer wins); `lookup` is the union of both families'
 * kept addresses (undefined when neither has any); `changed` is called only when
 * `lookup`'s answer changes; nothing is reported after `stop()`.
 */
import type { LineLogger } from "../../src/log/json-lines.ts";
import { serializeError } from "../../src/protocol/errors.ts";
import { type AddressFamily, isNoAddress, type Resolver } from "./resolver.ts";

/**
 * How many resolve periods a family's last good answer is kept through transient
 * failures (the actor passes `maxStaleMs` = this × `--gateway-resolve-period`: 10 min at
 * the default 60 s).
 */
export const MAX_STALE_PERIODS = 10;

/** A family's last good answer and when it came. */
interface FamilyAnswer {
  readonly ips: readonly string[];
  readonly at: number;
}

interface HostnameState {
  readonly 4?: FamilyAnswer;
  readonly 6?: FamilyAnswer;
}

export interface HostnameCacheOptions {
  /** Milliseconds on a monotonic clock. Default `performance.now`. */
  readonly now?: () => number;
  /** How long a family's last good answer is kept through transient failures. Default 10 min. */
  readonly maxStaleMs?: number;
}

const FAMILIES: readonly AddressFamily[] = [4, 6];

function addressesOf(state: HostnameState | undefined): readonly string[] | undefined {
  const ips = [...(state?.[4]?.ips ?? []), ...(state?.[6]?.ips ?? [])];
  return ips.length > 0 ? [...new Set(ips)].sort() : undefined;
}

export class HostnameCache {
  readonly #resolve: Resolver;
  readonly #log: LineLogger;
  readonly #changed: (hostname: string) => void;
  readonly #now: () => number;
  readonly #maxStaleMs: number;
  readonly #hostnames = new Map<string, HostnameState>();
  #stopped = false;

  /** `changed(hostname)`: its addresses differ from the previous answer (or it stopped resolving). */
  constructor(
    resolve: Resolver,
    log: LineLogger,
    changed: (hostname: string) => void,
    options: HostnameCacheOptions = {},
  ) {
    this.#resolve = resolve;
    this.#log = log;
    this.#changed = changed;
    this.#now = options.now ?? (() => performance.now());
    this.#maxStaleMs = options.maxStaleMs ?? 600_000;
  }

  /** The addresses last resolved for `hostname`; undefined while unknown or unresolvable. */
  readonly lookup = (hostname: string): readonly string[] | undefined => addressesOf(this.#hostnames.get(hostname));

  /**
   * Starts resolving the hostnames not seen yet; returns the lookups started (their
   * rejections are the caller's faults: a resolver error itself is caught and recorded).
   */
  track(hostnames: Iterable<string>): Promise<void>[] {
    const started: Promise<void>[] = [];
    for (const hostname of hostnames) {
      if (this.#hostnames.has(hostname)) continue;
      this.#hostnames.set(hostname, {});
      started.push(this.#resolveOne(hostname));
    }
    return started;
  }

  /** Forgets hostnames no longer in use and resolves every one in `inUse` again. */
  async refresh(inUse: ReadonlySet<string>): Promise<void> {
    for (const hostname of this.#hostnames.keys()) if (!inUse.has(hostname)) this.#hostnames.delete(hostname);
    await Promise.all([...inUse].map((h) => this.#resolveOne(h)));
  }

  stop(): void {
    this.#stopped = true;
  }

  async #resolveOne(hostname: string): Promise<void> {
    const answers = await Promise.allSettled(FAMILIES.map((family) => this.#resolve(hostname, family)));
    if (this.#stopped) return;
    const previous = this.#hostnames.get(hostname) ?? {};
    const now = this.#now();
    const next: { 4?: FamilyAnswer; 6?: FamilyAnswer } = {};
    const transient: string[] = [];
    let none: string | undefined;
    answers.forEach((answer, i) => {
      const family = FAMILIES[i] as AddressFamily;
      if (answer.status === "fulfilled") next[family] = { ips: answer.value, at: now };
      else if (isNoAddress(answer.reason)) {
        next[family] = { ips: [], at: now };
        none = (answer.reason as Error).message;
      } else {
        transient.push(`${family === 4 ? "A" : "AAAA"}: ${(answer.reason as Error)?.message ?? String(answer.reason)}`);
        const kept = previous[family];
        if (kept && now - kept.at <= this.#maxStaleMs) next[family] = kept;
      }
    });
    this.#hostnames.set(hostname, next);
    const before = addressesOf(previous);
    const after = addressesOf(next);
    this.#report(hostname, transient, none, before, after);
    if (JSON.stringify(before) === JSON.stringify(after)) return;
    this.#changed(hostname);
  }

  #report(
    hostname: string,
    transient: readonly string[],
    none: string | undefined,
    before: readonly string[] | undefined,
    after: readonly string[] | undefined,
  ): void {
    if (transient.length > 0 && after !== undefined && before !== undefined) {
      this.#log.warn(
        { hostname, failures: transient },
        `gateway ingress hostname ${hostname}: lookup failed (${transient.join("; ")}); keeping its last good addresses for at most ${Math.round(this.#maxStaleMs / 1000)} s`,
      );
    } else if (after === undefined) {
      const why = transient.length > 0 ? transient.join("; ") : (none ?? "no A or AAAA record");
      this.#log.warn(
        { hostname, err: serializeError(new Error(why)) },
        `gateway ingress hostname ${hostname} does not resolve (${why})`,
      );
    }
  }
}
