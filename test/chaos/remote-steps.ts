/**
 * The chaos run's writes to the remote clusters and its hand edits of local mirrors:
 * each schedule step that changes a remote (or tampers with a mirror), applied through
 * API server restarts (`retrying`), a step on an object that is gone being skipped with
 * a log line. The faults themselves are chaos-run.ts's.
 */
import type { CoreV1Api, V1Service, V1ServicePort } from "@kubernetes/client-node";
import type { Fleet } from "../helpers/fleet.ts";
import { setSlice } from "../helpers/headless.ts";
import { statusCode } from "../helpers/kube.ts";
import { createServiceExport, deleteServiceExport } from "../helpers/mcs.ts";
import {
  type GatewayRef,
  HEADLESS_SERVICE,
  MCS_NAMESPACE,
  MODE_NAMESPACE,
  type ModeStep,
  type PortSpec,
  type RemoteStep,
} from "./steps.ts";
import { ignoring, retrying } from "./world.ts";

const GATEWAY_NAME = "mirror.linkerd.io/gateway-name";
const GATEWAY_NS = "mirror.linkerd.io/gateway-ns";
const GATEWAY_IDENTITY = "mirror.linkerd.io/gateway-identity";
/** A short probe period, so that an address is dead 3 failed probes (≈ 3 s) after it dies. */
const PROBE_PERIOD = "mirror.linkerd.io/probe-period";
/** The default `--export-selector` and `--federated-selector` (SPEC §11, §12). */
export const EXPORT_LABEL = "mirror.linkerd.io/exported";
export const MEMBER_LABEL = "mirror.linkerd.io/federated";
/** The name of the headless Service's one remote slice. */
const HEADLESS_SLICE = `${HEADLESS_SERVICE.name}-pods`;

export function toPorts(ports: readonly PortSpec[]): V1ServicePort[] {
  return ports.map((p) => ({
    ...(p.name !== undefined ? { name: p.name } : {}),
    protocol: p.protocol,
    port: p.port,
    ...(p.targetPort !== undefined ? { targetPort: p.targetPort } : {}),
  }));
}

export class RemoteWriter {
  readonly #fleet: Fleet;
  readonly #log: (line: string) => void;
  /** The gateways' probe port; undefined: gateways are not probed. */
  readonly #probePort: () => number | undefined;

  constructor(fleet: Fleet, log: (line: string) => void, probePort: () => number | undefined) {
    this.#fleet = fleet;
    this.#log = log;
    this.#probePort = probePort;
  }

  /** A remote change or a hand edit of a local mirror (the probe steps are the run's). */
  async apply(step: Exclude<RemoteStep, { kind: "probe-fail" | "probe-recover" }>): Promise<void> {
    switch (step.kind) {
      case "export-new":
        return this.createService(step.cluster, step.namespace, step.name, step.ports, step.gateway);
      case "recreate-service": {
        const api = this.#fleet.api(step.cluster);
        const { namespace, name } = step;
        const before = await retrying(`read ${step.cluster}:${namespace}/${name}`, () =>
          ignoring([404], () => api.readNamespacedService({ namespace, name })),
        );
        await retrying(`delete ${step.cluster}:${namespace}/${name}`, () =>
          ignoring([404], () => api.deleteNamespacedService({ namespace, name })),
        );
        return this.createService(step.cluster, namespace, name, step.ports, step.gateway, before?.metadata?.uid);
      }
      case "unexport":
        return this.patch(step.cluster, step.namespace, step.name, (svc) => {
          const annotations = { ...(svc.metadata?.annotations ?? {}) };
          if (step.half) delete annotations[GATEWAY_NS];
          else {
            delete annotations[GATEWAY_NAME];
            delete annotations[GATEWAY_NS];
          }
          if (svc.metadata) svc.metadata.annotations = annotations;
        });
      case "re-export":
        return this.patch(step.cluster, step.namespace, step.name, (svc) => setExportAnnotations(svc, step.gateway));
      case "change-ports":
        return this.patch(step.cluster, step.namespace, step.name, (svc) => {
          if (svc.spec) svc.spec.ports = toPorts(step.ports);
        });
      case "delete-service":
        await retrying(`delete ${step.cluster}:${step.namespace}/${step.name}`, () =>
          ignoring([404], () =>
            this.#fleet.api(step.cluster).deleteNamespacedService({ namespace: step.namespace, name: step.name }),
          ),
        );
        return;
      case "tamper-local":
        return this.#tamper(step.namespace, `${step.name}-${step.cluster}`, step.action);
      case "gateway-ips":
        return this.setIngress(step.cluster, step.gateway, step.ips);
      case "gateway-remove-ingress":
        return this.setIngress(step.cluster, step.gateway, []);
      case "gateway-identity":
        return this.patch(step.cluster, step.gateway.namespace, step.gateway.name, (svc) => {
          const annotations = { ...(svc.metadata?.annotations ?? {}) };
          if (step.identity) annotations[GATEWAY_IDENTITY] = step.identity;
          else delete annotations[GATEWAY_IDENTITY];
          if (svc.metadata) svc.metadata.annotations = annotations;
        });
      case "gateway-port":
        return this.patch(step.cluster, step.gateway.namespace, step.gateway.name, (svc) => {
          const probe = svc.spec?.ports?.find((p) => p.name === "mc-probe");
          if (svc.spec)
            svc.spec.ports = [{ name: step.portName, port: step.port, protocol: "TCP" }, ...(probe ? [probe] : [])];
        });
      case "gateway-delete":
        await retrying(`delete gateway ${step.cluster}:${step.gateway.name}`, () =>
          ignoring([404], () =>
            this.#fleet
              .api(step.cluster)
              .deleteNamespacedService({ namespace: step.gateway.namespace, name: step.gateway.name }),
          ),
        );
        return;
      case "gateway-create":
        return this.createGateway(step.cluster, step.gateway, step.ips, step.port, step.identity);
      default: {
        const never: never = step;
        throw new Error(`unknown remote step ${JSON.stringify(never)}`);
      }
    }
  }

  /** A change to the other ways of exporting (SPEC §11, §12). */
  async applyMode(step: ModeStep): Promise<void> {
    switch (step.kind) {
      case "label-export":
        return this.patch(step.cluster, MODE_NAMESPACE, step.name, (svc) => {
          const labels = { ...(svc.metadata?.labels ?? {}) };
          if (step.value === null) delete labels[EXPORT_LABEL];
          else labels[EXPORT_LABEL] = step.value;
          if (svc.metadata) svc.metadata.labels = labels;
        });
      case "annotate-export":
        return this.patch(step.cluster, MODE_NAMESPACE, step.name, (svc) => setExportAnnotations(svc, step.gateway));
      case "member":
        return this.patch(step.cluster, MODE_NAMESPACE, step.name, (svc) => {
          const labels = { ...(svc.metadata?.labels ?? {}) };
          if (step.join) labels[MEMBER_LABEL] = "member";
          else delete labels[MEMBER_LABEL];
          if (svc.metadata) svc.metadata.labels = labels;
        });
      case "mode-ports":
        return this.patch(step.cluster, MODE_NAMESPACE, step.name, (svc) => {
          if (svc.spec) svc.spec.ports = toPorts(step.ports);
        });
      case "service-export":
        await retrying(`ServiceExport ${step.cluster}:${MCS_NAMESPACE}/${step.name}`, () =>
          step.exported
            ? ignoring([409], () => createServiceExport(this.#fleet, step.cluster, MCS_NAMESPACE, step.name))
            : ignoring([404], () => deleteServiceExport(this.#fleet, step.cluster, MCS_NAMESPACE, step.name)),
        );
        return;
      case "headless-hosts":
        return this.setHosts(step.cluster, step.hosts);
      default: {
        const never: never = step;
        throw new Error(`unknown mode step ${JSON.stringify(never)}`);
      }
    }
  }

  /** The headless Service's remote slice names exactly `hosts`. */
  async setHosts(cluster: string, hosts: readonly string[]): Promise<void> {
    const { namespace, name } = HEADLESS_SERVICE;
    await retrying(`hosts of ${cluster}:${namespace}/${name}`, () =>
      setSlice(this.#fleet, cluster, namespace, name, HEADLESS_SLICE, hosts),
    );
  }

  /**
   * Creates a Service (exported through `gateway` unless it is null); with `replacing`,
   * an AlreadyExists from that old uid is retried.
   */
  async createService(
    cluster: string,
    namespace: string,
    name: string,
    ports: readonly PortSpec[],
    gateway: GatewayRef | null,
    replacing?: string,
    spec: { readonly clusterIP?: "None" } = {},
  ): Promise<void> {
    const api = this.#fleet.api(cluster);
    await retrying(`namespace ${namespace} in ${cluster}`, () => this.#fleet.ensureNamespace(cluster, namespace));
    await retrying(`create ${cluster}:${namespace}/${name}`, async () => {
      try {
        await api.createNamespacedService({
          namespace,
          body: {
            metadata: {
              name,
              ...(gateway ? { annotations: { [GATEWAY_NAME]: gateway.name, [GATEWAY_NS]: gateway.namespace } } : {}),
            },
            spec: { ports: toPorts(ports), selector: { app: name }, ...spec },
          },
        });
      } catch (error) {
        if (statusCode(error) !== 409) throw error;
        // Created by an earlier attempt whose answer was lost — unless it is the old one, still being deleted.
        const current = await ignoring([404], () => api.readNamespacedService({ namespace, name }));
        if (!current || (replacing !== undefined && current.metadata?.uid === replacing)) throw error;
      }
    });
  }

  async patch(cluster: string, namespace: string, name: string, mutate: (svc: V1Service) => void): Promise<void> {
    const api = this.#fleet.api(cluster);
    await retrying(`update ${cluster}:${namespace}/${name}`, async () => {
      const svc = await ignoring([404], () => api.readNamespacedService({ namespace, name }));
      if (!svc) {
        this.#log(`  (${cluster}:${namespace}/${name} does not exist; skipped)`);
        return;
      }
      mutate(svc);
      await api.replaceNamespacedService({ namespace, name, body: svc });
    });
  }

  /** Edits a mirror by hand in the local cluster (the controller must restore it); absent → skipped. */
  async #tamper(
    namespace: string,
    name: string,
    action: "delete-service" | "delete-endpoints" | "edit-ports" | "clear-endpoints",
  ): Promise<void> {
    const local: CoreV1Api = this.#fleet.local;
    const skipped = () => this.#log(`  (local ${namespace}/${name} does not exist; skipped)`);
    await retrying(`tamper with local ${namespace}/${name}`, async () => {
      switch (action) {
        case "delete-service":
          if (!(await ignoring([404], () => local.deleteNamespacedService({ namespace, name })))) skipped();
          return;
        case "delete-endpoints":
          if (!(await ignoring([404], () => local.deleteNamespacedEndpoints({ namespace, name })))) skipped();
          return;
        case "edit-ports": {
          const svc = await ignoring([404], () => local.readNamespacedService({ namespace, name }));
          if (!svc?.spec) return skipped();
          svc.spec.ports = [{ name: "tampered", port: 1, protocol: "TCP" }];
          await local.replaceNamespacedService({ namespace, name, body: svc });
          return;
        }
        case "clear-endpoints": {
          const ep = await ignoring([404], () => local.readNamespacedEndpoints({ namespace, name }));
          if (!ep) return skipped();
          ep.subsets = [{ addresses: [{ ip: "10.9.9.9" }], ports: [{ name: "tampered", port: 1 }] }];
          await local.replaceNamespacedEndpoints({ namespace, name, body: ep });
          return;
        }
        default: {
          const never: never = action;
          throw new Error(`unknown tamper action ${String(never)}`);
        }
      }
    });
  }

  async setIngress(cluster: string, gateway: GatewayRef, ips: readonly string[]): Promise<void> {
    const api = this.#fleet.api(cluster);
    await retrying(`ingress of ${cluster}:${gateway.name}`, async () => {
      const svc = await ignoring([404], () =>
        api.readNamespacedServiceStatus({ namespace: gateway.namespace, name: gateway.name }),
      );
      if (!svc) {
        this.#log(`  (gateway ${cluster}:${gateway.name} does not exist; skipped)`);
        return;
      }
      svc.status = { loadBalancer: { ingress: ips.map((ip) => ({ ip })) } };
      await api.replaceNamespacedServiceStatus({ namespace: gateway.namespace, name: gateway.name, body: svc });
    });
  }

  async createGateway(
    cluster: string,
    gateway: GatewayRef,
    ips: readonly string[],
    port: number,
    identity: string,
  ): Promise<void> {
    const probePort = this.#probePort();
    await retrying(`namespace ${gateway.namespace} in ${cluster}`, () =>
      this.#fleet.ensureNamespace(cluster, gateway.namespace),
    );
    await retrying(`create gateway ${cluster}:${gateway.name}`, () =>
      ignoring([409], () =>
        this.#fleet.api(cluster).createNamespacedService({
          namespace: gateway.namespace,
          body: {
            metadata: {
              name: gateway.name,
              annotations: {
                ...(identity ? { [GATEWAY_IDENTITY]: identity } : {}),
                ...(probePort !== undefined ? { [PROBE_PERIOD]: "1" } : {}),
              },
            },
            spec: {
              type: "LoadBalancer",
              ports: [
                { name: "incoming-port", port, protocol: "TCP" },
                ...(probePort !== undefined ? [{ name: "mc-probe", port: probePort, protocol: "TCP" }] : []),
              ],
            },
          },
        }),
      ),
    );
    await this.setIngress(cluster, gateway, ips);
  }
}

/** Sets the §2 annotations to `gateway`, or removes both (`null`). */
function setExportAnnotations(svc: V1Service, gateway: GatewayRef | null): void {
  const annotations = { ...(svc.metadata?.annotations ?? {}) };
  if (gateway) {
    annotations[GATEWAY_NAME] = gateway.name;
    annotations[GATEWAY_NS] = gateway.namespace;
  } else {
    delete annotations[GATEWAY_NAME];
    delete annotations[GATEWAY_NS];
  }
  if (svc.metadata) svc.metadata.annotations = annotations;
}
