/**
 * One sandbox API server's command line, and the small network helpers the sandbox's
 * processes share (a free loopback port, an HTTPS status probe). Pure apart from those
 * two probes; the ControlPlane (control-plane.ts) runs the processes.
 */
import { request } from "node:https";
import { createServer } from "node:net";
import { join } from "node:path";

/**
 * The audit policy of a cluster named in `ControlPlaneOptions.audit`: Metadata (who, what
 * verb, which object, which response code; no bodies) for the writes fleet-mirror or its
 * tests make (create/update/patch/delete of Services, Endpoints, EndpointSlices,
 * Namespaces, Events, Leases, ServiceImports, linkerd's Links and their status), and nothing else, so the log stays small
 * and cheap to read. Lease writes keep their bodies (RequestResponse): the holder each
 * write left in the Lease is the server's own history of who held what, and when. Only
 * the ResponseComplete stage is kept: one line per write, with its response code.
 */
export const AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
  - level: RequestResponse
    verbs: ["create", "update", "patch", "delete"]
    resources:
      - group: "coordination.k8s.io"
        resources: ["leases"]
  - level: Metadata
    verbs: ["create", "update", "patch", "delete", "deletecollection"]
    resources:
      - group: ""
        resources: ["services", "services/status", "endpoints", "namespaces", "events"]
      - group: "discovery.k8s.io"
        resources: ["endpointslices"]
      - group: "events.k8s.io"
        resources: ["events"]
      - group: "coordination.k8s.io"
        resources: ["leases"]
      - group: "multicluster.x-k8s.io"
        resources: ["serviceimports"]
      - group: "multicluster.linkerd.io"
        resources: ["links", "links/status"]
  - level: None
`;

export interface ApiServerArgs {
  readonly name: string;
  readonly port: number;
  readonly etcdUrl: string;
  readonly etcdPrefix: string;
  readonly dir: string;
  readonly servingCert: { readonly certPath: string; readonly keyPath: string };
  readonly caPath: string;
  readonly saPublic: string;
  readonly saPrivate: string;
  readonly serviceClusterIpRange: string;
  /** With an audit log: the policy file (`AUDIT_POLICY`) and where the log goes. */
  readonly audit?: { readonly policyPath: string; readonly logPath: string };
}

/** The kube-apiserver flags of one sandbox cluster (see control-plane.ts for the guarantees). */
export function apiServerArgs(a: ApiServerArgs): string[] {
  return [
    `--etcd-servers=${a.etcdUrl}`,
    `--etcd-prefix=${a.etcdPrefix}`,
    "--bind-address=127.0.0.1",
    "--advertise-address=127.0.0.1",
    `--secure-port=${a.port}`,
    `--cert-dir=${join(a.dir, `certs-${a.name}`)}`,
    `--tls-cert-file=${a.servingCert.certPath}`,
    `--tls-private-key-file=${a.servingCert.keyPath}`,
    `--client-ca-file=${a.caPath}`,
    "--authorization-mode=RBAC",
    `--service-account-issuer=https://kubernetes.default.svc.${a.name}`,
    `--service-account-key-file=${a.saPublic}`,
    `--service-account-signing-key-file=${a.saPrivate}`,
    `--service-cluster-ip-range=${a.serviceClusterIpRange}`,
    "--allow-privileged=true",
    // No ServiceAccount or token controller runs here (a kube-controller-manager, where
    // there is one, runs only the controllers fleet-mirror meets): the ServiceAccount
    // admission plugin would wait for them forever. Tokens come from TokenRequest.
    "--disable-admission-plugins=ServiceAccount",
    // The sandbox has no kubelets (KWOK's fake Nodes, where a cluster runs it, are not
    // API server endpoints); keep start-up lean.
    "--endpoint-reconciler-type=none",
    "--v=0",
    ...(a.audit
      ? [
          `--audit-policy-file=${a.audit.policyPath}`,
          `--audit-log-path=${a.audit.logPath}`,
          // Blocking (the log backend's default, stated because readers rely on
          // it): a request's line is written before its handler returns, so a
          // write the client saw answered is in the file once a later marker
          // write is (test/helpers/audit.ts).
          "--audit-log-mode=blocking",
          "--audit-log-format=json",
          // Rotation would split the log a test reads from the start.
          "--audit-log-maxsize=0",
        ]
      : []),
  ];
}

/** A port free on 127.0.0.1 now (the OS's choice). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => {
        if (address && typeof address === "object") resolve(address.port);
        else reject(new Error("could not allocate a free port"));
      });
    });
  });
}

/**
 * The status code of a GET of `url` (a sandbox process's /readyz or /healthz), or the
 * error's message when there is no answer within 2 s. Never rejects.
 */
export function httpsStatus(
  url: string,
  options: { readonly ca: string; readonly cert?: string; readonly key?: string; readonly signal: AbortSignal },
): Promise<number | string> {
  return new Promise((resolve) => {
    const req = request(url, { ...options, timeout: 2_000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", (error) => resolve(error.message));
    req.end();
  });
}
