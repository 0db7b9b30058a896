/**
 * `fleet-mirror export` / `unexport`: set or remove the two gateway annotations of
 * SPEC §2 on a Service of a remote cluster. The cluster is the one of
 * `--remote-kubeconfig`/`--remote-context` when given, else kubectl's current one
 * (`--kubeconfig`/`--context`): exporting is something done *on* the remote cluster.
 */

import { viewGateway } from "../core/desired.ts";
import { GATEWAY_NAME, GATEWAY_NS } from "../core/labels.ts";
import type { Service } from "../core/objects.ts";
import type { ConnectionSpec } from "../kube/connection.ts";
import { loadLocalConnection } from "../kube/local-connection.ts";
import {
  type CommandDefinition,
  CommandError,
  cliClient,
  commandHelp,
  connectionFromFile,
  EXIT_OK,
  type FlagValues,
  isNotFound,
  requiredFlag,
  runCli,
  stringFlag,
  UsageError,
  writeErr,
  writeOut,
} from "./common.ts";

const clusterFlags = {
  kubeconfig: {
    type: "string",
    description: "kubeconfig of the cluster holding the Service (kubectl's default order)",
  },
  context: { type: "string", description: "kubeconfig context (default: the current context)" },
  "remote-kubeconfig": { type: "string", description: "kubeconfig of the remote cluster (overrides --kubeconfig)" },
  "remote-context": { type: "string", description: "context in --remote-kubeconfig" },
  namespace: { type: "string", short: "n", description: "namespace of the Service (default: default)" },
} as const;

const exportFlags = {
  ...clusterFlags,
  gateway: { type: "string", description: "name of the gateway Service (required)" },
  "gateway-namespace": { type: "string", description: "namespace of the gateway Service (required)" },
} as const;

const exportHelp = commandHelp(
  "export SERVICE --gateway NAME --gateway-namespace NS [-n NAMESPACE] [flags]",
  `Exports a Service of a remote cluster: sets the annotations ${GATEWAY_NAME} and
${GATEWAY_NS}, so fleet-mirror mirrors it into the local cluster through that
gateway. Warns (without failing) when the gateway is missing or not usable yet.`,
  exportFlags,
);

const unexportHelp = commandHelp(
  "unexport SERVICE [-n NAMESPACE] [flags]",
  `Stops exporting a Service of a remote cluster: removes both gateway annotations;
fleet-mirror then deletes its mirror.`,
  clusterFlags,
);

function targetConnection(values: FlagValues): ConnectionSpec {
  const remote = stringFlag(values, "remote-kubeconfig");
  if (remote) return connectionFromFile(remote, stringFlag(values, "remote-context"), "--remote-kubeconfig");
  try {
    return loadLocalConnection(stringFlag(values, "kubeconfig"), stringFlag(values, "context"));
  } catch (error) {
    throw new CommandError((error as Error).message);
  }
}

function serviceArgument(positionals: readonly string[]): string {
  const [name] = positionals;
  if (!name) throw new UsageError("the Service name is required");
  return name.replace(/^(service|svc|services)\//, "");
}

/** Merge-patches the Service's annotations (null removes one); a missing Service is a clear error. */
async function patchAnnotations(
  values: FlagValues,
  positionals: readonly string[],
  annotations: Record<string, string | null>,
): Promise<{ service: Service; namespace: string; client: ReturnType<typeof cliClient> }> {
  const name = serviceArgument(positionals);
  const namespace = stringFlag(values, "namespace") ?? "default";
  const client = cliClient(targetConnection(values));
  try {
    const service = await client.request<Service>(
      "PATCH",
      `/api/v1/namespaces/${encodeURIComponent(namespace)}/services/${encodeURIComponent(name)}`,
      { body: { metadata: { annotations } }, contentType: "application/merge-patch+json" },
    );
    return { service, namespace, client };
  } catch (error) {
    client.close();
    if (isNotFound(error))
      throw new CommandError(`service/${name} not found in namespace ${namespace} on ${client.server}`);
    throw error;
  }
}

export const exportDefinition: CommandDefinition = {
  name: "export",
  help: exportHelp,
  flags: exportFlags,
  maxPositionals: 1,
  async run({ values, positionals }) {
    const gateway = requiredFlag(values, "gateway");
    const gatewayNamespace = requiredFlag(values, "gateway-namespace");
    const { service, namespace, client } = await patchAnnotations(values, positionals, {
      [GATEWAY_NAME]: gateway,
      [GATEWAY_NS]: gatewayNamespace,
    });
    try {
      writeOut(
        `service/${service.metadata.name} in ${namespace} exported through gateway ${gatewayNamespace}/${gateway}\n`,
      );
      let gw: Service | undefined;
      try {
        gw = await client.request<Service>(
          "GET",
          `/api/v1/namespaces/${encodeURIComponent(gatewayNamespace)}/services/${encodeURIComponent(gateway)}`,
        );
      } catch (error) {
        if (!isNotFound(error)) throw error;
      }
      // Hostnames are not resolved here: `check` does that; this is only a early hint.
      const view = viewGateway(gw, () => ["198.18.0.1"]);
      if (view.unusable)
        writeErr(
          `warning: gateway ${gatewayNamespace}/${gateway}: ${view.unusable}; the mirror has no endpoints until it is usable\n`,
        );
    } finally {
      client.close();
    }
    return EXIT_OK;
  },
};

export const unexportDefinition: CommandDefinition = {
  name: "unexport",
  help: unexportHelp,
  flags: clusterFlags,
  maxPositionals: 1,
  async run({ values, positionals }) {
    const { service, namespace, client } = await patchAnnotations(values, positionals, {
      [GATEWAY_NAME]: null,
      [GATEWAY_NS]: null,
    });
    client.close();
    writeOut(`service/${service.metadata.name} in ${namespace} unexported\n`);
    return EXIT_OK;
  },
};

export function exportCommand(argv: readonly string[]): Promise<number> {
  return runCli(exportDefinition, argv);
}

export function unexportCommand(argv: readonly string[]): Promise<number> {
  return runCli(unexportDefinition, argv);
}
