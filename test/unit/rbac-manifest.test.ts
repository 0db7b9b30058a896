import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { describe, it } from "node:test";
import { rbacManifestCandidates, rbacManifestPath } from "../../src/kube/rbac-manifest.ts";

describe("where the RBAC manifests are found", () => {
  it("finds deploy/rbac from the sources of a checkout", () => {
    assert.ok(existsSync(rbacManifestPath("local")));
    assert.ok(existsSync(rbacManifestPath("remote")));
  });

  it("looks beside dist/ for a build, as in the image (/app/dist/src/kube → /app/deploy/rbac)", () => {
    const candidates = rbacManifestCandidates("remote", "file:///app/dist/src/kube/rbac-manifest.js");
    assert.deepEqual(candidates, ["/app/dist/deploy/rbac/remote.yaml", "/app/deploy/rbac/remote.yaml"]);
  });
});
