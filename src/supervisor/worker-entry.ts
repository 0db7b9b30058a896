/**
 * Where an actor's thread entry lives. The supervisor runs from TypeScript sources
 * (tests, Node's type stripping) or from compiled JavaScript (dist/, the image); the
 * entry has the same extension as this module in both cases.
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

export type ActorKind = "remote-cluster" | "local-writer";

export function workerEntry(kind: ActorKind): URL {
  const extension = import.meta.url.endsWith(".ts") ? "ts" : "js";
  const url = new URL(`../../workers/${kind}/entry.${extension}`, import.meta.url);
  if (!existsSync(fileURLToPath(url))) throw new Error(`worker entry not found: ${fileURLToPath(url)}`);
  return url;
}
