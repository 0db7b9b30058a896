/**
 * The serving tiers of each fleet-wide Service this writer holds (SPEC §14): the
 * lifecycle state per key (src/core/tiers.ts), fed with what the reduction and the
 * observed objects say, and its effects carried out: an Event and a counted switch per
 * change of the serving tiers, a wake-up when a better tier will have waited long enough.
 *
 * Sharded, the owner of a Service decides and states it; a replica that only hosts
 * members follows the statement (`follow`, SPEC §14 "Sharded").
 *
 * The state is memory only. After a writer start a key's first observation takes the
 * cutoff its Service states (`mirror.linkerd.io/federated-serving-priority`), so a
 * restart over a converged world serves what it served and writes nothing; a better
 * tier then waits the whole delay again.
 */
import type { FederatedMember, Reduction } from "../../src/core/federated.ts";
import { servingParts } from "../../src/core/federated-tiers.ts";
import type { Service } from "../../src/core/objects.ts";
import { splitKey } from "../../src/core/objects.ts";
import { type FollowedTiers, followTiers } from "../../src/core/sharded-tiers.ts";
import {
  SERVING_PRIORITY_ANNOTATION,
  stepTiers,
  type Tier,
  type TierSettings,
  type TierState,
  writtenCutoff,
} from "../../src/core/tiers.ts";
import type { Logger } from "../../src/log.ts";
import type { EventRequest } from "../../src/protocol/messages.ts";

export interface TierBookDeps {
  readonly settings: TierSettings;
  readonly now: () => number;
  readonly priorityOf: (cluster: string) => number;
  readonly recordEvent: (event: EventRequest) => void;
  readonly log: Logger;
  /** One change of a Service's serving tiers, by direction (the metric's counter). */
  readonly switched: (direction: "failover" | "failback") => void;
}

/** What a fleet-wide Service's tiers make of its reduction. */
export interface TierOutcome {
  /** The parts to write: outside the serving tiers, standing by. */
  readonly parts: readonly FederatedMember[];
  /** The worst priority that serves; absent: fewer than two tiers. */
  readonly servingPriority?: number;
  /** Observe again in this many ms (a better tier ripens). */
  readonly wakeMs?: number;
}

/** A fleet-wide Service's tiers as `status` shows them. */
export interface TierSummary {
  readonly servingPriority: number;
  /** When the serving tiers last changed (ms on the writer's clock, for an age). */
  readonly since: number;
  readonly tiers: readonly Tier[];
}

export class TierBook {
  readonly #deps: TierBookDeps;
  readonly #states = new Map<string, { state: TierState; tiers: readonly Tier[] }>();
  /** Sharded: the keys whose Service another replica owns, as followed (see `follow`). */
  readonly #followed = new Map<string, FollowedTiers>();

  constructor(deps: TierBookDeps) {
    this.#deps = deps;
  }

  /**
   * The serving tiers of `key` given its reduction (to write), its `tiers` as observed
   * (federatedTiers, or shardedTiers; undefined: fewer than two) and its observed Service.
   */
  observe(
    key: string,
    reduction: Extract<Reduction, { kind: "write" }>,
    tiers: readonly Tier[] | undefined,
    service: Service | undefined,
  ): TierOutcome {
    const { priorityOf, settings, now } = this.#deps;
    this.#followed.delete(key);
    if (!tiers) {
      this.#states.delete(key);
      return { parts: reduction.parts };
    }
    const previous = this.#states.get(key)?.state;
    const written = writtenCutoff(service?.metadata.annotations?.[SERVING_PRIORITY_ANNOTATION]);
    const step = stepTiers(settings, previous, {
      now: now(),
      tiers,
      ...(previous === undefined && written !== undefined ? { written } : {}),
    });
    if (!step.state) {
      this.#states.delete(key);
      return { parts: reduction.parts };
    }
    this.#states.set(key, { state: step.state, tiers });
    let wakeMs: number | undefined;
    const { namespace = "", name } = splitKey(key);
    for (const effect of step.effects) {
      if (effect.kind === "wake") {
        wakeMs = Math.max(1, effect.at - now());
        continue;
      }
      this.#deps.switched(effect.kind);
      this.#deps.log.info({ key, from: effect.from, to: effect.to, direction: effect.kind }, effect.message);
      this.#deps.recordEvent({
        involved: { kind: "Service", apiVersion: "v1", namespace, name },
        type: effect.kind === "failover" ? "Warning" : "Normal",
        reason: effect.kind === "failover" ? "FederatedFailover" : "FederatedFailback",
        message: effect.message,
      });
    }
    return {
      parts: servingParts(reduction.parts, step.state.cutoff, priorityOf),
      servingPriority: step.state.cutoff,
      ...(wakeMs !== undefined ? { wakeMs } : {}),
    };
  }

  /**
   * Sharded, on a replica that does not own `key`'s Service: the cutoff to write its
   * hosted parts for, following the one the Service states (followTiers; undefined:
   * every member serves). Nothing is reported: the owner reports its decisions.
   */
  follow(key: string, tiers: readonly Tier[] | undefined, service: Service | undefined): Omit<TierOutcome, "parts"> {
    this.#states.delete(key);
    const now = this.#deps.now();
    const stated = writtenCutoff(service?.metadata.annotations?.[SERVING_PRIORITY_ANNOTATION]);
    const following = followTiers(this.#deps.settings, this.#followed.get(key), { now, tiers, stated });
    if (following.followed) this.#followed.set(key, following.followed);
    else this.#followed.delete(key);
    return {
      ...(following.cutoff !== undefined ? { servingPriority: following.cutoff } : {}),
      ...(following.wake !== undefined ? { wakeMs: Math.max(1, following.wake - now) } : {}),
    };
  }

  /** Forgets `key` (its Service is deleted, or no longer this writer's). */
  forget(key: string): void {
    this.#states.delete(key);
    this.#followed.delete(key);
  }

  summary(key: string): TierSummary | undefined {
    const held = this.#states.get(key);
    if (!held) return undefined;
    return { servingPriority: held.state.cutoff, since: held.state.since, tiers: held.tiers };
  }
}
