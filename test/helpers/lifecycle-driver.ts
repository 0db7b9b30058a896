/**
 * Drives the remote-cluster actors' lifecycle (src/supervisor/actor-lifecycle.ts) event by
 * event, as a pure function: for the lifecycle's unit tests.
 */
import assert from "node:assert/strict";
import { transition } from "../../src/supervisor/actor-lifecycle.ts";
import {
  initialLifecycleState,
  type LifecycleEffect,
  type LifecycleEvent,
  type LifecycleSettings,
  type LifecycleState,
} from "../../src/supervisor/actor-lifecycle-state.ts";
import type { RegisteredCluster } from "../../src/supervisor/registry.ts";

export const POLICY = {
  initialMs: 1_000,
  maxMs: 60_000,
  windowMs: 600_000,
  crashLoopAfter: 3,
  crashLoopRetryMs: 300_000,
};
export const SOLO: LifecycleSettings = { maxThreads: 0, maxConcurrentStarts: 2, policy: POLICY, stopTimeoutMs: 10_000 };
export const PACKED: LifecycleSettings = { ...SOLO, maxThreads: 2 };

export function reg(cluster: string, opts: { uid?: string; fingerprint?: string } = {}): RegisteredCluster {
  return {
    cluster,
    domain: "example.test",
    connection: { server: `https://${cluster}.test:6443`, auth: { kind: "token", token: "t" } },
    defaultGateway: { name: "linkerd-gateway", namespace: "linkerd-multicluster" },
    priority: 100,
    fingerprint: opts.fingerprint ?? "f1",
    secretKey: `fleet/cluster-credentials-${cluster}`,
    secretUid: opts.uid ?? `uid-${cluster}`,
  };
}

export const registrations = (...rs: RegisteredCluster[]): LifecycleEvent => ({
  type: "registrations",
  registered: new Map(rs.map((r) => [r.cluster, r])),
});

/** Drives the lifecycle; `effects` holds the effects of the last step only. */
export class Driver {
  state: LifecycleState;
  effects: readonly LifecycleEffect[] = [];
  now = 1_000_000;

  constructor(settings: LifecycleSettings) {
    this.state = initialLifecycleState(settings);
  }

  step(event: LifecycleEvent): readonly LifecycleEffect[] {
    const next = transition(this.state, event, this.now);
    this.state = next.state;
    this.effects = next.effects;
    return next.effects;
  }

  of<T extends LifecycleEffect["type"]>(type: T): Extract<LifecycleEffect, { type: T }>[] {
    return this.effects.filter((e): e is Extract<LifecycleEffect, { type: T }> => e.type === type);
  }

  /** Epoch and thread of `cluster`'s current incarnation. */
  current(cluster: string): { epoch: number; thread: number } {
    const epoch = this.state.actors.get(cluster)?.epoch;
    assert.ok(epoch !== undefined, `${cluster} has a current incarnation`);
    const inc = this.state.incarnations.get(epoch);
    assert.ok(inc);
    return { epoch, thread: inc.thread };
  }

  ready(cluster: string): void {
    const { epoch, thread } = this.current(cluster);
    this.step({ type: "actor-ready", thread, cluster, epoch });
  }
}
