/**
 * The controller's own connection to the local cluster: `--kubeconfig`, then
 * $KUBECONFIG, then ~/.kube/config, then the in-cluster ServiceAccount. Unlike a
 * remote kubeconfig from a Secret, the operator's own may name files.
 */
import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { delimiter, join } from "node:path";
import type { ConnectionSpec } from "../core/connection.ts";
import { connectionFromKubeconfig } from "./kubeconfig.ts";

const SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

export function loadLocalConnection(
  kubeconfig: string | undefined,
  context: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): ConnectionSpec {
  const candidates = kubeconfig
    ? [kubeconfig]
    : [...(env["KUBECONFIG"] ?? "").split(delimiter).filter(Boolean), join(homedir(), ".kube", "config")];
  for (const path of candidates) {
    if (!existsSync(path)) {
      if (kubeconfig) throw new Error(`--kubeconfig ${path} does not exist`);
      continue;
    }
    try {
      return connectionFromKubeconfig(
        readFileSync(path, "utf8"),
        { allowFilePaths: true, allowInsecure: true },
        context,
      );
    } catch (error) {
      throw new Error(`kubeconfig ${path}: ${(error as Error).message}`, { cause: error });
    }
  }
  const host = env["KUBERNETES_SERVICE_HOST"];
  const port = env["KUBERNETES_SERVICE_PORT"];
  if (host && port && existsSync(join(SA_DIR, "token"))) {
    return {
      server: `https://${host.includes(":") ? `[${host}]` : host}:${port}`,
      caPem: readFileSync(join(SA_DIR, "ca.crt"), "utf8"),
      auth: { kind: "token-file", path: join(SA_DIR, "token") },
    };
  }
  throw new Error("no kubeconfig found (tried --kubeconfig, $KUBECONFIG, ~/.kube/config) and not running in a cluster");
}
