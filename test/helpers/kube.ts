/** Small conveniences over @kubernetes/client-node for tests (never used by the product). */
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import type { SandboxCluster } from "../../sandbox/control-plane.ts";

export function kubeConfigFromString(text: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromString(text);
  return kc;
}

export function adminKubeConfig(cluster: SandboxCluster): KubeConfig {
  return kubeConfigFromString(cluster.adminKubeconfig);
}

export function coreApi(kc: KubeConfig): CoreV1Api {
  return kc.makeApiClient(CoreV1Api);
}

/** The HTTP status of a client-node ApiException, or undefined for anything else. */
export function statusCode(error: unknown): number | undefined {
  if (typeof error === "object" && error !== null && "code" in error) {
    const code = (error as { code: unknown }).code;
    return typeof code === "number" ? code : undefined;
  }
  return undefined;
}

/** Polls `check` until it returns a value that is not undefined, or throws after `timeoutMs`. */
export async function eventually<T>(
  what: string | (() => string),
  check: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 30_000,
  intervalMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) {
      const description = typeof what === "function" ? what() : what;
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${description}`, { cause: lastError });
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** uid and resourceVersion of an object: equal identities mean it was not written in between. */
export function objectIdentity(object: { readonly metadata?: { uid?: string; resourceVersion?: string } }): string {
  return `${object.metadata?.uid}@${object.metadata?.resourceVersion}`;
}
