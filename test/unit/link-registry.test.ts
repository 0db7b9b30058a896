import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { computeLinkRegistry, type LinkRegistry } from "../../src/supervisor/link-registry.ts";
import { linkReports, NOTHING_REPORTED_OF_LINKS } from "../../src/supervisor/link-reports.ts";
import { linkRows } from "../../src/supervisor/link-rows.ts";
import { type StoredCredentials, type StoredLink, storedLink } from "../../src/supervisor/link-stored.ts";
import type { ParsedSecret } from "../../src/supervisor/registration.ts";
import { computeRegistry, type SecretEntry, withLinks } from "../../src/supervisor/registry.ts";

const NS = "linkerd-multicluster";

function link(
  name: string,
  cluster: string,
  extra: Record<string, unknown> = {},
  at = "2026-01-01T00:00:00Z",
): StoredLink {
  return storedLink(
    {
      metadata: { name, namespace: NS, uid: `uid-${name}`, resourceVersion: "1", creationTimestamp: at },
      spec: {
        targetClusterName: cluster,
        targetClusterDomain: "cluster.local",
        clusterCredentialsSecret: `cluster-credentials-${cluster}`,
        selector: { matchLabels: { "mirror.linkerd.io/exported": "true" } },
        ...extra,
      },
    } as never,
    undefined,
  );
}

const creds = (server: string): StoredCredentials => ({
  metadata: { name: "x" },
  parsed: { kind: "valid", connection: { server, auth: { kind: "token", token: "t" } } },
});

function registry(
  links: StoredLink[],
  secrets: Record<string, StoredCredentials>,
  before?: LinkRegistry,
): LinkRegistry {
  return computeLinkRegistry(links, (key) => secrets[key], before?.remembered ?? new Map(), new Map());
}

describe("Link registry (SPEC §15)", () => {
  it("registers each Link's cluster with the credentials of the Secret it names", () => {
    const r = registry([link("east", "east")], { [`${NS}/cluster-credentials-east`]: creds("https://east") });
    const east = r.registered.get("east");
    assert.equal(east?.connection.server, "https://east");
    assert.equal(east?.secretKey, `Link ${NS}/east`);
    assert.deepEqual(east?.defaultGateway, { namespace: "(link)", name: "east" });
    assert.ok(east?.link);
    assert.deepEqual(r.keep, ["east"]);
    assert.ok(r.claimedSecrets.has(`${NS}/cluster-credentials-east`));
  });

  it("registers nothing for a Link whose Secret is missing or invalid, and keeps its cluster's mirrors", () => {
    const missing = registry([link("east", "east")], {});
    assert.equal(missing.registered.size, 0);
    assert.deepEqual(
      missing.invalid.map((i) => i.reason),
      ["credentials-missing"],
    );
    assert.deepEqual(missing.keep, ["east"]);
    const invalid = registry([link("east", "east")], {
      [`${NS}/cluster-credentials-east`]: {
        metadata: { name: "x" },
        parsed: { kind: "invalid", reason: "exec-not-allowed", message: "exec is refused" },
      },
    });
    assert.deepEqual(
      invalid.invalid.map((i) => i.reason),
      ["credentials-invalid"],
    );
  });

  it("keeps the credentials a Link had when its Secret goes, until the Link changes", () => {
    const secrets = { [`${NS}/cluster-credentials-east`]: creds("https://east") };
    const first = registry([link("east", "east")], secrets);
    const gone = registry([link("east", "east")], {}, first);
    assert.equal(gone.registered.get("east")?.connection.server, "https://east");
    assert.equal(gone.credentialsKept.length, 1);
    const changed = registry([link("east", "east", { targetClusterDomain: "east.local" })], {}, gone);
    assert.equal(changed.registered.size, 0, "a changed Link without credentials registers nothing");
    assert.deepEqual(changed.keep, ["east"]);
  });

  it("lets the first of two Links naming one cluster keep it", () => {
    const secrets = { [`${NS}/cluster-credentials-east`]: creds("https://east") };
    const r = registry(
      [link("b", "east", {}, "2026-01-02T00:00:00Z"), link("a", "east", {}, "2026-01-03T00:00:00Z")],
      secrets,
    );
    assert.equal(r.registered.get("east")?.secretKey, `Link ${NS}/b`);
    assert.deepEqual(r.duplicates, [{ secretKey: `Link ${NS}/a`, cluster: "east", winner: `Link ${NS}/b` }]);
  });

  it("wins over an annotated Secret naming the same cluster, which is reported as a duplicate", () => {
    const links = registry([link("east", "east")], { [`${NS}/cluster-credentials-east`]: creds("https://east") });
    const annotated: SecretEntry = {
      secret: { metadata: { name: "old-east", namespace: "fleet-mirror", uid: "s1" } },
      parsed: {
        kind: "valid",
        registration: {
          cluster: "east",
          domain: "cluster.local",
          connection: { server: "https://old", auth: { kind: "anonymous" } },
          defaultGateway: { name: "linkerd-gateway", namespace: "linkerd-multicluster" },
          priority: 100,
          fingerprint: "f",
        },
      } satisfies ParsedSecret,
    };
    const linkCredentials: SecretEntry = {
      secret: { metadata: { name: "cluster-credentials-east", namespace: NS, uid: "s2" } },
      parsed: { kind: "invalid", cluster: undefined, reason: "missing-cluster-name", message: "no annotation" },
    };
    const secrets = computeRegistry([annotated, linkCredentials], new Map(), {
      clusters: links.claimed,
      secrets: links.claimedSecrets,
    });
    assert.equal(secrets.registered.size, 0);
    assert.deepEqual(secrets.invalid, [], "a Link's Secret is never a registration of its own");
    assert.deepEqual(secrets.duplicates, [
      { secretKey: "fleet-mirror/old-east", cluster: "east", winner: `Link ${NS}/east` },
    ]);
    const merged = withLinks(secrets, links);
    assert.equal(merged.registered.get("east")?.connection.server, "https://east");
    assert.deepEqual(merged.order, ["east"]);
  });

  it("reports a change of state once: registered, invalid, credentials kept", () => {
    const secrets = { [`${NS}/cluster-credentials-east`]: creds("https://east") };
    const r1 = registry([link("east", "east")], secrets);
    const uids = new Set(["uid-east"]);
    const first = linkReports(NOTHING_REPORTED_OF_LINKS, r1, uids);
    assert.deepEqual(
      first.reports.map((r) => r.reason),
      ["ClusterRegistered"],
    );
    assert.deepEqual(linkReports(first.reported, r1, uids).reports, [], "nothing new, nothing reported");
    const r2 = registry([link("east", "east")], {}, r1);
    assert.deepEqual(
      linkReports(first.reported, r2, uids).reports.map((r) => r.reason),
      ["CredentialsKept"],
    );
  });
});

describe("Link rows of /status and `status` (SPEC §15)", () => {
  it("gives every Link one row: registered, or InvalidLink, InvalidCredentials, DuplicateCluster, CredentialsKept with why", () => {
    const secrets = {
      [`${NS}/cluster-credentials-east`]: creds("https://east"),
      [`${NS}/cluster-credentials-west`]: creds("https://west"),
    };
    const links = [
      link("east", "east"),
      link("east-again", "east", {}, "2026-02-01T00:00:00Z"),
      link("north", "north"),
      link("bad", "Not_A_Label"),
      link("west", "west"),
    ];
    const first = registry(links, secrets);
    const { [`${NS}/cluster-credentials-west`]: _west, ...withoutWest } = secrets;
    const now = registry(links, withoutWest, first);
    const rows = linkRows(links, now);
    assert.deepEqual(
      rows.map((r) => [r.link, r.cluster ?? "-", r.secret ?? "-", r.state, r.reason ?? "-"]),
      [
        [`${NS}/bad`, "-", "-", "InvalidLink", "invalid-cluster-name"],
        [`${NS}/east`, "east", `${NS}/cluster-credentials-east`, "registered", "-"],
        [`${NS}/east-again`, "east", `${NS}/cluster-credentials-east`, "DuplicateCluster", "-"],
        [`${NS}/north`, "north", `${NS}/cluster-credentials-north`, "InvalidCredentials", "credentials-missing"],
        [`${NS}/west`, "west", `${NS}/cluster-credentials-west`, "CredentialsKept", "-"],
      ],
    );
    assert.match(rows[2]?.message ?? "", /already registered by Link linkerd-multicluster\/east/);
  });
});
