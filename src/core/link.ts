/**
 * A linkerd `Link` (`multicluster.linkerd.io`, storage version v1alpha3) as fleet-mirror
 * reads it (SPEC §15): which cluster it registers, the Secret holding its credentials,
 * and the cluster's settings (selectors, excluded keys, its gateway and its probe).
 * Pure: `parseLink` turns what the API server stored into a `LinkSpec` or a specific
 * reason why the Link registers nothing.
 *
 * Bad input: a Link that cannot be acted on safely registers nothing and keeps its
 * cluster's mirrors (an invalid selector must never read as "selects nothing": that
 * would delete every mirror). A bad probe spec is not that: each bad field falls back as
 * SPEC §10 does for a gateway Service's annotations, and is reported.
 */
import { parseGoDuration } from "./go-duration.ts";
import { type LabelSelector, parseLabelSelector } from "./label-selector.ts";
import { validateDns1123Label, validateDns1123Subdomain } from "./naming.ts";
import type { KubeObject } from "./objects.ts";
import { DEFAULT_PROBE_PATH } from "./probe-spec.ts";

export const LINK_GROUP = "multicluster.linkerd.io";
export const LINK_VERSION = "v1alpha3";
export const LINK_API_VERSION = `${LINK_GROUP}/${LINK_VERSION}`;
/** The collection path of the Links of `namespace`, or of one Link's subresource path. */
export function linksPath(namespace: string, name?: string, subresource?: "status"): string {
  const base = `/apis/${LINK_GROUP}/${LINK_VERSION}/namespaces/${namespace}/links`;
  return name === undefined ? base : `${base}/${name}${subresource ? `/${subresource}` : ""}`;
}

/** linkerd's defaults for a probe spec field the Link leaves out (its CRD's defaults). */
export const LINK_PROBE_DEFAULTS = Object.freeze({ timeoutMs: 30_000, failureThreshold: 3, periodMs: 3_000 });
const MAX_PERIOD_MS = 3_600_000;
const MAX_FAILURE_THRESHOLD = 100;

/** The Link's gateway probe (SPEC §10 with the Link's values; SPEC §15). */
export interface LinkProbe {
  readonly port: number;
  readonly path: string;
  readonly periodMs: number;
  readonly timeoutMs: number;
  /** Consecutive failures after which an address is dead. */
  readonly failureThreshold: number;
}

/** The gateway a Link names: not a remote Service, an address list with a port and an identity. */
export interface LinkGateway {
  /** `spec.gatewayAddress` split on commas: IPs or hostnames, in the Link's order. */
  readonly addresses: readonly string[];
  /** Absent when the Link names no gateway (no address): its mirrors have no endpoints. */
  readonly port?: number;
  readonly identity: string;
  /** Absent: not probed (no probe path, as linkerd; or a probe port that is not a port). */
  readonly probe?: LinkProbe;
  /** Bad probe fields with the fallback taken (reported like a gateway's, SPEC §10). */
  readonly probeProblems: readonly string[];
}

/** What a Link-registered cluster's actor needs besides the common settings. Plain data. */
export interface LinkSettings {
  /** The Link, `namespace/name` (logs, status). */
  readonly link: string;
  /** Remote Services mirrored through the gateway (absent: none). */
  readonly selector?: LabelSelector;
  /** Remote Services mirrored for linkerd's remote discovery: a Service without endpoints (absent: none). */
  readonly remoteDiscoverySelector?: LabelSelector;
  /** Remote Services that join fleet-wide Services (absent: none). */
  readonly federatedSelector?: LabelSelector;
  /** Label keys (or `<prefix>/*`) not copied to mirrors. */
  readonly excludedLabels: readonly string[];
  /** Annotation keys (or `<prefix>/*`) not copied to mirrors. */
  readonly excludedAnnotations: readonly string[];
  readonly gateway: LinkGateway;
}

export interface LinkSpec {
  readonly cluster: string;
  readonly domain: string;
  /** The credentials Secret's name, in the Link's namespace. */
  readonly secretName: string;
  readonly settings: LinkSettings;
}

export type LinkProblem =
  | "missing-cluster-name"
  | "invalid-cluster-name"
  | "missing-cluster-domain"
  | "invalid-cluster-domain"
  | "missing-credentials-secret"
  | "invalid-selector"
  | "invalid-gateway-port";

export type ParsedLink =
  | { readonly kind: "valid"; readonly spec: LinkSpec }
  | {
      readonly kind: "invalid";
      readonly cluster: string | undefined;
      readonly reason: LinkProblem;
      readonly message: string;
    };

const text = (value: unknown): string => (typeof value === "string" ? value : "");
const strings = (value: unknown): string[] =>
  Array.isArray(value) ? value.filter((v): v is string => typeof v === "string" && v !== "") : [];

/** A port number written as text ("4143"), or undefined. */
export function portOf(value: unknown): number | undefined {
  const t = typeof value === "number" ? String(value) : text(value).trim();
  if (!/^\d{1,5}$/.test(t)) return undefined;
  const n = Number(t);
  return n >= 1 && n <= 65_535 ? n : undefined;
}

/** The Link `link` (any object; only its metadata and `spec` are read). */
export function parseLink(link: KubeObject & { readonly spec?: unknown }): ParsedLink {
  const spec = (typeof link.spec === "object" && link.spec !== null ? link.spec : {}) as Record<string, unknown>;
  const cluster = text(spec["targetClusterName"]);
  const invalid = (reason: LinkProblem, message: string, name: string | undefined = cluster): ParsedLink => ({
    kind: "invalid",
    cluster: name || undefined,
    reason,
    message,
  });
  if (!cluster) return invalid("missing-cluster-name", "spec.targetClusterName is missing");
  const nameProblem = validateDns1123Label(cluster);
  if (nameProblem)
    return invalid("invalid-cluster-name", `spec.targetClusterName ${JSON.stringify(cluster)} ${nameProblem}`, "");
  const domain = text(spec["targetClusterDomain"]);
  if (!domain) return invalid("missing-cluster-domain", "spec.targetClusterDomain is missing");
  if (validateDns1123Subdomain(domain))
    return invalid("invalid-cluster-domain", `spec.targetClusterDomain ${JSON.stringify(domain)} is not a DNS name`);
  const secretName = text(spec["clusterCredentialsSecret"]);
  if (!secretName) return invalid("missing-credentials-secret", "spec.clusterCredentialsSecret is missing");
  const selectors: Record<
    "selector" | "remoteDiscoverySelector" | "federatedServiceSelector",
    LabelSelector | undefined
  > = { selector: undefined, remoteDiscoverySelector: undefined, federatedServiceSelector: undefined };
  for (const field of ["selector", "remoteDiscoverySelector", "federatedServiceSelector"] as const) {
    const parsed = parseLabelSelector(spec[field]);
    if (typeof parsed === "string") return invalid("invalid-selector", `spec.${field}: ${parsed}`);
    selectors[field] = parsed;
  }
  const addresses = text(spec["gatewayAddress"])
    .split(",")
    .map((a) => a.trim())
    .filter(Boolean);
  const port = portOf(spec["gatewayPort"]);
  if (addresses.length > 0 && port === undefined)
    return invalid(
      "invalid-gateway-port",
      `spec.gatewayPort ${JSON.stringify(spec["gatewayPort"] ?? "")} is not a port number (1-65535) and spec.gatewayAddress names a gateway`,
    );
  const { probe, problems } = linkProbe(spec["probeSpec"]);
  const settings: LinkSettings = {
    link: `${link.metadata.namespace ?? ""}/${link.metadata.name}`,
    ...(selectors.selector ? { selector: selectors.selector } : {}),
    ...(selectors.remoteDiscoverySelector ? { remoteDiscoverySelector: selectors.remoteDiscoverySelector } : {}),
    ...(selectors.federatedServiceSelector ? { federatedSelector: selectors.federatedServiceSelector } : {}),
    excludedLabels: strings(spec["excludedLabels"]),
    excludedAnnotations: strings(spec["excludedAnnotations"]),
    gateway: {
      addresses,
      ...(port !== undefined && addresses.length > 0 ? { port } : {}),
      identity: text(spec["gatewayIdentity"]),
      ...(probe && addresses.length > 0 ? { probe } : {}),
      probeProblems: problems,
    },
  };
  return { kind: "valid", spec: { cluster, domain, secretName, settings } };
}

/**
 * The probe of a Link's gateway: none without a path (linkerd probes only then); each
 * bad field falls back (period 3 s, timeout 30 s, threshold 3) and is reported; a probe
 * port that is not a port number turns probing off (reported).
 */
function linkProbe(raw: unknown): { probe?: LinkProbe; problems: string[] } {
  const spec = (typeof raw === "object" && raw !== null ? raw : {}) as Record<string, unknown>;
  const path = text(spec["path"]);
  if (!path) return { problems: [] };
  const problems: string[] = [];
  const port = portOf(spec["port"]);
  if (port === undefined)
    return {
      problems: [`probeSpec.port ${JSON.stringify(spec["port"] ?? "")} is not a port number: gateway not probed`],
    };
  const validPath = path.startsWith("/") && path.length <= 1_024 && /^[\x21-\x7e]+$/.test(path) && !path.includes("#");
  if (!validPath)
    problems.push(`probeSpec.path ${JSON.stringify(path)} is not an absolute path: using ${DEFAULT_PROBE_PATH}`);
  const duration = (field: "period" | "timeout", fallback: number): number => {
    const given = spec[field];
    if (given === undefined || given === "") return fallback;
    const ms = parseGoDuration(text(given));
    if (ms !== undefined && ms >= 1 && ms <= MAX_PERIOD_MS) return Math.round(ms);
    problems.push(`probeSpec.${field} ${JSON.stringify(given)} is not a duration from 1ms to 1h: using ${fallback} ms`);
    return fallback;
  };
  const periodMs = duration("period", LINK_PROBE_DEFAULTS.periodMs);
  const timeoutMs = duration("timeout", LINK_PROBE_DEFAULTS.timeoutMs);
  let failureThreshold: number = LINK_PROBE_DEFAULTS.failureThreshold;
  const threshold = spec["failureThreshold"];
  if (threshold !== undefined && threshold !== "") {
    const n = /^\d{1,3}$/.test(text(threshold).trim()) ? Number(text(threshold).trim()) : Number.NaN;
    if (n >= 1 && n <= MAX_FAILURE_THRESHOLD) failureThreshold = n;
    else
      problems.push(
        `probeSpec.failureThreshold ${JSON.stringify(threshold)} is not a whole number in 1-${MAX_FAILURE_THRESHOLD}: using ${LINK_PROBE_DEFAULTS.failureThreshold}`,
      );
  }
  return {
    probe: { port, path: validPath ? path : DEFAULT_PROBE_PATH, periodMs, timeoutMs, failureThreshold },
    problems,
  };
}
