/**
 * `fleet-mirror unlink`: deletes the credentials Secret(s) registering a cluster; the
 * controller then deletes that cluster's mirrors (SPEC §1). `--wait` polls until no
 * Service or Endpoints labelled as that cluster's mirror is left.
 */
import { setTimeout as sleep } from "node:timers/promises";
import {
  CLUSTER_NAME,
  MANAGED_BY_FLEET_MIRROR,
  MANAGED_BY_LABEL,
  MIRRORED_SERVICE,
  SECRET_TYPE,
} from "../core/labels.ts";
import { validateDns1123Label } from "../core/naming.ts";
import type { KubeObject, Secret } from "../core/objects.ts";
import type { KubeClient } from "../kube/client.ts";
import {
  type CommandDefinition,
  CommandError,
  cliClient,
  commandHelp,
  credentialsNamespace,
  durationFlag,
  EXIT_FAILURE,
  EXIT_OK,
  isNotFound,
  listAll,
  localConnection,
  localFlags,
  requiredFlag,
  runCli,
  startProgress,
  UsageError,
  writeErr,
  writeOut,
} from "./common.ts";
import { PROGRAM } from "./program.ts";

const flags = {
  "cluster-name": { type: "string", description: "the cluster to unlink (required)" },
  wait: { type: "boolean", description: "wait until the controller has deleted every mirror of the cluster" },
  timeout: { type: "string", default: "120s", description: "limit of --wait" },
  ...localFlags,
} as const;

const help = commandHelp(
  "unlink --cluster-name C [--wait] [flags]",
  `Deletes the credentials Secret(s) in -n that register cluster C (whatever their
name). The running controller then deletes every mirror of C; with --wait, waits until
none is left (exit 1 after --timeout). Namespaces are never deleted. The identity that
\`link\` created on the remote cluster is left in place.`,
  flags,
);

/**
 * Mirror objects (Services, Endpoints, EndpointSlices) of `cluster` still in the local
 * cluster. Only fleet-mirror's own slices count: the built-in mirroring controller's
 * copy the mirror labels from mirror Endpoints and go with them.
 */
export async function remainingMirrors(client: KubeClient, cluster: string): Promise<number> {
  const labelSelector = `${MIRRORED_SERVICE}=true,${CLUSTER_NAME}=${cluster}`;
  const [services, endpoints, slices] = await Promise.all([
    listAll<KubeObject>(client, "/api/v1/services", { labelSelector }),
    listAll<KubeObject>(client, "/api/v1/endpoints", { labelSelector }),
    listAll<KubeObject>(client, "/apis/discovery.k8s.io/v1/endpointslices", {
      labelSelector: `${labelSelector},${MANAGED_BY_LABEL}=${MANAGED_BY_FLEET_MIRROR}`,
    }),
  ]);
  return services.length + endpoints.length + slices.length;
}

export const unlinkDefinition: CommandDefinition = {
  name: "unlink",
  help,
  flags,
  async run({ values }) {
    const cluster = requiredFlag(values, "cluster-name");
    const problem = validateDns1123Label(cluster);
    if (problem) throw new UsageError(`--cluster-name ${JSON.stringify(cluster)} ${problem}`);
    const timeoutMs = durationFlag(values, "timeout", "120s");
    const namespace = credentialsNamespace(values);
    const client = cliClient(localConnection(values));
    try {
      const path = `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets`;
      const secrets = (await listAll<Secret>(client, path, { fieldSelector: `type=${SECRET_TYPE}` })).filter(
        (s) => s.metadata.annotations?.[CLUSTER_NAME] === cluster,
      );
      if (secrets.length === 0)
        throw new CommandError(`no credentials Secret in namespace ${namespace} registers cluster ${cluster}`);
      for (const secret of secrets) {
        try {
          await client.request("DELETE", `${path}/${encodeURIComponent(secret.metadata.name)}`);
        } catch (error) {
          if (!isNotFound(error)) throw error;
        }
        writeOut(`secret/${secret.metadata.name} deleted from namespace ${namespace}\n`);
      }
      if (values["wait"] !== true) return EXIT_OK;

      const progress = startProgress(`waiting for the mirrors of ${cluster} to be deleted`);
      const deadline = Date.now() + timeoutMs;
      let left = -1;
      try {
        for (;;) {
          left = await remainingMirrors(client, cluster);
          if (left === 0) break;
          if (Date.now() > deadline) break;
          progress.update(`waiting for the mirrors of ${cluster} to be deleted: ${left} object(s) left`);
          await sleep(500);
        }
      } finally {
        progress.done();
      }
      if (left === 0) {
        writeOut(`every mirror of cluster ${cluster} is gone\n`);
        return EXIT_OK;
      }
      writeErr(
        `${PROGRAM} unlink: ${left} mirror object(s) of cluster ${cluster} still there after ${Math.round(timeoutMs / 1000)}s: is the controller running?\n`,
      );
      return EXIT_FAILURE;
    } finally {
      client.close();
    }
  },
};

export function unlinkCommand(argv: readonly string[]): Promise<number> {
  return runCli(unlinkDefinition, argv);
}
