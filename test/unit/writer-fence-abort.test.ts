/**
 * A fenced write is abandoned at its shard's fence: the request is given no more time than
 * is left before the deadline, so a write that waits (for a socket, for an API server that
 * restarts) cannot reach the server after another replica may hold the shard. Found by the
 * sharded chaos run: after a local API server restart, writes a replica had sent before its
 * renew deadline were received 3.5 s after it, 0.3 s after another replica took the shard.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "../../src/core/clock.ts";
import { FairTokenBucket } from "../../src/core/fair-bucket.ts";
import type { WriteAction } from "../../src/core/mirror-kinds.ts";
import type { RequestOptions } from "../../src/kube/client.ts";
import { silentLogger } from "../../src/log.ts";
import { WriteFence } from "../../workers/local-writer/fence.ts";
import { MutationCache } from "../../workers/local-writer/mutation-cache.ts";
import { WriterStats } from "../../workers/local-writer/status.ts";
import { WriteExecutor } from "../../workers/local-writer/write-executor.ts";

const UPDATE: WriteAction = {
  verb: "update",
  kind: "Endpoints",
  namespace: "shop",
  name: "web-east",
  body: { apiVersion: "v1", kind: "Endpoints", metadata: { name: "web-east", namespace: "shop" } },
};

/** An executor over `fence` whose client records each request's options and answers at once. */
function executor(fence: WriteFence, clock: ManualClock) {
  const sent: RequestOptions[] = [];
  const client = {
    request: async <T>(_method: string, _path: string, options: RequestOptions = {}): Promise<T> => {
      sent.push(options);
      return { metadata: { name: "web-east", namespace: "shop", resourceVersion: "2" } } as T;
    },
  };
  const write = new WriteExecutor({
    client,
    bucket: new FairTokenBucket(1_000, 1_000, clock),
    fence,
    cache: new MutationCache(clock),
    stats: new WriterStats(),
    log: silentLogger(),
    block: () => undefined,
    blockedRecheckMs: 1_000,
  });
  return { write, sent };
}

describe("a fenced write's request", () => {
  it("is given no more time than is left before its shard's fence (sharded)", async () => {
    const clock = new ManualClock(10_000);
    const fence = new WriteFence(true, clock, silentLogger(), 6);
    fence.setShards([{ shard: 2, writableUntil: 11_500 }]);
    const { write, sent } = executor(fence, clock);
    assert.equal(await write.apply("shop/web-east", UPDATE, undefined, undefined, 2), undefined);
    assert.equal(sent.length, 1);
    assert.equal(sent[0]?.timeoutMs, 1_500);
  });

  it("is given no more time than is left before the fence (single leader)", async () => {
    const clock = new ManualClock(0);
    const fence = new WriteFence(true, clock, silentLogger());
    fence.move(4_000);
    clock.advance(3_250);
    const { write, sent } = executor(fence, clock);
    await write.apply("shop/web-east", UPDATE, undefined, undefined, 0);
    assert.equal(sent[0]?.timeoutMs, 750);
  });

  it("keeps the client's own timeout without leader election", async () => {
    const clock = new ManualClock(0);
    const { write, sent } = executor(new WriteFence(false, clock, silentLogger()), clock);
    await write.apply("shop/web-east", UPDATE, undefined, undefined, 0);
    assert.equal(sent[0]?.timeoutMs, undefined);
  });
});
