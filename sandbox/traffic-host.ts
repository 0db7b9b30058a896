/**
 * The host side of the sandbox's traffic path (traffic.ts): what must hold on this machine
 * before a kube-proxy may write rules, and what is undone after.
 *
 * - **One at a time, machine-wide.** kube-proxy's nftables mode writes table `kube-proxy`
 *   (families ip and ip6), a fixed name: two sandboxes' kube-proxies on one host would
 *   overwrite each other's rules. `acquireTrafficHost` takes an exclusive `flock(1)` on
 *   TRAFFIC_LOCK, held by a child (`flock … cat`) whose stdin is a pipe from this
 *   process: if this process dies in any way, even SIGKILL, the pipe closes, the child
 *   exits and the kernel releases the lock. Waits up to `waitMs` (0: does not wait).
 * - **Leftovers swept.** Holding the lock, nothing of a live sandbox can exist, so what
 *   carries the sandbox's marks is a dead run's and is removed: tables `ip`/`ip6
 *   kube-proxy` (unless a kube-proxy this sandbox did not start runs: then it refuses),
 *   routes of protocol ROUTE_PROTO, network namespaces named `fmtr-*` and their
 *   /etc/netns directories.
 * - **The Service CIDR never leaves the machine.** Before kube-proxy starts, the whole
 *   Service range gets a `blackhole` route (protocol ROUTE_PROTO, the sandbox's mark): a
 *   packet to a cluster IP that kube-proxy does not rewrite (no rule yet, a Service
 *   without endpoints, an address no Service holds) is dropped here, never sent to the
 *   default gateway. It stays while the lock is held; `release` removes it last.
 * - **Nothing rewritten or forwarded leaves either.** In the same step, table GUARD_TABLE
 *   drops at postrouting (where the outgoing interface is final) every packet that came
 *   in from a Pod's veth (`fmtr*`: this host forwards, as Docker's hosts do, and a Pod's
 *   packet that reaches postrouting is on its way off the machine), and every packet whose
 *   original destination is in the Service range going out of any interface but `lo` or a
 *   Pod's veth (kube-proxy rewrote it to an endpoint that is not local: a mirror whose
 *   gateway address is not this machine's). Legitimate paths never reach postrouting
 *   off-host: the endpoints are local (INPUT) and the answers go to the Pod's veth.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { readdir, readFile, rm } from "node:fs/promises";
import { promisify } from "node:util";

const run = promisify(execFile);

export const TRAFFIC_LOCK = "/run/fleet-mirror-traffic.lock";
/** The routing protocol number that marks the sandbox's routes (`ip route … proto 252`). */
export const ROUTE_PROTO = "252";
/** Network namespaces (and their veths) of the sandbox's client Pods start with this. */
export const NETNS_PREFIX = "fmtr-";
/** The nftables table (family inet) of the drop rules above; the sandbox's alone. */
export const GUARD_TABLE = "fleet-mirror-traffic";

/** The guard's ruleset for `serviceCidr` (for `nft -f -`): see the file comment. */
export function guardRuleset(serviceCidr: string): string {
  const family = serviceCidr.includes(":") ? "ip6" : "ip";
  return [
    `table inet ${GUARD_TABLE} {`,
    "  chain postrouting {",
    "    type filter hook postrouting priority 0; policy accept;",
    `    iifname "fmtr*" counter drop`,
    `    ct original ${family} daddr ${serviceCidr} oifname != "lo" oifname != "fmtr*" counter drop`,
    "  }",
    "}",
    "",
  ].join("\n");
}

export interface TrafficHost {
  /** The Service CIDR routed to a blackhole while held. */
  readonly serviceCidr: string;
  /** What the sweep removed, for a log line ("" when nothing). */
  readonly swept: string;
  /** Removes the guard table and the route, and releases the lock. Idempotent. */
  release(): Promise<void>;
}

async function ip(...args: string[]): Promise<string> {
  const { stdout } = await run("ip", args);
  return stdout;
}

async function nft(...args: string[]): Promise<string> {
  const { stdout } = await run("nft", args);
  return stdout;
}

/** Loads `ruleset` with `nft -f -` (one transaction: all of it or nothing). */
async function nftLoad(ruleset: string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const child = execFile("nft", ["-f", "-"], (error) => (error ? reject(error) : resolve()));
    child.stdin?.end(ruleset);
  });
}

/** Pids of running processes whose command name is `name` (from /proc). */
async function processesNamed(name: string): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const comm = await readFile(`/proc/${entry}/comm`, "utf8").catch(() => "");
    if (comm.trim() === name) pids.push(Number(entry));
  }
  return pids;
}

/** Takes the lock through a `flock` child; resolves with it once held, or undefined after `waitMs`. */
async function lock(waitMs: number): Promise<ChildProcess | undefined> {
  const wait = Math.max(0, Math.ceil(waitMs / 1000));
  const args = [
    ...(wait === 0 ? ["-n"] : ["-w", String(wait)]),
    "-E",
    "75",
    "-x",
    TRAFFIC_LOCK,
    "sh",
    "-c",
    "echo locked; exec cat",
  ];
  const child = spawn("/usr/bin/setpriv", ["--pdeathsig", "SIGKILL", "--", "flock", ...args], {
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  return new Promise((resolve, reject) => {
    child.stdout?.on("data", (chunk: Buffer) => {
      if (chunk.toString().includes("locked")) resolve(child);
    });
    child.once("error", (error) => reject(new Error(`cannot run flock: ${error.message}`)));
    child.once("exit", (code) => {
      if (code === 75) resolve(undefined);
      else reject(new Error(`flock ${TRAFFIC_LOCK} exited ${code}: ${stderr.trim()}`));
    });
  });
}

/** Removes a dead run's leftovers (see the file comment); returns what it removed. */
export async function sweepLeftovers(): Promise<string> {
  const removed: string[] = [];
  const tables = await nft("list", "tables");
  for (const family of ["ip", "ip6"] as const) {
    if (!new RegExp(`^table ${family} kube-proxy$`, "m").test(tables)) continue;
    const running = await processesNamed("kube-proxy");
    if (running.length > 0)
      throw new Error(
        `a kube-proxy not started by this sandbox runs on this machine (pid ${running.join(", ")}): the traffic path would overwrite its table ${family} kube-proxy`,
      );
    await nft("delete", "table", family, "kube-proxy");
    removed.push(`table ${family} kube-proxy`);
  }
  if (new RegExp(`^table inet ${GUARD_TABLE}$`, "m").test(tables)) {
    await nft("delete", "table", "inet", GUARD_TABLE);
    removed.push(`table inet ${GUARD_TABLE}`);
  }
  for (const family of ["-4", "-6"]) {
    for (const line of (await ip(family, "route", "show", "proto", ROUTE_PROTO)).split("\n")) {
      if (line.trim() === "") continue;
      await ip(family, "route", "del", ...line.trim().split(/\s+/));
      removed.push(`route ${line.trim()}`);
    }
  }
  for (const line of (await ip("netns", "list")).split("\n")) {
    const name = line.trim().split(/\s+/)[0] ?? "";
    if (!name.startsWith(NETNS_PREFIX)) continue;
    await ip("netns", "delete", name);
    removed.push(`netns ${name}`);
  }
  for (const entry of await readdir("/etc/netns").catch(() => [] as string[])) {
    if (!entry.startsWith(NETNS_PREFIX)) continue;
    await rm(`/etc/netns/${entry}`, { recursive: true, force: true });
  }
  return removed.join(", ");
}

/**
 * Takes the machine-wide lock, sweeps leftovers, routes `serviceCidr` to a blackhole and
 * loads the guard table.
 * @returns undefined when another sandbox holds the lock past `waitMs`.
 * @throws when a tool is missing, the caller lacks CAP_NET_ADMIN, or a foreign kube-proxy
 *   runs (the lock is released first).
 */
export async function acquireTrafficHost(serviceCidr: string, waitMs: number): Promise<TrafficHost | undefined> {
  const holder = await lock(waitMs);
  if (!holder) return undefined;
  const unlock = async (): Promise<void> => {
    // Gone already (a signal to the process group ends it too): its exit event has fired.
    if (holder.exitCode !== null || holder.signalCode !== null) return;
    const exited = new Promise((resolve) => holder.once("exit", resolve));
    holder.stdin?.end();
    await exited;
  };
  const family = serviceCidr.includes(":") ? "-6" : "-4";
  /** Guard table first off, route last: each step tried, the first failure thrown. */
  const undo = async (routed: boolean): Promise<void> => {
    const failures: string[] = [];
    const tables = await nft("list", "tables").catch((error: Error) => {
      failures.push(error.message);
      return "";
    });
    if (new RegExp(`^table inet ${GUARD_TABLE}$`, "m").test(tables))
      await nft("delete", "table", "inet", GUARD_TABLE).catch((error: Error) => failures.push(error.message));
    if (routed)
      await ip(family, "route", "del", "blackhole", serviceCidr, "proto", ROUTE_PROTO).catch((error: Error) =>
        failures.push(error.message),
      );
    if (failures.length > 0) throw new Error(`traffic host not fully released: ${failures.join("; ")}`);
  };
  let routed = false;
  try {
    const swept = await sweepLeftovers();
    await ip(family, "route", "add", "blackhole", serviceCidr, "proto", ROUTE_PROTO);
    routed = true;
    await nftLoad(guardRuleset(serviceCidr));
    let released = false;
    return {
      serviceCidr,
      swept,
      async release() {
        if (released) return;
        released = true;
        try {
          await undo(true);
        } finally {
          await unlock();
        }
      },
    };
  } catch (error) {
    // The start's own error is the one to report; a failed undo is swept by the next start.
    await undo(routed).catch(() => undefined);
    await unlock();
    throw error;
  }
}
