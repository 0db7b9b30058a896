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
 * Two ways to hold a route:
 * - `makeLocal(range)` (tests, the bench): a whole range; a route that already exists (left
 *   by another run, or added by someone else) is tolerated and then left in place on
 *   release: only a route this call added is removed.
 * - `claimLocal(prefixes)` (the demo): the first of `prefixes` that no one holds, added by
 *   this call and so removed by it alone. The kernel refuses to add a route that exists
 *   ("File exists"), so two claims never get the same prefix, and a more specific prefix
 *   coexists with a route for its whole range held by a test: neither's release removes
 *   the other's addresses.
 */
import { execFile } from "node:child_process";
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

function heldRoute(range: string, added: boolean): LocalRoute {
  let released = false;
  return {
    range,
    added,
    async release() {
      if (!added || released) return;
      released = true;
      await run("ip", [familyOf(range), "route", "del", "local", range, "dev", "lo"]);
    },
  };
}

/**
 * Makes `range` local (a `local` route on `lo`).
 * @throws when `range` is not one of LOCAL_RANGES, or `ip` fails for another reason than
 *   an existing route (no `ip` binary, no CAP_NET_ADMIN).
 */
export async function makeLocal(range: LocalRange): Promise<LocalRoute> {
  if (!LOCAL_RANGES.includes(range))
    throw new Error(`${String(range)} is not a documentation range this helper may make local`);
  // Added by someone else between the check and the add: theirs to remove.
  const added = !(await routeExists(range)) && (await addRoute(range));
  return heldRoute(range, added);
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
  for (const prefix of prefixes) if (await addRoute(prefix)) return heldRoute(prefix, true);
  return undefined;
}
