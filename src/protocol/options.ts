/**
 * Plain-data payloads of the lifecycle and Event messages: actor options, writer
 * options, fault kinds and Event requests. Types and schemas from one definition.
 */
import * as v from "valibot";
import { parseCidr } from "../core/ip.ts";
import { ENDPOINTS_APIS } from "../core/mirror-kinds.ts";
import { count, type DeepReadonly, finite, name } from "./codec.ts";

const nonNegative = v.pipe(finite, v.minValue(0, "must be >= 0"));
const atLeastOne = v.pipe(count, v.minValue(1, "must be >= 1"));
const cidr = v.pipe(
  v.string(),
  v.check((text) => typeof parseCidr(text) !== "string", "must be a CIDR range"),
);

/**
 * The local cluster's own address ranges (core/address-policy.ts `LocalRanges`), read by
 * the main thread from the local API: gateway addresses in them are refused (SPEC §10).
 */
export const LocalRangesSchema = v.object({
  /** Grows with every change; a receiver keeps the highest it has seen. */
  seq: count,
  serviceCidrs: v.array(cidr),
  podCidrs: v.array(cidr),
});
export type LocalRangesMessage = DeepReadonly<v.InferOutput<typeof LocalRangesSchema>>;

/** The operator's gateway address policy and caps (SPEC §10; the `--gateway-*` flags). */
export const GatewayPolicyOptionsSchema = v.object({
  cidrAllow: v.array(cidr),
  cidrDeny: v.array(cidr),
  /** Addresses per gateway at most. */
  maxAddresses: atLeastOne,
  /** Gateways probed per cluster at most. */
  maxProbed: atLeastOne,
  /** Probes in flight per cluster at most. */
  maxProbesInFlight: atLeastOne,
  /** `--stale-after` in ms (SPEC §14): unreachable this long, unprobed gateways' addresses are not ready; absent or 0: never. */
  staleAfterMs: v.exactOptional(nonNegative),
});
export type GatewayPolicyOptions = DeepReadonly<v.InferOutput<typeof GatewayPolicyOptionsSchema>>;

export const RemoteActorOptionsSchema = v.object({
  /** How often ingress hostnames are resolved again (SPEC §2). */
  resolvePeriodMs: nonNegative,
  /** Un-acknowledged batches allowed in flight to the writer (>= 1). */
  maxInFlight: v.pipe(count, v.minValue(1, "must be >= 1")),
  /** Changes arriving within this window are sent as one batch. */
  batchDelayMs: nonNegative,
  logLevel: v.string(),
  watchInactivityTimeoutMs: v.exactOptional(nonNegative),
  /** How often remote reads that were denied (403) are tried again (SPEC §12). Default 60 s; tests set less. */
  deniedRetryMs: v.exactOptional(nonNegative),
  /** Remote Services with this label (key = value) are members of fleet-wide Services (SPEC §11). */
  memberSelector: v.object({ key: name, value: v.string() }),
  /**
   * How often a cluster whose ServiceExports are not served, forbidden or undiscoverable
   * is checked again (SPEC §12: the CRDs or the read can come later). Absent: 60 s.
   */
  mcsRecheckMs: v.exactOptional(v.pipe(finite, v.minValue(1, "must be >= 1"))),
  /** The gateway address policy and caps (SPEC §10); absent: the defaults (core/address-policy.ts, gateway-health.ts). */
  gatewayPolicy: v.exactOptional(GatewayPolicyOptionsSchema),
  /** Tests only: the DNS servers (`ip:port`) gateway hostnames are resolved with; absent: the system's. */
  gatewayDnsServers: v.exactOptional(v.array(v.string())),
  /**
   * How long a host missing from a headless Service's remote slices stays a host (its
   * per-host mirror kept; SPEC §12, `--headless-host-grace`). Absent: 5 min.
   */
  headlessHostGraceMs: v.exactOptional(nonNegative),
  /** Largest response body the actor's API client reads (`--max-response-mb`); absent: 64 MiB. */
  maxResponseBytes: v.exactOptional(v.pipe(count, v.minValue(1, "must be >= 1"))),
  /**
   * Accept `actor.inject-fault` (tests only). Default false: the message is then
   * rejected as a protocol error. Set only by a Supervisor constructed with
   * `testHooks: true`, never from the command line.
   */
  testHooks: v.exactOptional(v.boolean()),
});
export type RemoteActorOptions = DeepReadonly<v.InferOutput<typeof RemoteActorOptionsSchema>>;

/**
 * A fault a test asks an actor to suffer: an exception thrown from one of the actor's
 * callbacks ("throw": caught by the actor's guard and reported as that actor's
 * failure, so its neighbours on a shared thread are untouched), and faults of the
 * whole thread: an unhandled promise rejection, `process.exit(3)` (in a worker it ends
 * only the thread), or allocation until the thread's heap limit (ERR_WORKER_OUT_OF_MEMORY).
 */
export const ACTOR_FAULT_KINDS = ["throw", "reject", "exit", "oom"] as const;
export type ActorFaultKind = (typeof ACTOR_FAULT_KINDS)[number];

export const WriterOptionsSchema = v.object({
  createNamespaces: v.boolean(),
  excludedNamespaces: v.array(v.string()),
  /** Writes in flight at once (an integer >= 1). */
  concurrency: v.pipe(count, v.minValue(1, "must be >= 1")),
  /** Client-side write rate limit; qps <= 0 disables it. */
  qps: finite,
  burst: count,
  /** Percent of the rate that busy clusters take together while quiet ones write (1–100; 100: no cap). */
  busyWritePercent: v.exactOptional(v.pipe(count, v.minValue(1, "must be >= 1"), v.maxValue(100, "must be <= 100"))),
  resyncPeriodMs: nonNegative,
  /** Re-check period of mirrors blocked by a conflict or a missing namespace. */
  blockedRecheckMs: nonNegative,
  /** Which API carries a mirror's addresses (SPEC §9, `--endpoints-api`). */
  endpointsApi: v.picklist(ENDPOINTS_APIS),
  logLevel: v.string(),
  /** Where Events for the controller itself (not a mirror) are recorded. */
  namespace: name,
  /** Leader election is on: nothing is written until a `writer.fence` allows it. */
  fenced: v.exactOptional(v.boolean()),
  /**
   * Sharded across replicas (`--shards`, > 1): the shard count S. The writer then holds
   * no shard (writes nothing, plans nothing) until a `writer.shards` names the shards it
   * holds and their deadlines. Absent: one shard, held (fenced by `writer.fence` when
   * `fenced`).
   */
  shards: v.exactOptional(v.pipe(count, v.minValue(1, "must be >= 1"))),
  /** Fleet-wide Services' tiers (SPEC §14): `--failback-delay` in ms; absent: 30 s. */
  failbackDelayMs: v.exactOptional(nonNegative),
  /**
   * The local member of fleet-wide Services (SPEC §14): local Services with this label
   * (`--federated-selector`) join `<svc>-federated` at `localPriority` (`--local-priority`).
   * Absent: the local cluster has no member.
   */
  localMembers: v.exactOptional(
    v.object({ key: v.string(), value: v.string(), priority: v.pipe(count, v.maxValue(1000)) }),
  ),
  /** Fleet-wide Services' tiers (SPEC §14): `--failover-min-ready`; absent: 1. */
  failoverMinReady: v.exactOptional(v.pipe(count, v.minValue(1, "must be >= 1"))),
  /** The local cluster's name in its clusterset (`--cluster-name`, SPEC §16); absent: `local`. */
  clusterName: v.exactOptional(name),
  /** How often the local cluster is checked again for ServiceImports while they are not readable (SPEC §12); absent: 60 s. */
  mcsRecheckMs: v.exactOptional(v.pipe(finite, v.minValue(1, "must be >= 1"))),
  /** Namespaces created per cluster at most (`--max-namespaces-per-cluster`); absent or 0: no quota. */
  maxNamespacesPerCluster: v.exactOptional(count),
  /** Largest response body the writer's API client reads (`--max-response-mb`); absent: 64 MiB. */
  maxResponseBytes: v.exactOptional(v.pipe(count, v.minValue(1, "must be >= 1"))),
  /** `run --dry-run`: plan every write, send none (no mirror, Namespace or Event), report the plan. */
  dryRun: v.exactOptional(v.boolean()),
});
export type WriterOptions = DeepReadonly<v.InferOutput<typeof WriterOptionsSchema>>;

/** A Kubernetes Event the writer records on the supervisor's behalf. */
export const EventRequestSchema = v.object({
  involved: v.object({
    kind: name,
    namespace: v.string(),
    name,
    uid: v.exactOptional(v.string()),
    apiVersion: name,
  }),
  type: v.picklist(["Normal", "Warning"]),
  reason: name,
  message: v.string(),
});
export type EventRequest = DeepReadonly<v.InferOutput<typeof EventRequestSchema>>;
