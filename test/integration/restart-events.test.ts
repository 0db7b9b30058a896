/**
 * A controller restart on an unchanged world writes nothing at all but (with leader
 * election) its Lease: no mirror write and no Kubernetes Event, because the writer lists
 * the Events fleet-mirror recorded before and posts none identical to them; a state that
 * did change still gets its Event. Counted by the local API server itself
 * (`apiserver_request_total`), with the controller least-privilege (deploy/rbac/local.yaml).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Supervisor } from "../../src/supervisor/supervisor.ts";
import { apiRequests } from "../actor/writer-harness.ts";
import { Fleet } from "../helpers/fleet.ts";
import { eventually } from "../helpers/kube.ts";
import { waitForClusterRow } from "../helpers/supervision.ts";

const TIMEOUT_MS = 60_000;

describe("restarting the controller on an unchanged world", () => {
  let fleet: Fleet;
  const running = new Set<Supervisor>();

  function start(): Supervisor {
    const supervisor = fleet.startInProcess();
    running.add(supervisor);
    return supervisor;
  }

  async function stop(supervisor: Supervisor): Promise<void> {
    await supervisor.stop();
    running.delete(supervisor);
  }

  /** Synced, and the writer has nothing queued nor in flight. */
  async function settled(supervisor: Supervisor): Promise<void> {
    await waitForClusterRow(supervisor, "east", "synced", (r) => r.state === "synced");
    await eventually(
      "the local writer idle",
      () => {
        const w = supervisor.status().writer;
        return w?.ready && w.queueDepth === 0 && w.inFlight === 0 ? w : undefined;
      },
      TIMEOUT_MS,
      50,
    );
  }

  before(async () => {
    fleet = await Fleet.start(["east"]);
    await fleet.createGateway("east", { ingress: [{ ip: "198.18.0.10" }] });
    await fleet.register("east");
    await fleet.createService("east", "shop", "web");
  });
  after(async () => {
    for (const supervisor of running) await supervisor.stop();
    await fleet?.stop();
  });

  it("posts no Event and writes no mirror on a second start, and still posts the Event of a state that changed", async () => {
    const first = start();
    await fleet.mirrorIdentity("shop", "web-east");
    await fleet.waitForSecretEvent("cluster-credentials-east", "ClusterRegistered");
    await settled(first);
    await stop(first);

    const eventsBefore = await apiRequests(fleet, "POST", "events");
    const writesBefore = await fleet.localWriteCount();
    const second = start();
    await settled(second);
    // A marker: a state that changes after the restart (an invalid credentials Secret).
    // Its Event is recorded after the restart's own reports, so once it is in the API
    // every earlier Event has been posted or deduplicated.
    await fleet.createSecret(
      fleet.secretBody({
        secretName: "broken-credentials",
        clusterName: "broken",
        kubeconfig: "not: [a kubeconfig",
      }) as never,
    );
    await fleet.waitForSecretEvent("broken-credentials", "InvalidCredentials");
    await settled(second);
    assert.equal(await apiRequests(fleet, "POST", "events"), eventsBefore + 1, "only the changed state's Event");
    assert.equal(await fleet.localWriteCount(), writesBefore, "no mirror write");
    assert.equal((await fleet.secretEvents("cluster-credentials-east", "ClusterRegistered")).length, 1);
  });
});
