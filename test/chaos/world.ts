/**
 * The fixed part of the chaos world and the calls that survive its faults: Services the
 * schedule never touches (their mirrors must keep their uids), objects fleet-mirror does
 * not own (never written), and retries of the run's own API calls through API server
 * restarts.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { CoreV1Api } from "@kubernetes/client-node";
import { statusCode } from "../helpers/kube.ts";
import type { GatewayRef } from "./steps.ts";

/** Network errors, 5xx, 429 and 409 conflicts: worth retrying while an API server restarts. */
function transient(error: unknown): boolean {
  const code = statusCode(error);
  return code === undefined || code >= 500 || code === 429 || code === 409;
}

/** Runs `fn` until it succeeds or fails for good; transient errors are retried for up to 3 min. */
export async function retrying<T>(what: string, fn: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + 180_000;
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (error) {
      if (!transient(error) || Date.now() > deadline) {
        throw new Error(`${what} failed after ${attempt + 1} attempts`, { cause: error });
      }
      await sleep(Math.min(2_000, 100 * 2 ** attempt));
    }
  }
}

export async function ignoring<T>(codes: readonly number[], fn: () => Promise<T>): Promise<T | undefined> {
  try {
    return await fn();
  } catch (error) {
    const code = statusCode(error);
    if (code !== undefined && codes.includes(code)) return undefined;
    throw error;
  }
}

/** Stable Services (never touched by the schedule): their mirrors must keep their uids. */
export const STABLE: readonly { namespace: string; name: string; gateway: GatewayRef }[] = [
  { namespace: "stable", name: "web", gateway: { namespace: "gateway", name: "gateway" } },
  { namespace: "shop", name: "api", gateway: { namespace: "gateway", name: "gw2" } },
];

/** Local objects fleet-mirror does not own; two of them hold a mirror's name. */
export const USER_OBJECTS: readonly { kind: "Service" | "Endpoints"; namespace: string; name: string }[] = [
  { kind: "Service", namespace: "shop", name: "user-web" },
  { kind: "Endpoints", namespace: "shop", name: "user-web" },
  // east exports shop/held → its mirror name is held by a user's Service
  { kind: "Service", namespace: "shop", name: "held-east" },
  // west exports churn/held → its mirror name is held by a user's Endpoints only
  { kind: "Endpoints", namespace: "churn", name: "held-west" },
];
export const HELD_EXPORTS: readonly { cluster: string; namespace: string; name: string }[] = [
  { cluster: "east", namespace: "shop", name: "held" },
  { cluster: "west", namespace: "churn", name: "held" },
];

export async function identityOf(
  api: CoreV1Api,
  kind: "Service" | "Endpoints",
  namespace: string,
  name: string,
): Promise<string> {
  const object =
    kind === "Service"
      ? await retrying(`read ${namespace}/${name}`, () => api.readNamespacedService({ namespace, name }))
      : await retrying(`read ${namespace}/${name}`, () => api.readNamespacedEndpoints({ namespace, name }));
  return `uid=${object.metadata?.uid} rv=${object.metadata?.resourceVersion}`;
}

export async function uidOf(
  api: CoreV1Api,
  kind: "Service" | "Endpoints",
  namespace: string,
  name: string,
): Promise<string> {
  try {
    const object =
      kind === "Service"
        ? await retrying(`read ${namespace}/${name}`, () => api.readNamespacedService({ namespace, name }))
        : await retrying(`read ${namespace}/${name}`, () => api.readNamespacedEndpoints({ namespace, name }));
    return `uid=${object.metadata?.uid}`;
  } catch (error) {
    if (statusCode((error as { cause?: unknown }).cause) === 404) return "deleted";
    throw error;
  }
}
