/**
 * `fleet-mirror export` / `unexport`: mark a Service of a remote cluster as exported, by
 * the two gateway annotations of SPEC §2 (`--mode annotation`, the default), by the
 * export label of SPEC §12 (`--mode label`) or by a ServiceExport of the MCS API (SPEC
 * §12, `--mode mcs`), or remove every mark. The cluster is the
 * one of `--remote-kubeconfig`/`--remote-context` when given, else kubectl's current one
 * (`--kubeconfig`/`--context`): exporting is something done *on* the remote cluster.
 */

import type { ConnectionSpec } from "../core/connection.ts";
import { viewGateway } from "../core/desired.ts";
import { DEFAULT_EXPORT_SELECTOR, DEFAULT_GATEWAY, EXPORT_MODES } from "../core/export.ts";
import { type LabelRequirement, parseLabelRequirement } from "../core/label-requirement.ts";
import { GATEWAY_NAME, GATEWAY_NS } from "../core/labels.ts";
import { MCS_API_VERSION, SERVICE_EXPORTS } from "../core/mcs.ts";
import type { Service } from "../core/objects.ts";
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

/** The export modes a user chooses from: the Service's marks, and a ServiceExport of the MCS API. */
const CLI_MODES = [...EXPORT_MODES, "mcs"] as const;
type CliMode = (typeof CLI_MODES)[number];

const exportFlags = {
  ...clusterFlags,
  ...selectorFlag,
  mode: { type: "string", default: "annotation", description: `how to export: ${CLI_MODES.join("|")}` },
  gateway: {
    type: "string",
    description:
      "name of the gateway Service (annotation mode: required; label, mcs modes: the cluster's default gateway, checked only)",
  },
  "gateway-namespace": {
    type: "string",
    description: "namespace of the gateway Service (annotation mode: required; label, mcs modes: checked only)",
  },
} as const;

const exportHelp = commandHelp(
  "export SERVICE [--mode annotation|label|mcs] [--gateway NAME --gateway-namespace NS] [-n NAMESPACE] [flags]",
  `Exports a Service of a remote cluster, so fleet-mirror mirrors it into the local cluster.

  --mode annotation  sets the annotations ${GATEWAY_NAME} and ${GATEWAY_NS}
                     (--gateway, --gateway-namespace): mirrored through that gateway
  --mode label       sets the label of --export-selector (${DEFAULT_EXPORT_SELECTOR}):
                     mirrored through the cluster's default gateway, which its
                     credentials Secret names (else ${DEFAULT_GATEWAY.namespace}/${DEFAULT_GATEWAY.name})
  --mode mcs         creates a ServiceExport of the same name (${MCS_API_VERSION}; the
                     MCS API's CRDs must be installed): imported as a ServiceImport
                     through the cluster's default gateway

Warns (without failing) when the gateway is missing or not usable yet.`,
  exportFlags,
);

const unexportHelp = commandHelp(
  "unexport SERVICE [-n NAMESPACE] [flags]",
  `Stops exporting a Service of a remote cluster: removes both gateway annotations, the
export label and its ServiceExport (where the MCS API is installed); fleet-mirror then
deletes its mirror and its part of the ServiceImport.`,
  { ...clusterFlags, ...selectorFlag },
);

function exportSelector(values: FlagValues): LabelRequirement {
  const text = stringFlag(values, "export-selector") ?? DEFAULT_EXPORT_SELECTOR;
  const parsed = parseLabelRequirement(text);
  if (typeof parsed === "string") throw new UsageError(`--export-selector: ${JSON.stringify(text)}: ${parsed}`);
  return parsed;
}

function exportMode(values: FlagValues): CliMode {
  const text = stringFlag(values, "mode") ?? "annotation";
  const mode = CLI_MODES.find((m) => m === text);
  if (!mode) throw new UsageError(`--mode: ${JSON.stringify(text)} is not one of ${CLI_MODES.join(", ")}`);
  return mode;
}

const serviceExportsPath = (namespace: string): string =>
  `${SERVICE_EXPORTS.discoveryPath}/namespaces/${encodeURIComponent(namespace)}/${SERVICE_EXPORTS.plural}`;

/** Creates the ServiceExport of Service `name` (which must exist); one already there is fine. */
async function createServiceExport(
  values: FlagValues,
  positionals: readonly string[],
): Promise<{ service: Service; namespace: string; client: ReturnType<typeof cliClient> }> {
  const { service, namespace, client } = await patchMetadata(values, positionals, {});
  try {
    await client.request("POST", serviceExportsPath(namespace), {
      body: { apiVersion: MCS_API_VERSION, kind: SERVICE_EXPORTS.kind, metadata: { name: service.metadata.name } },
    });
  } catch (error) {
    if (isAlreadyExists(error)) return { service, namespace, client };
    client.close();
    if (isNotFound(error))
      throw new CommandError(
        `${client.server} does not serve ${SERVICE_EXPORTS.plural}.${SERVICE_EXPORTS.group}: install the MCS API's CRDs, or export with --mode label`,
      );
    throw error;
  }
  return { service, namespace, client };
}

const isAlreadyExists = (error: unknown): boolean =>
  typeof error === "object" && error !== null && "status" in error && error.status === 409;

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
    const { service, namespace, client } =
      mode === "mcs"
        ? await createServiceExport(values, positionals)
        : await patchMetadata(
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
          : mode === "label"
            ? `service/${service.metadata.name} in ${namespace} exported by label ${selector.key}=${selector.value}, through the cluster's default gateway\n`
            : `service/${service.metadata.name} in ${namespace} exported by ServiceExport ${namespace}/${service.metadata.name}, through the cluster's default gateway\n`,
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
    try {
      // Its ServiceExport, if any; a cluster without the MCS API has none (404 either way).
      await client.request("DELETE", `${serviceExportsPath(namespace)}/${encodeURIComponent(service.metadata.name)}`);
    } catch (error) {
      if (!isNotFound(error)) throw error;
    } finally {
      client.close();
    }
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
