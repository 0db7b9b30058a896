/**
 * A rendered Deployment's Pod as `docker run` arguments: what the kubelet would make of the
 * chart's Pod template, for a machine with a Docker daemon and no kubelet. Pure: the
 * caller (test/helpers/chart-pod.ts) supplies the Pod's name, its directories and the
 * in-cluster API address.
 *
 * Mapped, as the kubelet maps them:
 * - command/args: `command` replaces the image's ENTRYPOINT (`--entrypoint` + its rest
 *   before the args), `args` replace its CMD;
 * - env: values, and `fieldRef` to the Pod's name, namespace and ServiceAccount; plus the
 *   in-cluster API variables the kubelet always sets (KUBERNETES_SERVICE_HOST/PORT);
 * - securityContext (the container's over the Pod's): runAsUser/runAsGroup → `--user`,
 *   runAsNonRoot (refused for uid 0), readOnlyRootFilesystem → `--read-only`,
 *   allowPrivilegeEscalation: false → `no-new-privileges`, capabilities → `--cap-drop` /
 *   `--cap-add`, privileged, seccompProfile (RuntimeDefault is Docker's default profile);
 * - resources: limits.cpu → `--cpus`, limits.memory → `--memory` (and no swap), and
 *   requests.cpu → `--cpu-shares` (milli-CPUs × 1024 / 1000, at least 2);
 * - volumeMounts of emptyDir volumes → a bind mount of a directory the caller made (as the
 *   kubelet's emptyDir on the node's disk: it outlives container restarts, not the Pod);
 * - the ServiceAccount token (automountServiceAccountToken) → a read-only bind mount of a
 *   directory holding token, ca.crt and namespace at /var/run/secrets/kubernetes.io/serviceaccount;
 * - ports: the container's ports, published on loopback by the Pod's sandbox container,
 *   which owns the network namespace the container joins (as the kubelet's pause container);
 * - terminationGracePeriodSeconds: returned, for `docker stop --time`.
 * Anything else in the container or the Pod's security settings is refused with its name,
 * so a chart change the mapping does not know cannot pass unnoticed.
 */

/** The parts of a rendered Pod template this mapping reads (the rest is checked against KNOWN_*). */
export interface PodTemplateSpec {
  readonly serviceAccountName?: string;
  readonly automountServiceAccountToken?: boolean;
  readonly terminationGracePeriodSeconds?: number;
  readonly securityContext?: SecurityContext;
  readonly volumes?: readonly { readonly name: string; readonly emptyDir?: { readonly sizeLimit?: string } }[];
  readonly containers: readonly ContainerSpec[];
}

export interface SecurityContext {
  readonly runAsUser?: number;
  readonly runAsGroup?: number;
  readonly runAsNonRoot?: boolean;
  readonly readOnlyRootFilesystem?: boolean;
  readonly allowPrivilegeEscalation?: boolean;
  readonly privileged?: boolean;
  readonly capabilities?: { readonly drop?: readonly string[]; readonly add?: readonly string[] };
  readonly seccompProfile?: { readonly type: string };
}

export interface ContainerSpec {
  readonly name: string;
  readonly image: string;
  readonly command?: readonly string[];
  readonly args?: readonly string[];
  readonly env?: readonly {
    readonly name: string;
    readonly value?: string;
    readonly valueFrom?: { readonly fieldRef?: { readonly fieldPath: string } };
  }[];
  readonly ports?: readonly { readonly name?: string; readonly containerPort: number; readonly protocol?: string }[];
  readonly resources?: {
    readonly limits?: Readonly<Record<string, string>>;
    readonly requests?: Readonly<Record<string, string>>;
  };
  readonly securityContext?: SecurityContext;
  readonly volumeMounts?: readonly { readonly name: string; readonly mountPath: string; readonly readOnly?: boolean }[];
}

/** Fields of a container the mapping handles (or that a kubelet-less run has no use for: probes, pull policy). */
const KNOWN_CONTAINER_FIELDS = new Set([
  "name",
  "image",
  "imagePullPolicy",
  "command",
  "args",
  "env",
  "ports",
  "startupProbe",
  "livenessProbe",
  "readinessProbe",
  "resources",
  "securityContext",
  "volumeMounts",
]);
const KNOWN_SECURITY_FIELDS = new Set([
  "runAsUser",
  "runAsGroup",
  "runAsNonRoot",
  "readOnlyRootFilesystem",
  "allowPrivilegeEscalation",
  "privileged",
  "capabilities",
  "seccompProfile",
]);

/** Where the Pod runs: its identity, its directories on the host, and the in-cluster API address. */
export interface PodContext {
  readonly podName: string;
  readonly namespace: string;
  /** The image to run in place of the rendered one (undefined: the rendered image). */
  readonly image?: string;
  /** KUBERNETES_SERVICE_HOST/PORT: the local API server as the Pod reaches it. */
  readonly apiHost: string;
  readonly apiPort: number;
  /** The host directory of the emptyDir volume `name` (the caller creates it, mode 0777). */
  readonly emptyDir: (name: string) => string;
  /** The host directory holding token, ca.crt and namespace. */
  readonly serviceAccountDir: string;
  /** The sandbox container whose network namespace the Pod's container joins. */
  readonly sandboxContainer: string;
  /** The container's name in Docker. */
  readonly containerName: string;
}

export interface PodRun {
  /** `docker run` arguments of the Pod's sandbox (network namespace owner), before its image and command. */
  readonly sandboxArgs: readonly string[];
  /** `docker run` arguments of the container: options, image, then command and args. */
  readonly containerArgs: readonly string[];
  /** Container ports by name (or number), as published by the sandbox. */
  readonly ports: ReadonlyMap<string, number>;
  readonly gracePeriodSeconds: number;
}

/** The mount path of the ServiceAccount token, as the kubelet mounts it. */
export const SERVICE_ACCOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount";

/** A Kubernetes quantity in its base unit: cores for CPU ("500m" → 0.5), bytes for memory ("1Gi"). */
export function parseQuantity(text: string): number {
  const match = /^([0-9]+(?:\.[0-9]+)?)(m|k|M|G|T|Ki|Mi|Gi|Ti)?$/.exec(text);
  if (!match) throw new Error(`quantity ${JSON.stringify(text)} is not one this mapping reads`);
  const factors: Readonly<Record<string, number>> = {
    m: 1e-3,
    k: 1e3,
    M: 1e6,
    G: 1e9,
    T: 1e12,
    Ki: 2 ** 10,
    Mi: 2 ** 20,
    Gi: 2 ** 30,
    Ti: 2 ** 40,
  };
  return Number(match[1]) * (match[2] ? (factors[match[2]] ?? 1) : 1);
}

function refuseUnknown(what: string, object: object, known: ReadonlySet<string>): void {
  const unknown = Object.keys(object).filter((key) => !known.has(key));
  if (unknown.length > 0) throw new Error(`${what}: ${unknown.join(", ")} not mapped to docker run`);
}

function envValue(entry: NonNullable<ContainerSpec["env"]>[number], pod: PodTemplateSpec, context: PodContext): string {
  if (entry.value !== undefined) return entry.value;
  const path = entry.valueFrom?.fieldRef?.fieldPath;
  const fields: Readonly<Record<string, string>> = {
    "metadata.name": context.podName,
    "metadata.namespace": context.namespace,
    "spec.serviceAccountName": pod.serviceAccountName ?? "default",
  };
  const value = path === undefined ? undefined : fields[path];
  if (value === undefined) throw new Error(`env ${entry.name}: its source is not mapped to docker run`);
  return value;
}

function securityArgs(security: SecurityContext): string[] {
  const args: string[] = [];
  if (security.runAsUser !== undefined) {
    if (security.runAsNonRoot && security.runAsUser === 0) throw new Error("runAsNonRoot with runAsUser 0");
    args.push("--user", `${security.runAsUser}:${security.runAsGroup ?? security.runAsUser}`);
  } else if (security.runAsNonRoot) {
    throw new Error("runAsNonRoot without runAsUser: the image's user would have to be checked");
  }
  if (security.readOnlyRootFilesystem) args.push("--read-only");
  if (security.allowPrivilegeEscalation === false) args.push("--security-opt", "no-new-privileges");
  if (security.privileged) args.push("--privileged");
  for (const capability of security.capabilities?.drop ?? []) args.push("--cap-drop", capability);
  for (const capability of security.capabilities?.add ?? []) args.push("--cap-add", capability);
  const seccomp = security.seccompProfile?.type;
  if (seccomp === "Unconfined") args.push("--security-opt", "seccomp=unconfined");
  else if (seccomp !== undefined && seccomp !== "RuntimeDefault") throw new Error(`seccompProfile ${seccomp}`);
  return args;
}

function resourceArgs(resources: ContainerSpec["resources"]): string[] {
  const args: string[] = [];
  const cpuLimit = resources?.limits?.["cpu"];
  const memoryLimit = resources?.limits?.["memory"];
  const cpuRequest = resources?.requests?.["cpu"];
  if (cpuLimit !== undefined) args.push("--cpus", String(parseQuantity(cpuLimit)));
  if (memoryLimit !== undefined) {
    const bytes = String(Math.round(parseQuantity(memoryLimit)));
    args.push("--memory", bytes, "--memory-swap", bytes);
  }
  if (cpuRequest !== undefined) {
    args.push("--cpu-shares", String(Math.max(2, Math.round((parseQuantity(cpuRequest) * 1000 * 1024) / 1000))));
  }
  return args;
}

/** The `docker run` arguments of the Pod template's only container, and of its sandbox. */
export function podRun(pod: PodTemplateSpec, context: PodContext): PodRun {
  if (pod.containers.length !== 1) throw new Error(`${pod.containers.length} containers: one is mapped`);
  const container = pod.containers[0] as ContainerSpec;
  refuseUnknown(`container ${container.name}`, container, KNOWN_CONTAINER_FIELDS);
  const security: SecurityContext = { ...pod.securityContext, ...container.securityContext };
  refuseUnknown("securityContext", security, KNOWN_SECURITY_FIELDS);

  const ports = new Map<string, number>();
  const sandboxArgs = ["--hostname", context.podName];
  for (const port of container.ports ?? []) {
    if ((port.protocol ?? "TCP") !== "TCP") throw new Error(`port ${port.containerPort}: only TCP is mapped`);
    ports.set(port.name ?? String(port.containerPort), port.containerPort);
    sandboxArgs.push("--publish", `127.0.0.1::${port.containerPort}`);
  }

  const args = ["--name", context.containerName, "--network", `container:${context.sandboxContainer}`];
  const env: [string, string][] = [
    ["KUBERNETES_SERVICE_HOST", context.apiHost],
    ["KUBERNETES_SERVICE_PORT", String(context.apiPort)],
    ["KUBERNETES_SERVICE_PORT_HTTPS", String(context.apiPort)],
  ];
  for (const entry of container.env ?? []) env.push([entry.name, envValue(entry, pod, context)]);
  for (const [name, value] of env) args.push("--env", `${name}=${value}`);
  args.push(...securityArgs(security), ...resourceArgs(container.resources));

  const volumes = new Map((pod.volumes ?? []).map((volume) => [volume.name, volume]));
  for (const mount of container.volumeMounts ?? []) {
    const volume = volumes.get(mount.name);
    if (!volume?.emptyDir) throw new Error(`volume ${mount.name}: only emptyDir volumes are mapped`);
    args.push("--volume", `${context.emptyDir(mount.name)}:${mount.mountPath}${mount.readOnly ? ":ro" : ""}`);
  }
  if (pod.automountServiceAccountToken !== false) {
    args.push("--volume", `${context.serviceAccountDir}:${SERVICE_ACCOUNT_PATH}:ro`);
  }

  const [entrypoint, ...commandRest] = container.command ?? [];
  if (entrypoint !== undefined) args.push("--entrypoint", entrypoint);
  args.push(context.image ?? container.image, ...commandRest, ...(container.args ?? []));
  return {
    sandboxArgs,
    containerArgs: args,
    ports,
    gracePeriodSeconds: pod.terminationGracePeriodSeconds ?? 30,
  };
}
