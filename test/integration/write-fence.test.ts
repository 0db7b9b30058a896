/**
 * Leader election's write fence, enforced by the local writer itself (on the real API
 * servers): a controller built with `writeFence` writes nothing until a deadline allows
 * it, nothing once the latest deadline has passed (as when the main thread stalls and
 * renews nothing), and catches up at once when the deadline moves forward again.
 * Writes are counted by the local API server (`apiserver_request_total`).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { systemClock } from "../../src/core/clock.ts";
import type { Supervisor } from "../../src/supervisor/supervisor.ts";
import { Fleet } from "../helpers/fleet.ts";
import { eventually } from "../helpers/kube.ts";
import { waitForWriterIdle } from "../helpers/settle.ts";
import { waitForClusterRow } from "../helpers/supervision.ts";

const fromNow = (ms: number): number => systemClock.now() + ms;

describe("the writer's leader-election fence", () => {
  let fleet: Fleet;
  let controller: Supervisor;

  before(async () => {
    fleet = await Fleet.start(["east"]);
    await fleet.createGateway("east", { ingress: [{ ip: "198.18.0.10" }] });
    await fleet.register("east");
    await fleet.createService("east", "shop", "web");
    controller = fleet.startInProcess({}, { writeFence: true });
  });
  /**
   * The writer has east's complete desired set of `mirrors` mirrors and, in a later report,
   * an empty queue with nothing in flight: each key was handed to a worker, which would have
   * written it by now were it not for the fence (it is retried every second meanwhile).
   */
  async function writerHolds(mirrors: number): Promise<void> {
    await waitForClusterRow(controller, "east", "synced", (r) => r.state === "synced");
    await eventually(
      () =>
        `the writer to hold east's complete desired set of ${mirrors} (now ${JSON.stringify(controller.status().writer?.clusters)})`,
      () => {
        const east = controller.status().writer?.clusters["east"];
        return east?.complete === true && east.mirrors === mirrors ? true : undefined;
      },
      60_000,
      20,
    );
    await waitForWriterIdle(controller);
  }

  after(async () => {
    await controller?.stop();
    await fleet?.stop();
  });

  it("writes nothing before the first deadline, then mirrors once a deadline allows it", async () => {
    const before = await fleet.localWriteCount();
    await writerHolds(1);
    assert.equal(await fleet.localService("shop", "web-east"), undefined, "no mirror while fenced");
    assert.equal(await fleet.localWriteCount(), before, "no local write while fenced");
    controller.setWriteDeadline(fromNow(120_000));
    await fleet.waitForMirror("shop", "web-east");
    await fleet.waitForEndpoints("shop", "web-east", (ep) => ep.subsets?.[0]?.addresses?.[0]?.ip === "198.18.0.10");
  });

  it("stops writing once the deadline has passed, and catches up when it moves forward", async () => {
    await waitForWriterIdle(controller);
    controller.setWriteDeadline(fromNow(-1));
    // Two reports after the fence message was posted: the writer has read it by then.
    await waitForWriterIdle(controller, { reports: 2 });
    const before = await fleet.localWriteCount();
    await fleet.createService("east", "shop", "cart");
    await writerHolds(2);
    assert.equal(await fleet.localService("shop", "cart-east"), undefined, "no mirror past the deadline");
    assert.equal(await fleet.localWriteCount(), before, "no local write past the deadline");
    const reopened = Date.now();
    controller.setWriteDeadline(fromNow(120_000));
    await fleet.waitForMirror("shop", "cart-east");
    // The fence moving forward re-queues every key at once, not after a backoff.
    assert.ok(Date.now() - reopened < 10_000, `caught up in ${Date.now() - reopened} ms`);
  });
});
