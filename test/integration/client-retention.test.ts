/**
 * What a KubeClient keeps after an exchange, against a real kube-apiserver over TLS:
 * nothing of the answer. Node's https agent keeps the first request made on each
 * keep-alive socket reachable as long as the socket lives; a client whose listeners held
 * the answer kept a whole list (parsed and raw) per remote actor, for good.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { ControlPlane } from "../../sandbox/control-plane.ts";
import { KubeClient } from "../../src/kube/client.ts";
import { adminConnection } from "../helpers/connection.ts";

setFlagsFromString("--expose-gc");
/** A full, synchronous garbage collection (the test runner does not expose `gc`). */
const collectGarbage = runInNewContext("gc") as () => void;

/** Collects until `ref` is cleared, a few rounds at most (weak references clear after the turn they were read in). */
async function cleared(ref: WeakRef<object>): Promise<boolean> {
  for (let round = 0; round < 5; round++) {
    await new Promise((resolve) => setImmediate(resolve));
    collectGarbage();
    if (ref.deref() === undefined) return true;
  }
  return false;
}

describe("KubeClient against a real API server", () => {
  let plane: ControlPlane;
  let client: KubeClient;

  before(async () => {
    plane = await ControlPlane.start({ clusters: ["remote"] });
    client = new KubeClient(adminConnection(plane.cluster("remote")), { requestTimeoutMs: 5_000 });
  });
  after(async () => {
    client?.close();
    await plane?.stop();
  });

  it("keeps no answer alive once it is handed over, while the keep-alive socket stays open", async () => {
    // The first request opens the socket (the one Node's agent keeps reachable); its answer is dropped at once.
    const first = new WeakRef(await client.request<object>("GET", "/api/v1/namespaces"));
    const failed = await client.request("GET", "/api/v1/namespaces/no-such-namespace").catch((error: unknown) => error);
    assert.ok(failed instanceof Error, "the error answer arrives as an error");
    // A later request on the same socket: the socket is still open and pooled.
    const later = await client.request<{ items?: unknown[] }>("GET", "/api/v1/namespaces");
    assert.ok((later.items ?? []).length > 0);
    assert.ok(await cleared(first), "the first answer is still reachable after it was handed over");
  });
});
