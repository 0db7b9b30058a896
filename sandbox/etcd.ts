/**
 * An etcd of the sandbox: one member on loopback, its data in a directory of the
 * plane's, without fsync (a test cluster's data is disposable). The plane's shared etcd
 * is one; a cluster named in `ControlPlaneOptions.ownEtcd` runs another, so that its
 * writes load a process of their own (a benchmark's model of a cluster on other machines).
 */
import { join } from "node:path";
import { freePort } from "./api-server.ts";
import { ManagedProcess, waitReady } from "./process.ts";

export interface SandboxEtcd {
  readonly process: ManagedProcess;
  /** `http://127.0.0.1:<port>`, the API servers' `--etcd-servers`. */
  readonly url: string;
}

/** An etcd named `name` (its process is `etcd` for the shared one, `etcd-<cluster>` for a cluster's own), not started. */
export async function etcdProcess(binary: string, dir: string, name: string): Promise<SandboxEtcd> {
  const [port, peerPort] = await Promise.all([freePort(), freePort()]);
  const url = `http://127.0.0.1:${port}`;
  const peer = `http://127.0.0.1:${peerPort}`;
  const process = new ManagedProcess(
    name,
    binary,
    [
      "--name=sandbox",
      `--data-dir=${join(dir, name)}`,
      `--listen-client-urls=${url}`,
      `--advertise-client-urls=${url}`,
      `--listen-peer-urls=${peer}`,
      `--initial-advertise-peer-urls=${peer}`,
      `--initial-cluster=sandbox=${peer}`,
      // A test cluster's data is disposable: skipping fsync makes writes ~10x faster.
      "--unsafe-no-fsync",
      "--log-level=warn",
    ],
    join(dir, "logs", `${name}.log`),
  );
  return { process, url };
}

/** Resolves once `etcd` answers /health. */
export async function waitForEtcd(
  etcd: SandboxEtcd,
  options: { readonly timeoutMs: number; readonly signal: AbortSignal },
): Promise<void> {
  await waitReady(
    etcd.process,
    async () => {
      try {
        const response = await fetch(`${etcd.url}/health`);
        return response.ok || String(response.status);
      } catch (error) {
        return (error as Error).message; // not listening yet
      }
    },
    { ...options, state: "healthy" },
  );
}
