/**
 * Links → registrations (SPEC §15, `--links <namespace>`): watches the Links of one
 * namespace and the credentials Secrets there (type `mirror.linkerd.io/remote-kubeconfig`,
 * the type linkerd's `link` writes), parses each once per version (link-stored.ts),
 * computes the Link registry (link-registry.ts), reports its changes as log lines and
 * Events on the Links (link-reports.ts), and hands each new registry to `onRegistry`.
 *
 * Level-triggered like registry-controller.ts (once-per-turn.ts): events only mark the
 * registry dirty, and one pass runs per turn of the event loop. `listed` once both
 * watches listed: the keep set is sent only then (SPEC §6). A Link CRD that is not
 * installed fails the list: reported once (a log line naming the CRD, and `problem` for
 * /status) until the Links list again; the watch retries with its backoff meanwhile, so
 * a CRD installed later is picked up without a restart.
 */
import type { Config } from "../config.ts";
import { SECRET_TYPE } from "../core/labels.ts";
import { LINK_API_VERSION, linksPath } from "../core/link.ts";
import type { KubeClient } from "../kube/client.ts";
import { Watcher } from "../kube/watcher.ts";
import type { Logger } from "../log.ts";
import type { EventRequest } from "../protocol/messages.ts";
import type { LinkRow, LinksProblem } from "../status/link-row.ts";
import { computeLinkRegistry, isLinkSourceKey, type LinkRegistry, NO_LINKS } from "./link-registry.ts";
import { linkReports, NOTHING_REPORTED_OF_LINKS, type ReportedLinks } from "./link-reports.ts";
import { linkRows } from "./link-rows.ts";
import { type StoredCredentials, type StoredLink, storedCredentials, storedLink } from "./link-stored.ts";
import { credentialsParseOptions, OncePerTurn } from "./once-per-turn.ts";

/** The CRD a `--links` namespace needs (SPEC §15). */
export const LINK_CRD = "links.multicluster.linkerd.io";

export interface LinkControllerOptions {
  readonly config: Config;
  /** The namespace of the Links and their Secrets (`--links`). */
  readonly namespace: string;
  readonly client: KubeClient;
  readonly logger: Logger;
  readonly onRegistry: (registry: LinkRegistry) => void;
  readonly sendEvent: (event: EventRequest) => void;
  /** Whether this replica reports the registration of `cluster` (sharded: its host only). Default: every one. */
  readonly reportsFor?: (cluster: string | undefined, sourceKey: string) => boolean;
}

export class LinkController {
  readonly #o: LinkControllerOptions;
  readonly #links: Watcher<StoredLink>;
  readonly #secrets: Watcher<StoredCredentials>;
  #registry: LinkRegistry = NO_LINKS;
  readonly #winners = new Map<string, string>();
  #reported: ReportedLinks = NOTHING_REPORTED_OF_LINKS;
  readonly #pass = new OncePerTurn(() => {
    if (this.listed) this.#reconcile();
  });
  /** Why the Links cannot be listed now (reported once per episode); undefined once they list. */
  #problem: LinksProblem | undefined;

  constructor(options: LinkControllerOptions) {
    this.#o = options;
    const parseOptions = credentialsParseOptions(options.config);
    this.#links = new Watcher<StoredLink>({
      client: options.client,
      path: linksPath(options.namespace),
      expectedKind: "Link",
      keep: (link, current) => storedLink(link, current),
    });
    this.#secrets = new Watcher<StoredCredentials>({
      client: options.client,
      path: `/api/v1/namespaces/${options.namespace}/secrets`,
      expectedKind: "Secret",
      fieldSelector: `type=${SECRET_TYPE}`,
      keep: (secret, current) => storedCredentials(secret, current, parseOptions),
    });
    this.#secrets.on("failure", (f) =>
      options.logger.warn(
        { failure: f, namespace: options.namespace },
        `listing the Links' credentials Secrets in ${options.namespace} failed: ${f.message}`,
      ),
    );
    this.#links.on("failure", (f) => this.#linksFailed(f.reason, f.message));
    this.#links.on("listed", () => this.#linksListed());
    for (const watcher of [this.#links, this.#secrets]) {
      watcher.on("change", () => this.#pass.schedule());
      watcher.on("listed", () => this.#pass.schedule());
    }
  }

  /**
   * A failed Links list or watch. The CRD missing (404) is said once per episode, at
   * error level, naming the CRD; another failure is logged as every watch failure is.
   */
  #linksFailed(reason: string, message: string): void {
    const { logger, namespace } = this.#o;
    if (reason !== "http-404") {
      logger.warn({ namespace, reason }, `listing Links in ${namespace} failed: ${message}`);
      return;
    }
    const text = `the Link CRD ${LINK_CRD} (v1alpha3) is not installed in the local cluster: the Links of ${namespace} are not read (annotated Secrets keep working; mirrors are not collected until Links list); install linkerd's multicluster CRDs and they are read without a restart`;
    if (this.#problem?.message === text) return;
    this.#problem = { namespace, message: text };
    logger.error({ namespace, crd: LINK_CRD }, text);
  }

  #linksListed(): void {
    if (this.#problem === undefined) return;
    this.#problem = undefined;
    this.#o.logger.info(
      { namespace: this.#o.namespace, crd: LINK_CRD },
      `Links of ${this.#o.namespace} listed: the Link CRD is served`,
    );
  }

  /** Why the Links cannot be listed now, or undefined. */
  get problem(): LinksProblem | undefined {
    return this.#problem;
  }

  /** One row per Link listed (SPEC §15): registered, or why not. */
  rows(): LinkRow[] {
    return linkRows(this.#links.values(), this.#registry);
  }

  get registry(): LinkRegistry {
    return this.#registry;
  }

  /** Both the Links and their Secrets were listed completely at least once. */
  get listed(): boolean {
    return this.#links.hasSynced && this.#secrets.hasSynced;
  }

  start(): void {
    this.#links.start();
    this.#secrets.start();
  }

  async stop(): Promise<void> {
    this.#pass.stop();
    await Promise.all([this.#links.stop(), this.#secrets.stop()]);
  }

  /** Computes the registry again (the clusters this replica reports changed). */
  refresh(): void {
    if (this.listed) this.#pass.schedule();
  }

  /** The Link of `sourceKey` (`Link <namespace>/<name>`), while it exists. */
  link(sourceKey: string): StoredLink | undefined {
    if (!isLinkSourceKey(sourceKey)) return undefined;
    return this.#links.get(sourceKey.slice("Link ".length));
  }

  /** An Event on the Link `sourceKey`; nothing when the Link is gone. */
  linkEvent(sourceKey: string, type: "Normal" | "Warning", reason: string, message: string): void {
    const link = this.link(sourceKey);
    if (!link) return;
    this.#o.sendEvent({
      involved: {
        kind: "Link",
        apiVersion: LINK_API_VERSION,
        namespace: link.metadata.namespace ?? this.#o.namespace,
        name: link.metadata.name,
        ...(link.metadata.uid ? { uid: link.metadata.uid } : {}),
      },
      type,
      reason,
      message,
    });
  }

  #reconcile(): void {
    const registry = computeLinkRegistry(
      this.#links.values(),
      (key) => this.#secrets.get(key),
      this.#registry.remembered,
      this.#winners,
    );
    this.#registry = registry;
    this.#winners.clear();
    for (const [cluster, r] of registry.registered) this.#winners.set(cluster, r.secretUid);
    const uids = new Set<string>();
    for (const link of this.#links.values()) uids.add(link.metadata.uid ?? "");
    const { reported, reports } = linkReports(this.#reported, registry, uids);
    this.#reported = reported;
    const reportsFor = this.#o.reportsFor;
    for (const r of reports) {
      if (reportsFor && !reportsFor(r.cluster, r.sourceKey)) continue;
      this.#o.logger[r.level](
        { link: r.sourceKey, cluster: r.cluster, reason: r.reason },
        `${r.sourceKey}: ${r.message}`,
      );
      this.linkEvent(r.sourceKey, r.eventType, r.reason, r.message);
    }
    this.#o.onRegistry(registry);
  }
}
