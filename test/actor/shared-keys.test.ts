/**
 * What a complete batch costs the keys clusters share (fleet-wide Services, SPEC §11;
 * MCS imports, SPEC §12): each such reconcile reduces every cluster's part and reads the
 * key's slices, so a complete batch enqueues only the shared keys it may change (the
 * batch's cluster's parts changed, or its turning known may change a kept part or end a
 * wait), never all of them. Counted with a spy on the two shared reconcilers, against a
 * real local API server.
 */
import assert from "node:assert/strict";
import { after, before, describe, it, mock } from "node:test";
import type { FederatedMember } from "../../src/core/federated.ts";
import type { McsExport } from "../../src/core/mcs.ts";
import type { ToWriterFromActor } from "../../src/protocol/messages.ts";
import { FederatedReconciler } from "../../workers/local-writer/reconcile-federated.ts";
import { ImportReconciler } from "../../workers/local-writer/reconcile-imports.ts";
import { Fleet } from "../helpers/fleet.ts";
import { eventually } from "../helpers/kube.ts";
import { installMcs } from "../helpers/mcs.ts";
import { clusterSetSpec } from "../helpers/mcs-export.ts";
import { batch, FakeActorPort, startWriter, writerIdle } from "./writer-harness.ts";

const KEYS = 20;
const NS = "shared-keys";

function member(cluster: string, i: number): FederatedMember {
  return {
    cluster,
    namespace: NS,
    name: `svc${i}-federated`,
    remote: `${NS}/svc${i}`,
    ports: [{ name: "http", protocol: "TCP", port: 80 }],
    addresses: ["198.18.3.1"],
    notReadyAddresses: [],
    endpointPorts: [{ name: "http", protocol: "TCP", port: 4143 }],
  };
}

function exported(cluster: string, i: number): McsExport {
  return {
    ...member(cluster, i),
    name: `db${i}`,
    remote: `${NS}/db${i}`,
    exportedAt: "2026-01-01T00:00:00Z",
    spec: clusterSetSpec(member(cluster, i).ports),
  };
}

/** A complete set of `cluster` with the given members and exports. */
function complete(cluster: string, seq: number, parts: number): ToWriterFromActor {
  return {
    ...batch(cluster, 1, seq, { complete: true }),
    members: Array.from({ length: parts }, (_, i) => member(cluster, i)),
    mcsExports: Array.from({ length: parts }, (_, i) => exported(cluster, i)),
  };
}

describe("shared keys reduced again per complete batch (F15)", () => {
  let fleet: Fleet;

  before(async () => {
    fleet = await Fleet.start([]);
    await installMcs(fleet, ["local"]);
  });
  after(async () => {
    mock.restoreAll();
    await fleet?.stop();
  });

  it("a complete batch of an unrelated cluster, or an unchanged one, reconciles no shared key", async () => {
    const shared = [
      mock.method(FederatedReconciler.prototype, "reconcile"),
      mock.method(ImportReconciler.prototype, "reconcile"),
    ];
    const reconciles = (): number => shared.reduce((n, spy) => n + spy.mock.callCount(), 0);
    const writer = await startWriter(fleet, { endpointsApi: "endpointslices", mcsRecheckMs: 500 });
    try {
      const a = new FakeActorPort();
      const b = new FakeActorPort();
      writer.actor.setKeep(["a", "b"]);
      writer.actor.attach("a", 1, a);
      writer.actor.attach("b", 1, b);
      a.send(complete("a", 1, KEYS));
      await eventually("a's fleet-wide Services and imports written", () =>
        writer.actor.status().federated?.length === KEYS && writer.actor.status().imports?.length === KEYS
          ? true
          : undefined,
      );
      await writerIdle(writer.actor);

      const counts: Record<string, number> = {};
      const measure = async (what: string, send: () => void, seq: { port: FakeActorPort; seq: number }) => {
        const before = reconciles();
        send();
        await seq.port.waitForAck((ack) => ack.seq === seq.seq, `ack of ${what}`);
        await writerIdle(writer.actor);
        counts[what] = reconciles() - before;
      };
      await measure("b's first complete batch", () => b.send(complete("b", 1, 0)), { port: b, seq: 1 });
      await measure("b's second complete batch", () => b.send(complete("b", 2, 0)), { port: b, seq: 2 });
      await measure("a's complete batch, unchanged", () => a.send(complete("a", 2, KEYS)), { port: a, seq: 2 });
      await measure("the same keep set again", () => writer.actor.setKeep(["a", "b"]), { port: b, seq: 2 });
      assert.deepEqual(counts, {
        "b's first complete batch": 0,
        "b's second complete batch": 0,
        "a's complete batch, unchanged": 0,
        "the same keep set again": 0,
      });
    } finally {
      await writer.stop();
      for (const spy of shared) spy.mock.restore();
    }
  });
});
