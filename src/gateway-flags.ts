/**
 * The `run` flags of the gateway address policy and caps (SPEC §10, docs/CLI.md), parsed
 * once into `Config` (config.ts spreads them in). A remote names its gateways'
 * addresses; these flags bound what it can make the controller probe and write.
 */
import { DEFAULT_MAX_GATEWAY_ADDRESSES } from "./core/address-policy.ts";
import { parseCidr } from "./core/ip.ts";
import { DEFAULT_MAX_PROBED_GATEWAYS, DEFAULT_MAX_PROBES_IN_FLIGHT } from "./core/probe-spec.ts";
import { ConfigError, parseNumericFlag } from "./flag-values.ts";
import type { GatewayPolicyOptions } from "./protocol/messages.ts";

export interface GatewayConfig {
  /** Gateway address ranges allowed even inside a built-in or local range (`--gateway-cidr-allow`). */
  readonly gatewayCidrAllow: readonly string[];
  /** Gateway address ranges refused (`--gateway-cidr-deny`). */
  readonly gatewayCidrDeny: readonly string[];
  /** Addresses per gateway at most (`--gateway-max-addresses`). */
  readonly gatewayMaxAddresses: number;
  /** Gateways probed per cluster at most (`--gateway-max-probed`). */
  readonly gatewayMaxProbed: number;
  /** Probes in flight per cluster at most (`--gateway-max-probes-in-flight`). */
  readonly gatewayMaxProbesInFlight: number;
}

export const gatewayFlags = {
  "gateway-cidr-allow": {
    type: "string",
    default: "",
    description:
      "gateway addresses in these CIDR ranges (comma-separated) may be probed and written even inside the local Service or pod CIDRs or a metadata range; the most specific of the allow and deny ranges decides",
  },
  "gateway-cidr-deny": {
    type: "string",
    default: "",
    description: "gateway addresses in these CIDR ranges (comma-separated) are never probed nor written as endpoints",
  },
  "gateway-max-addresses": {
    type: "string",
    default: String(DEFAULT_MAX_GATEWAY_ADDRESSES),
    description: "addresses of one gateway used at most (the first, sorted); the others are refused and reported",
  },
  "gateway-max-probed": {
    type: "string",
    default: String(DEFAULT_MAX_PROBED_GATEWAYS),
    description: "gateways probed per cluster at most; the others are reported and not probed (they count alive)",
  },
  "gateway-max-probes-in-flight": {
    type: "string",
    default: String(DEFAULT_MAX_PROBES_IN_FLIGHT),
    description: "gateway probes in flight per cluster at most; a probe due meanwhile waits for a free slot",
  },
} as const;

function cidrList(flag: string, text: string): readonly string[] {
  const ranges = text
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  for (const range of ranges) {
    const parsed = parseCidr(range);
    if (typeof parsed === "string") throw new ConfigError(`--${flag}: ${parsed} (e.g. 10.0.0.0/8,fd00::/8)`);
  }
  return Object.freeze(ranges);
}

/** The gateway flags of `values` (parseArgs' output), checked. */
export function parseGatewayFlags(values: Record<string, string | boolean | undefined>): GatewayConfig {
  const str = (name: keyof typeof gatewayFlags): string => String(values[name] ?? gatewayFlags[name].default);
  return {
    gatewayCidrAllow: cidrList("gateway-cidr-allow", str("gateway-cidr-allow")),
    gatewayCidrDeny: cidrList("gateway-cidr-deny", str("gateway-cidr-deny")),
    gatewayMaxAddresses: parseNumericFlag("gateway-max-addresses", str("gateway-max-addresses")),
    gatewayMaxProbed: parseNumericFlag("gateway-max-probed", str("gateway-max-probed")),
    gatewayMaxProbesInFlight: parseNumericFlag("gateway-max-probes-in-flight", str("gateway-max-probes-in-flight")),
  };
}

/** What every actor's init carries of them (RemoteActorOptions.gatewayPolicy). */
export function gatewayPolicyOptions(config: GatewayConfig): GatewayPolicyOptions {
  return {
    cidrAllow: [...config.gatewayCidrAllow],
    cidrDeny: [...config.gatewayCidrDeny],
    maxAddresses: config.gatewayMaxAddresses,
    maxProbed: config.gatewayMaxProbed,
    maxProbesInFlight: config.gatewayMaxProbesInFlight,
  };
}
