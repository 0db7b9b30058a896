/**
 * `fleet-mirror check`: pre-flight and health checks, one ✓/✗ line each, exit 1 when
 * any fails. Everything is read, nothing is written (the access reviews create nothing).
 *
 * - local permissions: a SelfSubjectAccessReview for every verb/resource that
 *   `deploy/rbac/local.yaml` grants (the manifest is the one list of what the controller
 *   needs), for the identity of --kubeconfig: run it with the controller's kubeconfig;
 * - every credentials Secret, validated by the controller's own parser and registry;
 * - every registered remote: reachable and readable with the Secret's credentials, and
 *   every gateway its exported Services use usable (SPEC §2, hostnames resolved here);
 * - no local Service/Endpoints that a mirror would need but fleet-mirror does not own;
 * - no local Service/Endpoints/EndpointSlice that a fleet-wide Service (SPEC §11) of the
 *   members the remotes show would need but fleet-mirror does not own;
 * - no mirror labelled with a cluster that no Secret names.
 *
 * This file reads the clusters; check-rules.ts holds the pure rules and the report.
 */
import { lookup } from "node:dns/promises";
import { viewGateway } from "../core/desired.ts";
import { DEFAULT_EXPORT_SELECTOR, type ExportSettings, exportOf } from "../core/export.ts";
import { DEFAULT_MEMBER_SELECTOR, isMember, type MemberSelector } from "../core/federated.ts";
import { type LabelRequirement, parseLabelRequirement } from "../core/label-requirement.ts";
import { SECRET_TYPE } from "../core/labels.ts";
import { type KubeObject, objectKey, type Secret, type Service } from "../core/objects.ts";
import type { KubeClient } from "../kube/client.ts";
import { parseCredentialsSecret } from "../supervisor/registration.ts";
import { computeRegistry, type RegisteredCluster } from "../supervisor/registry.ts";
import { checkLinks } from "./check-links.ts";
import {
  type CheckResult,
  credentialChecks,
  federatedNameConflicts,
  formatChecks,
  type LocalMirrorObjects,
  nameConflicts,
  permissionNeeds,
  unknownClusterMirrors,
} from "./check-rules.ts";
import {
  type CommandDefinition,
  cliClient,
  commandHelp,
  credentialsNamespace,
  durationFlag,
  EXIT_FAILURE,
  EXIT_OK,
  formatData,
  listAll,
  localConnection,
  localFlags,
  outputFlag,
  outputFormat,
  type Progress,
  readRbacManifest,
  runCli,
  startProgress,
  stringFlag,
  UsageError,
  writeOut,
} from "./common.ts";

const flags = {
  ...localFlags,
  ...outputFlag,
  timeout: { type: "string", default: "10s", description: "limit of each request to a remote cluster" },
  "federated-selector": {
    type: "string",
    default: DEFAULT_MEMBER_SELECTOR,
    description: "member label of fleet-wide Services, as the controller's flag of the same name",
  },
  "export-selector": {
    type: "string",
    default: DEFAULT_EXPORT_SELECTOR,
    description: "label export's label, as the controller's flag of the same name (empty: off)",
  },
  links: {
    type: "string",
    description: "as `run --links`: check the Links of this namespace (SPEC §15) and the clusters they register",
  },
  "allow-kubeconfig-file-paths": {
    type: "boolean",
    description: "validate Secrets as a controller started with the same flag does",
  },
  "allow-insecure-remotes": {
    type: "boolean",
    description:
      "validate Secrets as a controller started with the same flag does (http:// servers, insecure-skip-tls-verify)",
  },
} as const;

const help = commandHelp(
  "check [flags]",
  `Pre-flight and health checks, printed as ✓/✗ lines; exits 1 when any check fails.

  local permissions   a SelfSubjectAccessReview for every verb and resource of
                      deploy/rbac/local.yaml, for the identity of --kubeconfig (run
                      check with the controller's kubeconfig to check the controller)
  credentials         every Secret of type mirror.linkerd.io/remote-kubeconfig in -n is
                      valid and names a cluster no other Secret names
  remote clusters     each is reachable and its Services readable with the Secret's
                      credentials; every gateway used by an exported Service is usable
  name conflicts      no local Service/Endpoints/EndpointSlice that holds a mirror's
                      name without being that cluster's mirror
  fleet-wide names    no local Service/Endpoints/EndpointSlice that holds a name of a
                      fleet-wide Service <svc>-federated (of the members the remotes
                      show, by --federated-selector) without being fleet-mirror's
  links (--links NS)  each Link of NS registers its cluster (its Secret there and
                      valid, no other Link naming the cluster), whose remote is reachable
  orphans             no mirror labelled with a cluster that no Secret or Link registers`,
  flags,
);

async function checkPermissions(client: KubeClient, namespace: string): Promise<CheckResult[]> {
  const needs = permissionNeeds(readRbacManifest("local").text, namespace);
  const answers = await Promise.all(
    needs.map(async (need) => {
      const review = await client.request<{ status?: { allowed?: boolean } }>(
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        {
          body: {
            apiVersion: "authorization.k8s.io/v1",
            kind: "SelfSubjectAccessReview",
            spec: {
              resourceAttributes: {
                group: need.group,
                resource: need.resource,
                verb: need.verb,
                ...(need.namespace ? { namespace: need.namespace } : {}),
                ...(need.name ? { name: need.name } : {}),
              },
            },
          },
        },
      );
      return { need, allowed: review?.status?.allowed === true };
    }),
  );
  // One line per resource and scope, listing what is missing.
  const groups = new Map<string, { allowed: string[]; missing: string[] }>();
  for (const { need, allowed } of answers) {
    const where = need.namespace ? `in namespace ${need.namespace}` : "cluster-wide";
    const what = need.group ? `${need.resource}.${need.group}` : need.resource;
    const key = `${need.name ? `${what}/${need.name}` : what} ${where}`;
    const entry = groups.get(key) ?? { allowed: [], missing: [] };
    (allowed ? entry.allowed : entry.missing).push(need.verb);
    groups.set(key, entry);
  }
  return [...groups].map(([key, { allowed, missing }]) => ({
    section: "local permissions",
    ok: missing.length === 0,
    message: missing.length === 0 ? `${key}: ${allowed.join(", ")}` : `${key}: missing ${missing.join(", ")}`,
  }));
}

/** IPs of a hostname, or undefined when it does not resolve (gateway ingress, SPEC §2). */
async function resolveAll(hostnames: readonly string[]): Promise<Map<string, string[]>> {
  const resolved = new Map<string, string[]>();
  await Promise.all(
    hostnames.map(async (name) => {
      try {
        const addresses = await lookup(name, { all: true });
        resolved.set(name, addresses.map((a) => a.address).sort());
      } catch {
        // Unresolved: viewGateway reports it.
      }
    }),
  );
  return resolved;
}

interface RemoteFindings {
  readonly results: CheckResult[];
  /** Exported Services, when the remote could be listed. */
  readonly exported?: readonly Service[];
  /** Members of fleet-wide Services, when the remote could be listed. */
  readonly members?: readonly Service[];
}

async function checkRemote(
  cluster: RegisteredCluster,
  selector: MemberSelector,
  exportSelector: LabelRequirement | undefined,
  timeoutMs: number,
): Promise<RemoteFindings> {
  const section = `remote cluster ${cluster.cluster}`;
  const client = cliClient(cluster.connection, timeoutMs);
  const results: CheckResult[] = [];
  try {
    try {
      await client.request("GET", "/api/v1/services", { query: { limit: 1 } });
      results.push({ section, ok: true, message: `${cluster.connection.server} reachable; Services readable` });
    } catch (error) {
      results.push({ section, ok: false, message: `${cluster.connection.server}: ${(error as Error).message}` });
      return { results };
    }
    const services = await listAll<Service>(client, "/api/v1/services");
    const byKey = new Map(services.map((s) => [objectKey(s.metadata), s]));
    const settings: ExportSettings = {
      defaultGateway: cluster.defaultGateway,
      ...(exportSelector ? { exportSelector } : {}),
    };
    const exported: Service[] = [];
    const byLabel: Service[] = [];
    const users = new Map<string, number>();
    for (const s of services) {
      const decision = exportOf(settings, s);
      if (decision.kind === "label-value")
        results.push({ section, ok: false, message: `Service ${objectKey(s.metadata)}: ${decision.message}` });
      if (decision.kind !== "exported") continue;
      exported.push(s);
      if (decision.mode === "label") byLabel.push(s);
      const key = objectKey(decision.gateway);
      users.set(key, (users.get(key) ?? 0) + 1);
    }
    const members = services.filter((s) => isMember(selector, s));
    results.push({
      section,
      ok: true,
      message: `${exported.length} exported Service(s) (${byLabel.length} by label), ${members.length} fleet-wide member(s)`,
    });
    for (const [key, count] of [...users].sort(([a], [b]) => a.localeCompare(b))) {
      const gateway = byKey.get(key);
      const hostnames = (gateway?.status?.loadBalancer?.ingress ?? []).flatMap((i) =>
        !i.ip && i.hostname ? [i.hostname] : [],
      );
      const resolved = await resolveAll(hostnames);
      const view = viewGateway(gateway, (name) => resolved.get(name));
      results.push({
        section,
        ok: view.unusable === undefined,
        message:
          view.unusable === undefined
            ? `gateway ${key} usable: ${view.addresses.join(", ")} port ${view.incomingPort ?? "?"} (${count} Service(s))`
            : `gateway ${key} unusable: ${view.unusable} (${count} Service(s) without endpoints)`,
      });
    }
    return { results, exported, members };
  } catch (error) {
    results.push({ section, ok: false, message: (error as Error).message });
    return { results };
  } finally {
    client.close();
  }
}

async function runChecks(
  values: Readonly<Record<string, string | boolean | undefined>>,
  progress: Progress,
): Promise<CheckResult[]> {
  const namespace = credentialsNamespace(values);
  const timeoutMs = durationFlag(values, "timeout", "10s");
  const selectorText = stringFlag(values, "federated-selector") ?? DEFAULT_MEMBER_SELECTOR;
  const selector = parseLabelRequirement(selectorText);
  if (typeof selector === "string")
    throw new UsageError(`--federated-selector: ${JSON.stringify(selectorText)}: ${selector}`);
  const exportText = stringFlag(values, "export-selector") ?? DEFAULT_EXPORT_SELECTOR;
  const exportSelector = exportText.trim() === "" ? undefined : parseLabelRequirement(exportText);
  if (typeof exportSelector === "string")
    throw new UsageError(`--export-selector: ${JSON.stringify(exportText)}: ${exportSelector}`);
  const client = cliClient(localConnection(values), timeoutMs);
  const results: CheckResult[] = [];
  try {
    progress.update("local cluster");
    try {
      const version = await client.request<{ gitVersion?: string }>("GET", "/version");
      results.push({
        section: "local cluster",
        ok: true,
        message: `${client.server} reachable (${version?.gitVersion ?? "unknown version"})`,
      });
    } catch (error) {
      results.push({ section: "local cluster", ok: false, message: (error as Error).message });
      return results;
    }
    progress.update("local permissions");
    results.push(...(await checkPermissions(client, namespace)));

    progress.update("credentials Secrets");
    let secrets: Secret[];
    try {
      secrets = await listAll<Secret>(client, `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets`, {
        fieldSelector: `type=${SECRET_TYPE}`,
      });
    } catch (error) {
      results.push({
        section: "credentials",
        ok: false,
        message: `cannot list Secrets in ${namespace}: ${(error as Error).message}`,
      });
      return results;
    }
    const parseOptions = {
      allowFilePaths: values["allow-kubeconfig-file-paths"] === true,
      allowInsecure: values["allow-insecure-remotes"] === true,
    };
    const linksNamespace = stringFlag(values, "links");
    const links =
      linksNamespace === undefined ? undefined : await checkLinks(client, linksNamespace, parseOptions, timeoutMs);
    const linkRegistry = links?.registry;
    const registry = computeRegistry(
      secrets.map((secret) => ({ secret, parsed: parseCredentialsSecret(secret, parseOptions) })),
      new Map(),
      linkRegistry ? { clusters: linkRegistry.claimed, secrets: linkRegistry.claimedSecrets } : undefined,
    );
    if (secrets.length === 0)
      results.push({
        section: "credentials",
        ok: true,
        message: `no credentials Secret in ${namespace} (no remote cluster linked yet)`,
      });
    results.push(...credentialChecks(registry));
    if (links) results.push(...links.results);

    progress.update(`remote clusters (${registry.registered.size})`);
    const remotes = await Promise.all(
      [...registry.registered.values()].map(async (reg) => ({
        reg,
        found: await checkRemote(reg, selector, exportSelector, timeoutMs),
      })),
    );
    remotes.sort((a, b) => a.reg.cluster.localeCompare(b.reg.cluster));
    for (const { found } of remotes) results.push(...found.results);

    progress.update("local mirrors");
    let local: LocalMirrorObjects;
    try {
      const [services, endpoints, slices] = await Promise.all([
        listAll<KubeObject>(client, "/api/v1/services"),
        listAll<KubeObject>(client, "/api/v1/endpoints"),
        listAll<KubeObject>(client, "/apis/discovery.k8s.io/v1/endpointslices"),
      ]);
      local = { services, endpoints, slices };
    } catch (error) {
      results.push({
        section: "name conflicts",
        ok: false,
        message: `cannot list local Services/Endpoints/EndpointSlices: ${(error as Error).message}`,
      });
      return results;
    }
    const conflicts = nameConflicts(
      remotes.flatMap(({ reg, found }) => (found.exported ? [{ cluster: reg.cluster, exported: found.exported }] : [])),
      local,
    );
    results.push(
      ...(conflicts.length > 0
        ? conflicts
        : [{ section: "name conflicts", ok: true, message: "no local object holds a mirror's name" }]),
    );
    const fleetWide = federatedNameConflicts(
      remotes.flatMap(({ reg, found }) => (found.members ? [{ cluster: reg.cluster, members: found.members }] : [])),
      local,
    );
    results.push(
      ...(fleetWide.length > 0
        ? fleetWide
        : [{ section: "fleet-wide names", ok: true, message: "no local object holds a fleet-wide Service's name" }]),
    );
    const orphans = unknownClusterMirrors(new Set([...registry.keep, ...(linkRegistry?.keep ?? [])]), local);
    results.push(
      ...(orphans.length > 0
        ? orphans
        : [{ section: "orphans", ok: true, message: "every mirror belongs to a registered cluster" }]),
    );
    return results;
  } finally {
    client.close();
  }
}

export const checkDefinition: CommandDefinition = {
  name: "check",
  help,
  flags,
  async run({ values }) {
    const format = outputFormat(values);
    const progress = startProgress("checking");
    let results: CheckResult[];
    try {
      results = await runChecks(values, progress);
    } finally {
      progress.done();
    }
    const ok = results.every((r) => r.ok);
    writeOut(format === "table" ? formatChecks(results) : formatData({ ok, checks: results }, format));
    return ok ? EXIT_OK : EXIT_FAILURE;
  },
};

export function checkCommand(argv: readonly string[]): Promise<number> {
  return runCli(checkDefinition, argv);
}
