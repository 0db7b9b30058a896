import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import type { AdminStatus } from "../../src/admin/source.ts";
import {
  type CheckResult,
  credentialChecks,
  formatChecks,
  nameConflicts,
  permissionNeeds,
  unknownClusterMirrors,
} from "../../src/cli/check-rules.ts";
import {
  credentialsNamespace,
  durationFlag,
  formatAge,
  formatData,
  formatTable,
  outputFormat,
  parseCommandLine,
  UsageError,
} from "../../src/cli/common.ts";
import { remoteIdentity } from "../../src/cli/link-identity.ts";
import { credentialsSecret, remoteKubeconfigText } from "../../src/cli/link-secret.ts";
import { rowsFromAdmin, rowsFromObjects } from "../../src/cli/status-rows.ts";
import { exportsCell, formatStatusTable, stateCell } from "../../src/cli/status-table.ts";
import { CLUSTER_NAME, GATEWAY_NAME, GATEWAY_NS, MIRRORED_SERVICE } from "../../src/core/labels.ts";
import type { KubeObject, Secret, Service } from "../../src/core/objects.ts";
import { rbacManifestPath } from "../../src/kube/rbac-manifest.ts";
import { parseCredentialsSecret } from "../../src/supervisor/registration.ts";

const FAKE_CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
const NOW = Date.parse("2026-01-01T12:00:00Z");

function validSecret(name: string, cluster: string, created: string): Secret {
  const secret = credentialsSecret({
    secretName: name,
    namespace: "fleet-mirror",
    cluster,
    domain: "cluster.local",
    kubeconfig: remoteKubeconfigText(
      cluster,
      { server: "https://198.18.0.1:6443", caPem: FAKE_CA, auth: { kind: "anonymous" } },
      "tok",
    ),
  });
  return { ...secret, metadata: { ...secret.metadata, uid: name, creationTimestamp: created } };
}

const mirror = (namespace: string, name: string, cluster: string): KubeObject => ({
  metadata: { namespace, name, labels: { [MIRRORED_SERVICE]: "true", [CLUSTER_NAME]: cluster } },
});

describe("CLI output", () => {
  it("formats tables like kubectl: uppercase headers, aligned columns, no trailing blanks", () => {
    assert.equal(
      formatTable(
        ["cluster", "state", "last sync"],
        [
          ["east", "synced", "5s ago"],
          ["a-long-name", "stale since 3m", ""],
        ],
      ),
      "CLUSTER       STATE            LAST SYNC\neast          synced           5s ago\na-long-name   stale since 3m\n",
    );
  });

  it("formats ages as kubectl does", () => {
    assert.deepEqual([0, 59_000, 119_000, 120_000, 7_199_000, 7_200_000, 172_800_000].map(formatAge), [
      "0s",
      "59s",
      "119s",
      "2m",
      "119m",
      "2h",
      "2d",
    ]);
  });

  it("emits JSON and YAML that read back to the same data", () => {
    const data = {
      source: "controller",
      clusters: [{ cluster: "east", mirrors: 2, since: "2026-01-01T00:00:00.000Z" }],
    };
    assert.deepEqual(JSON.parse(formatData(data, "json")), data);
    assert.equal(
      formatData(data, "yaml"),
      "source: controller\nclusters:\n  - cluster: east\n    mirrors: 2\n    since: '2026-01-01T00:00:00.000Z'\n",
    );
  });

  it("accepts -o table|json|yaml and refuses anything else as a usage error", () => {
    assert.equal(outputFormat({}), "table");
    assert.equal(outputFormat({ output: "json" }), "json");
    assert.equal(outputFormat({ output: "yaml" }), "yaml");
    assert.throws(() => outputFormat({ output: "xml" }), UsageError);
  });

  it("turns unknown flags and extra arguments into usage errors, and --help into help", () => {
    const flags = { wait: { type: "boolean", description: "" } } as const;
    assert.equal(parseCommandLine(["-h"], flags), "help");
    assert.throws(() => parseCommandLine(["--nope"], flags), UsageError);
    assert.throws(() => parseCommandLine(["extra"], flags), UsageError);
    assert.deepEqual(parseCommandLine(["svc", "--wait"], flags, 1), { values: { wait: true }, positionals: ["svc"] });
  });

  it("refuses a zero or malformed timeout as a usage error naming the flag and the value", () => {
    assert.equal(durationFlag({}, "timeout", "60s"), 60_000);
    assert.equal(durationFlag({ timeout: "250ms" }, "timeout", "60s"), 250);
    for (const bad of ["0", "0s", "soon", "-1s"])
      assert.throws(
        () => durationFlag({ timeout: bad }, "timeout", "60s"),
        (error: unknown) => {
          assert.ok(error instanceof UsageError);
          assert.ok(
            error.message.startsWith("--timeout: ") && error.message.includes(JSON.stringify(bad)),
            error.message,
          );
          return true;
        },
      );
  });

  it("uses run's default namespace for the credentials Secrets unless -n is given", () => {
    assert.equal(credentialsNamespace({}, { POD_NAMESPACE: "ops" }), "ops");
    assert.equal(credentialsNamespace({ namespace: "x" }, { POD_NAMESPACE: "ops" }), "x");
  });
});

describe("link", () => {
  it("prints a Secret that the controller's parser accepts", () => {
    const parsed = parseCredentialsSecret(validSecret("cluster-credentials-east", "east", "t"), {
      allowFilePaths: false,
    });
    assert.equal(parsed.kind, "valid");
    if (parsed.kind === "valid") {
      assert.equal(parsed.registration.cluster, "east");
      assert.deepEqual(parsed.registration.connection.auth, { kind: "token", token: "tok" });
      assert.equal(parsed.registration.connection.caPem, FAKE_CA);
    }
  });

  it("takes the remote identity from deploy/rbac/remote.yaml; another ServiceAccount gets a binding of its own", () => {
    const id = remoteIdentity(undefined);
    assert.equal(id.namespace, "fleet-mirror-remote");
    assert.equal(id.serviceAccount, "fleet-mirror-reader");
    assert.equal(id.clusterRole.metadata?.name, "fleet-mirror-remote-reader");
    assert.equal(id.bindingName, "fleet-mirror-remote-reader");
    assert.equal(remoteIdentity("other").bindingName, "fleet-mirror-remote-reader-other");
  });
});

describe("status rows", () => {
  const admin: AdminStatus = {
    leadership: { enabled: false, leading: true, identity: "me" },
    time: NOW,
    secretsListed: true,
    writer: undefined,
    writerRestarts: 0,
    clusters: [
      {
        cluster: "east",
        secret: "fleet-mirror/cluster-credentials-east",
        state: "synced",
        since: NOW - 60_000,
        mirrors: 3,
        exportedServices: 3,
        exports: { annotation: 2, label: 1, declined: 1 },
        lastSyncedAt: NOW - 5_000,
        restarts: 1,
        gateways: [{ key: "gw/gateway", usable: true }],
        problems: [],
      },
      {
        cluster: "west",
        secret: "fleet-mirror/cluster-credentials-west",
        state: "stale",
        since: NOW - 180_000,
        reason: "connect ECONNREFUSED",
        mirrors: 2,
        exportedServices: 2,
        restarts: 0,
        gateways: [{ key: "gw/gateway", usable: false, reason: "gateway has no ingress yet" }],
        problems: [{ key: "shop/web-west", reason: "user-owned", message: "held by a user's Service" }],
        deniedReads: [{ resource: "discovery.k8s.io/endpointslices", message: "reading it is forbidden" }],
      },
    ],
  };

  it("builds rows from the controller's status, and prints states, ages and gateways", () => {
    const rows = rowsFromAdmin(admin);
    assert.deepEqual(rows[1]?.problems, [
      "discovery.k8s.io/endpointslices: read-denied: reading it is forbidden",
      "shop/web-west: user-owned: held by a user's Service",
    ]);
    assert.equal(
      stateCell(rows[1] ?? { cluster: "", secret: "", state: "", mirrors: 0 }, NOW),
      "stale since 3m: connect ECONNREFUSED",
    );
    assert.equal(
      formatStatusTable({ source: "controller", clusters: rows, federated: [] }, NOW),
      [
        "CLUSTER   STATE                                  MIRRORS   EXPORTS                              LAST SYNC   RESTARTS   GATEWAY                                           HEALTH",
        "east      synced                                 3         2 annotation, 1 label (1 declined)   5s ago      1          usable                                            -",
        "west      stale since 3m: connect ECONNREFUSED   2         2                                    never       0          gw/gateway unusable: gateway has no ingress yet   -",
        "",
      ].join("\n"),
    );
  });

  it("shows MCS exports in the EXPORTS cell, and why MCS export is off in a cluster (SPEC §12)", () => {
    const [east] = admin.clusters ?? [];
    assert.ok(east);
    const row = (mcs: { state: "active" | "forbidden" | "not-installed"; message?: string }, count: number) =>
      rowsFromAdmin({
        ...admin,
        clusters: [{ ...east, exports: { annotation: 1, label: 0, declined: 0, mcs: count }, mcs }],
      })[0] ?? { cluster: "", secret: "", state: "", mirrors: 0 };
    assert.equal(exportsCell(row({ state: "active" }, 2)), "1 annotation, 2 mcs");
    assert.equal(
      exportsCell(row({ state: "not-installed", message: "no CRDs" }, 0)),
      "1 annotation (mcs: not installed)",
    );
    const forbidden = row({ state: "forbidden", message: "403" }, 0);
    assert.equal(exportsCell(forbidden), "1 annotation (mcs: forbidden)");
    assert.deepEqual(forbidden.mcs, { state: "forbidden", message: "403" });
  });

  it("builds rows from cluster objects: registered, duplicate, invalid, and mirrors of unknown clusters", () => {
    const invalid: Secret = {
      metadata: { name: "bad", namespace: "fleet-mirror", annotations: { [CLUSTER_NAME]: "bad" } },
      type: "mirror.linkerd.io/remote-kubeconfig",
    } as Secret;
    const rows = rowsFromObjects(
      [validSecret("a", "east", "2026-01-01T00:00:00Z"), validSecret("b", "east", "2026-01-02T00:00:00Z"), invalid],
      [mirror("shop", "web-east", "east"), mirror("shop", "web-ghost", "ghost")] as Service[],
      { allowFilePaths: false },
    );
    assert.deepEqual(
      rows.map((r) => [r.cluster, r.secret, r.state, r.mirrors]),
      [
        ["bad", "fleet-mirror/bad", "invalid", 0],
        ["east", "fleet-mirror/a", "registered", 1],
        ["east", "fleet-mirror/b", "duplicate", 0],
        ["ghost", "", "unknown-cluster", 1],
      ],
    );
    const table = formatStatusTable(
      { source: "cluster-objects", note: "ECONNREFUSED", clusters: rows, federated: [] },
      NOW,
    );
    assert.match(table, /^controller not reachable; from cluster objects \(ECONNREFUSED\)\nCLUSTER/);
    assert.match(table, /\neast\s+registered\s+1\s+unknown\s+unknown\s+unknown\s+unknown\s+unknown\n/);
  });
});

describe("check", () => {
  it("fails on a registered cluster's invalid priority annotation, naming the Secret and the default used (SPEC §14)", () => {
    const reg = {
      cluster: "east",
      domain: "cluster.local",
      connection: { server: "https://east.test:6443", auth: { kind: "token" as const, token: "t" } },
      defaultGateway: { name: "linkerd-gateway", namespace: "linkerd-multicluster" },
      priority: 100,
      priorityProblem: 'annotation mirror.linkerd.io/priority "high" is not a whole number from 0 to 1000',
      fingerprint: "f",
      secretKey: "fleet-mirror/east",
      secretUid: "u",
    };
    const results = credentialChecks({
      registered: new Map([["east", reg]]),
      duplicates: [],
      invalid: [],
      keep: ["east"],
      order: ["east"],
      registeredAt: {},
      priorities: { east: 100 },
    });
    assert.deepEqual(
      results.map((r) => [r.ok, r.message]),
      [
        [true, "secret fleet-mirror/east registers cluster east (cluster.local)"],
        [false, `secret fleet-mirror/east: ${reg.priorityProblem}`],
      ],
    );
  });

  it("derives the permissions to review from deploy/rbac/local.yaml: cluster-wide and in the credentials namespace", () => {
    const needs = permissionNeeds(readFileSync(rbacManifestPath("local"), "utf8"), "ops");
    assert.ok(needs.some((n) => n.resource === "endpoints" && n.verb === "delete" && n.namespace === undefined));
    assert.ok(needs.some((n) => n.resource === "secrets" && n.verb === "watch" && n.namespace === "ops"));
    assert.ok(
      !needs.some((n) => n.resource === "secrets" && n.namespace === undefined),
      "no cluster-wide Secret access",
    );
  });

  it("reviews the Lease by name where the manifest names it, and no patch anywhere (nothing is patched)", () => {
    const needs = permissionNeeds(readFileSync(rbacManifestPath("local"), "utf8"), "ops");
    const leases = needs.filter((n) => n.resource === "leases");
    assert.deepEqual(leases.map((n) => `${n.verb} ${n.name ?? "*"} ${n.namespace}`).sort(), [
      "create * ops",
      "get fleet-mirror ops",
      "list * ops",
      "update fleet-mirror ops",
    ]);
    assert.deepEqual(
      needs.filter((n) => n.verb === "patch"),
      [],
    );
  });

  it("finds local objects holding a mirror's name that the cluster does not own", () => {
    const exported: Service = {
      metadata: { namespace: "shop", name: "web", annotations: { [GATEWAY_NAME]: "gw", [GATEWAY_NS]: "gw" } },
    };
    const results = nameConflicts([{ cluster: "east", exported: [exported] }], {
      services: [{ metadata: { namespace: "shop", name: "web-east" } }],
      endpoints: [mirror("shop", "web-east", "west")],
      slices: [],
    });
    assert.deepEqual(
      results.map((r) => r.message.replace(/ but .*/, "")),
      [
        "service/shop/web-east is needed for the mirror of shop/web from east",
        "endpoints/shop/web-east is needed for the mirror of shop/web from east",
      ],
    );
    assert.match(results[1]?.message ?? "", /is a mirror of cluster west/);
    assert.deepEqual(
      nameConflicts([{ cluster: "east", exported: [exported] }], {
        services: [mirror("shop", "web-east", "east")],
        endpoints: [],
        slices: [],
      }),
      [],
    );
  });

  it("finds a slice under a mirror's slice name that is not that cluster's, and orphaned slices (SPEC §9)", () => {
    const exported: Service = {
      metadata: { namespace: "shop", name: "web", annotations: { [GATEWAY_NAME]: "gw", [GATEWAY_NS]: "gw" } },
    };
    const ourSlice = (name: string, cluster: string): KubeObject => {
      const base = mirror("shop", name, cluster);
      return {
        metadata: {
          ...base.metadata,
          labels: { ...base.metadata.labels, "endpointslice.kubernetes.io/managed-by": "fleet-mirror" },
        },
      };
    };
    const conflicts = nameConflicts([{ cluster: "east", exported: [exported] }], {
      services: [],
      endpoints: [],
      // The mirror labels alone (as the built-in mirroring controller copies them) do not make a slice ours.
      slices: [mirror("shop", "web-east-ipv4", "east"), ourSlice("web-east-ipv6", "east")],
    });
    assert.deepEqual(
      conflicts.map((r) => r.message.replace(/ but .*/, "")),
      ["endpointslice/shop/web-east-ipv4 is needed for the mirror of shop/web from east"],
    );
    const orphans = unknownClusterMirrors(new Set(["east"]), {
      services: [],
      endpoints: [],
      slices: [ourSlice("web-ghost-ipv4", "ghost"), mirror("shop", "web-other-abcde", "other")],
    });
    assert.equal(orphans.length, 1);
    assert.match(
      orphans[0]?.message ?? "",
      /^1 mirror object\(s\) of unknown cluster ghost .*: endpointslice\/shop\/web-ghost-ipv4$/,
    );
  });

  it("finds mirrors of clusters that no Secret names", () => {
    const results = unknownClusterMirrors(new Set(["east"]), {
      services: [mirror("shop", "web-east", "east"), mirror("shop", "web-ghost", "ghost")],
      endpoints: [mirror("shop", "web-ghost", "ghost")],
      slices: [],
    });
    assert.equal(results.length, 1);
    assert.match(results[0]?.message ?? "", /^2 mirror object\(s\) of unknown cluster ghost/);
  });

  it("prints ✓/✗ lines by section and a verdict", () => {
    const results: CheckResult[] = [
      { section: "local cluster", ok: true, message: "reachable" },
      { section: "orphans", ok: false, message: "ghost" },
    ];
    assert.equal(
      formatChecks(results),
      "local cluster\n-------------\n✓ reachable\n\norphans\n-------\n✗ ghost\n\nStatus check results are ✗ (1 of 2 checks failed)\n",
    );
  });
});
