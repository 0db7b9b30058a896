/**
 * Where clusters are registered from: the credentials Secrets of SPEC §1
 * (registry-controller.ts) and, with `--links`, linkerd's Links (SPEC §15,
 * link-controller.ts), merged into the one registry the supervisor acts on
 * (`withLinks`: a Link wins over a Secret naming its cluster, which is reported as a
 * duplicate). For the supervisor this is the registry controller it had: `registry`,
 * `listed` (both sources listed: the keep set waits for both, SPEC §6), `refresh`, and
 * `secretEvent`, which finds the object a report belongs to by its key (a Link's key is
 * `Link <namespace>/<name>`, never a Secret's).
 *
 * It also says which Links register clusters, for the writer's Link status
 * (`writer.links`, with the problems of each Link's cluster).
 */

import type { ClusterStatus, ToWriter } from "../protocol/messages.ts";
import type { LinkRow, LinksProblem } from "../status/link-row.ts";
import { LinkController } from "./link-controller.ts";
import { isLinkSourceKey } from "./link-registry.ts";
import { type RegistryState, withLinks } from "./registry.ts";
import { RegistryController, type RegistryControllerOptions } from "./registry-controller.ts";

/** The registry controller's options but what Links claim, which this supplies itself. */
export type RegistrationSourcesOptions = Omit<RegistryControllerOptions, "claims">;

type LinksMessage = Extract<ToWriter, { type: "writer.links" }>;

export class RegistrationSources {
  readonly #secrets: RegistryController;
  readonly #links: LinkController | undefined;
  readonly #namespace: string | undefined;
  #registry: RegistryState;
  #linksSeq = 0;
  #linksSent = "";

  constructor(options: RegistrationSourcesOptions) {
    const { config } = options;
    this.#namespace = config.linksNamespace;
    const emit = (): void => {
      this.#registry = this.#merged();
      options.onRegistry(this.#registry);
    };
    this.#links =
      config.linksNamespace === undefined
        ? undefined
        : new LinkController({
            config,
            namespace: config.linksNamespace,
            client: options.client,
            logger: options.logger,
            sendEvent: options.sendEvent,
            ...(options.reportsFor ? { reportsFor: options.reportsFor } : {}),
            // The Secrets' registry depends on what Links claim: computed again, then merged.
            onRegistry: () => this.#secrets.refresh(),
          });
    this.#secrets = new RegistryController({
      config,
      client: options.client,
      logger: options.logger,
      sendEvent: options.sendEvent,
      ...(options.reportsFor ? { reportsFor: options.reportsFor } : {}),
      ...(this.#links
        ? {
            claims: () => {
              const r = this.#links?.registry;
              return { clusters: r?.claimed ?? new Map(), secrets: r?.claimedSecrets ?? new Set() };
            },
          }
        : {}),
      onRegistry: emit,
    });
    this.#registry = this.#secrets.registry;
  }

  get registry(): RegistryState {
    return this.#registry;
  }

  /** Every source listed completely at least once (and the Secrets' registry computed since the Links'). */
  get listed(): boolean {
    return this.#secrets.listed && (this.#links?.listed ?? true);
  }

  start(): void {
    this.#secrets.start();
    this.#links?.start();
  }

  async stop(): Promise<void> {
    await Promise.all([this.#secrets.stop(), this.#links?.stop()]);
  }

  refresh(): void {
    this.#links?.refresh();
    this.#secrets.refresh();
  }

  /** With `--links`: one row per Link (SPEC §15), and why the Links cannot be listed when they cannot. */
  links(): { readonly rows: LinkRow[]; readonly problem?: LinksProblem } | undefined {
    if (!this.#links) return undefined;
    const problem = this.#links.problem;
    return { rows: this.#links.rows(), ...(problem ? { problem } : {}) };
  }

  /** An Event on the object registering by `key`: a Secret's key, or a Link's (`Link <ns>/<name>`). */
  secretEvent(key: string, type: "Normal" | "Warning", reason: string, message: string): void {
    if (isLinkSourceKey(key)) this.#links?.linkEvent(key, type, reason, message);
    else this.#secrets.secretEvent(key, type, reason, message);
  }

  /**
   * The `writer.links` message for the Links registering clusters now, with the problems
   * `statusOf` reports for each cluster; undefined without `--links`, or when it would
   * say what the last one said (a new writer asks with `force`).
   */
  linksMessage(statusOf: (cluster: string) => ClusterStatus | undefined, force = false): LinksMessage | undefined {
    if (this.#namespace === undefined || !this.#links) return undefined;
    const links: LinksMessage["links"][number][] = [];
    for (const [cluster, r] of this.#registry.registered) {
      if (!isLinkSourceKey(r.secretKey)) continue;
      const problems = (statusOf(cluster)?.problems ?? []).map((p) => ({
        remote: p.remote,
        reason: p.reason,
        message: p.message,
      }));
      links.push({ cluster, name: r.secretKey.slice(r.secretKey.indexOf("/") + 1), uid: r.secretUid, problems });
    }
    links.sort((a, b) => (a.cluster < b.cluster ? -1 : a.cluster > b.cluster ? 1 : 0));
    const digest = JSON.stringify(links);
    if (!force && digest === this.#linksSent) return undefined;
    this.#linksSent = digest;
    this.#linksSeq += 1;
    return { type: "writer.links", seq: this.#linksSeq, namespace: this.#namespace, links };
  }

  #merged(): RegistryState {
    return this.#links ? withLinks(this.#secrets.registry, this.#links.registry) : this.#secrets.registry;
  }
}
