/**
 * The Lease object through the API: read, create, and conditionally replace one
 * coordination.k8s.io/v1 Lease, checking that every answer is a Lease. No decisions
 * (those are in lease.ts) and no state: the elector keeps what it observed.
 */
import { KubeApiError, type KubeClient, KubeTransportError } from "../kube/client.ts";
import type { LeaseRecord } from "./lease.ts";

export interface LeaseObject {
  readonly metadata?: { readonly resourceVersion?: string } & Record<string, unknown>;
  readonly spec?: unknown;
  readonly [field: string]: unknown;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function asLease(value: unknown, what: string): LeaseObject {
  if (!isRecord(value) || value["kind"] !== "Lease") throw new Error(`${what}: the answer is not a Lease`);
  return value as LeaseObject;
}

export function isStatus(error: unknown, status: number): error is KubeApiError {
  return error instanceof KubeApiError && error.status === status;
}

export function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Whether trying again can help (unknown errors: yes). */
export function retryable(error: unknown): boolean {
  if (error instanceof KubeApiError || error instanceof KubeTransportError) return error.retryable;
  return true;
}

export interface RequestBounds {
  readonly signal: AbortSignal;
  readonly timeoutMs: number;
}

/** `/apis/coordination.k8s.io/v1/namespaces/<namespace>/leases`. */
export function leasesPath(namespace: string): string {
  return `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/leases`;
}

/** A Lease as listed: its name, resourceVersion and spec (list items carry no `kind`). */
export interface ListedLease {
  readonly name: string;
  readonly resourceVersion: string;
  readonly spec: unknown;
}

/**
 * LIST the Leases of `namespace` (one page; `labelSelector` optional). Items without a
 * name are skipped; throws on any failure or an answer that is not a list.
 */
export async function listLeases(
  client: KubeClient,
  namespace: string,
  bounds: RequestBounds & { readonly labelSelector?: string },
): Promise<ListedLease[]> {
  const path = leasesPath(namespace);
  const answer = await client.request<unknown>("GET", path, {
    signal: bounds.signal,
    timeoutMs: bounds.timeoutMs,
    ...(bounds.labelSelector ? { query: { labelSelector: bounds.labelSelector } } : {}),
  });
  if (!isRecord(answer) || !Array.isArray(answer["items"])) throw new Error(`${path}: the answer is not a LeaseList`);
  const out: ListedLease[] = [];
  for (const item of answer["items"] as unknown[]) {
    if (!isRecord(item) || !isRecord(item["metadata"])) continue;
    const { name, resourceVersion } = item["metadata"];
    if (typeof name !== "string") continue;
    out.push({ name, resourceVersion: typeof resourceVersion === "string" ? resourceVersion : "", spec: item["spec"] });
  }
  return out;
}

/** DELETE Lease `name` only if it is still at `resourceVersion` (409 otherwise); 404 counts as done. */
export async function deleteLease(
  client: KubeClient,
  namespace: string,
  name: string,
  resourceVersion: string,
  bounds: RequestBounds,
): Promise<void> {
  try {
    await client.request<unknown>("DELETE", `${leasesPath(namespace)}/${encodeURIComponent(name)}`, {
      body: { apiVersion: "v1", kind: "DeleteOptions", preconditions: { resourceVersion } },
      ...bounds,
    });
  } catch (error) {
    if (!isStatus(error, 404)) throw error;
  }
}

export class LeaseApi {
  readonly #client: KubeClient;
  readonly #namespace: string;
  readonly #name: string;
  readonly #collection: string;
  readonly #path: string;
  readonly #labels: Readonly<Record<string, string>> | undefined;

  /** `labels`: set on the Lease when this creates it (e.g. to find a group of Leases). */
  constructor(client: KubeClient, namespace: string, name: string, labels?: Readonly<Record<string, string>>) {
    this.#client = client;
    this.#namespace = namespace;
    this.#name = name;
    this.#labels = labels;
    this.#collection = leasesPath(namespace);
    this.#path = `${this.#collection}/${encodeURIComponent(name)}`;
  }

  /** GET the Lease; undefined on 404; throws on any other failure. */
  async get(bounds: RequestBounds): Promise<LeaseObject | undefined> {
    try {
      return asLease(await this.#client.request<unknown>("GET", this.#path, bounds), this.#path);
    } catch (error) {
      if (isStatus(error, 404)) return undefined;
      throw error;
    }
  }

  /** POST a new Lease holding `record`; 409 when someone created it first. */
  async create(record: LeaseRecord, bounds: RequestBounds): Promise<LeaseObject> {
    const body = {
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: { name: this.#name, namespace: this.#namespace, ...(this.#labels ? { labels: this.#labels } : {}) },
      spec: record,
    };
    return asLease(
      await this.#client.request<unknown>("POST", this.#collection, { body, ...bounds }),
      this.#collection,
    );
  }

  /** PUT the Lease with `record` over its spec; the read's resourceVersion makes it conditional (409 on a clash). */
  async put(lease: LeaseObject, record: LeaseRecord, bounds: RequestBounds): Promise<LeaseObject> {
    const spec = isRecord(lease.spec) ? lease.spec : {};
    const body = { ...lease, spec: { ...spec, ...record } };
    return asLease(await this.#client.request<unknown>("PUT", this.#path, { body, ...bounds }), this.#path);
  }
}
