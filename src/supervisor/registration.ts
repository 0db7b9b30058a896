/**
 * Turns a credentials Secret (SPEC §1) into a cluster registration, or a specific,
 * actionable reason why it registers nothing. Runs on the supervisor's thread; what it
 * produces is plain data. The kubeconfig itself is checked by src/kube/kubeconfig.ts
 * (SPEC §7's auth-method policy).
 */
import { createHash } from "node:crypto";
import type { ConnectionSpec } from "../core/connection.ts";
import { DEFAULT_GATEWAY, type GatewayRef } from "../core/export.ts";
import {
  CLUSTER_NAME,
  GATEWAY_NAME,
  GATEWAY_NS,
  KUBECONFIG_KEY,
  REMOTE_CLUSTER_DOMAIN,
  SECRET_TYPE,
} from "../core/labels.ts";
import type { LinkSettings } from "../core/link.ts";
import { validateDns1123Label, validateDns1123Subdomain, validateMirrorName } from "../core/naming.ts";
import type { Secret } from "../core/objects.ts";
import { PRIORITY_ANNOTATION, parsePriority } from "../core/tiers.ts";
import {
  b64decode,
  connectionFromKubeconfig,
  InvalidKubeconfig,
  type KubeconfigProblem,
  type ParseOptions,
} from "../kube/kubeconfig.ts";

export type { ParseOptions };

export interface Registration {
  readonly cluster: string;
  readonly domain: string;
  readonly connection: ConnectionSpec;
  /**
   * The cluster's default gateway (SPEC §12): the Secret's `mirror.linkerd.io/gateway-name`
   * and `mirror.linkerd.io/gateway-ns` annotations, each defaulting on its own to
   * DEFAULT_GATEWAY's. Label export and fleet-wide members without §2 annotations use it.
   */
  readonly defaultGateway: GatewayRef;
  /**
   * The cluster's priority (SPEC §14): annotation `mirror.linkerd.io/priority`, 0–1000,
   * lower preferred; the default when absent or invalid. Only the local writer uses it,
   * so it is not in the fingerprint: changing it never restarts the actor.
   */
  readonly priority: number;
  /** Why the priority annotation was not used (then `priority` is the default). */
  readonly priorityProblem?: string;
  /** Set when a Link registers the cluster (SPEC §15; link-registry.ts): its selectors, excluded keys and gateway. */
  readonly link?: LinkSettings;
  /** Changes whenever anything the actor uses changes (rotation → restart). */
  readonly fingerprint: string;
}

/** A registration as the registry holds it: with the key and uid of what registered it (a Secret, or a Link). */
export interface RegisteredCluster extends Registration {
  readonly secretKey: string;
  readonly secretUid: string;
}

export type InvalidReason =
  | "missing-cluster-name"
  | "invalid-cluster-name"
  | "missing-cluster-domain"
  | "invalid-cluster-domain"
  | "invalid-default-gateway"
  | "missing-kubeconfig"
  | "kubeconfig-not-base64"
  | KubeconfigProblem;

export type ParsedSecret =
  | { readonly kind: "ignored" }
  | {
      readonly kind: "invalid";
      readonly cluster: string | undefined;
      readonly reason: InvalidReason;
      readonly message: string;
    }
  | { readonly kind: "valid"; readonly registration: Registration };

export function parseCredentialsSecret(secret: Secret, options: ParseOptions): ParsedSecret {
  if (secret.type !== SECRET_TYPE) return { kind: "ignored" };
  const annotations = secret.metadata.annotations ?? {};
  const cluster = annotations[CLUSTER_NAME];
  const invalid = (reason: InvalidReason, message: string, name: string | undefined = cluster): ParsedSecret => ({
    kind: "invalid",
    cluster: name,
    reason,
    message,
  });
  if (!cluster) return invalid("missing-cluster-name", `annotation ${CLUSTER_NAME} is missing`);
  const nameProblem = validateDns1123Label(cluster);
  if (nameProblem)
    return invalid("invalid-cluster-name", `cluster name ${JSON.stringify(cluster)} ${nameProblem}`, undefined);
  const domain = annotations[REMOTE_CLUSTER_DOMAIN];
  if (!domain) return invalid("missing-cluster-domain", `annotation ${REMOTE_CLUSTER_DOMAIN} is missing`);
  if (validateDns1123Subdomain(domain)) {
    return invalid("invalid-cluster-domain", `cluster domain ${JSON.stringify(domain)} is not a DNS name`);
  }
  const defaultGateway = {
    name: annotations[GATEWAY_NAME] ?? DEFAULT_GATEWAY.name,
    namespace: annotations[GATEWAY_NS] ?? DEFAULT_GATEWAY.namespace,
  };
  for (const [key, value, validate] of [
    [GATEWAY_NAME, defaultGateway.name, validateMirrorName],
    [GATEWAY_NS, defaultGateway.namespace, validateDns1123Label],
  ] as const) {
    const problem = validate(value);
    if (problem)
      return invalid(
        "invalid-default-gateway",
        `annotation ${key} ${JSON.stringify(value)} ${problem} (it names the cluster's default gateway Service or its namespace)`,
      );
  }
  const encoded = secret.data?.[KUBECONFIG_KEY];
  if (!encoded) return invalid("missing-kubeconfig", `data key ${KUBECONFIG_KEY} is missing or empty`);
  if (!/^[A-Za-z0-9+/=\s]*$/.test(encoded))
    return invalid("kubeconfig-not-base64", `data key ${KUBECONFIG_KEY} is not base64`);
  let connection: ConnectionSpec;
  try {
    connection = connectionFromKubeconfig(b64decode(encoded), options);
  } catch (error) {
    if (error instanceof InvalidKubeconfig) return invalid(error.reason, error.message);
    return invalid("kubeconfig-unparsable", (error as Error).message);
  }
  const fingerprint = createHash("sha256")
    .update(JSON.stringify({ domain, connection, defaultGateway }))
    .digest("hex")
    .slice(0, 16);
  const { priority, problem } = parsePriority(annotations[PRIORITY_ANNOTATION]);
  return {
    kind: "valid",
    registration: {
      cluster,
      domain,
      connection,
      defaultGateway,
      priority,
      ...(problem ? { priorityProblem: problem } : {}),
      fingerprint,
    },
  };
}
