/**
 * The pure parts of `check` and `status` for fleet-wide Services (SPEC §11): which local
 * objects hold a fleet-wide name without being fleet-mirror's, and the fleet-wide rows.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { AdminStatus } from "../../src/admin/source.ts";
import { federatedNameConflicts } from "../../src/cli/check-rules.ts";
import { federatedRowsFromAdmin, federatedRowsFromObjects } from "../../src/cli/status-rows.ts";
import { formatFederatedTable } from "../../src/cli/status-table.ts";
import type { KubeObject, Service } from "../../src/core/objects.ts";
import { alwaysLeading } from "../../src/leader/leadership.ts";

const FLEET = { "mirror.linkerd.io/mirrored-service": "true", "mirror.linkerd.io/federated": "true" };
const OUR_SLICE = { ...FLEET, "endpointslice.kubernetes.io/managed-by": "fleet-mirror" };

const member = (name: string): Service => ({
  metadata: { namespace: "shop", name, labels: { "mirror.linkerd.io/federated": "member" } },
});
const object = (name: string, labels?: Record<string, string>): KubeObject => ({
  metadata: { namespace: "shop", name, ...(labels ? { labels } : {}) },
});

describe("check: fleet-wide names", () => {
  it("reports a user's Service and a user's slice of a member cluster, each once, naming the members that want it", () => {
    const results = federatedNameConflicts(
      [
        { cluster: "east", members: [member("search")] },
        { cluster: "west", members: [member("search")] },
      ],
      {
        services: [object("search-federated")],
        endpoints: [],
        slices: [object("search-federated-west-ipv4"), object("search-federated-north-ipv4")],
      },
    );
    assert.deepEqual(
      results.map((r) => [r.section, r.ok, r.message.replace(/ but .*/, "")]),
      [
        [
          "fleet-wide names",
          false,
          "service/shop/search-federated is needed for the fleet-wide Service shop/search-federated (member shop/search from east, shop/search from west)",
        ],
        [
          "fleet-wide names",
          false,
          "endpointslice/shop/search-federated-west-ipv4 is needed for the fleet-wide Service shop/search-federated (member shop/search from west)",
        ],
      ],
    );
    assert.match(results[0]?.message ?? "", /a user's object$/);
  });

  it("fleet-mirror's own fleet-wide objects are no conflict; a cluster's mirror under the name is", () => {
    const clusters = [{ cluster: "east", members: [member("search")] }];
    assert.deepEqual(
      federatedNameConflicts(clusters, {
        services: [object("search-federated", FLEET)],
        endpoints: [object("search-federated", FLEET)],
        slices: [object("search-federated-east-ipv4", { ...OUR_SLICE, "mirror.linkerd.io/cluster-name": "east" })],
      }),
      [],
    );
    const mirror = federatedNameConflicts(clusters, {
      services: [
        object("search-federated", {
          "mirror.linkerd.io/mirrored-service": "true",
          "mirror.linkerd.io/cluster-name": "federated",
        }),
      ],
      endpoints: [],
      // Fleet-wide labels without fleet-mirror's managed-by: the built-in mirroring controller's copy, not ours.
      slices: [object("search-federated-east-ipv4", FLEET)],
    });
    assert.equal(mirror.length, 2);
    assert.match(mirror[0]?.message ?? "", /is a mirror of cluster federated$/);
  });
});

describe("status: fleet-wide rows", () => {
  it("joins the writer's fleet-wide Services with the member clusters' problems under the same key", () => {
    const status = {
      leadership: alwaysLeading("test", 0),
      time: 0,
      writer: {
        federated: [{ key: "shop/cart-federated", clusters: ["east", "west"], kept: ["west"], ready: 1, notReady: 1 }],
      },
      clusters: [
        { cluster: "east", problems: [{ key: "shop/web-east", reason: "user-owned", message: "m1" }] },
        { cluster: "north", problems: [{ key: "shop/cart-federated", reason: "port-conflict", message: "m2" }] },
      ],
    } as unknown as AdminStatus;
    const rows = federatedRowsFromAdmin(status);
    assert.deepEqual(rows, [
      {
        service: "shop/cart-federated",
        clusters: ["east", "west"],
        kept: ["west"],
        ready: 1,
        notReady: 1,
        conflicts: ["north: port-conflict: m2"],
      },
    ]);
    assert.match(
      formatFederatedTable(rows),
      /^FLEET-WIDE SERVICE\s+MEMBERS\s+READY\s+NOT READY\s+CONFLICTS\nshop\/cart-federated\s+east, west \(kept\)\s+1\s+1\s+north: port-conflict: m2\n$/,
    );
    assert.equal(formatFederatedTable([]), "");
  });

  it("shows a fleet-wide Service's tiers, which serve and since when, in a TIERS column only when some Service has tiers (SPEC §14)", () => {
    const status = {
      time: 0,
      writer: {
        federated: [
          { key: "shop/cart-federated", clusters: ["east"], kept: [], ready: 1, notReady: 0 },
          {
            key: "shop/web-federated",
            clusters: ["east", "west"],
            kept: [],
            ready: 1,
            notReady: 1,
            tiers: [
              { priority: 10, ready: 0, serving: true },
              { priority: 20, ready: 1, serving: true },
              { priority: 30, ready: 2, serving: false },
            ],
            servingPriority: 20,
            servingSince: "2026-12-06T10:05:02.123Z",
          },
        ],
      },
      clusters: [],
    } as unknown as AdminStatus;
    const table = formatFederatedTable(federatedRowsFromAdmin(status));
    assert.match(table, /CONFLICTS\s+TIERS\n/);
    assert.match(table, /shop\/cart-federated\s+east\s+1\s+0\s+-\s+-\n/);
    assert.match(
      table,
      /shop\/web-federated .* 10 serving \(0 ready\), 20 serving \(1 ready\), 30 standby \(2 ready\) since 2026-12-06T10:05:02Z\n$/,
    );
  });

  it("from the objects: only fleet-wide Services, members by their annotation, the rest unknown", () => {
    const rows = federatedRowsFromObjects([
      {
        metadata: {
          namespace: "shop",
          name: "search-federated",
          labels: FLEET,
          annotations: { "mirror.linkerd.io/federated-clusters": "east,west" },
        },
      },
      { metadata: { namespace: "shop", name: "web-east", labels: { "mirror.linkerd.io/mirrored-service": "true" } } },
    ]);
    assert.deepEqual(rows, [{ service: "shop/search-federated", clusters: ["east", "west"] }]);
    assert.match(formatFederatedTable(rows), /\nshop\/search-federated\s+east, west\s+unknown\s+unknown\s+unknown\n$/);
  });
});
