/**
 * Resolution of gateway ingress hostnames (SPEC §2) without libuv's thread pool.
 *
 * Why not `dns.lookup`: it calls getaddrinfo on libuv's pool (4 threads, shared by the
 * whole process with fs and crypto work), so one cluster whose names resolve slowly, or
 * whose DNS server never answers, delays every other cluster's lookups and the
 * process's file I/O. This resolver asks DNS servers itself (node:dns `Resolver`, i.e.
 * c-ares on the event loop), one per actor, with a timeout and a number of tries, so a
 * dead server costs only the lookups that use it.
 *
 * Semantics kept from the system resolver: names in the hosts file (`/etc/hosts`) are
 * answered from it and never sent to DNS, as nsswitch's usual `files dns` order does
 * (c-ares' resolve4/resolve6 do not read it). The file is re-read when its mtime
 * changes (one `statSync` per lookup: small, and off the pool). Not kept: search
 * domains and `ndots` from resolv.conf (a gateway hostname is a fully-qualified name),
 * mDNS and other nsswitch sources.
 *
 * Answers: every IPv4 and IPv6 address of the name (A and AAAA asked in parallel),
 * de-duplicated and sorted. One family failing (a timeout, SERVFAIL, a refused
 * connection) never hides the other: a name whose A query answers and whose AAAA query
 * is never answered gives its IPv4 addresses. Rejections tell "no answer" from "no
 * address": `ENOTFOUND` only when every family said authoritatively that it has none
 * (NXDOMAIN or NODATA), else the transient failure itself (`ETIMEOUT`, `ESERVFAIL`, …),
 * which a caller must not read as "the name has no address" (hostnames.ts keeps the
 * last good answer then). Asked for one `family`, it answers that family's addresses,
 * `[]` when it authoritatively has none, and rejects on a transient failure.
 *
 * Names in the `invalid` top-level domain are reserved never to resolve: they are
 * answered `ENOTFOUND` at once and never sent to a DNS server (a gateway that names one
 * costs no query, and tests that use such names stay on this machine).
 */
import { promises as dns } from "node:dns";
import { readFileSync, statSync } from "node:fs";
import { isIP } from "node:net";

export type AddressFamily = 4 | 6;

/**
 * A name's addresses (see the file's comment): both families when `family` is omitted,
 * else that family's, `[]` for none.
 */
export type Resolver = (hostname: string, family?: AddressFamily) => Promise<string[]>;

export interface ResolverOptions {
  /** DNS servers (`ip` or `ip:port`). Default: the system's (resolv.conf). */
  readonly servers?: readonly string[];
  /** Per-query timeout. Default 2 000 ms. */
  readonly timeoutMs?: number;
  /** Attempts per server before giving up. Default 2 (worst case for a dead server: timeoutMs × tries per server). */
  readonly tries?: number;
  /** Default `/etc/hosts`; a missing file means no hosts entries. */
  readonly hostsPath?: string;
}

/** The reserved `invalid` top-level domain (and the name itself), with or without the root dot. */
const RESERVED_NEVER_RESOLVES = /(^|\.)invalid\.?$/i;

/** Codes of an answer that says "no such address" (NODATA, NXDOMAIN) rather than "no answer". */
export const NO_ADDRESS: ReadonlySet<string> = new Set(["ENODATA", "ENOTFOUND"]);

/** Whether `error` is an authoritative "no such name" or "no data" (not a transient failure). */
export function isNoAddress(error: unknown): boolean {
  return NO_ADDRESS.has(code(error) ?? "");
}

/** Parses hosts-file text into lower-cased name → addresses (in file order, de-duplicated). */
export function parseHosts(text: string): Map<string, string[]> {
  const hosts = new Map<string, string[]>();
  for (const raw of text.split("\n")) {
    const [address, ...names] = (raw.split("#")[0] ?? "").trim().split(/\s+/);
    if (!address || isIP(address) === 0) continue;
    for (const name of names) {
      const key = name.toLowerCase();
      const list = hosts.get(key) ?? [];
      if (!list.includes(address)) list.push(address);
      hosts.set(key, list);
    }
  }
  return hosts;
}

/** The hosts file, re-read when its mtime changes. */
class HostsFile {
  readonly #path: string;
  #mtimeMs = -1;
  #entries = new Map<string, string[]>();

  constructor(path: string) {
    this.#path = path;
  }

  lookup(hostname: string): string[] | undefined {
    let mtimeMs: number;
    try {
      mtimeMs = statSync(this.#path).mtimeMs;
    } catch {
      this.#entries = new Map();
      this.#mtimeMs = -1;
      return undefined;
    }
    if (mtimeMs !== this.#mtimeMs) {
      try {
        this.#entries = parseHosts(readFileSync(this.#path, "utf8"));
        this.#mtimeMs = mtimeMs;
      } catch {
        this.#entries = new Map();
      }
    }
    return this.#entries.get(hostname.toLowerCase().replace(/\.$/, ""));
  }
}

function code(error: unknown): string | undefined {
  return typeof error === "object" && error !== null && "code" in error ? String(error.code) : undefined;
}

/**
 * A resolver of its own (own c-ares channel and servers): lookups through it never wait
 * for another resolver's, nor for the thread pool.
 * @throws when `servers` holds an invalid address.
 */
export function createResolver(options: ResolverOptions = {}): Resolver {
  const resolver = new dns.Resolver({ timeout: options.timeoutMs ?? 2_000, tries: options.tries ?? 2 });
  if (options.servers) resolver.setServers([...options.servers]);
  const hosts = new HostsFile(options.hostsPath ?? "/etc/hosts");
  /** One family's addresses: [] for an authoritative none; a transient failure rejects. */
  const ask = async (hostname: string, family: AddressFamily): Promise<string[]> => {
    try {
      return await (family === 4 ? resolver.resolve4(hostname) : resolver.resolve6(hostname));
    } catch (error) {
      if (isNoAddress(error)) return [];
      throw error;
    }
  };
  return async (hostname, family) => {
    const kind = isIP(hostname);
    if (kind !== 0) return family === undefined || family === kind ? [hostname] : [];
    if (RESERVED_NEVER_RESOLVES.test(hostname)) {
      throw Object.assign(new Error(`${hostname}: the invalid. domain never resolves (ENOTFOUND)`), {
        code: "ENOTFOUND",
        hostname,
      });
    }
    const fromFile = hosts.lookup(hostname);
    if (fromFile) return fromFile.filter((ip) => family === undefined || isIP(ip) === family).sort();
    if (family !== undefined) return ask(hostname, family);
    const answers = await Promise.allSettled([ask(hostname, 4), ask(hostname, 6)]);
    const addresses = [...new Set(answers.flatMap((a) => (a.status === "fulfilled" ? a.value : [])))].sort();
    if (addresses.length > 0) return addresses;
    const failed = answers.find((a) => a.status === "rejected");
    if (failed) throw failed.reason;
    throw Object.assign(new Error(`${hostname}: no A or AAAA record (ENOTFOUND)`), { code: "ENOTFOUND", hostname });
  };
}
