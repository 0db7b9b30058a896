/**
 * Which gateway addresses fleet-mirror may probe and write as a mirror's endpoints
 * (SPEC §10, "Gateway addresses"). Pure: the local cluster's ranges come in as data
 * (`LocalRanges`, read by the main thread from the local API), the operator's as flags.
 *
 * A remote names its gateways' addresses, so without this a remote could aim the
 * controller's probes, and every local client of a mirror, at anything the controller's
 * Pod can reach: the local Services and Pods, the API server, cloud metadata.
 *
 * An address is refused, in this order:
 * 1. when the API server would refuse it in endpoints (not an IP, unspecified, loopback,
 *    link-local, link-local multicast): always, no flag overrides it;
 * 2. by the operator's ranges: of the `--gateway-cidr-allow` and `--gateway-cidr-deny`
 *    ranges that hold it, the most specific one decides (deny on a tie);
 * 3. when a built-in or local range holds it: other multicast and broadcast addresses,
 *    cloud metadata addresses (169.254.169.254 is link-local already; fd00:ec2::254,
 *    AWS's IPv6 one, and 100.100.100.200 are not), the local Service CIDRs, the local
 *    pod CIDRs.
 * Then a gateway keeps its first `maxAddresses` accepted addresses in sorted order; the
 * others are refused as `over-cap`.
 */
import { type Cidr, cidrContains, compareIps, endpointIpProblem, numericIp, parseCidr } from "./ip.ts";

export const REFUSAL_REASONS = [
  "not-ip",
  "unspecified",
  "loopback",
  "link-local",
  "not-unicast",
  "metadata",
  "local-service-cidr",
  "local-pod-cidr",
  "denied",
  "over-cap",
] as const;
/** Why an address is refused: a fixed set, so a metric may carry it as a label. */
export type RefusalReason = (typeof REFUSAL_REASONS)[number];

export interface Refusal {
  readonly address: string;
  readonly reason: RefusalReason;
  /** For people: `in the local Service CIDR 10.96.0.0/16`. */
  readonly why: string;
}

/**
 * The local cluster's own ranges as last read from its API: `seq` grows with every read
 * that changed them (the newest wins), `serviceCidrs` from its ServiceCIDR objects,
 * `podCidrs` from its Nodes' `spec.podCIDRs`.
 */
export interface LocalRanges {
  readonly seq: number;
  readonly serviceCidrs: readonly string[];
  readonly podCidrs: readonly string[];
}

/** The operator's settings (`--gateway-cidr-allow`, `--gateway-cidr-deny`, `--gateway-max-addresses`). */
export interface AddressPolicySettings {
  readonly cidrAllow: readonly string[];
  readonly cidrDeny: readonly string[];
  readonly maxAddresses: number;
}

/** Addresses per gateway at most, by default (`--gateway-max-addresses`). */
export const DEFAULT_MAX_GATEWAY_ADDRESSES = 32;

export const DEFAULT_ADDRESS_POLICY_SETTINGS: AddressPolicySettings = Object.freeze({
  cidrAllow: [],
  cidrDeny: [],
  maxAddresses: DEFAULT_MAX_GATEWAY_ADDRESSES,
});

interface RangeRule {
  readonly cidr: Cidr;
  readonly reason: RefusalReason;
  readonly why: string;
}

/** A compiled policy: build it with `addressPolicy`. */
export interface AddressPolicy {
  readonly allow: readonly Cidr[];
  readonly deny: readonly Cidr[];
  readonly ranges: readonly RangeRule[];
  readonly maxAddresses: number;
  /** The local ranges it was built with (seq 0: none read yet). */
  readonly local: LocalRanges;
}

const NO_LOCAL_RANGES: LocalRanges = Object.freeze({ seq: 0, serviceCidrs: [], podCidrs: [] });

const BUILT_IN: readonly [string, RefusalReason, string][] = [
  ["0.0.0.0/8", "unspecified", "in 0.0.0.0/8, this host on this network"],
  ["224.0.0.0/4", "not-unicast", "a multicast address"],
  ["255.255.255.255/32", "not-unicast", "the broadcast address"],
  ["ff00::/8", "not-unicast", "a multicast address"],
  ["fd00:ec2::254/128", "metadata", "a cloud metadata address"],
  ["100.100.100.200/32", "metadata", "a cloud metadata address"],
];

function compile(texts: readonly string[]): Cidr[] {
  return texts.flatMap((text) => {
    const cidr = parseCidr(text);
    return typeof cidr === "string" ? [] : [cidr];
  });
}

/**
 * The policy of `settings` and `local` (ranges that do not parse are left out: the flags
 * are checked at start-up, the local ranges come from the API server's own validation).
 */
export function addressPolicy(
  settings: AddressPolicySettings = DEFAULT_ADDRESS_POLICY_SETTINGS,
  local: LocalRanges = NO_LOCAL_RANGES,
): AddressPolicy {
  const rule = (reason: RefusalReason, why: (cidr: Cidr) => string) => (cidr: Cidr) => ({
    cidr,
    reason,
    why: why(cidr),
  });
  const ranges: RangeRule[] = [
    ...BUILT_IN.flatMap(([text, reason, why]) => compile([text]).map((cidr) => ({ cidr, reason, why }))),
    ...compile(local.serviceCidrs).map(rule("local-service-cidr", (c) => `in the local Service CIDR ${c.text}`)),
    ...compile(local.podCidrs).map(rule("local-pod-cidr", (c) => `in the local pod CIDR ${c.text}`)),
  ];
  return {
    allow: compile(settings.cidrAllow),
    deny: compile(settings.cidrDeny),
    ranges,
    maxAddresses: settings.maxAddresses,
    local,
  };
}

export const DEFAULT_ADDRESS_POLICY: AddressPolicy = addressPolicy();

const API_REFUSALS: Readonly<Record<string, RefusalReason>> = {
  "not an IP address": "not-ip",
  unspecified: "unspecified",
  loopback: "loopback",
  "link-local": "link-local",
  "link-local multicast": "not-unicast",
};

/** Why `policy` refuses `ip` (before the per-gateway cap), or undefined when it accepts it. */
export function refusalOf(policy: AddressPolicy, ip: string): Refusal | undefined {
  const problem = endpointIpProblem(ip);
  if (problem) return { address: ip, reason: API_REFUSALS[problem] ?? "not-ip", why: problem };
  const numeric = numericIp(ip);
  if (!numeric) return { address: ip, reason: "not-ip", why: "not an IP address" };
  let decided: { cidr: Cidr; allow: boolean } | undefined;
  for (const [list, allow] of [
    [policy.deny, false],
    [policy.allow, true],
  ] as const) {
    for (const cidr of list) {
      if (!cidrContains(cidr, numeric)) continue;
      if (!decided || cidr.prefix > decided.cidr.prefix) decided = { cidr, allow };
    }
  }
  if (decided)
    return decided.allow
      ? undefined
      : { address: ip, reason: "denied", why: `in ${decided.cidr.text} (--gateway-cidr-deny)` };
  const range = policy.ranges.find((r) => cidrContains(r.cidr, numeric));
  return range ? { address: ip, reason: range.reason, why: range.why } : undefined;
}

/**
 * The addresses of one gateway as `policy` lets them be used: `accepted` sorted and at
 * most `maxAddresses`, `refused` sorted by address (each address once).
 */
export function filterAddresses(
  policy: AddressPolicy,
  ips: Iterable<string>,
): { readonly accepted: string[]; readonly refused: Refusal[] } {
  const accepted: string[] = [];
  const refused: Refusal[] = [];
  for (const ip of new Set(ips)) {
    const refusal = refusalOf(policy, ip);
    if (refusal) refused.push(refusal);
    else accepted.push(ip);
  }
  accepted.sort(compareIps);
  for (const ip of accepted.splice(policy.maxAddresses)) {
    refused.push({
      address: ip,
      reason: "over-cap",
      why: `over the cap of ${policy.maxAddresses} addresses per gateway`,
    });
  }
  refused.sort((a, b) => compareIps(a.address, b.address));
  return { accepted, refused };
}
