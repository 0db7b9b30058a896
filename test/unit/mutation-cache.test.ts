/**
 * The local writer's mutation cache: our own writes and deletes count before the watch
 * delivers them, until it does, and never for longer than the TTL or beyond the cap.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "../../src/core/clock.ts";
import type { KubeObject } from "../../src/core/objects.ts";
import { MUTATION_TTL_MS, MutationCache } from "../../workers/local-writer/mutation-cache.ts";

function service(resourceVersion: string, uid = "uid-1"): KubeObject {
  return { apiVersion: "v1", kind: "Service", metadata: { name: "web-east", namespace: "shop", uid, resourceVersion } };
}

describe("MutationCache", () => {
  it("a written object wins over an older watch copy until the watch shows its version", () => {
    const cache = new MutationCache(new ManualClock());
    cache.written("Service", "shop/web-east", service("12"));
    assert.equal(cache.observed("Service", "shop/web-east", service("10"))?.metadata.resourceVersion, "12");
    assert.equal(cache.observed("Service", "shop/web-east", undefined)?.metadata.resourceVersion, "12");
    cache.watched("Service", "shop/web-east", service("10"));
    assert.equal(cache.size, 1, "an older watch event does not catch up");
    cache.watched("Service", "shop/web-east", service("12"));
    assert.equal(cache.size, 0);
    assert.equal(cache.observed("Service", "shop/web-east", service("12"))?.metadata.resourceVersion, "12");
  });

  it("a deletion answers absent while the watch still shows the deleted object, so it is not deleted again", () => {
    const cache = new MutationCache(new ManualClock());
    cache.deleted("Service", "shop/web-east", service("10"));
    assert.equal(cache.observed("Service", "shop/web-east", service("10")), undefined);
    cache.watched("Service", "shop/web-east", service("10")); // a late event of the deleted object
    assert.equal(cache.observed("Service", "shop/web-east", service("10")), undefined, "still deleted");
    cache.watched("Service", "shop/web-east", undefined); // the watch shows the deletion
    assert.equal(cache.size, 0);
  });

  it("a deletion gives way to a recreated object: another uid or a newer resourceVersion", () => {
    const cache = new MutationCache(new ManualClock());
    cache.deleted("Service", "shop/web-east", service("10"));
    assert.equal(cache.observed("Service", "shop/web-east", service("11", "uid-2"))?.metadata.uid, "uid-2");
    assert.equal(cache.observed("Service", "shop/web-east", service("15"))?.metadata.resourceVersion, "15");
    cache.watched("Service", "shop/web-east", service("11", "uid-2"));
    assert.equal(cache.size, 0);
  });

  it("forgets an entry the watch never caught up with once it is older than the TTL", () => {
    const clock = new ManualClock();
    const cache = new MutationCache(clock);
    cache.written("Service", "shop/web-east", service("12"));
    cache.deleted("Endpoints", "shop/web-east", service("10"));
    clock.advance(MUTATION_TTL_MS - 1);
    cache.sweep();
    assert.equal(cache.size, 2);
    clock.advance(1);
    assert.equal(cache.observed("Service", "shop/web-east", service("10"))?.metadata.resourceVersion, "10");
    assert.equal(cache.observed("Endpoints", "shop/web-east", service("10"))?.metadata.resourceVersion, "10");
    assert.equal(cache.size, 0);
  });

  it("holds at most maxEntries entries: the oldest go first", () => {
    const cache = new MutationCache(new ManualClock(), { maxEntries: 100 });
    for (let i = 0; i < 1_000; i++) cache.written("Service", `shop/web-${i}`, service(String(i)));
    assert.equal(cache.size, 100);
    assert.equal(cache.observed("Service", "shop/web-999", undefined)?.metadata.resourceVersion, "999");
    assert.equal(cache.observed("Service", "shop/web-0", undefined), undefined);
  });
});
