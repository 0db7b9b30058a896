/**
 * A Link's gateway (SPEC §15) presented to the gateway machinery as the Service it stands
 * for: a *static gateway*. A Link names no remote Service, only addresses (IPs or
 * hostnames), a port, an identity and a probe; every mirror of its cluster uses it.
 * Built as a Service under a key no remote Service can have (`(link)/<link name>`: a
 * namespace name has no parentheses), it goes through the same paths as an annotated
 * gateway: `viewGateway` (addresses, hostnames resolved, the address policy of SPEC §10,
 * the identity), the hostname cache and its refresh, the gateway index and the prober,
 * which takes its probe from the Link (`linkProbeSpec`) instead of annotations. A
 * gateway Service of an annotation-mode cluster is never this: its key is its own.
 * Pure.
 */
import type { GatewayRef } from "./export.ts";
import { numericIp } from "./ip.ts";
import { GATEWAY_IDENTITY, GATEWAY_PORT_NAME } from "./labels.ts";
import type { LinkSettings } from "./link.ts";
import type { Service } from "./objects.ts";
import type { ProbeSpecOutcome } from "./probe-spec.ts";

/** The namespace part of every Link gateway's key. */
export const LINK_GATEWAY_NAMESPACE = "(link)";

/** The gateway a Link-registered cluster's exports and members use: its `defaultGateway`. */
export function linkGatewayRef(link: LinkSettings): GatewayRef {
  return { namespace: LINK_GATEWAY_NAMESPACE, name: link.link.slice(link.link.indexOf("/") + 1) || "link" };
}

/** Whether `key` is a Link gateway's key (never a remote Service's). */
export function isLinkGatewayKey(key: string): boolean {
  return key.startsWith(`${LINK_GATEWAY_NAMESPACE}/`);
}

/**
 * The Service the Link's gateway stands for: its addresses as ingress entries (IPs as
 * `ip`, anything else as `hostname`, resolved like an ingress hostname), its port as
 * `incoming-port` (none: unusable, as a Link without a gateway has), its identity as the
 * gateway identity annotation. No resourceVersion: a mirror of a Link's cluster has no
 * gateway resource version, as linkerd's have none.
 */
export function linkGatewayService(link: LinkSettings): Service {
  const ref = linkGatewayRef(link);
  const { addresses, port, identity } = link.gateway;
  return {
    metadata: { ...ref, ...(identity ? { annotations: { [GATEWAY_IDENTITY]: identity } } : {}) },
    spec: { type: "LoadBalancer", ports: port !== undefined ? [{ name: GATEWAY_PORT_NAME, port }] : [] },
    status: {
      loadBalancer: { ingress: addresses.map((a) => (numericIp(a) !== undefined ? { ip: a } : { hostname: a })) },
    },
  };
}

/** The probe of the Link's gateway and its problems, in the prober's terms (SPEC §10, §15). */
export function linkProbeSpec(link: LinkSettings): ProbeSpecOutcome {
  const { probe, probeProblems } = link.gateway;
  return {
    ...(probe
      ? {
          spec: {
            port: probe.port,
            path: probe.path,
            periodMs: probe.periodMs,
            timeoutMs: probe.timeoutMs,
            failureThreshold: probe.failureThreshold,
          },
        }
      : {}),
    problems: probeProblems,
  };
}
