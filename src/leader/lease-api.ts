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

export class LeaseApi {
  readonly #client: KubeClient;
  readonly #namespace: string;
  readonly #name: string;
  readonly #collection: string;
  readonly #path: string;

  constructor(client: KubeClient, namespace: string, name: string) {
    this.#client = client;
    this.#namespace = namespace;
    this.#name = name;
    this.#collection = `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/leases`;
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
      metadata: { name: this.#name, namespace: this.#namespace },
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
