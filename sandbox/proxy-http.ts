/**
 * What a proxy in front of an API server forwards: the end-to-end headers of a message
 * (never the hop-by-hop ones, nor those its `Connection` header names), and whether a
 * request is a watch (one long streamed response). Pure.
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";

/** Headers that describe one hop, never forwarded (RFC 9110 §7.6.1). */
const HOP_BY_HOP: ReadonlySet<string> = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);

/** `headers` without the hop-by-hop ones. */
export function endToEnd(headers: IncomingHttpHeaders): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  const named = new Set(
    (typeof headers.connection === "string" ? headers.connection : "")
      .split(",")
      .map((h) => h.trim().toLowerCase())
      .filter((h) => h !== ""),
  );
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || named.has(name)) continue;
    out[name] = value;
  }
  return out;
}

/** A watch: `?watch=true|1`, or the old `/watch/` path. */
export function isWatch(url: URL): boolean {
  const watch = url.searchParams.get("watch");
  return watch === "true" || watch === "1" || /\/watch\//.test(url.pathname);
}
