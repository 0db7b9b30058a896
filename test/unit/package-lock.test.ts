/**
 * package-lock.json agrees with package.json: `npm install` on a fresh clone must leave
 * the tree clean. npm copies the root package's name, version, license, bin, engines and
 * dependency ranges into the lockfile's root entry; `npm ci` checks the dependency
 * ranges only, so a field like `bin` edited in package.json alone went unnoticed until
 * an install rewrote the lockfile.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";

const read = (file: string): Record<string, unknown> =>
  JSON.parse(readFileSync(new URL(`../../${file}`, import.meta.url), "utf8")) as Record<string, unknown>;

/** The fields of package.json npm mirrors into the lockfile's root entry. */
const MIRRORED = ["name", "version", "license", "bin", "engines", "dependencies", "devDependencies"] as const;

describe("package-lock.json", () => {
  it("holds package.json's root fields as npm would write them (no rewrite on npm install)", () => {
    const pkg = read("package.json");
    const lock = read("package-lock.json");
    const packages = lock["packages"] as Record<string, Record<string, unknown>> | undefined;
    const root = packages?.[""];
    assert.ok(root, "package-lock.json has no root package entry");
    for (const field of MIRRORED)
      assert.deepEqual(
        root[field],
        pkg[field],
        `package-lock.json's root ${field} differs from package.json's: run npm install and commit the lockfile`,
      );
    assert.equal(lock["name"], pkg["name"]);
    assert.equal(lock["version"], pkg["version"]);
  });
});
