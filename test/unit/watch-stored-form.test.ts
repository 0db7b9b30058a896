/**
 * What a watcher keeps of the objects it stores (`storedForm`, src/kube/watch-store.ts):
 * never `metadata.managedFields`, only on request the annotations named in
 * `dropAnnotations`, and every other field as the API server sent it.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Service } from "../../src/core/objects.ts";
import { LAST_APPLIED_CONFIGURATION, storedForm } from "../../src/kube/watch-store.ts";
import { Watcher, type WatcherOptions } from "../../src/kube/watcher.ts";
import { type FakeApi, fakeApi, openStream, sendList, until } from "../helpers/fake-api.ts";

const MANAGED_FIELDS = [
  { manager: "kubectl-client-side-apply", operation: "Update", apiVersion: "v1", fieldsType: "FieldsV1", fieldsV1: {} },
];

/** A Service as an API server sends it: with managedFields and kubectl's last-applied copy. */
function served(name: string, resourceVersion: string): Service {
  return {
    metadata: {
      name,
      namespace: "shop",
      uid: `uid-${name}`,
      resourceVersion,
      labels: { app: name },
      annotations: {
        "mirror.linkerd.io/gateway-name": "gateway",
        [LAST_APPLIED_CONFIGURATION]: JSON.stringify({ metadata: { name } }),
      },
      managedFields: MANAGED_FIELDS,
    },
    spec: { ports: [{ name: "http", port: 80 }] },
    status: { loadBalancer: { ingress: [{ ip: "198.18.0.1" }] } },
  };
}

/** `object` less its managedFields (and the annotations named), with the kind a list gives its items. */
function expected(object: Service, dropAnnotations: readonly string[] = []): Service {
  const { managedFields: _managed, ...metadata } = object.metadata;
  const annotations = Object.fromEntries(
    Object.entries(metadata.annotations ?? {}).filter(([key]) => !dropAnnotations.includes(key)),
  );
  return { apiVersion: "v1", kind: "Service", ...object, metadata: { ...metadata, annotations } };
}

/** An API server that lists `listed` and then sends `added` as a watch event. */
async function serve(listed: Service, added: Service): Promise<FakeApi> {
  const api = await fakeApi((url, res) => {
    if (url.searchParams.get("watch") !== "true") return sendList(res, [listed], "10");
    const stream = openStream(res);
    if (api.watches().length === 1) stream.event("ADDED", { apiVersion: "v1", kind: "Service", ...added });
  });
  return api;
}

async function stored(options: Partial<WatcherOptions>): Promise<[Service | undefined, Service | undefined]> {
  const api = await serve(served("listed", "5"), served("added", "11"));
  const watcher = new Watcher<Service>({ client: api.client, path: "/api/v1/services", ...options });
  watcher.start();
  try {
    await until("the listed and the added Service stored", () => watcher.size === 2);
    return [watcher.get("shop/listed"), watcher.get("shop/added")];
  } finally {
    await watcher.stop();
    await api.close();
  }
}

describe("stored form of watched objects", () => {
  it("stores listed and watched objects without metadata.managedFields, every other field kept", async () => {
    const [listed, added] = await stored({});
    assert.ok(listed && added);
    assert.equal("managedFields" in listed.metadata, false);
    assert.equal("managedFields" in added.metadata, false);
    assert.deepEqual(listed, expected(served("listed", "5")));
    assert.deepEqual(added, expected(served("added", "11")));
    assert.ok(Object.isFrozen(listed) && Object.isFrozen(added));
  });

  it("drops the annotations named in dropAnnotations, and only those", async () => {
    const [listed, added] = await stored({ dropAnnotations: [LAST_APPLIED_CONFIGURATION] });
    assert.deepEqual(listed, expected(served("listed", "5"), [LAST_APPLIED_CONFIGURATION]));
    assert.deepEqual(added?.metadata.annotations, { "mirror.linkerd.io/gateway-name": "gateway" });
  });

  it("stores what keep makes of the stored form, given what the store held under its key", async () => {
    const seen: [string, string | undefined][] = [];
    const [listed, added] = await stored({
      dropAnnotations: [LAST_APPLIED_CONFIGURATION],
      keep: (object, current) => {
        assert.equal("managedFields" in object.metadata, false);
        assert.equal(LAST_APPLIED_CONFIGURATION in (object.metadata.annotations ?? {}), false);
        seen.push([object.metadata.name, current?.metadata.resourceVersion]);
        return { metadata: object.metadata, spec: { ports: [] } } as Service;
      },
    });
    assert.deepEqual(listed?.spec, { ports: [] });
    assert.deepEqual(added?.spec, { ports: [] });
    assert.deepEqual(seen, [
      ["listed", undefined],
      ["added", undefined],
    ]);
  });

  it("returns the object itself when it has nothing to drop", () => {
    const plain: Service = { metadata: { name: "a", annotations: { keep: "me" } }, spec: { ports: [] } };
    assert.equal(storedForm(plain, [LAST_APPLIED_CONFIGURATION]), plain);
  });
});
