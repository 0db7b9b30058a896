/**
 * Readiness of gateway addresses across every EndpointSlice that holds them, fed by a
 * local watch (pure: the caller hands it each change and reads the clock itself). An
 * address may sit in several slices (its mirrors' and the fleet-wide Services'); it is
 * not ready everywhere once every slice holding it marks it not ready, and ready
 * everywhere once every one marks it ready.
 */
import type { KubeObject, SliceEndpoint } from "../src/core/objects.ts";
import type { Watcher } from "../src/kube/watcher.ts";
import { percentile, round } from "./harness.ts";

/** An endpoint is ready unless its `ready` condition says false (the API's reading of an absent condition). */
const isReady = (endpoint: SliceEndpoint): boolean => endpoint.conditions?.ready !== false;

export class EndpointReadiness {
  /** Slice key → address → ready, as last seen. */
  readonly #slices = new Map<string, ReadonlyMap<string, boolean>>();

  /**
   * Records slice `key`'s endpoints now (undefined: the slice is gone).
   * @returns the addresses this slice held ready before and now holds not ready.
   */
  update(key: string, endpoints: readonly SliceEndpoint[] | null | undefined): string[] {
    const before = this.#slices.get(key);
    if (endpoints === undefined) {
      this.#slices.delete(key);
      return [];
    }
    const now = new Map<string, boolean>();
    for (const endpoint of endpoints ?? [])
      for (const address of endpoint.addresses) now.set(address, isReady(endpoint));
    this.#slices.set(key, now);
    const turned: string[] = [];
    for (const [address, ready] of now) if (!ready && before?.get(address) === true) turned.push(address);
    return turned;
  }

  /** How many slices hold `address`. */
  holders(address: string): number {
    let n = 0;
    for (const slice of this.#slices.values()) if (slice.has(address)) n += 1;
    return n;
  }

  /** True when at least `minHolders` slices hold `address` and every one of them marks it `ready`. */
  everywhere(address: string, ready: boolean, minHolders = 1): boolean {
    let n = 0;
    for (const slice of this.#slices.values()) {
      const state = slice.get(address);
      if (state === undefined) continue;
      if (state !== ready) return false;
      n += 1;
    }
    return n >= minHolders;
  }
}

export interface LatencySummary {
  /** Addresses measured. */
  readonly gateways: number;
  /** Addresses that never got there (timed out): not in p50/max. */
  readonly missing: number;
  readonly p50S: number | null;
  readonly maxS: number | null;
}

/** p50 and max of `doneAt − startedAt` (ms instants) per address, in seconds; undefined = never done. */
export function latencySummary(startedAt: number, doneAt: ReadonlyMap<string, number | undefined>): LatencySummary {
  const seconds: number[] = [];
  let missing = 0;
  for (const at of doneAt.values()) {
    if (at === undefined) missing += 1;
    else seconds.push((at - startedAt) / 1000);
  }
  const p50 = percentile(seconds, 50);
  const max = percentile(seconds, 100);
  return {
    gateways: doneAt.size,
    missing,
    p50S: p50 === null ? null : round(p50, 2),
    maxS: max === null ? null : round(max, 2),
  };
}

/**
 * Resolves with the instant (Date.now()) each of `keys` first met `done`, checked at once
 * and on every change `watcher` reports; a key that does not within `timeoutMs` maps to
 * undefined. Register it after the scenario's own listener, so that what `done` reads is
 * up to date when it runs.
 */
export function whenEach<T extends KubeObject>(
  watcher: Watcher<T>,
  keys: readonly string[],
  done: (key: string) => boolean,
  timeoutMs: number,
): Promise<Map<string, number | undefined>> {
  const at = new Map<string, number | undefined>(keys.map((key) => [key, undefined]));
  return new Promise((resolve) => {
    const check = (): void => {
      const now = Date.now();
      for (const key of keys) if (at.get(key) === undefined && done(key)) at.set(key, now);
      if ([...at.values()].every((t) => t !== undefined)) finish();
    };
    const timer = setTimeout(() => finish(), timeoutMs);
    const finish = (): void => {
      clearTimeout(timer);
      watcher.off("change", check);
      resolve(at);
    };
    watcher.on("change", check);
    check();
  });
}
