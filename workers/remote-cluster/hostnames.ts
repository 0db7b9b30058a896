/**
 * Gateway ingress hostnames of one cluster and the IPs they resolve to (SPEC §2: an
 * ingress with a hostname and no IP is resolved to all its addresses, sorted, again
 * every `resolvePeriodMs`). Lookups go through the actor's own resolver (resolver.ts),
 * never libuv's pool.
 *
 * Invariants: a hostname is resolved at most once at a time from `track` (the periodic
 * round may overlap it; the later answer wins); `changed` is called only when a
 * hostname's addresses differ from the last answer; nothing is reported after `stop()`.
 */
import type { LineLogger } from "../../src/log/json-lines.ts";
import { serializeError } from "../../src/protocol/errors.ts";
import type { Resolver } from "./resolver.ts";

interface HostnameState {
  ips: readonly string[] | undefined;
  error?: string;
}

export class HostnameCache {
  readonly #resolve: Resolver;
  readonly #log: LineLogger;
  readonly #changed: (hostname: string) => void;
  readonly #hostnames = new Map<string, HostnameState>();
  #stopped = false;

  /** `changed(hostname)`: its addresses differ from the previous answer (or it stopped resolving). */
  constructor(resolve: Resolver, log: LineLogger, changed: (hostname: string) => void) {
    this.#resolve = resolve;
    this.#log = log;
    this.#changed = changed;
  }

  /** The addresses last resolved for `hostname`; undefined while unknown or unresolvable. */
  readonly lookup = (hostname: string): readonly string[] | undefined => this.#hostnames.get(hostname)?.ips;

  /**
   * Starts resolving the hostnames not seen yet; returns the lookups started (their
   * rejections are the caller's faults: a resolver error itself is caught and recorded).
   */
  track(hostnames: Iterable<string>): Promise<void>[] {
    const started: Promise<void>[] = [];
    for (const hostname of hostnames) {
      if (this.#hostnames.has(hostname)) continue;
      this.#hostnames.set(hostname, { ips: undefined });
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
    let next: HostnameState;
    try {
      next = { ips: await this.#resolve(hostname) };
    } catch (error) {
      next = { ips: undefined, error: (error as Error).message };
      this.#log.warn({ hostname, err: serializeError(error) }, `gateway ingress hostname ${hostname} does not resolve`);
    }
    if (this.#stopped) return;
    const previous = this.#hostnames.get(hostname);
    this.#hostnames.set(hostname, next);
    if (JSON.stringify(previous?.ips) === JSON.stringify(next.ips)) return;
    this.#changed(hostname);
  }
}
