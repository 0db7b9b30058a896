/**
 * The connections of an optional resource's discovery (SPEC §12): a client holds one
 * long-lived connection (its watch), so the first discovery, sent before the client's
 * list, leaves its connection for that list to reuse, and a recheck (sent while the
 * watch holds that connection) asks for its own to be closed after the answer instead
 * of leaving it idle in the pool (≈ 90 KB per cluster).
 */
import assert from "node:assert/strict";
import { afterEach, describe, it } from "node:test";
import { SERVICE_EXPORTS } from "../../src/core/mcs.ts";
import { OptionalWatch } from "../../src/kube/optional-watch.ts";
import { type FakeApi, fakeApi, sendStatus, until } from "../helpers/fake-api.ts";

describe("an optional resource's discovery and its connections", () => {
  let api: FakeApi | undefined;
  let watch: OptionalWatch<never> | undefined;
  afterEach(async () => {
    await watch?.stop();
    await api?.close();
  });

  it("keeps the first discovery's connection for the list, closes every recheck's", async () => {
    const connection: (string | undefined)[] = [];
    api = await fakeApi((url, res, req) => {
      if (url.pathname === SERVICE_EXPORTS.discoveryPath) connection.push(req.headers.connection);
      sendStatus(res, 404, "NotFound");
    });
    const log = { info: () => {}, warn: () => {} };
    let changes = 0;
    watch = new OptionalWatch<never>({
      client: api.client,
      resource: SERVICE_EXPORTS,
      recheckMs: 20,
      log,
      guard: (fn) => fn,
      track: (promise) => void promise,
      changed: () => {},
      availabilityChanged: () => {
        changes += 1;
      },
    });
    watch.start();
    await until("three discoveries", () => connection.length >= 3);
    assert.equal(changes, 1, "the first answer changed the availability; the rechecks did not");
    assert.equal(watch.availability.state, "not-installed");
    assert.deepEqual(connection.slice(0, 3), ["keep-alive", "close", "close"]);
  });
});
