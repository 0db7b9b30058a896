/**
 * Every pointer in the docs and code comments points at something that exists:
 * relative markdown links (and their #anchors), "DESIGN §n" / "SPEC §n" section numbers
 * and the section titles quoted beside them, and the repository paths the docs name.
 * Files move and sections get renumbered; a pointer left behind misleads quietly, so each
 * failure lists every broken pointer with its file and line (test/helpers/doc-references.ts
 * says which forms are read).
 */
import assert from "node:assert/strict";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import {
  brokenLink,
  brokenSectionRef,
  filesUnder,
  headingSlugs,
  linksIn,
  pathsIn,
  reader,
  type Sections,
  sectionRefsIn,
  sectionsOf,
} from "../helpers/doc-references.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const read = reader(ROOT);

/** The docs: README.md, docs/*.md, bench/*.md, sandbox/README.md, test/README.md. */
const DOCS = [
  "README.md",
  ...readdirSync(join(ROOT, "docs"))
    .filter((name) => name.endsWith(".md"))
    .map((name) => `docs/${name}`),
  ...readdirSync(join(ROOT, "bench"))
    .filter((name) => name.endsWith(".md"))
    .map((name) => `bench/${name}`),
  "sandbox/README.md",
  "test/README.md",
].sort();

/** The code whose comments may cite the docs. */
const CODE = ["src", "workers", "bench", "sandbox", "test", "scripts"].flatMap((dir) =>
  filesUnder(ROOT, dir, [".ts", ".sh"]),
);

const slugs = new Map<string, Set<string>>();
const slugsOf = (path: string): Set<string> => {
  let found = slugs.get(path);
  if (!found) {
    found = headingSlugs(read(path));
    slugs.set(path, found);
  }
  return found;
};
const sectionsOfDoc = (doc: string): Sections => sectionsOf(read(doc));

/** `found` as one failure message: each entry on its own line, `file:line: why`. */
const report = (what: string, found: readonly string[]): string => `${found.length} ${what}:\n${found.join("\n")}`;

describe("the docs' pointers", () => {
  it("reads every doc the house keeps", () => {
    for (const doc of ["README.md", "docs/DESIGN.md", "docs/SPEC.md", "bench/HISTORY.md", "sandbox/README.md"]) {
      assert.ok(DOCS.includes(doc) && existsSync(join(ROOT, doc)), doc);
    }
  });

  it("every relative link points at a file that exists, and an #anchor at a heading of it", () => {
    const broken = DOCS.flatMap((doc) =>
      linksIn(doc, read(doc)).flatMap((link) => {
        const why = brokenLink(ROOT, doc, link.text, slugsOf);
        return why === undefined ? [] : [`${doc}:${link.line}: ${why}`];
      }),
    );
    assert.deepEqual(broken, [], report("broken links", broken));
  });

  it("every DESIGN or SPEC § reference names a section, and a quoted title, that exists", () => {
    const broken = DOCS.flatMap((doc) =>
      sectionRefsIn(doc, read(doc)).flatMap((ref) => {
        const why = brokenSectionRef(ref, sectionsOfDoc);
        return why === undefined ? [] : [`${doc}:${ref.line}: ${why}`];
      }),
    );
    assert.deepEqual(broken, [], report("broken § references", broken));
  });

  it("every repository path the docs name exists (a moved file shows here)", () => {
    const missing = DOCS.flatMap((doc) =>
      pathsIn(doc, read(doc)).flatMap((path) =>
        existsSync(join(ROOT, path.text)) ? [] : [`${doc}:${path.line}: ${path.text}`],
      ),
    );
    assert.deepEqual(missing, [], report("paths that do not exist", missing));
  });
});

describe("the code comments' pointers", () => {
  it("every DESIGN or SPEC § reference names a section, and a quoted title, that exists", () => {
    const broken = CODE.flatMap((file) =>
      sectionRefsIn(file, read(file)).flatMap((ref) => {
        const why = brokenSectionRef(ref, sectionsOfDoc);
        return why === undefined ? [] : [`${file}:${ref.line}: ${why}`];
      }),
    );
    assert.deepEqual(broken, [], report("broken § references in code comments", broken));
  });
});
