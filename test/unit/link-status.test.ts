import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { desiredLinkStatus, type EntryState, type LinkStatus, statusTime } from "../../src/core/link-status.ts";

const NOW = Date.parse("2026-03-01T12:00:00Z");
const BEFORE = "2025-12-24T08:00:00Z";

const mirrored = (local: string): EntryState => ({
  known: true,
  mirrored: true,
  reason: "Mirrored",
  message: "",
  local,
});

/** An entry as linkerd writes it, as the API server stores it (`group` defaulted to `core`). */
function linkerdEntry(remote: string, local: string, at = BEFORE) {
  const [namespace = "", name = ""] = remote.split("/");
  const [ln = "", lname = ""] = local.split("/");
  return {
    controllerName: "linkerd.io/service-mirror",
    remoteRef: { group: "core", kind: "Service", name, namespace },
    conditions: [
      {
        type: "Mirrored",
        status: "True",
        reason: "Mirrored",
        message: "",
        lastTransitionTime: at,
        localRef: { group: "core", kind: "Service", name: lname, namespace: ln },
      },
    ],
  };
}

describe("a Link's status (SPEC §15)", () => {
  const input = (mirrors: Record<string, EntryState>, federated: Record<string, EntryState> = {}) => ({
    mirrorServices: new Map(Object.entries(mirrors)),
    federatedServices: new Map(Object.entries(federated)),
  });

  it("leaves a converged status written by linkerd as it is, in any order", () => {
    const observed: LinkStatus = {
      mirrorServices: [linkerdEntry("shop/web", "shop/web-east"), linkerdEntry("shop/api", "shop/api-east")],
    };
    const out = desiredLinkStatus(
      input({ "shop/api": mirrored("shop/api-east"), "shop/web": mirrored("shop/web-east") }),
      observed,
      NOW,
    );
    assert.equal(out.changed, false);
  });

  it("writes one entry per remote Service with linkerd's shape, and removes stale ones", () => {
    const observed: LinkStatus = { mirrorServices: [linkerdEntry("shop/gone", "shop/gone-east")] };
    const out = desiredLinkStatus(input({ "shop/web": mirrored("shop/web-east") }), observed, NOW);
    assert.equal(out.changed, true);
    assert.deepEqual(out.patch.status, {
      mirrorServices: [
        {
          controllerName: "linkerd.io/service-mirror",
          remoteRef: { group: "core", kind: "Service", name: "web", namespace: "shop" },
          conditions: [
            {
              type: "Mirrored",
              status: "True",
              reason: "Mirrored",
              message: "",
              lastTransitionTime: statusTime(NOW),
              localRef: { group: "core", kind: "Service", name: "web-east", namespace: "shop" },
            },
          ],
        },
      ],
      federatedServices: null,
    });
  });

  it("keeps lastTransitionTime while the condition's status stays, and moves it when it changes", () => {
    const observed: LinkStatus = { mirrorServices: [linkerdEntry("shop/web", "shop/web-east")] };
    const error: EntryState = { known: true, mirrored: false, reason: "Error", message: "boom" };
    const failed = desiredLinkStatus(input({ "shop/web": error }), observed, NOW);
    const condition = (failed.patch.status["mirrorServices"] as { conditions: { lastTransitionTime: string }[] }[])[0]
      ?.conditions[0];
    assert.equal(condition?.lastTransitionTime, statusTime(NOW));
    const again = desiredLinkStatus(input({ "shop/web": mirrored("shop/web-east") }), observed, NOW);
    assert.equal(again.changed, false, "the same status keeps the observed time: nothing to write");
  });

  it("keeps the observed entry of a Service whose state is not known yet, and never invents one", () => {
    const observed: LinkStatus = { mirrorServices: [linkerdEntry("shop/web", "shop/web-east")] };
    assert.equal(desiredLinkStatus(input({ "shop/web": { known: false } }), observed, NOW).changed, false);
    assert.equal(desiredLinkStatus(input({ "shop/new": { known: false } }), {}, NOW).changed, false);
  });

  it("keeps entries of another controller untouched", () => {
    const foreign = { ...linkerdEntry("shop/x", "shop/x-east"), controllerName: "example.com/other" };
    const out = desiredLinkStatus(input({}), { mirrorServices: [foreign] }, NOW);
    assert.equal(out.changed, false);
  });

  it("reports the reasons linkerd uses", () => {
    const out = desiredLinkStatus(
      input(
        {
          "shop/a": { known: true, mirrored: false, reason: "MissingNamespace", message: "Namespace does not exist" },
          "shop/b": { known: true, mirrored: false, reason: "InvalidService", message: "remote Service has no ports" },
        },
        { "shop/c": mirrored("shop/c-federated") },
      ),
      {},
      NOW,
    );
    const reasons = (l: unknown) =>
      (l as { conditions: { reason: string; status: string }[] }[]).map(
        (e) => `${e.conditions[0]?.status}/${e.conditions[0]?.reason}`,
      );
    assert.deepEqual(reasons(out.patch.status["mirrorServices"]), ["False/MissingNamespace", "False/InvalidService"]);
    assert.deepEqual(reasons(out.patch.status["federatedServices"]), ["True/Mirrored"]);
  });
});
