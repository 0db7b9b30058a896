/**
 * An in-memory Lease collection in namespace `fleet-mirror` answering the calls
 * src/leader/lease-api.ts makes (GET, list, POST, conditional PUT and DELETE), for unit
 * tests of the electors and the shard coordinator without an API server. A test may read
 * the Leases, or put one there as another replica would.
 */
import type { KubeClient } from "../../src/kube/client.ts";
import { KubeApiError } from "../../src/kube/errors.ts";

const COLLECTION = "/apis/coordination.k8s.io/v1/namespaces/fleet-mirror/leases";

export type Stored = { metadata: { name: string; resourceVersion: string }; spec: unknown } & Record<string, unknown>;

/** A client over the Leases `leases` (by name; empty by default), which the test may read or fill. */
export function leaseStore(leases = new Map<string, Stored>()): KubeClient {
  let version = 0;
  const fail = (method: string, path: string, status: number): never => {
    throw new KubeApiError({ method, path, server: "memory", status, reason: String(status), statusMessage: "" });
  };
  const store = (body: Stored): Stored => {
    const lease = { ...body, kind: "Lease", metadata: { ...body.metadata, resourceVersion: String(++version) } };
    leases.set(lease.metadata.name, lease);
    return structuredClone(lease);
  };
  const request = async (method: string, path: string, options?: { body?: unknown }): Promise<unknown> => {
    await new Promise((resolve) => setImmediate(resolve));
    const body = options?.body as Stored | undefined;
    if (path === COLLECTION) {
      if (method === "GET") return { items: [...leases.values()].map((l) => structuredClone(l)) };
      if (method === "POST" && body) return leases.has(body.metadata.name) ? fail(method, path, 409) : store(body);
    }
    const name = decodeURIComponent(path.slice(COLLECTION.length + 1));
    const current = leases.get(name);
    if (!current) return fail(method, path, 404);
    if (method === "GET") return structuredClone(current);
    const precondition =
      method === "PUT"
        ? body?.metadata.resourceVersion
        : (body as { preconditions?: { resourceVersion?: string } } | undefined)?.preconditions?.resourceVersion;
    if (precondition !== undefined && precondition !== current.metadata.resourceVersion) fail(method, path, 409);
    if (method === "PUT" && body) return store(body);
    if (method === "DELETE") return leases.delete(name);
    return fail(method, path, 405);
  };
  return { request } as unknown as KubeClient;
}
