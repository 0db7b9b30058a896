/**
 * `fleet-mirror status`: one row per remote cluster, then one per fleet-wide Service
 * (SPEC §11). A controller run with --dry-run adds its plan: each write it would make (create, update
or delete, resource, object, cluster) and the mirrors it would leave alone (a conflict:
a name held by an object it does not own), none of them written.

Reads the running controller's admin endpoint (`/status`, an
 * AdminStatus); when none answers, builds the rows from the cluster objects instead —
 * credentials Secrets validated exactly as the controller validates them, mirrors
 * counted by the SPEC §3 labels — and says so. status-rows.ts holds the pure rows and tables.
 */

import type { AdminStatus } from "../admin/source.ts";
import { MIRRORED_SERVICE, SECRET_TYPE } from "../core/labels.ts";
import type { Secret, Service } from "../core/objects.ts";
import type { KubeClient } from "../kube/client.ts";
import { listLeases } from "../leader/lease-api.ts";
import {
  type CommandDefinition,
  cliClient,
  commandHelp,
  credentialsNamespace,
  EXIT_OK,
  formatData,
  listAll,
  localConnection,
  localFlags,
  outputFlag,
  outputFormat,
  runCli,
  stringFlag,
  writeErr,
  writeOut,
} from "./common.ts";
import { dryRunViewFromAdmin } from "./dry-run-rows.ts";
import { readLinkView } from "./link-view.ts";
import {
  federatedRowsFromAdmin,
  federatedRowsFromObjects,
  rowsFromAdmin,
  rowsFromObjects,
  type ShardRow,
  type StatusReport,
  shardRowsFromLeases,
  shardRowsFromView,
} from "./status-rows.ts";
import { formatStatusTable } from "./status-table.ts";

export const DEFAULT_ADMIN_URL = "http://127.0.0.1:9999";

const flags = {
  ...localFlags,
  ...outputFlag,
  "admin-url": {
    type: "string",
    description: `the controller's admin endpoint (default ${DEFAULT_ADMIN_URL}; e.g. after kubectl port-forward)`,
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
  links: {
    type: "string",
    description:
      "as `run --links`: when no controller answers, also read the Links of this namespace (SPEC §15) and the clusters they register",
  },
  "leader-election-id": {
    type: "string",
    description: "as `run`: the prefix of the shard Leases read when sharded (default fleet-mirror)",
  },
  "leader-election-namespace": {
    type: "string",
    description: "as `run`: where the shard Leases are (default: the credentials namespace)",
  },
} as const;

const help = commandHelp(
  "status [flags]",
  `One row per remote cluster: its state (syncing, synced, stale since T, failing: reason,
crash-loop, duplicate, invalid: reason), mirrored services, last successful sync,
restarts of its actor, whether its gateways are usable, and their health: the probed
gateways' addresses alive or dead (SPEC §10) and bad probe annotations (-o json|yaml
gives each gateway's probe: port, path, period, dead addresses, last failure).

Sharded (run --shards S): which replica holds which shard, with the Lease's last renewal
and the number of clusters in the shard (from the shard Leases when no controller
answers; a sharded controller's rows are the clusters it runs).

Then one row per fleet-wide Service <svc>-federated (SPEC §11): its member clusters
(a member marked "(kept)" is unknown since the controller's writer started and keeps
its last part), its ready and not-ready addresses, and its conflicts (a user's object
holding its name, a member whose ports differ); with priority tiers (SPEC §14), TIERS:
each priority, serving or standby, its ready endpoints, and since when.

A controller run with --dry-run adds its plan: each write it would make (create, update
or delete, resource, object, cluster) and the mirrors it would leave alone (a conflict:
a name held by an object it does not own), none of them written.

Reads the running controller's admin endpoint (--admin-url). When it does not answer,
the rows are built from the cluster objects (credentials Secrets, mirror Services) and
the output says "controller not reachable; from cluster objects": the state is then only
valid/invalid/duplicate, and sync times, restarts and gateways are unknown; fleet-wide
Services show the members their annotation names, addresses and conflicts unknown.

With Links (run --links, SPEC §15): one row per Link: its cluster, the Secret it names,
and registered or why not (InvalidLink, InvalidCredentials, DuplicateCluster,
CredentialsKept). From the cluster objects, give --links NS to read them.`,
  flags,
);

/**
 * GETs `<adminUrl>/status`. Resolves undefined with a reason when nothing usable
 * answers within `timeoutMs` (not running, wrong port, not the admin server).
 */
export async function fetchAdminStatus(
  adminUrl: string,
  timeoutMs = 2_000,
): Promise<{ status: AdminStatus } | { unreachable: string }> {
  let url: URL;
  try {
    url = new URL("/status", adminUrl);
  } catch {
    return { unreachable: `--admin-url ${JSON.stringify(adminUrl)} is not a URL` };
  }
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    if (!response.ok) return { unreachable: `${url.href}: HTTP ${response.status}` };
    const body: unknown = await response.json();
    if (typeof body !== "object" || body === null || !("leadership" in body))
      return { unreachable: `${url.href}: not a fleet-mirror status document` };
    return { status: body as AdminStatus };
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause;
    return { unreachable: `${url.href}: ${cause?.code ?? (error as Error).message}` };
  }
}

/** The credentials Secrets and the mirror Services of the local cluster, for the fallback rows. */
export async function readClusterObjects(
  client: KubeClient,
  namespace: string,
): Promise<{ secrets: Secret[]; mirrors: Service[] }> {
  const [secrets, mirrors] = await Promise.all([
    listAll<Secret>(client, `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets`, {
      fieldSelector: `type=${SECRET_TYPE}`,
    }),
    listAll<Service>(client, "/api/v1/services", { labelSelector: `${MIRRORED_SERVICE}=true` }),
  ]);
  return { secrets, mirrors };
}

export async function statusReport(
  values: Readonly<Record<string, string | boolean | undefined>>,
): Promise<StatusReport> {
  const adminUrl = stringFlag(values, "admin-url") ?? DEFAULT_ADMIN_URL;
  const admin = await fetchAdminStatus(adminUrl);
  if ("status" in admin) {
    if (admin.status.clusters !== undefined) {
      const clusters = rowsFromAdmin(admin.status);
      const sharding = admin.status.leadership.sharding;
      const dryRun = dryRunViewFromAdmin(admin.status);
      return {
        source: "controller",
        leading: admin.status.leadership.leading,
        clusters,
        federated: federatedRowsFromAdmin(admin.status),
        ...(sharding
          ? {
              shards: shardRowsFromView(
                sharding,
                clusters.map((r) => r.cluster),
              ),
            }
          : {}),
        ...(admin.status.placement ? { placement: admin.status.placement } : {}),
        ...(dryRun ? { dryRun } : {}),
        ...(admin.status.links ? { links: admin.status.links } : {}),
        ...(admin.status.linksProblem ? { linksProblem: admin.status.linksProblem } : {}),
      };
    }
    // A standby replica has no fleet status: the objects are the next best thing.
    return fromObjects(
      values,
      `${adminUrl} is a standby replica (leader: ${admin.status.leadership.holder ?? "unknown"})`,
    );
  }
  return fromObjects(values, admin.unreachable);
}

async function fromObjects(
  values: Readonly<Record<string, string | boolean | undefined>>,
  note: string,
): Promise<StatusReport> {
  const client = cliClient(localConnection(values));
  try {
    const namespace = credentialsNamespace(values);
    const { secrets, mirrors } = await readClusterObjects(client, namespace);
    const options = {
      allowFilePaths: values["allow-kubeconfig-file-paths"] === true,
      allowInsecure: values["allow-insecure-remotes"] === true,
    };
    const linksNamespace = stringFlag(values, "links");
    const view = linksNamespace === undefined ? undefined : await readLinkView(client, linksNamespace, options);
    const clusters = rowsFromObjects(secrets, mirrors, options, view && "rows" in view ? view.registry : undefined);
    const shards = await readShards(client, values, namespace, clusters);
    return {
      source: "cluster-objects",
      note,
      clusters,
      federated: federatedRowsFromObjects(mirrors),
      ...shards,
      ...(view && "rows" in view ? { links: view.rows } : {}),
      ...(view && "problem" in view && linksNamespace
        ? { linksProblem: { namespace: linksNamespace, message: view.problem } }
        : {}),
    };
  } finally {
    client.close();
  }
}

/**
 * The shard rows from the shard Leases (none when not sharded). A Lease list that fails
 * (e.g. no RBAC to list Leases) is reported in `shardsNote`, never fatal: the cluster
 * rows stand on their own.
 */
async function readShards(
  client: KubeClient,
  values: Readonly<Record<string, string | boolean | undefined>>,
  credentials: string,
  clusters: readonly { readonly cluster: string }[],
): Promise<{ shards?: ShardRow[]; shardsNote?: string }> {
  const leaseId = stringFlag(values, "leader-election-id") ?? "fleet-mirror";
  const namespace = stringFlag(values, "leader-election-namespace") ?? credentials;
  try {
    const leases = await listLeases(client, namespace, {
      signal: AbortSignal.timeout(10_000),
      timeoutMs: 10_000,
    });
    const shards = shardRowsFromLeases(
      leases,
      leaseId,
      clusters.map((r) => r.cluster),
    );
    return shards.length > 0 ? { shards } : {};
  } catch (error) {
    return { shardsNote: `could not list the Leases of ${namespace}: ${(error as Error).message}` };
  }
}

export const statusDefinition: CommandDefinition = {
  name: "status",
  help,
  flags,
  async run({ values }) {
    const format = outputFormat(values);
    const report = await statusReport(values);
    if (format === "table") {
      writeOut(formatStatusTable(report, Date.now()));
    } else {
      if (report.source === "cluster-objects")
        writeErr(`controller not reachable; from cluster objects (${report.note ?? ""})\n`);
      writeOut(formatData(report, format));
    }
    return EXIT_OK;
  },
};

export function statusCommand(argv: readonly string[]): Promise<number> {
  return runCli(statusDefinition, argv);
}
