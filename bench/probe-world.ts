/**
 * The world of the gateway-health scenarios (failover, failover-tiers): the probe range
 * made local, a real HTTP server per gateway address:port in a child process
 * (probe-servers.ts), remote API servers and a local one (test/helpers/fleet.ts), the
 * controller in-process, and label-selected local watches. `open` builds it in that
 * order and `close` undoes every step taken, last first, whichever step failed.
 *
 * Needs CAP_NET_ADMIN (the route): without it `open` answers the note to record instead.
 */
import type { Config } from "../src/config.ts";
import type { KubeObject } from "../src/core/objects.ts";
import type { KubeClient } from "../src/kube/client.ts";
import { Watcher } from "../src/kube/watcher.ts";
import type { Supervisor } from "../src/supervisor/supervisor.ts";
import { Fleet } from "../test/helpers/fleet.ts";
import { eventually } from "../test/helpers/kube.ts";
import { localAdminClient } from "./harness.ts";
import { localProbeRange, type ProbePair, ProbeServers } from "./probe-servers.ts";

export interface ProbeWorldSpec {
  /** The gateways' probe endpoints: each answers 200 from the start. */
  readonly pairs: readonly ProbePair[];
  /** The remote API servers, by name. */
  readonly remotes: readonly string[];
  /** The controller's settings beyond the test fleet's defaults. */
  readonly controller: Partial<Config>;
}

export class ProbeWorld {
  readonly servers: ProbeServers;
  readonly fleet: Fleet;
  readonly controller: Supervisor;
  /** The local API server as its administrator (the scenarios' own reads). */
  readonly client: KubeClient;
  readonly #pairs: number;
  /** Undone last first by `close`. */
  readonly #cleanups: (() => Promise<unknown>)[];

  private constructor(
    parts: { servers: ProbeServers; fleet: Fleet; controller: Supervisor; pairs: number },
    cleanups: (() => Promise<unknown>)[],
  ) {
    this.servers = parts.servers;
    this.fleet = parts.fleet;
    this.controller = parts.controller;
    this.client = localAdminClient(parts.fleet);
    this.#pairs = parts.pairs;
    this.#cleanups = cleanups;
  }

  /** The world, or the note a scenario records when the probe range cannot be made local. */
  static async open(scenario: string, spec: ProbeWorldSpec): Promise<ProbeWorld | { readonly note: string }> {
    const local = await localProbeRange(scenario);
    if ("note" in local) return { note: local.note };
    const cleanups: (() => Promise<unknown>)[] = [() => local.route.release()];
    try {
      const servers = await ProbeServers.start(spec.pairs);
      cleanups.push(() => servers.stop());
      const fleet = await Fleet.start(spec.remotes);
      cleanups.push(() => fleet.stop());
      const controller = fleet.startInProcess(spec.controller);
      cleanups.push(() => controller.stop());
      return new ProbeWorld({ servers, fleet, controller, pairs: spec.pairs.length }, cleanups);
    } catch (error) {
      await undo(cleanups);
      throw error;
    }
  }

  /**
   * A label-selected watch of the local API at `path`, listed before this resolves;
   * `onChange` sees every change from the first list on. Stopped by `close`.
   */
  async watch<T extends KubeObject>(
    path: string,
    labelSelector: string,
    onChange?: (key: string, previous: T | undefined, current: T | undefined) => void,
  ): Promise<Watcher<T>> {
    const watcher = new Watcher<T>({ client: this.client, path, labelSelector, pageSize: 5000 });
    this.#cleanups.push(() => watcher.stop());
    if (onChange) watcher.on("change", onChange);
    const listed = new Promise<void>((resolve) => watcher.once("listed", () => resolve()));
    watcher.start();
    await listed;
    return watcher;
  }

  /** Waits until every probe endpoint has been probed at least once. */
  async allProbed(): Promise<void> {
    await eventually(
      "every gateway probed",
      async () => ((await this.servers.probed()).pairs === this.#pairs ? true : undefined),
      60_000,
      500,
    );
  }

  /** Undoes every step, last first. */
  async close(): Promise<void> {
    await undo(this.#cleanups);
  }
}

async function undo(cleanups: (() => Promise<unknown>)[]): Promise<void> {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
}
