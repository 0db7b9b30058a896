/**
 * `link --links NS`: the Link (`multicluster.linkerd.io/v1alpha3`, SPEC §15) and its
 * credentials Secret, as linkerd's own `multicluster link` writes them: the Link named
 * after the cluster, its gateway (addresses, port, identity, probe) read from the remote
 * gateway Service unless given by flags, its three selectors (linkerd's defaults), its
 * excluded labels and annotations; the Secret `cluster-credentials-<cluster>` of type
 * `mirror.linkerd.io/remote-kubeconfig` in the same namespace, without annotations.
 *
 * Both are checked with the controller's own parsers before they are shown or applied:
 * what `link` writes is what `run --links` registers.
 */

import { parseSelectorText } from "../core/label-selector.ts";
import { KUBECONFIG_KEY, SECRET_TYPE } from "../core/labels.ts";
import { LINK_API_VERSION, parseLink, portOf } from "../core/link.ts";
import { validateDns1123Label } from "../core/naming.ts";
import type { KubeObject, Secret, Service } from "../core/objects.ts";
import { PROBE_PATH, PROBE_PERIOD, PROBE_PORT_NAME } from "../core/probe-spec.ts";
import type { KubeClient } from "../kube/client.ts";
import type { ParseOptions } from "../kube/kubeconfig.ts";
import { parseLinkCredentials } from "../supervisor/link-stored.ts";
import { CommandError, type FlagValues, isNotFound, stringFlag, UsageError } from "./common.ts";

/** linkerd's defaults (its `link` command's): what a Link mirrors unless told otherwise. */
export const LINK_DEFAULTS = Object.freeze({
  selector: "mirror.linkerd.io/exported=true",
  remoteDiscoverySelector: "mirror.linkerd.io/exported=remote-discovery",
  federatedServiceSelector: "mirror.linkerd.io/federated=member",
  gatewayName: "linkerd-gateway",
  gatewayNamespace: "linkerd-multicluster",
  linkerdNamespace: "linkerd",
});
/** The gateway's port: linkerd's name, then SPEC §2's. */
const GATEWAY_PORT_NAMES = ["mc-gateway", "incoming-port"];
const GATEWAY_IDENTITY = "mirror.linkerd.io/gateway-identity";

export const linkResourceFlags = {
  links: {
    type: "string",
    description:
      "write a linkerd Link (multicluster.linkerd.io/v1alpha3) and its Secret in this namespace, for `run --links` (usually linkerd-multicluster), instead of an annotated Secret",
  },
  selector: {
    type: "string",
    short: "l",
    description: `with --links: remote Services mirrored through the gateway (default ${LINK_DEFAULTS.selector})`,
  },
  "remote-discovery-selector": {
    type: "string",
    description: `with --links: remote Services mirrored for remote discovery (default ${LINK_DEFAULTS.remoteDiscoverySelector})`,
  },
  "federated-service-selector": {
    type: "string",
    description: `with --links: members of fleet-wide Services (default ${LINK_DEFAULTS.federatedServiceSelector})`,
  },
  "excluded-labels": { type: "string", description: "with --links: label keys not copied (comma-separated; prefix/*)" },
  "excluded-annotations": {
    type: "string",
    description: "with --links: annotation keys not copied (comma-separated; prefix/*)",
  },
  "gateway-addresses": {
    type: "string",
    description: "with --links: the gateway's addresses (comma-separated; default: the gateway Service's ingress)",
  },
  "gateway-port": { type: "string", description: "with --links: the gateway's port (default: its mc-gateway port)" },
  "gateway-identity": {
    type: "string",
    description: `with --links: the gateway's identity (default: its ${GATEWAY_IDENTITY} annotation)`,
  },
} as const;

const LINK_ONLY = Object.keys(linkResourceFlags).filter((f) => f !== "links");

/** The `--links` flags, validated: everything of the Link but what the remote gateway Service gives. */
export interface LinkResourceOptions {
  /** The namespace of the Link and its Secret. */
  readonly namespace: string;
  /** The three selectors, as the Link stores them. */
  readonly selectors: {
    readonly selector: object;
    readonly remoteDiscoverySelector: object;
    readonly federatedServiceSelector: object;
  };
  readonly excludedLabels: readonly string[];
  readonly excludedAnnotations: readonly string[];
  /** The gateway fields given by flags; the others are read from the remote gateway Service. */
  readonly given: { readonly address?: string; readonly port?: string; readonly identity?: string };
}

const list = (text: string | undefined): string[] =>
  (text ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");

/** A selector flag in kubectl's `-l` syntax, as the Link stores it (empty: selects nothing). */
function selectorFlag(values: FlagValues, flag: string, fallback: string): object {
  const text = stringFlag(values, flag) ?? fallback;
  const parsed = parseSelectorText(text);
  if (typeof parsed === "string") throw new UsageError(`--${flag} ${JSON.stringify(text)}: ${parsed}`);
  return parsed;
}

/**
 * The `--links` flags (pure; undefined without `--links`). Every flag is judged here,
 * before either cluster is reached, so a bad one writes nothing anywhere.
 * @throws UsageError naming the flag: a Link flag without `--links` (it would be ignored
 *   silently), a namespace that is not one, a selector that is not one, an empty or bad
 *   gateway flag.
 */
export function linkResourceOptions(values: FlagValues): LinkResourceOptions | undefined {
  const namespace = stringFlag(values, "links");
  if (namespace === undefined) {
    const given = LINK_ONLY.filter((f) => values[f] !== undefined);
    if (given.length > 0) throw new UsageError(`--${given[0]} goes with --links`);
    return undefined;
  }
  const namespaceProblem = validateDns1123Label(namespace);
  if (namespaceProblem) throw new UsageError(`--links ${JSON.stringify(namespace)} ${namespaceProblem}`);
  const address = stringFlag(values, "gateway-addresses");
  if (address !== undefined && list(address).length === 0)
    throw new UsageError("--gateway-addresses: names no address");
  const port = stringFlag(values, "gateway-port");
  if (port !== undefined && portOf(port) === undefined)
    throw new UsageError(`--gateway-port ${JSON.stringify(port)} is not a port number (1-65535)`);
  const identity = stringFlag(values, "gateway-identity");
  if (identity === "") throw new UsageError("--gateway-identity: must not be empty");
  return {
    namespace,
    selectors: {
      selector: selectorFlag(values, "selector", LINK_DEFAULTS.selector),
      remoteDiscoverySelector: selectorFlag(values, "remote-discovery-selector", LINK_DEFAULTS.remoteDiscoverySelector),
      federatedServiceSelector: selectorFlag(
        values,
        "federated-service-selector",
        LINK_DEFAULTS.federatedServiceSelector,
      ),
    },
    excludedLabels: list(stringFlag(values, "excluded-labels")),
    excludedAnnotations: list(stringFlag(values, "excluded-annotations")),
    given: {
      ...(address !== undefined ? { address: list(address).join(",") } : {}),
      ...(port !== undefined ? { port: port.trim() } : {}),
      ...(identity !== undefined ? { identity } : {}),
    },
  };
}

export interface LinkGatewaySpec {
  readonly gatewayAddress: string;
  readonly gatewayPort: string;
  readonly gatewayIdentity: string;
  readonly probeSpec?: { readonly path: string; readonly port: string; readonly period: string };
}

/**
 * The Link's gateway fields: the flags given, the rest from the remote gateway Service
 * (linkerd's rules: ingress IPs or hostnames, the `mc-gateway` port, the identity
 * annotation, a probe from the probe annotations and the `mc-probe` port). Without a
 * probe path the Link has no probe spec (not probed, SPEC §15); `warn` says so.
 */
export async function linkGateway(
  remote: KubeClient,
  given: LinkResourceOptions["given"],
  gateway: { readonly name: string; readonly namespace: string },
  warn: (text: string) => void,
): Promise<LinkGatewaySpec> {
  const where = `service/${gateway.name} in namespace ${gateway.namespace} of the remote cluster`;
  let service: Service | undefined;
  try {
    service = await remote.request<Service>(
      "GET",
      `/api/v1/namespaces/${encodeURIComponent(gateway.namespace)}/services/${encodeURIComponent(gateway.name)}`,
    );
  } catch (error) {
    if (!isNotFound(error)) throw error;
  }
  const complete = given.address !== undefined && given.port !== undefined && given.identity !== undefined;
  if (!service && !complete)
    throw new CommandError(
      `the gateway ${where} is not found: give --gateway-addresses, --gateway-port and --gateway-identity, or --gateway-name/--gateway-namespace`,
    );
  const ports = service?.spec?.ports ?? [];
  const portOf = (name: string): number | undefined => {
    const p = ports.find((x) => x.name === name);
    return service?.spec?.type === "NodePort" ? p?.nodePort : p?.port;
  };
  const ingress = (service?.status?.loadBalancer?.ingress ?? []).flatMap((i) => {
    const a = i.ip || i.hostname;
    return a ? [a] : [];
  });
  const address = given.address ?? ingress.join(",");
  if (address === "")
    throw new CommandError(`the gateway ${where} has no ingress address yet (or give --gateway-addresses)`);
  const port =
    given.port ??
    GATEWAY_PORT_NAMES.map(portOf)
      .find((p) => p !== undefined)
      ?.toString();
  if (port === undefined)
    throw new CommandError(
      `the gateway ${where} has no port named ${GATEWAY_PORT_NAMES.join(" or ")} (or give --gateway-port)`,
    );
  const identity = given.identity ?? service?.metadata.annotations?.[GATEWAY_IDENTITY];
  if (!identity)
    throw new CommandError(`the gateway ${where} has no ${GATEWAY_IDENTITY} annotation (or give --gateway-identity)`);
  const probePath = service?.metadata.annotations?.[PROBE_PATH];
  const probePort = portOf(PROBE_PORT_NAME);
  let probeSpec: LinkGatewaySpec["probeSpec"];
  if (probePath && probePort !== undefined) {
    // linkerd's annotation holds seconds ("3"); the Link holds a Go duration.
    const period = service?.metadata.annotations?.[PROBE_PERIOD] ?? "3";
    probeSpec = { path: probePath, port: String(probePort), period: /^\d+$/.test(period) ? `${period}s` : period };
  } else
    warn(
      `warning: the gateway ${where} has no probe path annotation or ${PROBE_PORT_NAME} port: the Link's gateway is not probed\n`,
    );
  return { gatewayAddress: address, gatewayPort: port, gatewayIdentity: identity, ...(probeSpec ? { probeSpec } : {}) };
}

export interface LinkObjects {
  readonly link: KubeObject & {
    readonly apiVersion: string;
    readonly kind: "Link";
    readonly spec: Record<string, unknown>;
  };
  readonly secret: Secret & { type: string; data: Record<string, string> };
}

/** The Link and its Secret (pure). */
export function linkObjects(opts: {
  readonly resource: LinkResourceOptions;
  readonly cluster: string;
  readonly domain: string;
  readonly kubeconfig: string;
  readonly secretName: string;
  readonly gateway: LinkGatewaySpec;
}): LinkObjects {
  const { resource } = opts;
  const spec: Record<string, unknown> = {
    targetClusterName: opts.cluster,
    targetClusterDomain: opts.domain,
    targetClusterLinkerdNamespace: LINK_DEFAULTS.linkerdNamespace,
    clusterCredentialsSecret: opts.secretName,
    ...opts.gateway,
    ...resource.selectors,
    excludedLabels: [...resource.excludedLabels],
    excludedAnnotations: [...resource.excludedAnnotations],
  };
  return {
    link: {
      apiVersion: LINK_API_VERSION,
      kind: "Link",
      metadata: { name: opts.cluster, namespace: resource.namespace },
      spec,
    },
    secret: {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: opts.secretName, namespace: resource.namespace },
      type: SECRET_TYPE,
      data: { [KUBECONFIG_KEY]: Buffer.from(opts.kubeconfig).toString("base64") },
    },
  };
}

/** Why the controller would refuse the Link or its Secret, or undefined (its own parsers). */
export function linkRefusal(objects: LinkObjects, options: ParseOptions): string | undefined {
  const link = parseLink(objects.link);
  if (link.kind === "invalid") return `the Link would be refused by the controller: ${link.message}`;
  const secret = parseLinkCredentials(objects.secret, options);
  if (secret.kind === "invalid") return `the Link's Secret would be refused by the controller: ${secret.message}`;
  return undefined;
}
