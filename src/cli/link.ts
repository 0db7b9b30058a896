/**
 * `fleet-mirror link`: gives fleet-mirror read-only access to a remote cluster and
 * produces the credentials Secret (SPEC §1) that registers it.
 *
 * On the remote cluster, every object of `deploy/rbac/remote.yaml` is created when
 * missing and reused when present (never replaced: an operator's edits stay); a custom
 * `--service-account` gets its own ClusterRoleBinding to the same ClusterRole. Then a
 * token is minted, and the Secret is printed (or applied to the local cluster). The
 * Secret is validated with the controller's own parser before it is shown, so what
 * `link` prints is exactly what the controller accepts.
 *
 * This file holds the command (flags, order of the steps, waiting for the controller);
 * link-options.ts judges the flags, link-identity.ts the remote side, link-secret.ts
 * the Secret, link-resource.ts and link-apply.ts the linkerd Link.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { CLUSTER_NAME, SECRET_TYPE } from "../core/labels.ts";
import type { Secret } from "../core/objects.ts";
import type { KubeClient } from "../kube/client.ts";
import { parseCredentialsSecret } from "../supervisor/registration.ts";
import {
  type CommandDefinition,
  CommandError,
  cliClient,
  commandHelp,
  connectionFromFile,
  credentialsNamespace,
  EXIT_FAILURE,
  EXIT_OK,
  type FlagValues,
  formatData,
  listAll,
  localConnection,
  localFlags,
  runCli,
  startProgress,
  stringFlag,
  writeErr,
  writeOut,
} from "./common.ts";
import { readLinkTargets, writeLinkObjects } from "./link-apply.ts";
import { ensureRemoteIdentity, remoteIdentity, requestToken, secretToken } from "./link-identity.ts";
import { DEFAULT_TOKEN_DURATION, linkOptions } from "./link-options.ts";
import {
  LINK_DEFAULTS,
  type LinkGatewaySpec,
  type LinkObjects,
  linkGateway,
  linkObjects,
  linkRefusal,
  linkResourceFlags,
} from "./link-resource.ts";
import { applySecret, credentialsSecret, remoteKubeconfigText } from "./link-secret.ts";
import { PROGRAM } from "./program.ts";
import { DEFAULT_ADMIN_URL, fetchAdminStatus } from "./status.ts";

const flags = {
  "cluster-name": {
    type: "string",
    description: "name of the remote cluster in fleet-mirror (a DNS-1123 label; required)",
  },
  "remote-kubeconfig": { type: "string", description: "kubeconfig of the remote cluster (required)" },
  "remote-context": { type: "string", description: "context in --remote-kubeconfig (default: its current context)" },
  "cluster-domain": { type: "string", default: "cluster.local", description: "the remote cluster's DNS domain" },
  "gateway-name": {
    type: "string",
    description:
      "the cluster's default gateway Service, for label export and fleet-wide members (default linkerd-gateway)",
  },
  "gateway-namespace": {
    type: "string",
    description: "namespace of the default gateway Service (default linkerd-multicluster)",
  },
  "service-account": {
    type: "string",
    description: "remote ServiceAccount to create or reuse (default: the one of deploy/rbac/remote.yaml)",
  },
  "token-source": {
    type: "string",
    default: "request",
    description:
      "request: TokenRequest API, works everywhere, expires (see --token-duration); secret: a kubernetes.io/service-account-token Secret, never expires, needs the remote's token controller",
  },
  "token-duration": {
    type: "string",
    default: DEFAULT_TOKEN_DURATION,
    description: "lifetime asked for a TokenRequest token (the API server may cap it)",
  },
  "secret-name": {
    type: "string",
    description: "name of the credentials Secret (default cluster-credentials-<cluster-name>)",
  },
  "allow-insecure-remotes": {
    type: "boolean",
    description:
      "write a Secret with an http:// server or insecure-skip-tls-verify (from --remote-kubeconfig), for a controller started with the same flag",
  },
  apply: { type: "boolean", description: "create or update the Secret in the local cluster instead of printing it" },
  wait: { type: "boolean", description: "with --apply: wait until the controller has registered the cluster" },
  timeout: { type: "string", default: "60s", description: "limit of --wait and of a token Secret being filled in" },
  "admin-url": { type: "string", description: `controller admin endpoint for --wait (default ${DEFAULT_ADMIN_URL})` },
  ...linkResourceFlags,
  ...localFlags,
  output: { type: "string", short: "o", description: "format of the printed Secret: yaml (default) | json" },
} as const;

const help = commandHelp(
  "link --cluster-name C --remote-kubeconfig PATH [flags]",
  `On the remote cluster, creates (or reuses) the read-only identity of
deploy/rbac/remote.yaml: namespace, ServiceAccount, ClusterRole (get/list/watch on
Services, EndpointSlices and the MCS API's ServiceExports, nothing else) and a ClusterRoleBinding; mints a token for it and prints the
credentials Secret cluster-credentials-<C> for the local cluster, ready for
\`kubectl apply -f -\`. With --apply, writes it to the local cluster (--kubeconfig,
--context, -n) itself. Running link again reuses everything and refreshes the token.

Tokens (--token-source):
  request (default)  TokenRequest API. Works on every API server, including those that
                     no longer create token Secrets, but the token EXPIRES
                     (--token-duration, default one year; the API server may cap it):
                     run link again before then. link prints the expiry on stderr.
  secret             a kubernetes.io/service-account-token Secret: never expires, but it
                     is filled in by the remote's token controller (kube-controller-manager);
                     without one, link fails after --timeout.

With --links NS: a linkerd Link (multicluster.linkerd.io/v1alpha3) named after the
cluster and its Secret cluster-credentials-<C> (no annotations), both in NS, as
linkerd's own \`multicluster link\` writes them, for \`run --links NS\`. The Link's gateway
(address, port, identity, probe) is read from the remote gateway Service
(--gateway-name/--gateway-namespace, default linkerd-gateway in linkerd-multicluster)
unless --gateway-addresses, --gateway-port and --gateway-identity say it.`,
  flags,
);

/** `--gateway-name`, `--gateway-namespace`: the parts given (the controller defaults each on its own). */
function defaultGatewayFlags(values: FlagValues): { name?: string; namespace?: string } {
  const name = stringFlag(values, "gateway-name");
  const namespace = stringFlag(values, "gateway-namespace");
  return { ...(name !== undefined ? { name } : {}), ...(namespace !== undefined ? { namespace } : {}) };
}

/** Waits until the controller reports the cluster synced (or says why it cannot be). */
async function waitRegistered(values: FlagValues, cluster: string, timeoutMs: number): Promise<number> {
  const adminUrl = stringFlag(values, "admin-url") ?? DEFAULT_ADMIN_URL;
  const progress = startProgress(`waiting for the controller to sync cluster ${cluster}`);
  const deadline = Date.now() + timeoutMs;
  let last = "";
  try {
    while (Date.now() < deadline) {
      const admin = await fetchAdminStatus(adminUrl);
      if ("unreachable" in admin) last = `controller not reachable (${admin.unreachable})`;
      else {
        const row = admin.status.clusters?.find((r) => r.cluster === cluster);
        last = row ? `${row.state}${row.reason ? `: ${row.reason}` : ""}` : "not registered yet";
        if (row?.state === "synced") {
          progress.done();
          writeErr(
            `cluster ${cluster} synced: ${row.exportedServices} exported Service(s), ${row.mirrors} mirrored so far\n`,
          );
          return EXIT_OK;
        }
        if (row?.state === "invalid" || row?.state === "duplicate") break;
      }
      progress.update(`waiting for the controller to sync cluster ${cluster}: ${last}`);
      await sleep(500);
    }
  } finally {
    progress.done();
  }
  writeErr(`${PROGRAM} link: cluster ${cluster} not synced within ${Math.round(timeoutMs / 1000)}s: ${last}\n`);
  return EXIT_FAILURE;
}

/** Stands for the token in the objects checked before the remote is written to (a token's text is never judged). */
const UNMINTED_TOKEN = "token-not-minted-yet";

export const linkDefinition: CommandDefinition = {
  name: "link",
  help,
  flags,
  async run({ values }) {
    // Every refusal comes before the first write on either cluster: the flags, the
    // remote gateway (read), the objects as the controller's parsers judge them (with a
    // stand-in token) and, with --apply, what the local cluster holds (read). Only then
    // the remote identity and its token, the one write a refusal must not leave behind.
    const options = linkOptions(values);
    const { cluster, links } = options;
    const namespace = credentialsNamespace(values);
    const identity = remoteIdentity(options.serviceAccount);
    const remoteConnection = connectionFromFile(
      options.remoteKubeconfig,
      stringFlag(values, "remote-context"),
      "--remote-kubeconfig",
    );
    const local = options.apply ? cliClient(localConnection(values)) : undefined;
    const remote = cliClient(remoteConnection);
    const parseOptions = { allowFilePaths: false, allowInsecure: values["allow-insecure-remotes"] === true };
    // Warnings wait for the refusals: a refused run prints its one line only.
    const warnings: string[] = [];
    try {
      let gateway: LinkGatewaySpec | undefined;
      if (links)
        gateway = await linkGateway(
          remote,
          links.given,
          {
            name: stringFlag(values, "gateway-name") ?? LINK_DEFAULTS.gatewayName,
            namespace: stringFlag(values, "gateway-namespace") ?? LINK_DEFAULTS.gatewayNamespace,
          },
          (warning) => warnings.push(warning),
        );
      const common = { cluster, domain: options.domain, secretName: options.secretName };
      const objectsFor = (token: string): Written => {
        const kubeconfig = remoteKubeconfigText(cluster, remoteConnection, token);
        if (links && gateway) {
          const objects = linkObjects({ ...common, resource: links, kubeconfig, gateway });
          // The controller's own parsers: never hand out a Link or Secret `run --links` would refuse.
          const refusal = linkRefusal(objects, parseOptions);
          if (refusal) throw new CommandError(refusal);
          return { links: objects };
        }
        const secret = credentialsSecret({
          ...common,
          namespace,
          kubeconfig,
          defaultGateway: defaultGatewayFlags(values),
        });
        // The controller's own parser: never hand out a Secret the controller would refuse.
        const parsed = parseCredentialsSecret(secret, parseOptions);
        if (parsed.kind !== "valid")
          throw new CommandError(
            `the credentials Secret would be refused by the controller: ${parsed.kind === "invalid" ? parsed.message : "ignored"}`,
          );
        return { secret };
      };
      const planned = objectsFor(UNMINTED_TOKEN);
      const targets = local && planned.links ? await readLinkTargets(local, planned.links, warnings) : undefined;
      for (const warning of warnings) writeErr(warning);
      await ensureRemoteIdentity(remote, identity);
      const token =
        options.tokenSource === "request"
          ? await requestToken(remote, identity, options.tokenSeconds)
          : await secretToken(remote, identity, options.timeoutMs);
      const written = objectsFor(token);
      if (written.links) {
        if (!local || !targets) {
          writeOut(formatLinkObjects(written.links, options.format));
          return EXIT_OK;
        }
        await writeLinkObjects(local, written.links, targets);
      } else {
        if (!local) {
          writeOut(formatData(written.secret, options.format));
          return EXIT_OK;
        }
        await applyCredentialsSecret(local, written.secret, namespace, cluster);
      }
    } finally {
      remote.close();
      local?.close();
    }
    return options.wait ? waitRegistered(values, cluster, options.timeoutMs) : EXIT_OK;
  },
};

/** What `link` prints or applies: a linkerd Link and its Secret, or an annotated credentials Secret. */
type Written = { links: LinkObjects; secret?: undefined } | { links?: undefined; secret: Secret };

/** Writes the annotated credentials Secret; warns of another Secret registering the same cluster. */
async function applyCredentialsSecret(local: KubeClient, secret: Secret, namespace: string, cluster: string) {
  // Another Secret naming the same cluster wins over this one (SPEC §1): say so now.
  const others = (
    await listAll<Secret>(local, `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets`, {
      fieldSelector: `type=${SECRET_TYPE}`,
    })
  ).filter((s) => s.metadata.annotations?.[CLUSTER_NAME] === cluster && s.metadata.name !== secret.metadata.name);
  for (const other of others)
    writeErr(
      `warning: secret/${other.metadata.name} already registers cluster ${cluster}; the controller reports this one as a duplicate until that one is deleted (${PROGRAM} unlink)\n`,
    );
  const outcome = await applySecret(local, secret);
  writeOut(`secret/${secret.metadata.name} ${outcome} in namespace ${namespace}\n`);
}

/** The Secret then the Link: two YAML documents, or a JSON `List`. */
function formatLinkObjects(objects: LinkObjects, format: "yaml" | "json"): string {
  if (format === "json")
    return formatData({ apiVersion: "v1", kind: "List", items: [objects.secret, objects.link] }, "json");
  return `${formatData(objects.secret, "yaml")}---\n${formatData(objects.link, "yaml")}`;
}

export function linkCommand(argv: readonly string[]): Promise<number> {
  return runCli(linkDefinition, argv);
}
