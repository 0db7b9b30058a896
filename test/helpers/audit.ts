/**
 * Reading a sandbox API server's audit log (`ControlPlaneOptions.audit`): which writes
 * each client identity made, on which objects, with which response code, and when the
 * server received them. The log has one JSON line per write (ResponseComplete stage,
 * Metadata level; see `AUDIT_POLICY` in sandbox/control-plane.ts).
 *
 * Identity: replicas of one Deployment share one ServiceAccount, so `user.username` alone
 * cannot tell them apart. Each replica's token is bound to its own Pod (TokenRequest with
 * a `boundObjectRef`, as the kubelet's projected token is), and the API server records
 * that Pod's name in `user.extra["authentication.kubernetes.io/pod-name"]`: the identity
 * of a write is that Pod name when present, else the user name.
 *
 * Flushing: the API server writes a request's line in blocking mode, before its handler
 * returns, but a reader cannot see "everything up to now" directly. `flush()` makes a
 * marker write (a dry-run Event create: it is audited, yet stores nothing) and waits for
 * its line: every write answered before the marker was sent is in the file by then.
 */
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { eventually } from "./kube.ts";

/** The audit `user.extra` key under which a Pod-bound ServiceAccount token names its Pod. */
export const POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name";

/** One audited write, as the API server recorded it. */
export interface AuditedWrite {
  readonly auditId: string;
  /** The Pod name of a Pod-bound token, else the user name (see the module comment). */
  readonly identity: string;
  readonly username: string;
  readonly userAgent: string;
  /** Kubernetes verb: create, update, patch, delete, deletecollection. */
  readonly verb: string;
  /** e.g. `services`, `endpointslices`, `leases`; with a subresource, `services/status`. */
  readonly resource: string;
  readonly apiGroup: string;
  /** Empty for cluster-scoped objects (namespaces). */
  readonly namespace: string;
  /** Empty for a create whose name the server generates, and for deletecollection. */
  readonly name: string;
  /** The response's HTTP status (201, 200, 409, 403, ...); 0 when the server recorded none. */
  readonly code: number;
  /** When the server received the request (epoch ms with a microsecond fraction; the server's clock: this machine's). */
  readonly receivedAt: number;
  /** Whether the request was a dry run (`dryRun=All`): audited, but nothing was stored. */
  readonly dryRun: boolean;
  /**
   * For a Lease write the server answered with the Lease: the holder it left there ("" when
   * released). Undefined for every other write, and for a rejected one.
   */
  readonly leaseHolder: string | undefined;
}

/** A write that changed or meant to change state: 2xx, not a dry run. */
export const succeeded = (w: AuditedWrite): boolean => w.code >= 200 && w.code < 300 && !w.dryRun;

interface RawEvent {
  readonly auditID?: string;
  readonly stage?: string;
  readonly verb?: string;
  readonly requestURI?: string;
  readonly userAgent?: string;
  readonly user?: { readonly username?: string; readonly extra?: Readonly<Record<string, readonly string[]>> };
  readonly objectRef?: {
    readonly resource?: string;
    readonly subresource?: string;
    readonly namespace?: string;
    readonly name?: string;
    readonly apiGroup?: string;
  };
  readonly responseStatus?: { readonly code?: number };
  readonly requestReceivedTimestamp?: string;
  readonly responseObject?: { readonly kind?: string; readonly spec?: { readonly holderIdentity?: string } };
}

/**
 * An RFC 3339 time with up to nine fractional digits as epoch ms, keeping the
 * microseconds as a fraction: writes a millisecond apart must still be ordered.
 */
export function parseMicroTime(text: string): number {
  const match = /^(.*?)(?:\.(\d+))?Z$/.exec(text);
  if (!match?.[1]) return Number.NaN;
  const fraction = match[2] ?? "";
  return Date.parse(`${match[1]}Z`) + Number(`0.${fraction || "0"}`) * 1_000;
}

/** Parses one audit line; undefined for anything that is not a complete ResponseComplete event. */
export function parseAuditLine(line: string): AuditedWrite | undefined {
  if (!line.startsWith("{")) return undefined;
  let event: RawEvent;
  try {
    event = JSON.parse(line) as RawEvent;
  } catch {
    return undefined; // a line still being written
  }
  if (event.stage !== "ResponseComplete" || !event.objectRef || !event.verb) return undefined;
  const ref = event.objectRef;
  const username = event.user?.username ?? "";
  const pod = event.user?.extra?.[POD_NAME_EXTRA]?.[0];
  const query = event.requestURI?.split("?")[1] ?? "";
  return {
    auditId: event.auditID ?? "",
    identity: pod ?? username,
    username,
    userAgent: event.userAgent ?? "",
    verb: event.verb,
    resource: ref.subresource ? `${ref.resource ?? ""}/${ref.subresource}` : (ref.resource ?? ""),
    apiGroup: ref.apiGroup ?? "",
    namespace: ref.namespace ?? "",
    name: ref.name ?? "",
    code: event.responseStatus?.code ?? 0,
    receivedAt: parseMicroTime(event.requestReceivedTimestamp ?? ""),
    dryRun: new URLSearchParams(query).getAll("dryRun").includes("All"),
    leaseHolder:
      ref.resource === "leases" && event.responseObject?.kind === "Lease"
        ? (event.responseObject.spec?.holderIdentity ?? "")
        : undefined,
  };
}

/** Parses every complete line of `text`. */
export function parseAuditLog(text: string): AuditedWrite[] {
  const writes: AuditedWrite[] = [];
  for (const line of text.split("\n")) {
    const write = parseAuditLine(line);
    if (write) writes.push(write);
  }
  return writes;
}

export interface WriteFilter {
  /** Only writes by this identity (Pod name or user name). */
  readonly identity?: string;
  /** Only these resources (`services`, `endpoints`, ...). */
  readonly resources?: readonly string[];
  readonly namespace?: string;
  /** Only writes the server received at or after this time (epoch ms). */
  readonly since?: number;
  /** Only writes the server received before this time (epoch ms). */
  readonly until?: number;
  /** Default false: only writes that succeeded (`succeeded`); true keeps rejected ones and dry runs. */
  readonly includeFailed?: boolean;
}

/**
 * The last `limit` of `writes`, one line each (time, identity, verb, object, code), for a
 * failing test's diagnostics.
 */
export function describeWrites(writes: readonly AuditedWrite[], limit = 100): string {
  return writes
    .slice(-limit)
    .map(
      (w) =>
        `${new Date(w.receivedAt).toISOString()} ${w.identity} ${w.verb} ${w.resource} ${w.namespace}/${w.name} ${w.code}${w.dryRun ? " (dry run)" : ""}`,
    )
    .join("\n");
}

/** The resources a mirror consists of (SPEC §3, §9): the writes that "mirror" a Service. */
export const MIRROR_RESOURCES: readonly string[] = ["services", "endpoints", "endpointslices"];

/** The audit log of one sandbox API server, read from disk on every question (it is small). */
export class AuditLog {
  readonly path: string;
  readonly #admin: CoreV1Api;

  /** `admin` makes the marker writes of `flush()`; it needs create on Events in `default`. */
  constructor(path: string, admin: KubeConfig) {
    this.path = path;
    this.#admin = admin.makeApiClient(CoreV1Api);
  }

  /** Every write recorded so far, in file order (the order the server finished them). */
  all(): AuditedWrite[] {
    if (!existsSync(this.path)) return [];
    return parseAuditLog(readFileSync(this.path, "utf8"));
  }

  /** The recorded writes that pass `filter` (by default: successful ones only). */
  writes(filter: WriteFilter = {}): AuditedWrite[] {
    return this.all().filter(
      (w) =>
        (filter.includeFailed || succeeded(w)) &&
        (filter.identity === undefined || w.identity === filter.identity) &&
        (filter.resources === undefined || filter.resources.includes(w.resource)) &&
        (filter.namespace === undefined || w.namespace === filter.namespace) &&
        (filter.since === undefined || w.receivedAt >= filter.since) &&
        (filter.until === undefined || w.receivedAt < filter.until),
    );
  }

  /** Successful writes per identity, for a failure message or a quick overview. */
  countByIdentity(filter: WriteFilter = {}): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const w of this.writes(filter)) counts[w.identity] = (counts[w.identity] ?? 0) + 1;
    return counts;
  }

  /**
   * Resolves once every write the server answered before this call is in the file: makes
   * a marker write (a dry-run Event create in `default`, which stores nothing) and waits
   * for its line. Returns the marker's receive time: a bound for `until`.
   */
  async flush(timeoutMs = 30_000): Promise<number> {
    const name = `audit-marker-${randomBytes(6).toString("hex")}`;
    await this.#admin.createNamespacedEvent({
      namespace: "default",
      dryRun: "All",
      body: {
        metadata: { name, namespace: "default" },
        involvedObject: { kind: "Namespace", name: "default" },
        reason: "AuditMarker",
        message: "marks a point in the audit log",
      },
    });
    const marker = await eventually(
      `audit marker ${name} in ${this.path}`,
      () => this.all().find((w) => w.dryRun && w.resource === "events" && w.name === name),
      timeoutMs,
      50,
    );
    return marker.receivedAt;
  }
}
