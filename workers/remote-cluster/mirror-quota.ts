/**
 * The actor's side of the per-cluster quota on local Services (src/core/cluster-quota.ts):
 * the weight of every remote key as last computed, and the keys refused now. The desired
 * sender weighs each key it computes, asks `decide()` before it diffs, and sends a
 * refused key as if it asked for nothing.
 */
import type { ServiceDesired } from "../../src/core/cluster-desired.ts";
import { refusedByQuota, weightOf } from "../../src/core/cluster-quota.ts";
import type { MirrorProblem } from "../../src/core/desired.ts";

export class MirrorQuota {
  readonly #cluster: string;
  /** Local Services the cluster may ask for; 0: no quota. */
  readonly #limit: number;
  /** Remote key → local objects it asks for (keys asking for none are left out). */
  readonly #weights = new Map<string, number>();
  #refused = new Map<string, MirrorProblem>();

  constructor(cluster: string, limit: number) {
    this.#cluster = cluster;
    this.#limit = limit;
  }

  /**
   * Records what `key` asks for now; mirrors not known yet (a headless Service's hosts
   * pending) keep its last weight, or, with none yet, weigh what a complete set would
   * send for it (its "hosts unknown" mirror).
   */
  weigh(key: string, desired: ServiceDesired): void {
    if (this.#limit <= 0) return;
    const known = desired.mirrors ?? (this.#weights.has(key) ? undefined : desired.unknownMirrors);
    const weight = known ? weightOf({ ...desired, mirrors: known }) : this.#weights.get(key);
    if (weight) this.#weights.set(key, weight);
    else this.#weights.delete(key);
  }

  /** Forgets the keys not in `keys` (gone from the cluster), before a complete set. */
  retain(keys: ReadonlySet<string>): void {
    for (const key of [...this.#weights.keys()]) if (!keys.has(key)) this.#weights.delete(key);
  }

  /** Decides again which keys are refused; returns those whose admission changed. */
  decide(): string[] {
    if (this.#limit <= 0) return [];
    const refused = refusedByQuota(this.#cluster, this.#weights, this.#limit);
    const changed = [...refused.keys()].filter((key) => !this.#refused.has(key));
    for (const key of this.#refused.keys()) if (!refused.has(key)) changed.push(key);
    this.#refused = refused;
    return changed;
  }

  /** Why `key` is refused, as of the last `decide()`; undefined when it is admitted. */
  refused(key: string): MirrorProblem | undefined {
    return this.#refused.get(key);
  }
}
