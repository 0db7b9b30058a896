/**
 * One chaos run's moving parts (run.ts drives them): the fault proxies and the timed
 * faults on them, API server restarts, the controller side, the probe servers, and the
 * dispatch of each schedule step to whichever of them applies it; `quiesce` ends every
 * fault, `diff` asks the oracles, `stopAll` tears it down.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { FaultProxy } from "../../sandbox/fault-proxy.ts";
import type { FaultRules } from "../../sandbox/fault-rules.ts";
import type { Fleet } from "../helpers/fleet.ts";
import { type ChaosControllers, type ControllerStep, isControllerStep } from "./controller.ts";
import { type Diff, diffWorld, type Registration } from "./observe.ts";
import type { ChaosProbes } from "./probes.ts";
import { RemoteWriter } from "./remote-steps.ts";
import { describeStep, isModeStep, type Step } from "./steps.ts";

export class ChaosRun {
  readonly seed: number;
  readonly fleet: Fleet;
  readonly log: (line: string) => void;
  readonly remotes: readonly string[];
  readonly proxies = new Map<string, FaultProxy>();
  readonly #ruleGeneration = new Map<string, number>();
  readonly #background = new Set<Promise<void>>();
  readonly #remoteRestarts = new Map<string, Promise<void>>();
  readonly #backgroundErrors: string[] = [];
  readonly problems: string[] = [];
  /** Oddities that are not failures (a SIGTERM that arrived before the controller handled signals). */
  readonly notes: string[] = [];
  readonly steps: string[] = [];
  /** The controller side: one process or the replicas of a sharded run; set once set-up is done. */
  controllers: ChaosControllers | undefined;
  /** The gateways' probe servers; undefined: the run is unprobed. */
  probes: ChaosProbes | undefined;
  /** Why the gateways are not probed (set when `probes` is undefined). */
  unprobed: string | undefined;
  /** Whether the remotes and the local cluster serve the MCS API; else why not. */
  mcs: true | { readonly unavailable: string } = { unavailable: "not set up yet" };
  /** The controllers' `--shards` (1: one controller): the oracle's shard labels. */
  shards = 1;
  readonly registrations: readonly Registration[];
  readonly writer: RemoteWriter;

  constructor(
    seed: number,
    fleet: Fleet,
    remotes: readonly string[],
    registrations: readonly Registration[],
    log: (line: string) => void,
  ) {
    this.seed = seed;
    this.fleet = fleet;
    this.remotes = remotes;
    this.registrations = registrations;
    this.log = log;
    this.writer = new RemoteWriter(fleet, log, () => this.probes?.port);
  }

  // -- faults -----------------------------------------------------------------------

  #track(what: string, promise: Promise<void>): Promise<void> {
    const tracked = promise.catch((error: unknown) => {
      this.#backgroundErrors.push(`${what}: ${error instanceof Error ? error.message : String(error)}`);
    });
    this.#background.add(tracked);
    void tracked.finally(() => this.#background.delete(tracked));
    return tracked;
  }

  /** Applies `rules` to `cluster`'s proxy for `ms`, then makes it transparent unless rules changed meanwhile. */
  #timedRules(cluster: string, rules: FaultRules, ms: number): void {
    const proxy = this.proxies.get(cluster);
    if (!proxy) return;
    const generation = (this.#ruleGeneration.get(cluster) ?? 0) + 1;
    this.#ruleGeneration.set(cluster, generation);
    proxy.setRules(rules);
    void this.#track(
      `lift rules on ${cluster}`,
      (async () => {
        await sleep(ms);
        if (this.#ruleGeneration.get(cluster) === generation) proxy.setRules({});
      })(),
    );
  }

  #restartRemote(cluster: string): void {
    const previous = this.#remoteRestarts.get(cluster) ?? Promise.resolve();
    const next = this.#track(
      `restart ${cluster} API server`,
      previous.then(() => this.fleet.plane.restartApiServer(cluster, { kill: true })),
    );
    this.#remoteRestarts.set(cluster, next);
  }

  /** Ends every fault: proxies transparent, every API server up, every controller process running and healed. */
  async quiesce(): Promise<void> {
    for (const [cluster, proxy] of this.proxies) {
      this.#ruleGeneration.set(cluster, (this.#ruleGeneration.get(cluster) ?? 0) + 1);
      proxy.setRules({});
    }
    while (this.#background.size > 0) await Promise.all([...this.#background]);
    for (const proxy of this.proxies.values()) proxy.setRules({});
    for (const cluster of ["local", ...this.remotes]) {
      if (!this.fleet.plane.apiServerProcess(cluster).running) {
        this.problems.push(`API server ${cluster} was down after the schedule; started again`);
        await this.fleet.plane.startApiServer(cluster);
      }
    }
    if (this.#backgroundErrors.length > 0) this.problems.push(...this.#backgroundErrors);
    await this.controllers?.quiesce();
  }

  // -- steps ------------------------------------------------------------------------

  async run(step: Step): Promise<void> {
    const line = describeStep(step);
    this.steps.push(line);
    this.log(`step ${this.steps.length}: ${line}`);
    if (isControllerStep(step)) {
      if (!this.controllers) throw new Error("a controller step before the controllers were started");
      await this.controllers.apply(step);
    } else await this.#apply(step);
    await sleep(step.pauseMs);
  }

  async #apply(step: Exclude<Step, ControllerStep>): Promise<void> {
    if (isModeStep(step)) {
      if (step.kind === "service-export" && this.mcs !== true) {
        this.log("  (the MCS API is not served; skipped)");
        return;
      }
      await this.writer.applyMode(step);
      return;
    }
    switch (step.kind) {
      case "probe-fail":
        await this.probes?.fail(step.address, step.how);
        return;
      case "probe-recover":
        await this.probes?.recover(step.address);
        return;
      case "cut-watches":
        this.proxies.get(step.cluster)?.cutWatches();
        return;
      case "cut-all":
        this.proxies.get(step.cluster)?.cutAll();
        return;
      case "stall":
        this.#timedRules(step.cluster, { stall: true }, step.ms);
        return;
      case "refuse":
        this.#timedRules(step.cluster, { refuse: true }, step.ms);
        this.proxies.get(step.cluster)?.cutAll();
        return;
      case "latency":
        this.#timedRules(step.cluster, { latencyMs: step.latencyMs }, step.ms);
        return;
      case "corrupt-watch":
        this.#timedRules(step.cluster, { corruptWatch: step.mode }, step.ms);
        this.proxies.get(step.cluster)?.cutWatches();
        return;
      case "errors":
        this.#timedRules(
          step.cluster,
          {
            errorRate: step.errorRate,
            errorStatus: step.status,
            ...(step.retryAfterSeconds !== undefined ? { retryAfterSeconds: step.retryAfterSeconds } : {}),
          },
          step.ms,
        );
        // Errors hit only new requests: cut the watches so the controller has to relist through them.
        this.proxies.get(step.cluster)?.cutWatches();
        return;
      case "restart-remote-api":
        this.#restartRemote(step.cluster);
        return;
      case "restart-local-api":
        await this.fleet.plane.restartApiServer("local", { kill: true });
        return;
      default:
        await this.writer.apply(step);
    }
  }

  // -- observation ------------------------------------------------------------------

  /** The oracles' diff against the local state now (no lines: equal). */
  diff(userHeld: ReadonlySet<string>): Promise<Diff> {
    return diffWorld(
      {
        fleet: this.fleet,
        remotes: this.remotes,
        registrations: this.registrations,
        mcs: this.mcs === true,
        shards: this.shards,
      },
      { userHeld, deadAddresses: this.probes?.deadAddresses() ?? new Set<string>() },
    );
  }

  async stopAll(): Promise<void> {
    await this.controllers?.stop();
    for (const proxy of this.proxies.values()) await proxy.stop().catch(() => undefined);
    await this.probes?.stop().catch(() => undefined);
  }
}
