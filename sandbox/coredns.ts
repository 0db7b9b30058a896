/**
 * A real DNS consumer of a sandbox cluster: CoreDNS with its `kubernetes` plugin, reading
 * the cluster's Services and EndpointSlices as a cluster's DNS does, so a test can check
 * that a mirror answers at `<name>.<namespace>.svc.cluster.local`.
 *
 * Guarantees:
 * - CoreDNS listens on 127.0.0.1 (`bind`), and on the caller's `bind` addresses (local
 *   ones: the traffic path's node address), UDP and TCP on one free port, and serves only
 *   the cluster domain (and, with `clustersetHosts`, `clusterset.local` from that hosts
 *   file: clusterset-dns.ts): it forwards nothing anywhere;
 * - it authenticates as user `COREDNS_USER` (a client certificate of the sandbox CA),
 *   bound by `COREDNS_CLUSTER_ROLE` to list/watch Services, EndpointSlices and Namespaces
 *   and nothing else: what CoreDNS's own deployment grants it, so a record that resolves
 *   here does not lean on admin rights;
 * - `start` resolves only once the `ready` plugin reports the kubernetes plugin synced
 *   (its caches hold the cluster's Services), so a lookup right after start sees what
 *   existed before it;
 * - `stop` ends the process; it also dies with the Node.js process (see process.ts).
 */
import { createSocket } from "node:dgram";
import { writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { join } from "node:path";
import { type KubeConfig, RbacAuthorizationV1Api } from "@kubernetes/client-node";
import { ensureCoreDns } from "./binaries.ts";
import type { ControlPlane } from "./control-plane.ts";
import { writeClientKubeconfig } from "./kubeconfig.ts";
import { ManagedProcess, waitForHttpOk } from "./process.ts";

export const COREDNS_USER = "fleet-mirror-sandbox:coredns";
export const COREDNS_CLUSTER_ROLE = "fleet-mirror-sandbox:coredns";

export interface CoreDnsOptions {
  /** The sandbox cluster whose Services CoreDNS serves. */
  readonly cluster: string;
  /** The admin identity, used once to create CoreDNS's ClusterRole and binding. */
  readonly admin: KubeConfig;
  /** The cluster domain. Default `cluster.local`. */
  readonly domain?: string;
  /** How long to wait for CoreDNS to report ready. Default 60 s. */
  readonly readyTimeoutMs?: number;
  /** Local addresses to listen on besides 127.0.0.1 (a Pod reaches CoreDNS at one through a Service). */
  readonly bind?: readonly string[];
  /** A hosts file to serve `clusterset.local` from (re-read every second). Default: no such zone. */
  readonly clustersetHosts?: string;
}

function statusCode(error: unknown): number | undefined {
  if (typeof error === "object" && error !== null && "code" in error) {
    const code = (error as { code: unknown }).code;
    return typeof code === "number" ? code : undefined;
  }
  return undefined;
}

/** Creates CoreDNS's ClusterRole and binding; one that exists already is kept (the rules are fixed). */
async function applyCoreDnsRbac(admin: KubeConfig): Promise<void> {
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  const ignoreExisting = (error: unknown): void => {
    if (statusCode(error) !== 409) throw error;
  };
  await rbac
    .createClusterRole({
      body: {
        metadata: { name: COREDNS_CLUSTER_ROLE },
        rules: [
          { apiGroups: [""], resources: ["services", "namespaces"], verbs: ["list", "watch"] },
          { apiGroups: ["discovery.k8s.io"], resources: ["endpointslices"], verbs: ["list", "watch"] },
        ],
      },
    })
    .catch(ignoreExisting);
  await rbac
    .createClusterRoleBinding({
      body: {
        metadata: { name: COREDNS_CLUSTER_ROLE },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: COREDNS_CLUSTER_ROLE },
        subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "User", name: COREDNS_USER }],
      },
    })
    .catch(ignoreExisting);
}

async function tryPort(port: number, kind: "tcp" | "udp"): Promise<number | undefined> {
  return new Promise((resolve) => {
    if (kind === "udp") {
      const socket = createSocket("udp4");
      socket.once("error", () => resolve(undefined));
      socket.bind(port, "127.0.0.1", () => {
        const bound = socket.address().port;
        socket.close(() => resolve(bound));
      });
      return;
    }
    const server = createServer();
    server.once("error", () => resolve(undefined));
    server.listen(port, "127.0.0.1", () => {
      const address = server.address();
      const bound = address && typeof address === "object" ? address.port : undefined;
      server.close(() => resolve(bound));
    });
  });
}

/** A loopback port free for both UDP and TCP (DNS uses both on one port). */
async function freeDnsPort(): Promise<number> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const port = await tryPort(0, "udp");
    if (port !== undefined && (await tryPort(port, "tcp")) === port) return port;
  }
  throw new Error("could not find a loopback port free for both UDP and TCP");
}

async function freeTcpPort(): Promise<number> {
  const port = await tryPort(0, "tcp");
  if (port === undefined) throw new Error("could not allocate a free loopback port");
  return port;
}

export class CoreDns {
  readonly process: ManagedProcess;
  /** The DNS port on 127.0.0.1 (UDP and TCP). */
  readonly port: number;
  /** `127.0.0.1:<port>`, as node:dns `Resolver.setServers` takes it. */
  readonly server: string;
  readonly domain: string;

  private constructor(process: ManagedProcess, port: number, domain: string) {
    this.process = process;
    this.port = port;
    this.server = `127.0.0.1:${port}`;
    this.domain = domain;
  }

  /**
   * Builds CoreDNS if needed, grants it its RBAC, starts it and resolves once it is
   * ready. On failure the process is stopped and the error names its log file.
   */
  static async start(plane: ControlPlane, options: CoreDnsOptions): Promise<CoreDns> {
    const binary = await ensureCoreDns();
    const domain = options.domain ?? "cluster.local";
    const cluster = plane.cluster(options.cluster);
    await applyCoreDnsRbac(options.admin);
    const kubeconfigPath = await writeClientKubeconfig(
      join(plane.dir, `${options.cluster}-coredns.kubeconfig`),
      cluster,
      COREDNS_USER,
      await plane.issueClientCertificate(COREDNS_USER),
    );
    const [port, readyPort] = [await freeDnsPort(), await freeTcpPort()];
    const corefilePath = join(plane.dir, `${options.cluster}-Corefile`);
    const bind = `    bind ${["127.0.0.1", ...(options.bind ?? [])].join(" ")}`;
    await writeFile(
      corefilePath,
      [
        `${domain}:${port} {`,
        bind,
        `    ready 127.0.0.1:${readyPort}`,
        "    errors",
        `    kubernetes ${domain} {`,
        `        kubeconfig ${kubeconfigPath}`,
        "    }",
        "}",
        ...(options.clustersetHosts
          ? [
              `clusterset.local:${port} {`,
              bind,
              "    errors",
              `    hosts ${options.clustersetHosts} clusterset.local {`,
              "        reload 1s",
              "    }",
              "}",
            ]
          : []),
        "",
      ].join("\n"),
    );
    const child = new ManagedProcess(
      `coredns-${options.cluster}`,
      binary,
      ["-conf", corefilePath],
      join(plane.dir, "logs", `coredns-${options.cluster}.log`),
    );
    const dns = new CoreDns(child, port, domain);
    try {
      await child.start();
      await waitForHttpOk(child, `http://127.0.0.1:${readyPort}/ready`, options.readyTimeoutMs ?? 60_000);
    } catch (error) {
      await child.close(2_000);
      throw error;
    }
    return dns;
  }

  async stop(): Promise<void> {
    await this.process.close();
  }
}
