/**
 * `fleet-mirror export` / `unexport`: mark a Service of a remote cluster as exported, by
 * the two gateway annotations of SPEC §2 (`--mode annotation`, the default) or by the
 * export label of SPEC §12 (`--mode label`), or remove both marks. The cluster is the
 * one of `--remote-kubeconfig`/`--remote-context` when given, else kubectl's current one
 * (`--kubeconfig`/`--context`): exporting is something done *on* the remote cluster.
 */

import { viewGateway } from "../core/desired.ts";
import { DEFAULT_EXPORT_SELECTOR, DEFAULT_GATEWAY, EXPORT_MODES, type ExportMode } from "../core/export.ts";
import { type LabelRequirement, parseLabelRequirement } from "../core/label-requirement.ts";
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

const selectorFlag = {
  "export-selector": {
    type: "string",
    default: DEFAULT_EXPORT_SELECTOR,
    description: "the controller's --export-selector: the label that label mode sets (and unexport removes)",
  },
} as const;

const exportFlags = {
  ...clusterFlags,
  ...selectorFlag,
  mode: { type: "string", default: "annotation", description: `how to export: ${EXPORT_MODES.join("|")}` },
  gateway: {
    type: "string",
    description:
      "name of the gateway Service (annotation mode: required; label mode: the cluster's default gateway, checked only)",
  },
  "gateway-namespace": {
    type: "string",
    description: "namespace of the gateway Service (annotation mode: required; label mode: checked only)",
  },
} as const;

const exportHelp = commandHelp(
  "export SERVICE [--mode annotation|label] [--gateway NAME --gateway-namespace NS] [-n NAMESPACE] [flags]",
  `Exports a Service of a remote cluster, so fleet-mirror mirrors it into the local cluster.

  --mode annotation  sets the annotations ${GATEWAY_NAME} and ${GATEWAY_NS}
                     (--gateway, --gateway-namespace): mirrored through that gateway
  --mode label       sets the label of --export-selector (${DEFAULT_EXPORT_SELECTOR}):
                     mirrored through the cluster's default gateway, which its
                     credentials Secret names (else ${DEFAULT_GATEWAY.namespace}/${DEFAULT_GATEWAY.name})

Warns (without failing) when the gateway is missing or not usable yet.`,
  exportFlags,
);

const unexportHelp = commandHelp(
  "unexport SERVICE [-n NAMESPACE] [flags]",
  `Stops exporting a Service of a remote cluster: removes both gateway annotations and
the export label; fleet-mirror then deletes its mirror.`,
  { ...clusterFlags, ...selectorFlag },
);

function exportSelector(values: FlagValues): LabelRequirement {
  const text = stringFlag(values, "export-selector") ?? DEFAULT_EXPORT_SELECTOR;
  const parsed = parseLabelRequirement(text);
  if (typeof parsed === "string") throw new UsageError(`--export-selector: ${JSON.stringify(text)}: ${parsed}`);
  return parsed;
}

function exportMode(values: FlagValues): ExportMode {
  const text = stringFlag(values, "mode") ?? "annotation";
  const mode = EXPORT_MODES.find((m) => m === text);
  if (!mode) throw new UsageError(`--mode: ${JSON.stringify(text)} is not one of ${EXPORT_MODES.join(", ")}`);
  return mode;
}

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

/** Merge-patches the Service's annotations and labels (null removes one); a missing Service is a clear error. */
async function patchMetadata(
  values: FlagValues,
  positionals: readonly string[],
  metadata: { annotations?: Record<string, string | null>; labels?: Record<string, string | null> },
): Promise<{ service: Service; namespace: string; client: ReturnType<typeof cliClient> }> {
  const name = serviceArgument(positionals);
  const namespace = stringFlag(values, "namespace") ?? "default";
  const client = cliClient(targetConnection(values));
  try {
    const service = await client.request<Service>(
      "PATCH",
      `/api/v1/namespaces/${encodeURIComponent(namespace)}/services/${encodeURIComponent(name)}`,
      { body: { metadata }, contentType: "application/merge-patch+json" },
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
    const mode = exportMode(values);
    const selector = exportSelector(values);
    const gateway =
      mode === "annotation" ? requiredFlag(values, "gateway") : (stringFlag(values, "gateway") ?? DEFAULT_GATEWAY.name);
    const gatewayNamespace =
      mode === "annotation"
        ? requiredFlag(values, "gateway-namespace")
        : (stringFlag(values, "gateway-namespace") ?? DEFAULT_GATEWAY.namespace);
    const { service, namespace, client } = await patchMetadata(
      values,
      positionals,
      mode === "annotation"
        ? { annotations: { [GATEWAY_NAME]: gateway, [GATEWAY_NS]: gatewayNamespace } }
        : { labels: { [selector.key]: selector.value } },
    );
    try {
      writeOut(
        mode === "annotation"
          ? `service/${service.metadata.name} in ${namespace} exported through gateway ${gatewayNamespace}/${gateway}\n`
          : `service/${service.metadata.name} in ${namespace} exported by label ${selector.key}=${selector.value}, through the cluster's default gateway\n`,
      );
      if (mode === "label" && service.metadata.annotations?.[GATEWAY_NAME] && service.metadata.annotations[GATEWAY_NS])
        writeErr(
          `note: its annotations ${GATEWAY_NAME} and ${GATEWAY_NS} still name gateway ${service.metadata.annotations[GATEWAY_NS]}/${service.metadata.annotations[GATEWAY_NAME]}, and they win over the label\n`,
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
  flags: { ...clusterFlags, ...selectorFlag },
  maxPositionals: 1,
  async run({ values, positionals }) {
    const selector = exportSelector(values);
    const { service, namespace, client } = await patchMetadata(values, positionals, {
      annotations: { [GATEWAY_NAME]: null, [GATEWAY_NS]: null },
      labels: { [selector.key]: null },
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
