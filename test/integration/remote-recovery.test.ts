/**
 * Recovery after a remote outage: the remote API server is stopped long enough for the
 * actor's reconnect backoff to reach its bound, then started again; the actor (in
 * process, through its ports) must catch up by itself. How fast is measured by the
 * bench (`npm run bench -- --scenario remote-recovery`), not asserted here.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ControlPlane } from "../../sandbox/control-plane.ts";
import { WATCH_BACKOFF } from "../../src/core/backoff.ts";
import type { ConnectionSpec } from "../../src/core/connection.ts";
import { KubeClient } from "../../src/kube/client.ts";
import { adminConnection } from "../helpers/connection.ts";
import { eventually } from "../helpers/kube.ts";
import { createExported, createGateway, type RunningActor, startActor, upsertsIn } from "../helpers/remote-actor.ts";

describe("remote cluster outage", () => {
  let plane: ControlPlane;
  let connection: ConnectionSpec;
  let client: KubeClient;
  let r: RunningActor | undefined;

  before(async () => {
    plane = await ControlPlane.start({ clusters: ["remote"] });
    connection = adminConnection(plane.cluster("remote"));
    client = new KubeClient(connection, { requestTimeoutMs: 10_000 });
  });
  after(async () => {
    await r?.actor.stop();
    client?.close();
    await plane?.stop();
  });

  it("converges again after the remote API server was down long enough for the backoff to reach its bound", async () => {
    await createGateway(client, "outage-gw", "198.18.0.41");
    await createExported(client, "outage", "before", "outage-gw");
    const actor = startActor(connection, { maxInFlight: 8 });
    r = actor;
    await actor.waitForBatch("the first complete batch", (b) => b.complete && upsertsIn(b, "outage").length === 1);

    await plane.stopApiServer("remote");
    // Down until the reconnect delay has grown to its bound (about 10 s of failures).
    const capped = await eventually(
      "a failure whose retry delay is in the bound's range",
      () =>
        actor.statuses
          .map((s) => s.lastFailure)
          .find((f) => f !== undefined && f.retryInMs >= WATCH_BACKOFF.maxMs / 2 && f.attempt >= 5),
      60_000,
      50,
    );
    assert.ok(capped.retryInMs <= WATCH_BACKOFF.maxMs, `retry delay ${capped.retryInMs} ms within the bound`);
    assert.equal(actor.statuses.at(-1)?.state, "stale");

    await plane.startApiServer("remote");
    await createExported(client, "outage", "after", "outage-gw");
    // A re-watch from the last resourceVersion, or a relist (a restarted API server's
    // watch cache may answer 410 Gone): either way the new Service's mirror follows.
    const batch = await actor.waitForBatch("the Service created after the remote returned", (b) =>
      upsertsIn(b, "outage").includes("after-east"),
    );
    if (batch.complete) assert.deepEqual(upsertsIn(batch, "outage"), ["after-east", "before-east"]);
    await eventually("the actor synced again", () => (actor.statuses.at(-1)?.state === "synced" ? true : undefined));
    assert.deepEqual(actor.faults, []);
  });
});
