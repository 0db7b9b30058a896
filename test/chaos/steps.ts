/**
 * The steps of a chaos run (schedule.ts draws them, run.ts applies them): changes to the
 * remote clusters, faults, replica faults, and changes to the other ways of exporting
 * (label export, fleet-wide members, MCS ServiceExports, headless hosts; mode-schedule.ts).
 * Types only, plus the fixed names of the world the steps act on.
 */

export interface PortSpec {
  readonly name?: string;
  readonly protocol: "TCP" | "UDP";
  readonly port: number;
  readonly targetPort?: number;
}

export interface GatewayRef {
  readonly namespace: string;
  readonly name: string;
}

/** Gateways the schedule creates in every remote; `missing` is referenced but never created. */
export const GATEWAYS: readonly GatewayRef[] = [
  { namespace: "gateway", name: "gateway" },
  { namespace: "gateway", name: "gw2" },
];
export const MISSING_GATEWAY: GatewayRef = { namespace: "gateway", name: "missing" };

/** Namespaces the schedule's Services live in (kube-system is excluded from mirroring). */
export const CHURN_NAMESPACES = ["shop", "churn", "kube-system"] as const;

export type RemoteStep =
  | {
      readonly kind: "export-new";
      readonly cluster: string;
      readonly namespace: string;
      readonly name: string;
      readonly ports: readonly PortSpec[];
      readonly gateway: GatewayRef;
    }
  /** `half`: drop one of the two annotations only, which also means "not exported". */
  | {
      readonly kind: "unexport";
      readonly cluster: string;
      readonly namespace: string;
      readonly name: string;
      readonly half: boolean;
    }
  | {
      readonly kind: "re-export";
      readonly cluster: string;
      readonly namespace: string;
      readonly name: string;
      readonly gateway: GatewayRef;
    }
  | {
      readonly kind: "change-ports";
      readonly cluster: string;
      readonly namespace: string;
      readonly name: string;
      readonly ports: readonly PortSpec[];
    }
  | { readonly kind: "delete-service"; readonly cluster: string; readonly namespace: string; readonly name: string }
  /** Deleted and created again at once under the same name (a new uid), with new ports. */
  | {
      readonly kind: "recreate-service";
      readonly cluster: string;
      readonly namespace: string;
      readonly name: string;
      readonly ports: readonly PortSpec[];
      readonly gateway: GatewayRef;
    }
  /** A hand edit of a (churn) mirror in the local cluster, which must be undone (SPEC §4). */
  | {
      readonly kind: "tamper-local";
      readonly cluster: string;
      readonly namespace: string;
      readonly name: string;
      readonly action: "delete-service" | "delete-endpoints" | "edit-ports" | "clear-endpoints";
    }
  | { readonly kind: "gateway-ips"; readonly cluster: string; readonly gateway: GatewayRef; readonly ips: string[] }
  | { readonly kind: "gateway-remove-ingress"; readonly cluster: string; readonly gateway: GatewayRef }
  | {
      readonly kind: "gateway-identity";
      readonly cluster: string;
      readonly gateway: GatewayRef;
      readonly identity: string;
    }
  /** Changes the incoming-port number, or renames the port so the gateway is unusable (`portName`). */
  | {
      readonly kind: "gateway-port";
      readonly cluster: string;
      readonly gateway: GatewayRef;
      readonly port: number;
      readonly portName: string;
    }
  | { readonly kind: "gateway-delete"; readonly cluster: string; readonly gateway: GatewayRef }
  /**
   * A gateway address dies (probes on): its probe server stops (refused), answers 503
   * or accepts and never answers; every gateway at that address is affected.
   */
  | { readonly kind: "probe-fail"; readonly address: string; readonly how: ProbeFailure }
  /** A dead gateway address answers its probes again. */
  | { readonly kind: "probe-recover"; readonly address: string }
  | {
      readonly kind: "gateway-create";
      readonly cluster: string;
      readonly gateway: GatewayRef;
      readonly ips: string[];
      readonly port: number;
      readonly identity: string;
    };

export const PROBE_FAILURES = ["stop", "unavailable", "hang"] as const;
export type ProbeFailure = (typeof PROBE_FAILURES)[number];

export type FaultStep =
  | { readonly kind: "cut-watches"; readonly cluster: string }
  | { readonly kind: "cut-all"; readonly cluster: string }
  | { readonly kind: "stall"; readonly cluster: string; readonly ms: number }
  | { readonly kind: "refuse"; readonly cluster: string; readonly ms: number }
  | { readonly kind: "latency"; readonly cluster: string; readonly latencyMs: number; readonly ms: number }
  | {
      readonly kind: "corrupt-watch";
      readonly cluster: string;
      readonly mode: "invalid-json" | "wrong-kind";
      readonly ms: number;
    }
  | {
      readonly kind: "errors";
      readonly cluster: string;
      readonly status: 409 | 429 | 500 | 503;
      readonly errorRate: number;
      readonly retryAfterSeconds?: number;
      readonly ms: number;
    }
  | { readonly kind: "restart-remote-api"; readonly cluster: string }
  | { readonly kind: "restart-local-api" }
  | { readonly kind: "kill-controller" }
  | { readonly kind: "term-controller" }
  | ReplicaStep;

/**
 * Faults of one replica of a sharded Deployment (`ScheduleOptions.replicas`): kill -9
 * (it stays down until a `start-replica` step or the end of the schedule), a SIGTERM
 * rolling restart (it must exit 0 and is started again at once), and a partition of its
 * local API for `ms` (its proxy stalls every request and stream, then lets them through).
 */
export type ReplicaStep =
  | { readonly kind: "kill-replica"; readonly replica: string }
  | { readonly kind: "start-replica"; readonly replica: string }
  | { readonly kind: "term-replica"; readonly replica: string }
  | { readonly kind: "partition-replica"; readonly replica: string; readonly ms: number };

export type Step = (RemoteStep | FaultStep | ModeStep) & { readonly pauseMs: number };

/** Whether the step needs the fault proxy (the others work on direct registrations too). */
export function needsProxy(step: Step): boolean {
  return ["cut-watches", "cut-all", "stall", "refuse", "latency", "corrupt-watch", "errors"].includes(step.kind);
}

export function describeStep(step: Step): string {
  const { kind, pauseMs, ...rest } = step;
  const fields = Object.entries(rest)
    .map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : String(v)}`)
    .join(" ");
  return `${kind} ${fields} (then ${pauseMs} ms)`;
}

/**
 * The world of the other ways to export (SPEC §11, §12), made at set-up in every remote
 * and changed only by `ModeStep`s (never by the remote changes above, so that the two
 * generators never disagree about a Service):
 * - `MODE_SERVICES` in `MODE_NAMESPACE`: exported by label or by annotation, and
 *   members of fleet-wide Services, as the steps toggle them; their ports switch
 *   between two sets, so fleet-wide members come to disagree;
 * - `MCS_SERVICES` in `MCS_NAMESPACE`: exported by ServiceExport; the same ports in
 *   every remote, never changed (which export's ports win a conflict rests on
 *   registration times the oracle does not see: unit-tested in plan-imports instead);
 * - `HEADLESS_SERVICE`: a headless Service exported by annotation whose remote slices
 *   name 1–3 hosts of `HEADLESS_HOSTS`.
 */
export const MODE_NAMESPACE = "modes";
export const MODE_SERVICES = ["m-0", "m-1", "m-2", "m-3"] as const;
export const MCS_NAMESPACE = "mcs";
export const MCS_SERVICES = ["api-0", "api-1"] as const;
export const HEADLESS_SERVICE = { namespace: "stateful", name: "db" } as const;
export const HEADLESS_HOSTS = ["db-0", "db-1", "db-2", "db-3"] as const;
/** Every registration's default gateway (its Secret's annotations, SPEC §1, §12). */
export const DEFAULT_GATEWAY: GatewayRef = { namespace: "gateway", name: "gw2" };
/** The two port sets of the mode Services. */
export const MODE_PORTS: readonly (readonly PortSpec[])[] = [
  [{ name: "http", protocol: "TCP", port: 80, targetPort: 8080 }],
  [
    { name: "http", protocol: "TCP", port: 80, targetPort: 8080 },
    { name: "grpc", protocol: "TCP", port: 90, targetPort: 9090 },
  ],
];

/** Changes to the other ways of exporting (SPEC §11, §12), on the world above. */
export type ModeStep =
  /** Sets the export label to a value (`true`, a look-alike, a negative), or removes it (`null`). */
  | { readonly kind: "label-export"; readonly cluster: string; readonly name: string; readonly value: string | null }
  /** Sets the §2 annotations to a gateway, or removes them (`null`). */
  | {
      readonly kind: "annotate-export";
      readonly cluster: string;
      readonly name: string;
      readonly gateway: GatewayRef | null;
    }
  /** Joins (or leaves) the fleet-wide Service `<name>-federated`: the member label on or off. */
  | { readonly kind: "member"; readonly cluster: string; readonly name: string; readonly join: boolean }
  | {
      readonly kind: "mode-ports";
      readonly cluster: string;
      readonly name: string;
      readonly ports: readonly PortSpec[];
    }
  /** Creates (or deletes) the ServiceExport of an MCS Service. */
  | { readonly kind: "service-export"; readonly cluster: string; readonly name: string; readonly exported: boolean }
  /** The headless Service's remote slice names exactly these hosts (1–3; never none, see mode-schedule.ts). */
  | { readonly kind: "headless-hosts"; readonly cluster: string; readonly hosts: readonly string[] };

export const MODE_STEP_KINDS: readonly ModeStep["kind"][] = [
  "label-export",
  "annotate-export",
  "member",
  "mode-ports",
  "service-export",
  "headless-hosts",
];

export function isModeStep(step: Step): step is ModeStep & { readonly pauseMs: number } {
  return (MODE_STEP_KINDS as readonly string[]).includes(step.kind);
}
