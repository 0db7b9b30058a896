/**
 * What the docs and the code comments point at, read from their text (pure but for
 * reading files): relative markdown links and their anchors, "DESIGN §n" / "SPEC §n"
 * references with the section title they may quote, and repository file paths. Used by
 * test/unit/docs-references.test.ts, which checks that each points at something that
 * exists; every finding carries its file and line, so a failure names what to fix.
 *
 * Conventions it reads (those the docs follow):
 * - a top-level section is a heading `## N. Title`; a reference `DESIGN §N` (also
 *   `DESIGN.md §N`, `docs/DESIGN.md §N`, `SPEC …`) names one, and `§N, §M`, `§N and §M`,
 *   `§N–§M` after it name more of the same document;
 * - a bare `§N` inside docs/DESIGN.md or docs/SPEC.md names a section of that file (in
 *   other files a bare § is left alone: it usually means the SPEC, and is not checked);
 * - a quoted title right after the number (`§5, "Sharding across replicas"`,
 *   `§8 ("Cheaper threads")`, `§8, 'The twelfth round'`) must begin a heading or a bold
 *   lead-in (`**Title …**`) inside that section; a quote that starts in lower case
 *   quotes the section's text, not its title, and is not checked;
 * - anchors are GitHub's heading slugs.
 * Fenced code blocks are skipped in markdown; in code, only comment text is read.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

/** A piece of a file's text with the line it starts on (1-based). */
export interface Found {
  readonly file: string;
  readonly line: number;
  readonly text: string;
}

/** A `§` reference: the document it names (repository path), its section numbers, the quoted title. */
export interface SectionRef extends Found {
  readonly doc: string;
  readonly sections: readonly number[];
  readonly title: string | undefined;
}

/** A document's sections: number → its own title and the headings and bold lead-ins inside it. */
export type Sections = ReadonlyMap<number, { readonly title: string; readonly inner: readonly string[] }>;

const DOC_OF: Readonly<Record<string, string>> = { DESIGN: "docs/DESIGN.md", SPEC: "docs/SPEC.md" };

/** Markdown text without its fenced code blocks (each line kept, emptied, so line numbers hold). */
export function withoutFences(text: string): string[] {
  let fenced = false;
  return text.split("\n").map((line) => {
    if (/^\s*(```|~~~)/.test(line)) {
      fenced = !fenced;
      return "";
    }
    return fenced ? "" : line;
  });
}

/** A line with its inline code spans blanked (same length), so links quoted as code are not links. */
function withoutInlineCode(line: string): string {
  return line.replace(/`[^`]*`/g, (span) => " ".repeat(span.length));
}

/** Heading or bold text as a reader sees it: no backticks, emphasis or link syntax. */
function plain(text: string): string {
  return text
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/[`*_]/g, "")
    .replace(/\s+/g, " ")
    .trim();
}

/** GitHub's anchor for a heading (duplicates get `-1`, `-2`, … in `headingSlugs`). */
export function slugOf(heading: string): string {
  return plain(heading)
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

/** Every anchor a markdown file offers. */
export function headingSlugs(text: string): Set<string> {
  const slugs = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of withoutFences(text)) {
    const heading = /^#{1,6}\s+(.+?)\s*#*\s*$/.exec(line);
    if (!heading?.[1]) continue;
    const slug = slugOf(heading[1]);
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    slugs.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return slugs;
}

/** The numbered top-level sections of a document (`## N. Title`), with what each holds. */
export function sectionsOf(text: string): Sections {
  const sections = new Map<number, { title: string; inner: string[] }>();
  let current: { title: string; inner: string[] } | undefined;
  for (const line of withoutFences(text)) {
    const top = /^##\s+(\d+)\.\s+(.+)$/.exec(line);
    if (top?.[1] && top[2]) {
      current = { title: plain(top[2]), inner: [] };
      sections.set(Number(top[1]), current);
      continue;
    }
    if (/^##\s/.test(line)) current = undefined;
    if (!current) continue;
    const heading = /^#{3,6}\s+(.+)$/.exec(line);
    if (heading?.[1]) current.inner.push(plain(heading[1]));
    const bold = /^\s*(?:[-*]\s+|\d+\.\s+)?\*\*(.+?)\*\*/.exec(line);
    if (bold?.[1]) current.inner.push(plain(bold[1]));
  }
  return sections;
}

/** Whether `title` (as quoted) is the start of section `n`'s title, or of a heading or bold lead-in in it. */
export function titleIn(sections: Sections, n: number, title: string): boolean {
  const section = sections.get(n);
  if (!section) return false;
  const wanted = plain(title).toLowerCase();
  return [section.title, ...section.inner].some((text) => text.toLowerCase().startsWith(wanted));
}

/** Relative markdown links (`[text](target)`, images too) outside code; web and mail links are left out. */
export function linksIn(file: string, text: string): Found[] {
  const links: Found[] = [];
  withoutFences(text).forEach((line, i) => {
    for (const match of withoutInlineCode(line).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = match[1] ?? "";
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
      links.push({ file, line: i + 1, text: target });
    }
  });
  return links;
}

/** Why a link from `file` (repository-relative) to `target` is broken, or undefined. */
export function brokenLink(
  root: string,
  file: string,
  target: string,
  slugsOf: (path: string) => Set<string>,
): string | undefined {
  const [pathPart = "", anchor] = target.split("#", 2);
  const path = pathPart === "" ? file : relative(root, resolve(root, dirname(file), decodeURI(pathPart)));
  if (path.startsWith("..")) return `${target} leaves the repository`;
  if (!existsSync(join(root, path))) return `${target}: no ${path}`;
  if (anchor === undefined || anchor === "" || !path.endsWith(".md")) return undefined;
  return slugsOf(path).has(anchor.toLowerCase()) ? undefined : `${target}: no heading #${anchor} in ${path}`;
}

const PATH = String.raw`(?:src|workers|bench|test|sandbox|scripts|deploy|charts|docs|\.ci)\/[\w./*<>\${}…-]*`;

/**
 * Paths under the repository's top-level folders that a doc names: a code span that is
 * a path or starts with one (`src/kube/watcher.ts`, `bench/charts.ts [dir]`), and paths
 * in the prose. Other code spans are commands, whose arguments may be outputs or
 * Kubernetes names (`kubectl scale deploy/fleet-mirror`); globs and placeholders are
 * left out.
 */
export function pathsIn(file: string, text: string): Found[] {
  const paths: Found[] = [];
  const add = (line: number, raw: string): void => {
    const path = raw.replace(/[.]+$/, "");
    if (!/[*<>${}…]/.test(path)) paths.push({ file, line, text: path });
  };
  withoutFences(text).forEach((line, i) => {
    for (const span of line.matchAll(/`([^`]*)`/g)) {
      const lead = new RegExp(`^(${PATH})(?:[\\s:#]|$)`).exec(span[1] ?? "");
      if (lead?.[1]) add(i + 1, lead[1]);
    }
    for (const match of withoutInlineCode(line).matchAll(new RegExp(`(?<![\\w./~-])(${PATH})`, "g"))) {
      add(i + 1, match[1] ?? "");
    }
  });
  return paths;
}

/**
 * Text to search for references, as one string, with the line each character came from:
 * markdown outside fences, or the comment text of a source file. Lines are joined with a
 * space, so a reference or a quoted title wrapped over two lines is still found.
 */
export function searchable(file: string, text: string): { joined: string; lineAt: (offset: number) => number } {
  const lines = file.endsWith(".md") ? withoutFences(text) : text.split("\n").map(commentText);
  const starts: number[] = [];
  let joined = "";
  for (const line of lines) {
    starts.push(joined.length);
    joined += `${line} `;
  }
  const lineAt = (offset: number): number => {
    let lo = 0;
    let hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if ((starts[mid] ?? 0) <= offset) lo = mid;
      else hi = mid - 1;
    }
    return lo + 1;
  };
  return { joined, lineAt };
}

/** The comment text of one source line (`//`, `/* … *\/`, ` * …`, `#` in shell), else "". */
function commentText(line: string): string {
  const block = /^\s*(?:\/\*\*?|\*(?!\/))\s?(.*?)(?:\*\/)?$/.exec(line);
  if (block) return block[1] ?? "";
  const slashes = /(?:^|\s)\/\/\s?(.*)$/.exec(line);
  if (slashes) return slashes[1] ?? "";
  const hash = /^\s*#\s?(.*)$/.exec(line);
  return hash ? (hash[1] ?? "") : "";
}

const NUMBERS = String.raw`§\s*\d+(?:\s*(?:,|and|or|–|-|to)\s*§\s*\d+)*`;
// A quoted title follows the number after a space, a comma, a colon or "(": "§8 'The …'", not "§3's".
const TITLE = String.raw`(?:(?:\s*[,:(]\s*|\s+)\(?(?:"(?<dq>[^"]{1,120})"|“(?<cq>[^”]{1,120})”|'(?<sq>(?:[^']|'(?=[a-z])){1,120})'(?![a-z])))?`;

/** `§` references in a file: prefixed ones anywhere, bare ones inside DESIGN.md and SPEC.md. */
export function sectionRefsIn(file: string, text: string): SectionRef[] {
  const { joined, lineAt } = searchable(file, text);
  const refs: SectionRef[] = [];
  const taken: [number, number][] = [];
  const add = (doc: string, match: RegExpMatchArray, numbers: string): void => {
    const index = match.index ?? 0;
    taken.push([index, index + match[0].length]);
    const sections = [...numbers.matchAll(/§\s*(\d+)/g)].map((m) => Number(m[1]));
    const quoted = match.groups?.["dq"] ?? match.groups?.["cq"] ?? match.groups?.["sq"];
    // A title starts as a heading does; a quote starting in lower case quotes the text instead.
    const title = quoted !== undefined && /^[\p{Lu}\p{N}`(]/u.test(quoted) ? quoted : undefined;
    refs.push({ file, line: lineAt(index), text: match[0].trim(), doc, sections, title });
  };
  const prefixed = new RegExp(
    String.raw`\b(?:docs\/)?(?<doc>DESIGN|SPEC)(?:\.md)?\]?\s*(?<numbers>${NUMBERS})${TITLE}`,
    "g",
  );
  for (const match of joined.matchAll(prefixed)) {
    add(DOC_OF[match.groups?.["doc"] ?? ""] ?? "", match, match.groups?.["numbers"] ?? "");
  }
  const self = Object.values(DOC_OF).find((doc) => doc === file);
  if (self) {
    for (const match of joined.matchAll(new RegExp(`(?<numbers>${NUMBERS})${TITLE}`, "g"))) {
      const index = match.index ?? 0;
      if (taken.some(([from, to]) => index >= from && index < to)) continue;
      add(self, match, match.groups?.["numbers"] ?? "");
    }
  }
  return refs;
}

/** Why a reference is wrong, or undefined. */
export function brokenSectionRef(ref: SectionRef, sectionsOfDoc: (doc: string) => Sections): string | undefined {
  const sections = sectionsOfDoc(ref.doc);
  const missing = ref.sections.filter((n) => !sections.has(n));
  if (missing.length > 0) {
    return `"${ref.text}": ${ref.doc} has no §${missing.join(", §")} (it has §${[...sections.keys()].join(", §")})`;
  }
  const last = ref.sections.at(-1);
  if (ref.title !== undefined && last !== undefined && !titleIn(sections, last, ref.title)) {
    return `"${ref.text}": no heading or bold lead-in "${ref.title}" in ${ref.doc} §${last}`;
  }
  return undefined;
}

/** Files under `dir` (repository-relative) whose names end in one of `suffixes`, recursively. */
export function filesUnder(root: string, dir: string, suffixes: readonly string[]): string[] {
  const out: string[] = [];
  const walk = (rel: string): void => {
    for (const name of readdirSync(join(root, rel))) {
      if (name === "node_modules" || name.startsWith(".")) continue;
      const path = join(rel, name);
      if (statSync(join(root, path)).isDirectory()) walk(path);
      else if (suffixes.some((suffix) => name.endsWith(suffix))) out.push(path);
    }
  };
  if (existsSync(join(root, dir))) walk(dir);
  return out.sort();
}

/** A file's text, read once. */
export function reader(root: string): (path: string) => string {
  const cache = new Map<string, string>();
  return (path) => {
    let text = cache.get(path);
    if (text === undefined) {
      text = readFileSync(join(root, path), "utf8");
      cache.set(path, text);
    }
    return text;
  };
}
