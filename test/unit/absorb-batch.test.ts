/**
 * absorbBatch: which keys one desired batch enqueues, and which batches are refused
 * (workers/local-writer/absorb-batch.ts), with the real DesiredStore.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ToWriterFromActor } from "../../src/protocol/messages.ts";
import { type AbsorbDeps, absorbBatch } from "../../workers/local-writer/absorb-batch.ts";
import { DesiredStore } from "../../workers/local-writer/desired-store.ts";
import { testMirror } from "../helpers/desired-mirror.ts";

let seq = 0;
function batch(complete: boolean, names: readonly string[], cluster = "east"): ToWriterFromActor {
  seq += 1;
  return {
    type: "desired.batch",
    cluster,
    epoch: 1,
    seq,
    complete,
    upserts: names.map((name) => testMirror({ cluster, name })),
    deletes: [],
  };
}

/** A writer's surroundings: `east` hosted, `shop/db-east` a headless mirror with one per-host Service, `shop/old-east` observed. */
function world(hosted = true) {
  const desired = new DesiredStore();
  desired.setKeep(["east"]); // the Secrets are listed: `west` is not registered
  const enqueued: string[] = [];
  const completes: { cluster: string; unchanged: boolean }[] = [];
  const deps: AbsorbDeps = {
    desired,
    stores: {
      perHostIndex: { of: (key: string) => new Set(key === "shop/db-east" ? ["shop/db-0-east"] : []) },
      observedMirrorsOf: function* (cluster: string) {
        if (cluster === "east") yield "shop/old-east";
      },
    } as unknown as AbsorbDeps["stores"],
    sharedKeys: { afterComplete: (cluster, unchanged) => void completes.push({ cluster, unchanged }) },
    hosts: () => hosted,
    enqueue: (key) => void enqueued.push(key),
  };
  return { deps, desired, enqueued, completes };
}

describe("absorbBatch", () => {
  it("enqueues a delta batch's keys and a headless mirror's per-host Services, and nothing it does not name", () => {
    const { deps, enqueued, completes } = world();
    assert.equal(absorbBatch(deps, batch(false, ["web-east", "db-east"])), true);
    assert.deepEqual(enqueued.sort(), ["shop/db-0-east", "shop/db-east", "shop/web-east"]);
    assert.deepEqual(completes, []);
  });

  it("on a complete batch also enqueues every observed mirror of the cluster (SPEC §6) and re-reduces the shared keys", () => {
    const { deps, enqueued, completes } = world();
    assert.equal(absorbBatch(deps, batch(true, ["web-east"])), true);
    assert.deepEqual(enqueued.sort(), ["shop/old-east", "shop/web-east"]);
    // The cluster was not known before this batch: its shared keys change standing.
    assert.deepEqual(completes, [{ cluster: "east", unchanged: false }]);
    absorbBatch(deps, batch(true, ["web-east"]));
    assert.deepEqual(completes.at(-1), { cluster: "east", unchanged: true });
  });

  it("refuses a batch of a cluster this replica does not host, and keeps nothing of it", () => {
    const { deps, desired, enqueued } = world(false);
    assert.equal(absorbBatch(deps, batch(true, ["web-east"])), false);
    assert.deepEqual(enqueued, []);
    assert.equal(desired.get("east", "shop/web-east"), undefined);
  });

  it("refuses a batch of an unregistered cluster", () => {
    const { deps, enqueued } = world();
    assert.equal(absorbBatch(deps, batch(true, ["web-west"], "west")), false);
    assert.deepEqual(enqueued, []);
  });
});
