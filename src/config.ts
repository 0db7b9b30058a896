/**
 * Flags and environment → one frozen, typed Config, parsed once; every problem fails
 * fast with a message that names the flag. The run's configuration reads process.env
 * only here; the CLI's other commands take defaults from it in the two places that find
 * the local API the way kubectl does (cli/common.ts, kube/local-connection.ts), and
 * cli/compile-cache.ts honours Node's own NODE_COMPILE_CACHE.
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { type LeaderConfig, leaderFlags, parseLeaderFlags, validateLeaderFlags } from "./config-leader.ts";
import { type LimitsConfig, limitFlags, parseLimits } from "./config-limits.ts";
import { DEFAULT_EXPORT_SELECTOR } from "./core/export.ts";
import { DEFAULT_MEMBER_SELECTOR } from "./core/federated.ts";
import { type LabelRequirement, parseLabelRequirement } from "./core/label-requirement.ts";
import { ENDPOINTS_APIS, type EndpointsApi } from "./core/mirror-kinds.ts";
import {
  ConfigError,
  type NumericFlag,
  type NumericRule,
  numericFlags,
  parseHostPort,
  parseNumericFlag,
  shortRange,
} from "./flag-values.ts";
import { type GatewayConfig, gatewayFlags, parseGatewayFlags } from "./gateway-flags.ts";
import { type LinkConfig, linkFlags, parseLinkFlags } from "./link-flags.ts";

/**
 * The gateway flags are in gateway-flags.ts, the limit flags (`--max-response-mb`,
 * `--max-*-per-cluster`, ...) in config-limits.ts, leader election and sharding in
 * config-leader.ts, `--links` in link-flags.ts.
 */
export interface Config extends GatewayConfig, LimitsConfig, LeaderConfig, LinkConfig {
  readonly kubeconfig: string | undefined;
  readonly context: string | undefined;
  /** Namespace of the credentials Secrets (SPEC §1). */
  readonly namespace: string;
  readonly resyncPeriodMs: number;
  readonly gatewayResolvePeriodMs: number;
  readonly createNamespaces: boolean;
  readonly excludedNamespaces: readonly string[];
  readonly writeConcurrency: number;
  readonly writeQps: number;
  readonly writeBurst: number;
  /** Percent of the write rate that busy clusters take together while quiet ones write (core/fair-bucket.ts). */
  readonly busyWritePercent: number;
  readonly logLevel: string;
  /** Append log lines to this file instead of stdout (every thread). */
  readonly logFile: string | undefined;
  readonly maxConcurrentStarts: number;
  readonly actorMaxOldGenerationMb: number;
  /**
   * Placement of remote-cluster actors: "auto" (default) = sized to the CPUs and the
   * memory limit (src/supervisor/default-placement.ts); 0 = one thread per cluster,
   * always; N > 0 = one thread per cluster up to N clusters, then actors are packed
   * evenly over N threads.
   */
  readonly maxThreads: number | "auto";
  /** The cap of a packed actor thread's heap, MB, or "auto" (supervisor/thread-heap.ts). */
  readonly packedThreadMaxOldGenerationMb: number | "auto";
  readonly allowKubeconfigFilePaths: boolean;
  /** Accept Secrets whose kubeconfig names an http:// server or sets insecure-skip-tls-verify. */
  readonly allowInsecureRemotes: boolean;
  readonly blockedRecheckMs: number;
  /**
   * How often a cluster that does not serve the MCS API (no CRDs, a refused read, a failed
   * discovery) is checked again, the remotes for ServiceExports and the local cluster for
   * ServiceImports (SPEC §12).
   */
  readonly mcsRecheckMs: number;
  /**
   * How long a host missing from a headless Service's remote slices keeps its per-host
   * mirror (SPEC §12): a StatefulSet pod being replaced keeps its mirror's uid and
   * cluster IP; a host gone for longer is a scale-down. 0: deleted at once.
   */
  readonly headlessHostGraceMs: number;
  /** Which API carries a mirror's addresses: EndpointSlices, Endpoints, or both (SPEC §9). */
  readonly endpointsApi: EndpointsApi;
  /** The local cluster's name in its clusterset (SPEC §16): its own MCS exports' `source-cluster`. */
  readonly clusterName: string;
  /** How long a better tier of a fleet-wide Service must hold enough ready endpoints before traffic returns to it (SPEC §14). */
  readonly failbackDelayMs: number;
  /** A remote cluster unreachable this long counts as partitioned (SPEC §14); 0: never. */
  readonly staleAfterMs: number;
  /** Ready endpoints the serving tiers of a fleet-wide Service hold at least, when the tiers have them (SPEC §14). */
  readonly failoverMinReady: number;
  /** The priority of a fleet-wide Service's local member: the local cluster's own Service (SPEC §14). */
  readonly localPriority: number;
  /** Remote Services with this label are members of fleet-wide Services (SPEC §11). */
  readonly federatedSelector: LabelRequirement;
  /** Remote Services with this label are exported through their cluster's default gateway (SPEC §12); undefined: off. */
  readonly exportSelector: LabelRequirement | undefined;
  /** `host:port` of the admin HTTP server (/metrics, /healthz, /readyz, /status); "" disables it. */
  readonly adminAddr: string;
  /**
   * Shadow mode: watch and plan everything, write nothing to the local cluster (no
   * mirror, Namespace, Event or Lease), and report the plan. Refused with --leader-elect
   * (a Lease is a write, and a dry run takes nobody's place).
   */
  readonly dryRun: boolean;
}

const IN_CLUSTER_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];

export const runFlags = {
  kubeconfig: {
    type: "string",
    description: "kubeconfig of the local cluster (default: $KUBECONFIG, ~/.kube/config, then in-cluster)",
  },
  context: { type: "string", description: "kubeconfig context to use (default: the current context)" },
  namespace: {
    type: "string",
    short: "n",
    description: "namespace of the credentials Secrets (default: the Pod's namespace, else fleet-mirror)",
  },
  "resync-period": { type: "string", default: "10m", description: "full re-check of every mirror" },
  "gateway-resolve-period": {
    type: "string",
    default: "60s",
    description: "how often gateway ingress hostnames are resolved again",
  },
  "create-namespaces": {
    type: "boolean",
    default: true,
    description: "create a mirror's namespace when it does not exist locally",
  },
  "no-create-namespaces": {
    type: "boolean",
    default: false,
    description: "skip (and report) mirrors whose namespace does not exist",
  },
  "exclude-namespaces": {
    type: "string",
    default: "kube-system,kube-public,kube-node-lease",
    description: "namespaces never mirrored into",
  },
  "write-concurrency": {
    type: "string",
    default: "8",
    description: "mirrors written in parallel, and slice writes of one mirror at once",
  },
  "write-qps": { type: "string", default: "50", description: "client-side write rate limit (0: none)" },
  "write-burst": { type: "string", default: "100", description: "write burst above the rate limit" },
  "busy-write-percent": {
    type: "string",
    default: "25",
    description: "share of --write-qps that clusters with a backlog take while quiet ones write (100: no cap)",
  },
  "log-level": { type: "string", default: "info", description: LOG_LEVELS.join("|") },
  "log-file": { type: "string", description: "append logs to this file instead of stdout" },
  "max-concurrent-starts": { type: "string", default: "4", description: "actor threads starting at the same time" },
  "actor-max-old-space-mb": {
    type: "string",
    default: "96",
    description: "heap limit of each remote-cluster actor thread",
  },
  "packed-thread-max-old-space-mb": {
    type: "string",
    default: "auto",
    description:
      "heap limit of a shared (packed) actor thread at most: the actor limit times its clusters, never above this (auto: half of what the memory limit leaves, split among the packed threads; 1024 without a limit)",
  },
  "max-threads": {
    type: "string",
    default: "auto",
    description:
      "actor threads at most: one per cluster up to N, then clusters share them (0: one per cluster; auto: sized to CPUs and memory limit)",
  },
  "allow-kubeconfig-file-paths": {
    type: "boolean",
    default: false,
    description: "let credentials Secrets name files (tokenFile, client-certificate, ...) in the controller's Pod",
  },
  "allow-insecure-remotes": {
    type: "boolean",
    default: false,
    description:
      "accept credentials Secrets whose kubeconfig names an http:// server or sets insecure-skip-tls-verify (their credentials then travel without verified TLS)",
  },
  "blocked-recheck-period": {
    type: "string",
    default: "30s",
    description: "re-check of mirrors blocked by a name conflict",
  },
  "mcs-recheck-period": {
    type: "string",
    default: "5m",
    description: "re-check of a cluster that does not serve the MCS API (its CRDs installed, a read granted later)",
  },
  "headless-host-grace": {
    type: "string",
    default: "5m",
    description:
      "how long a host missing from a headless Service's remote slices keeps its per-host mirror (a pod being replaced keeps its cluster IP; 0: none)",
  },
  "endpoints-api": {
    type: "string",
    default: "endpointslices",
    description: `the API of a mirror's addresses: ${ENDPOINTS_APIS.join("|")}`,
  },
  "cluster-name": { type: "string", default: "local", description: "the local cluster's name in its clusterset (MCS)" },
  "federated-selector": {
    type: "string",
    default: DEFAULT_MEMBER_SELECTOR,
    description: "label (key=value) of the remote Services that join a fleet-wide Service <svc>-federated",
  },
  "failback-delay": {
    type: "string",
    default: "30s",
    description:
      "how long a better tier of a fleet-wide Service holds enough ready endpoints without a break before traffic returns to it",
  },
  "stale-after": {
    type: "string",
    default: "0s",
    description:
      "a remote cluster's endpoints turn not ready once its API server has been unreachable this long, unless its gateway is probed and alive (0s: never)",
  },
  "failover-min-ready": {
    type: "string",
    default: "1",
    description:
      "ready endpoints a fleet-wide Service's serving tiers must hold; tiers are added in priority order until they do",
  },
  "local-priority": {
    type: "string",
    default: "0",
    description:
      "priority of the local cluster's own Service as a member of a fleet-wide Service (lower preferred; remote clusters default to 100)",
  },
  "export-selector": {
    type: "string",
    default: DEFAULT_EXPORT_SELECTOR,
    description: "label (key=value) that exports a remote Service through its cluster's default gateway (empty: off)",
  },
  "admin-addr": {
    type: "string",
    default: ":9999",
    description: "admin HTTP server for /metrics, /healthz, /readyz, /status (host:port; empty: off)",
  },
  ...leaderFlags,
  "dry-run": {
    type: "boolean",
    default: false,
    description:
      "shadow mode: plan every write and make none (no mirror, Namespace, Event or Lease); report the plan in status, metrics and logs",
  },
  ...gatewayFlags,
  ...limitFlags,
  ...linkFlags,
  help: { type: "boolean", short: "h", description: "show this help" },
} as const;

export function flagsHelp(
  flags: Record<string, { type: string; short?: string; default?: unknown; description: string }>,
): string {
  return Object.entries(flags)
    .map(([name, f]) => {
      const head = `  ${f.short ? `-${f.short}, ` : "    "}--${name}${f.type === "string" ? " <value>" : ""}`;
      const def = f.default !== undefined && f.type === "string" ? `default ${String(f.default)}` : "";
      const rule: NumericRule | undefined = Object.hasOwn(numericFlags, name)
        ? numericFlags[name as NumericFlag]
        : undefined;
      const range = rule ? shortRange(rule) : "";
      const notes = [def, range].filter(Boolean).join("; ");
      return `${head.padEnd(40)} ${f.description}${notes ? ` (${notes})` : ""}`;
    })
    .join("\n");
}

function defaultNamespace(env: NodeJS.ProcessEnv): string {
  if (env["POD_NAMESPACE"]) return env["POD_NAMESPACE"];
  try {
    return readFileSync(IN_CLUSTER_NAMESPACE_FILE, "utf8").trim() || "fleet-mirror";
  } catch {
    return "fleet-mirror";
  }
}

/** `auto` (the default) or the flag's number (--max-threads, --packed-thread-max-old-space-mb). */
function parseAutoOrNumber(flag: NumericFlag, text: string): number | "auto" {
  if (text === "auto") return "auto";
  try {
    return parseNumericFlag(flag, text);
  } catch (error) {
    if (error instanceof ConfigError) throw new ConfigError(`${error.message}, or auto (the default)`);
    throw error;
  }
}

function parseEndpointsApi(text: string): EndpointsApi {
  const mode = ENDPOINTS_APIS.find((m) => m === text);
  if (mode === undefined)
    throw new ConfigError(`--endpoints-api: ${JSON.stringify(text)} is not one of ${ENDPOINTS_APIS.join(", ")}`);
  return mode;
}

function parseSelectorFlag(flag: string, text: string, example: string): LabelRequirement {
  const selector = parseLabelRequirement(text);
  if (typeof selector === "string")
    throw new ConfigError(`--${flag}: ${JSON.stringify(text)}: ${selector} (e.g. ${example})`);
  return Object.freeze(selector);
}

export function parseRunConfig(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Config | "help" {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({ args: [...argv], options: runFlags, strict: true, allowPositionals: false }));
  } catch (error) {
    throw new ConfigError((error as Error).message);
  }
  if (values["help"]) return "help";
  const str = (name: keyof typeof runFlags): string => String(values[name] ?? "");
  const logLevel = str("log-level");
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError(`--log-level: must be one of ${LOG_LEVELS.join(", ")}`);
  const excluded = str("exclude-namespaces")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  const namespace = typeof values["namespace"] === "string" ? values["namespace"] : defaultNamespace(env);
  const config: Config = {
    kubeconfig: typeof values["kubeconfig"] === "string" ? values["kubeconfig"] : undefined,
    context: typeof values["context"] === "string" ? values["context"] : undefined,
    namespace,
    resyncPeriodMs: parseNumericFlag("resync-period", str("resync-period")),
    gatewayResolvePeriodMs: parseNumericFlag("gateway-resolve-period", str("gateway-resolve-period")),
    createNamespaces: values["no-create-namespaces"] ? false : values["create-namespaces"] !== false,
    excludedNamespaces: Object.freeze(excluded),
    writeConcurrency: parseNumericFlag("write-concurrency", str("write-concurrency")),
    writeQps: parseNumericFlag("write-qps", str("write-qps")),
    writeBurst: parseNumericFlag("write-burst", str("write-burst")),
    busyWritePercent: parseNumericFlag("busy-write-percent", str("busy-write-percent")),
    logLevel,
    logFile: typeof values["log-file"] === "string" ? values["log-file"] : undefined,
    maxConcurrentStarts: parseNumericFlag("max-concurrent-starts", str("max-concurrent-starts")),
    actorMaxOldGenerationMb: parseNumericFlag("actor-max-old-space-mb", str("actor-max-old-space-mb")),
    maxThreads: parseAutoOrNumber("max-threads", str("max-threads")),
    packedThreadMaxOldGenerationMb: parseAutoOrNumber(
      "packed-thread-max-old-space-mb",
      str("packed-thread-max-old-space-mb"),
    ),
    allowKubeconfigFilePaths: values["allow-kubeconfig-file-paths"] === true,
    allowInsecureRemotes: values["allow-insecure-remotes"] === true,
    blockedRecheckMs: parseNumericFlag("blocked-recheck-period", str("blocked-recheck-period")),
    mcsRecheckMs: parseNumericFlag("mcs-recheck-period", str("mcs-recheck-period")),
    headlessHostGraceMs: parseNumericFlag("headless-host-grace", str("headless-host-grace")),
    endpointsApi: parseEndpointsApi(str("endpoints-api")),
    clusterName: str("cluster-name"),
    failbackDelayMs: parseNumericFlag("failback-delay", str("failback-delay")),
    staleAfterMs: parseNumericFlag("stale-after", str("stale-after")),
    failoverMinReady: parseNumericFlag("failover-min-ready", str("failover-min-ready")),
    localPriority: parseNumericFlag("local-priority", str("local-priority")),
    federatedSelector: parseSelectorFlag("federated-selector", str("federated-selector"), DEFAULT_MEMBER_SELECTOR),
    exportSelector:
      str("export-selector").trim() === ""
        ? undefined
        : parseSelectorFlag("export-selector", str("export-selector"), DEFAULT_EXPORT_SELECTOR),
    adminAddr: str("admin-addr").trim(),
    dryRun: values["dry-run"] === true,
    ...parseGatewayFlags(values),
    ...parseLimits(str),
    ...parseLeaderFlags(values, str, namespace, env),
    ...parseLinkFlags(values),
  };
  if (config.dryRun && config.leaderElect)
    throw new ConfigError(
      "--dry-run: cannot be combined with --leader-elect (or --shards): a dry run writes nothing, a Lease neither; run it as one replica without --leader-elect",
    );
  validateLeaderFlags(config);
  if (config.adminAddr !== "") parseHostPort(config.adminAddr, "admin-addr");
  if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(config.clusterName))
    throw new ConfigError(`--cluster-name: ${JSON.stringify(config.clusterName)} is not a DNS-1123 label`);
  return Object.freeze(config);
}

/** The defaults, as a Config (for the demo and tests). */
export function defaultConfig(overrides: Partial<Config> = {}): Config {
  const parsed = parseRunConfig(["--namespace", "fleet-mirror"], {});
  if (parsed === "help") throw new ConfigError("unreachable");
  return Object.freeze({ ...parsed, ...overrides });
}
