/**
 * Documentation address ranges made local to this machine, so that tests, the demo and
 * the bench can run real servers at addresses the API server accepts in endpoints
 * (loopback is refused there) without ever sending a packet off the machine.
 *
 * `ip route add local <prefix> dev lo` makes every address of the prefix local: a server
 * can listen on any of them and connections to them never leave the host. Only prefixes
 * inside the documentation ranges 198.51.100.0/24, 203.0.113.0/24 and 2001:db8::/32 are
 * allowed (never 192.0.2.0/24: that is the test machines' own network). Needs
 * CAP_NET_ADMIN.
 *
 * The machine's own services may live inside a documentation range too (on these
 * machines the package registries' proxy answers at an address of 203.0.113.0/24): a
 * route never covers an address the machine needs. `machineAddresses()` resolves the
 * registries the set-up reaches (npm, the Go module proxy, Debian) and the resolvers of
 * /etc/resolv.conf; `makeLocal` covers its range minus those addresses with the fewest
 * prefixes (`prefixesWithout`), and `claimLocal` skips a prefix holding one.
 *
 * Two ways to hold a route:
 * - `makeLocal(range)` (tests, the bench): a whole range (minus the machine's addresses),
 *   shared: every holder keeps a shared lock on the range's lock file, an existing route is
 *   tolerated, and the last holder to release removes the routes.
 * - `claimLocal(prefixes)` (the demo): the first of `prefixes` that no one holds, added by
 *   this call and so removed by it alone. The kernel refuses to add a route that exists
 *   ("File exists"), so two claims never get the same prefix, and a more specific prefix
 *   coexists with a route for its whole range held by a test: neither's release removes
 *   the other's addresses.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { lookup } from "node:dns/promises";
import { readFile } from "node:fs/promises";
import { BlockList, isIPv4 } from "node:net";
import { promisify } from "node:util";

const run = promisify(execFile);

export const LOCAL_RANGES = ["198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32"] as const;
export type LocalRange = (typeof LOCAL_RANGES)[number];

export interface LocalRoute {
  /** The prefix made local, e.g. `198.51.100.64/28`. */
  readonly range: string;
  /** False when the route existed before: release() then leaves it. */
  readonly added: boolean;
  /** Removes the route if this call added it. Idempotent. */
  release(): Promise<void>;
}

const familyOf = (prefix: string): "-4" | "-6" => (prefix.includes(":") ? "-6" : "-4");

/** True when `prefix` (`address/length`) lies inside one of LOCAL_RANGES. */
export function isDocumentationPrefix(prefix: string): boolean {
  const [address = "", lengthText = ""] = prefix.split("/");
  const length = Number(lengthText);
  if (!/^\d{1,3}$/.test(lengthText)) return false;
  const family = isIPv4(address) ? "ipv4" : "ipv6";
  return LOCAL_RANGES.some((range) => {
    const [net = "", bits = ""] = range.split("/");
    if ((isIPv4(net) ? "ipv4" : "ipv6") !== family || length < Number(bits) || length > (family === "ipv4" ? 32 : 128))
      return false;
    const list = new BlockList();
    list.addSubnet(net, Number(bits), family);
    return list.check(address, family);
  });
}

/** True when a `local` route for exactly `prefix` exists (any table entry for it, whoever added it). */
export async function routeExists(prefix: string): Promise<boolean> {
  const { stdout } = await run("ip", [familyOf(prefix), "route", "show", "table", "local", prefix]);
  return stdout.trim() !== "";
}

/** Adds `local <prefix> dev lo`: true if added, false if it exists; throws for any other failure. */
async function addRoute(prefix: string): Promise<boolean> {
  try {
    await run("ip", [familyOf(prefix), "route", "add", "local", prefix, "dev", "lo"]);
    return true;
  } catch (error) {
    const stderr = String((error as { stderr?: string }).stderr ?? "").trim();
    if (/File exists/.test(stderr)) return false;
    throw new Error(`cannot make ${prefix} local: ${stderr || (error as Error).message}`, { cause: error });
  }
}

/** A held range: `pieces` are the routes this call added (all of the range's, or none). */
function heldRoute(range: string, pieces: readonly string[]): LocalRoute {
  let released = false;
  return {
    range,
    added: pieces.length > 0,
    async release() {
      if (pieces.length === 0 || released) return;
      released = true;
      for (const piece of pieces) await run("ip", [familyOf(piece), "route", "del", "local", piece, "dev", "lo"]);
    },
  };
}

/** Names the machine's set-up reaches (npm ci, go, apt): a route must never capture them. */
const MACHINE_HOSTS = ["registry.npmjs.org", "proxy.golang.org", "sum.golang.org", "deb.debian.org"];

/**
 * The addresses this machine needs that a local route could capture: the resolvers of
 * /etc/resolv.conf and every address MACHINE_HOSTS resolve to (a name that does not
 * resolve, or resolves slowly, adds nothing: it cannot be captured by a route either).
 */
export async function machineAddresses(): Promise<string[]> {
  const found = new Set<string>();
  const resolv = await readFile("/etc/resolv.conf", "utf8").catch(() => "");
  for (const match of resolv.matchAll(/^\s*nameserver\s+(\S+)/gm)) if (match[1]) found.add(match[1]);
  const timeout = new Promise<[]>((resolve) => setTimeout(() => resolve([]), 3_000).unref());
  const answers = await Promise.all(
    MACHINE_HOSTS.map((host) =>
      Promise.race([lookup(host, { all: true }).catch(() => []), timeout]).then((all) => all.map((a) => a.address)),
    ),
  );
  for (const address of answers.flat()) found.add(address);
  return [...found];
}

const toNumber = (address: string): number => address.split(".").reduce((n, part) => n * 256 + Number(part), 0);
const toAddress = (n: number): string => [24, 16, 8, 0].map((shift) => Math.floor(n / 2 ** shift) % 256).join(".");

/**
 * `prefix` (IPv4) minus the single addresses of `excluded`, as the fewest prefixes that
 * cover the rest (pure). An IPv6 prefix holding an excluded address is refused (undefined):
 * no range of ours needs one.
 */
export function prefixesWithout(prefix: string, excluded: readonly string[]): string[] | undefined {
  const [address = "", bitsText = ""] = prefix.split("/");
  const bits = Number(bitsText);
  const inside = (net: number, length: number, a: string): boolean =>
    isIPv4(a) && Math.floor(toNumber(a) / 2 ** (32 - length)) === Math.floor(net / 2 ** (32 - length));
  if (!isIPv4(address)) {
    const list = new BlockList();
    list.addSubnet(address, bits, "ipv6");
    return excluded.some((a) => !isIPv4(a) && list.check(a, "ipv6")) ? undefined : [prefix];
  }
  const split = (net: number, length: number): string[] => {
    if (!excluded.some((a) => inside(net, length, a))) return [`${toAddress(net)}/${length}`];
    if (length === 32) return [];
    const half = 2 ** (32 - length - 1);
    return [...split(net, length + 1), ...split(net + half, length + 1)];
  };
  return split(toNumber(address), bits);
}

/**
 * Makes `range` local (a `local` route on `lo`).
 * @throws when `range` is not one of LOCAL_RANGES, or `ip` fails for another reason than
 *   an existing route (no `ip` binary, no CAP_NET_ADMIN).
 */
export async function makeLocal(range: LocalRange): Promise<LocalRoute> {
  if (!LOCAL_RANGES.includes(range))
    throw new Error(`${String(range)} is not a documentation range this helper may make local`);
  const pieces = prefixesWithout(range, await machineAddresses());
  if (!pieces) throw new Error(`${range} holds an address this machine needs; it is not made local`);
  // Test files run in parallel and may want the same range: each holds a shared lock
  // while it needs the routes, and the last to let go removes them (under the exclusive
  // lock, so no one adds meanwhile). A holder that dies releases its lock with it.
  const file = lockFile(range);
  const holder = await flockHolder(file);
  for (const piece of pieces) await addRoute(piece);
  let released = false;
  return {
    range,
    added: true,
    async release() {
      if (released) return;
      released = true;
      holder.stdin?.end();
      await new Promise<void>((resolve) =>
        holder.exitCode !== null || holder.signalCode !== null ? resolve() : holder.once("exit", () => resolve()),
      );
      const deletes = pieces
        .map((piece) => `ip ${familyOf(piece)} route del local ${piece} dev lo 2>/dev/null`)
        .join("; ");
      // Exit 1 when another holder still has the shared lock: its routes stay.
      await run("flock", ["-n", "-x", file, "sh", "-c", `${deletes}; true`]).catch(() => undefined);
    },
  };
}

const lockFile = (range: string): string => `/tmp/fleet-mirror-local-${range.replace(/[/:]/g, "_")}.lock`;

/** A child holding a shared `flock` on `file` (waits up to 60 s), until its stdin closes or this process dies. */
function flockHolder(file: string): Promise<ChildProcess> {
  const child = spawn(
    "/usr/bin/setpriv",
    ["--pdeathsig", "SIGKILL", "--", "flock", "-w", "60", "-s", file, "sh", "-c", "echo locked; exec cat"],
    { stdio: ["pipe", "pipe", "pipe"] },
  );
  return new Promise((resolve, reject) => {
    child.stdout?.on("data", (chunk: Buffer) => {
      if (chunk.toString().includes("locked")) resolve(child);
    });
    child.once("error", (error) => reject(new Error(`cannot run flock: ${error.message}`)));
    child.once("exit", (code) => reject(new Error(`flock -s ${file} exited ${code} before holding the lock`)));
  });
}

/**
 * Makes the first of `prefixes` that no one holds local, for this caller alone
 * (`added` is always true: release() removes it).
 * @returns undefined when every prefix is held already.
 * @throws when a prefix lies outside LOCAL_RANGES (before anything is added), or `ip`
 *   fails for another reason than an existing route (no `ip` binary, no CAP_NET_ADMIN:
 *   "Operation not permitted").
 */
export async function claimLocal(prefixes: readonly string[]): Promise<LocalRoute | undefined> {
  const outside = prefixes.filter((p) => !isDocumentationPrefix(p));
  if (outside.length > 0)
    throw new Error(`${outside.join(", ")}: not inside a documentation range this helper may make local`);
  const needed = await machineAddresses();
  for (const prefix of prefixes) {
    // A prefix holding an address the machine needs counts as held by the machine.
    if (prefixesWithout(prefix, needed)?.[0] !== prefix) continue;
    if (await addRoute(prefix)) return heldRoute(prefix, [prefix]);
  }
  return undefined;
}
