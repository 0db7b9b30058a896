/**
 * Documentation address ranges made local to this machine, so that tests, the demo and
 * the bench can run real servers at addresses the API server accepts in endpoints
 * (loopback is refused there) without ever sending a packet off the machine.
 *
 * `ip route add local <range> dev lo` makes every address of the range local: a server
 * can listen on any of them and connections to them never leave the host. Only the
 * documentation ranges 198.51.100.0/24, 203.0.113.0/24 and 2001:db8::/32 are allowed
 * (never 192.0.2.0/24: that is the test machines' own network). Needs CAP_NET_ADMIN.
 *
 * A route that already exists (left by another run, or added by someone else) is
 * tolerated and then left in place on release: only a route this call added is removed.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";

const run = promisify(execFile);

export const LOCAL_RANGES = ["198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32"] as const;
export type LocalRange = (typeof LOCAL_RANGES)[number];

export interface LocalRoute {
  readonly range: LocalRange;
  /** False when the route existed before: release() then leaves it. */
  readonly added: boolean;
  /** Removes the route if this call added it. Idempotent. */
  release(): Promise<void>;
}

const familyOf = (range: LocalRange): "-4" | "-6" => (range.includes(":") ? "-6" : "-4");

async function routeExists(range: LocalRange): Promise<boolean> {
  const { stdout } = await run("ip", [familyOf(range), "route", "show", "table", "local", range]);
  return stdout.trim() !== "";
}

/**
 * Makes `range` local (a `local` route on `lo`).
 * @throws when `range` is not one of LOCAL_RANGES, or `ip` fails for another reason than
 *   an existing route (no `ip` binary, no CAP_NET_ADMIN).
 */
export async function makeLocal(range: LocalRange): Promise<LocalRoute> {
  if (!LOCAL_RANGES.includes(range))
    throw new Error(`${String(range)} is not a documentation range this helper may make local`);
  let added = false;
  if (!(await routeExists(range))) {
    try {
      await run("ip", [familyOf(range), "route", "add", "local", range, "dev", "lo"]);
      added = true;
    } catch (error) {
      // Added by someone else between the check and the add: theirs to remove.
      if (!/File exists/.test(String((error as { stderr?: string }).stderr ?? ""))) {
        throw new Error(`cannot make ${range} local: ${(error as Error).message}`, { cause: error });
      }
    }
  }
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
