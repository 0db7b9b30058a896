/**
 * No module of the controller imports node:http or node:https as an ES module value: the
 * ESM facade of a built-in reads every export, and node:http's include lazy getters that
 * load undici (fetch, WebSocket, HTTP/2), which `run` never uses; loading it cost every
 * start of the main thread ≈ 0.05–0.1 CPU-s. `process.getBuiltinModule` returns the
 * CommonJS module object and touches nothing (src/kube/transport.ts, src/admin/server.ts).
 * Type-only imports are erased and allowed.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** Every .ts file under `dir`, recursively. */
function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, encoding: "utf8" })
    .filter((file) => file.endsWith(".ts"))
    .map((file) => join(dir, file));
}

/** The import statements of `text` that bind a value of node:http or node:https. */
export function valueImportsOfHttp(text: string): string[] {
  const found: string[] = [];
  for (const m of text.matchAll(/^import\s+([^;]*?)\s+from\s+"node:https?";/gms)) {
    const clause = m[1] ?? "";
    if (clause.startsWith("type ")) continue;
    // `{ type A, type B }` binds no value either.
    const named = /^\{([^}]*)\}$/.exec(clause.trim())?.[1];
    if (named?.split(",").every((part) => part.trim() === "" || part.trim().startsWith("type "))) continue;
    found.push(m[0]);
  }
  return found;
}

describe("built-in imports of the controller", () => {
  it("a type-only import is allowed and a value import is found", () => {
    assert.deepEqual(valueImportsOfHttp(`import type * as Http from "node:http";`), []);
    assert.deepEqual(valueImportsOfHttp(`import { type IncomingMessage, type Server } from "node:http";`), []);
    assert.equal(valueImportsOfHttp(`import { createServer, type Server } from "node:http";`).length, 1);
    assert.equal(valueImportsOfHttp(`import * as https from "node:https";`).length, 1);
  });

  it("no module of src/ or workers/ imports node:http or node:https as a value (the ESM facade loads undici)", () => {
    const offenders = [...sources("src"), ...sources("workers")].flatMap((file) =>
      valueImportsOfHttp(readFileSync(join(ROOT, file), "utf8")).map((statement) => `${file}: ${statement}`),
    );
    assert.deepEqual(offenders, []);
  });
});
