/**
 * A Pod's network, as a CNI plugin would give it on a node: a network namespace of its
 * own (`ip netns add`), a veth pair whose host end stays on the host, an address on each
 * end, routes to the host end, and the resolv.conf a kubelet writes for a Pod
 * (`nameserver <kube-dns cluster IP>`, the namespace's search path, `ndots:5`), which `ip
 * netns exec` bind-mounts over /etc/resolv.conf for what runs inside.
 *
 * Addresses: the /30 POD_LINK (169.254.77.0/30, link-local: it names the two ends of one
 * link and nothing beyond it), host end .1, Pod end .2. Its only route is the veth's own
 * connected route; nothing else on the host routes there. One Pod network at a time, held
 * under the traffic host's lock (traffic-host.ts), whose sweep also removes a dead run's
 * namespace (`fmtr-<pid>`) and /etc/netns directory.
 *
 * Unlike a CNI plugin's, the namespace has no default route: only the prefixes its
 * caller names (the Service CIDR, the gateways' local prefix) go to the host end, and a
 * send to any other address fails in the Pod (ENETUNREACH). What leaves the namespace
 * goes into the host's netfilter (where kube-proxy's DNAT rewrites cluster IPs, and the
 * traffic host's guard drops whatever would be forwarded) and routing table (where the
 * Service CIDR is a blackhole and the gateways' documentation addresses are local):
 * nothing reaches a network beyond this machine.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { promisify } from "node:util";
import { NETNS_PREFIX } from "./traffic-host.ts";

const run = promisify(execFile);

export const POD_LINK = { host: "169.254.77.1", pod: "169.254.77.2", length: 30 } as const;

export interface PodDns {
  /** The cluster IP of the cluster's DNS Service. */
  readonly nameserver: string;
  /** The Pod's namespace: the first search domain is `<namespace>.svc.<domain>`. */
  readonly namespace: string;
  readonly domain: string;
}

/** The resolv.conf a kubelet writes for a Pod with dnsPolicy ClusterFirst. */
export function podResolvConf(dns: PodDns): string {
  const searches = [`${dns.namespace}.svc.${dns.domain}`, `svc.${dns.domain}`, dns.domain];
  return `search ${searches.join(" ")}\nnameserver ${dns.nameserver}\noptions ndots:5\n`;
}

async function ip(...args: string[]): Promise<void> {
  await run("ip", args);
}

export class PodNetns {
  /** `fmtr-<pid>`. */
  readonly name: string;
  /** The veth's host end (`fmtr<pid>`; the Pod end is `eth0` inside). */
  readonly hostLink: string;
  readonly #children = new Set<ChildProcess>();
  #deleted = false;

  private constructor(name: string, hostLink: string) {
    this.name = name;
    this.hostLink = hostLink;
  }

  /**
   * Makes the namespace, the veth pair, addresses, a route to the host end for each of
   * `routes` (CIDRs, and nothing else) and resolv.conf; undone on failure.
   */
  static async create(dns: PodDns, routes: readonly string[]): Promise<PodNetns> {
    const name = `${NETNS_PREFIX}${process.pid}`;
    const netns = new PodNetns(name, `fmtr${process.pid}`);
    try {
      await ip("netns", "add", name);
      await ip("link", "add", netns.hostLink, "type", "veth", "peer", "name", "eth0", "netns", name);
      await ip("addr", "add", `${POD_LINK.host}/${POD_LINK.length}`, "dev", netns.hostLink);
      await ip("link", "set", netns.hostLink, "up");
      await ip("-n", name, "link", "set", "lo", "up");
      await ip("-n", name, "addr", "add", `${POD_LINK.pod}/${POD_LINK.length}`, "dev", "eth0");
      await ip("-n", name, "link", "set", "eth0", "up");
      for (const cidr of routes) await ip("-n", name, "route", "add", cidr, "via", POD_LINK.host);
      await mkdir(`/etc/netns/${name}`, { recursive: true });
      await writeFile(`/etc/netns/${name}/resolv.conf`, podResolvConf(dns));
    } catch (error) {
      await netns.delete();
      throw error;
    }
    return netns;
  }

  /**
   * Runs `command args…` inside the namespace, as a Pod's container would (its stdio piped
   * to the caller). It is killed by delete() and dies with this process (setpriv).
   */
  spawn(command: string, args: readonly string[]): ChildProcess {
    const child = spawn(
      "/usr/bin/setpriv",
      ["--pdeathsig", "SIGKILL", "--", "ip", "netns", "exec", this.name, command, ...args],
      { stdio: ["pipe", "pipe", "pipe"] },
    );
    this.#children.add(child);
    child.once("exit", () => this.#children.delete(child));
    return child;
  }

  /** Kills what runs inside, then deletes the namespace (and so the veth pair) and its /etc/netns. Idempotent. */
  async delete(): Promise<void> {
    if (this.#deleted) return;
    this.#deleted = true;
    await Promise.all(
      [...this.#children].map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            child.once("exit", () => resolve());
            child.kill("SIGKILL");
          }),
      ),
    );
    const errors: string[] = [];
    await ip("link", "del", this.hostLink).catch((error: { stderr?: string }) => {
      if (!/Cannot find device/.test(String(error.stderr ?? ""))) errors.push(String(error.stderr ?? error));
    });
    await ip("netns", "delete", this.name).catch((error: { stderr?: string }) => {
      if (!/No such file/.test(String(error.stderr ?? ""))) errors.push(String(error.stderr ?? error));
    });
    await rm(`/etc/netns/${this.name}`, { recursive: true, force: true });
    if (errors.length > 0) throw new Error(`could not delete Pod network ${this.name}: ${errors.join("; ")}`);
  }
}
