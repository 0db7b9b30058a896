/**
 * `actor.local-ranges` (SPEC §10): decoded deeply at the actor thread's boundary, and
 * applied thread-wide with the newest `seq` winning, to the actors the thread hosts and
 * to those it starts later (whose init may carry older ranges).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { MessageChannel } from "node:worker_threads";
import type { LocalRanges } from "../../src/core/address-policy.ts";
import { decodeToRemoteActor, type FromRemoteActor, ProtocolError } from "../../src/protocol/messages.ts";
import type { RemoteActorInit } from "../../workers/remote-cluster/actor.ts";
import { type HostedActor, hostRemoteActors } from "../../workers/remote-cluster/entry.ts";
import { actorInitMessage } from "../helpers/actor-init.ts";

const ranges = (seq: number, serviceCidrs: string[] = ["10.96.0.0/16"]): LocalRanges => ({
  seq,
  serviceCidrs,
  podCidrs: [],
});

describe("the local ranges message", () => {
  it("decodes, and refuses a range that is not a CIDR naming the field", () => {
    const message = { type: "actor.local-ranges", ranges: ranges(1, ["10.96.0.0/16", "fd00::/108"]) };
    assert.deepEqual(decodeToRemoteActor(message), message);
    assert.throws(
      () => decodeToRemoteActor({ type: "actor.local-ranges", ranges: ranges(1, ["10.96.0.0"]) }),
      (error: unknown) =>
        error instanceof ProtocolError &&
        /^actor\.local-ranges: ranges\.serviceCidrs\[0\]: must be a CIDR range$/.test(error.message),
    );
  });

  it("reaches every hosted actor and every later one, the newest seq winning", () => {
    let listener: (message: unknown) => void = () => {};
    const posted: FromRemoteActor[] = [];
    const port = {
      postMessage: (m: FromRemoteActor) => void posted.push(m),
      on: (_event: "message", l: (message: unknown) => void) => {
        listener = l;
      },
      close: () => {},
    };
    const seen = new Map<string, number[]>();
    const create = (init: RemoteActorInit): HostedActor => {
      const got: number[] = init.localRanges ? [init.localRanges.seq] : [];
      seen.set(init.cluster.name, got);
      return {
        cluster: init.cluster.name,
        epoch: init.epoch,
        attachWriter: () => {},
        start: () => {},
        stop: async () => {},
        runLater: (fn) => fn(),
        setLocalRanges: (r) => void got.push(r.seq),
      };
    };
    hostRemoteActors(port, { createActor: create });
    const init = (cluster: string, withRanges?: LocalRanges) => {
      const message = actorInitMessage(cluster, 1, "silent", new MessageChannel().port1);
      listener(withRanges ? { ...message, localRanges: withRanges } : message);
    };
    listener({ type: "actor.local-ranges", ranges: ranges(2) });
    init("east");
    listener({ type: "actor.local-ranges", ranges: ranges(1) }); // older: nothing
    listener({ type: "actor.local-ranges", ranges: ranges(3) });
    listener({ type: "actor.local-ranges", ranges: ranges(3) }); // a duplicate: nothing
    init("west", ranges(1)); // its init is older than what the thread knows
    init("north", ranges(4));
    assert.deepEqual(Object.fromEntries(seen), { east: [2, 3], west: [3], north: [4] });
    for (const actor of ["east", "west", "north"])
      assert.ok(posted.some((m) => m.type === "actor.ready" && m.cluster === actor));
  });
});
