/**
 * `clusterset.local` for the sandbox's CoreDNS: the MCS DNS names
 * `<svc>.<ns>.svc.clusterset.local`, answered with the ServiceImport's `spec.ips` (the
 * derived Service's cluster IP, SPEC §12), as CoreDNS's `multicluster` plugin answers
 * them in a real cluster from the same field.
 *
 * Why not that plugin: it is not a module these machines can fetch (the Go module proxy
 * refuses github.com/coredns/multicluster), so the sandbox's CoreDNS cannot link it.
 * Instead this feeder lists the cluster's ServiceImports every `periodMs` and writes one
 * line per `ClusterSetIP` import with addresses to a hosts file, which CoreDNS's built-in
 * `hosts` plugin serves for the `clusterset.local` zone (reloading it every second). The
 * source of truth is the same object; a name appears a little later than the plugin would
 * show it (a list period plus a reload), and it goes when the import or its ips go.
 *
 * The file is replaced whole (write, then rename), so CoreDNS never reads half of it.
 */
import { rename, writeFile } from "node:fs/promises";
import type { KubeConfig } from "@kubernetes/client-node";
import { CustomObjectsApi } from "@kubernetes/client-node";
import { MCS_GROUP, MCS_VERSION, SERVICE_IMPORTS } from "../src/core/mcs.ts";

export const CLUSTERSET_DOMAIN = "clusterset.local";

interface ImportObject {
  readonly metadata?: { readonly name?: string; readonly namespace?: string };
  readonly spec?: { readonly type?: string; readonly ips?: readonly string[] };
}

/** The hosts file's text for `imports`: `<ip> <name>.<ns>.svc.clusterset.local`, sorted. */
export function clustersetHosts(imports: readonly ImportObject[]): string {
  const lines: string[] = [];
  for (const item of imports) {
    const { name, namespace } = item.metadata ?? {};
    if (!name || !namespace || item.spec?.type !== "ClusterSetIP") continue;
    for (const ip of item.spec.ips ?? []) lines.push(`${ip} ${name}.${namespace}.svc.${CLUSTERSET_DOMAIN}`);
  }
  return `${lines.sort().join("\n")}\n`;
}

export class ClustersetDns {
  readonly path: string;
  readonly #api: CustomObjectsApi;
  #timer: NodeJS.Timeout | undefined;
  #written = "";
  /** The last list's failure, if the last list failed (the file keeps its content). */
  lastError: string | undefined;

  private constructor(path: string, api: CustomObjectsApi) {
    this.path = path;
    this.#api = api;
  }

  /** Writes the file once (empty when no import exists yet), then keeps it current every `periodMs`. */
  static async start(admin: KubeConfig, path: string, periodMs = 500): Promise<ClustersetDns> {
    const feeder = new ClustersetDns(path, admin.makeApiClient(CustomObjectsApi));
    await feeder.#write("\n");
    await feeder.refresh().catch(() => undefined);
    feeder.#timer = setInterval(() => void feeder.refresh().catch(() => undefined), periodMs);
    return feeder;
  }

  /** Lists the ServiceImports and rewrites the file if its text changed. */
  async refresh(): Promise<void> {
    try {
      const list = (await this.#api.listClusterCustomObject({
        group: MCS_GROUP,
        version: MCS_VERSION,
        plural: SERVICE_IMPORTS.plural,
      })) as { items?: ImportObject[] };
      this.lastError = undefined;
      const text = clustersetHosts(list.items ?? []);
      if (text !== this.#written) await this.#write(text);
    } catch (error) {
      // The CRDs not installed yet, or a list refused: the names stay as they were.
      this.lastError = (error as Error).message;
      throw error;
    }
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  async #write(text: string): Promise<void> {
    await writeFile(`${this.path}.tmp`, text);
    await rename(`${this.path}.tmp`, this.path);
    this.#written = text;
  }
}
