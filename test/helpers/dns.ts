/**
 * The test side of the sandbox's DNS consumer: CoreDNS for a fleet's local cluster, and
 * lookups against it through node:dns (c-ares, so nothing reads /etc/resolv.conf and no
 * query leaves 127.0.0.1).
 */
import { Resolver } from "node:dns/promises";
import { CoreDns } from "../../sandbox/coredns.ts";
import { Fleet } from "./fleet.ts";
import { eventually } from "./kube.ts";

/** CoreDNS serving `cluster.local` from the fleet's local API server; stop it before the fleet. */
export async function startLocalCoreDns(fleet: Fleet): Promise<CoreDns> {
  return CoreDns.start(fleet.plane, { cluster: "local", admin: fleet.kubeConfig("local") });
}

/**
 * A fleet with remote `east` registered (its gateway `gateway/gateway` at `gatewayIp`),
 * CoreDNS for its local cluster, and a resolver asking it. Stop `dns` before `fleet`.
 */
export async function startDnsFleet(gatewayIp: string): Promise<{ fleet: Fleet; dns: CoreDns; resolver: Resolver }> {
  const fleet = await Fleet.start(["east"]);
  try {
    const dns = await startLocalCoreDns(fleet);
    await fleet.createGateway("east", { ingress: [{ ip: gatewayIp }] });
    await fleet.register("east");
    return { fleet, dns, resolver: resolverFor(dns) };
  } catch (error) {
    await fleet.stop();
    throw error;
  }
}

/** A resolver that asks only `dns`; one try per query, so a wait's poll is what retries. */
export function resolverFor(dns: CoreDns): Resolver {
  const resolver = new Resolver({ timeout: 2_000, tries: 1 });
  resolver.setServers([dns.server]);
  return resolver;
}

/** The A records of `name`, or `[]` when the name does not exist (NXDOMAIN) or has no A record. */
export async function lookupA(resolver: Resolver, name: string): Promise<string[]> {
  try {
    return await resolver.resolve4(name);
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code === "ENOTFOUND" || code === "ENODATA") return [];
    throw error;
  }
}

/** Resolves with the A records of `name` once they equal `expected` (in any order). */
export async function waitForA(
  resolver: Resolver,
  name: string,
  expected: readonly string[],
  timeoutMs = 30_000,
): Promise<string[]> {
  const want = [...expected].sort().join(",");
  let last: string[] = [];
  return eventually(
    () => `${name} to resolve to ${want} (last answer: ${last.join(",") || "none"})`,
    async () => {
      last = (await lookupA(resolver, name)).sort();
      return last.join(",") === want ? last : undefined;
    },
    timeoutMs,
    100,
  );
}
