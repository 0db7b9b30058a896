/** The writer's index of per-host mirror Services by their headless mirror (SPEC §12). */
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { describe, it } from "node:test";
import { HEADLESS_MIRROR_LABEL } from "../../src/core/headless.ts";
import type { Service } from "../../src/core/objects.ts";
import { PerHostIndex } from "../../workers/local-writer/per-host-index.ts";

function service(name: string, headless?: string): Service {
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name, namespace: "shop", ...(headless ? { labels: { [HEADLESS_MIRROR_LABEL]: headless } } : {}) },
  } as Service;
}

describe("PerHostIndex", () => {
  it("follows the store's changes: added, relabelled, unlabelled and deleted per-host Services", () => {
    const store = new EventEmitter();
    const index = new PerHostIndex(store);
    const change = (key: string, previous: Service | undefined, current: Service | undefined) =>
      store.emit("change", key, previous, current);
    change("shop/db-0-east", undefined, service("db-0-east", "db-east"));
    change("shop/db-1-east", undefined, service("db-1-east", "db-east"));
    change("shop/web-east", undefined, service("web-east"));
    assert.deepEqual([...index.of("shop/db-east")].sort(), ["shop/db-0-east", "shop/db-1-east"]);
    change("shop/db-1-east", service("db-1-east", "db-east"), service("db-1-east", "cache-east"));
    assert.deepEqual([...index.of("shop/db-east")], ["shop/db-0-east"]);
    assert.deepEqual([...index.of("shop/cache-east")], ["shop/db-1-east"]);
    change("shop/db-0-east", service("db-0-east", "db-east"), service("db-0-east"));
    change("shop/db-1-east", service("db-1-east", "cache-east"), undefined);
    assert.deepEqual([...index.of("shop/db-east")], []);
    assert.deepEqual([...index.of("shop/cache-east")], []);
    assert.deepEqual([...index.of("shop/web-east")], []);
  });
});
