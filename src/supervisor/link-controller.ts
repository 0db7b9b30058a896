/**
 * Links → registrations (SPEC §15, `--links <namespace>`): watches the Links of one
 * namespace and the credentials Secrets there (type `mirror.linkerd.io/remote-kubeconfig`,
 * the type linkerd's `link` writes), parses each once per version (link-stored.ts),
 * computes the Link registry (link-registry.ts), reports its changes as log lines and
 * Events on the Links (link-reports.ts), and hands each new registry to `onRegistry`.
 *
 * Level-triggered like registry-controller.ts: events only mark the registry dirty, and
 * one pass runs per turn of the event loop. `listed` once both watches listed: the keep
 * set is sent only then (SPEC §6). A Link CRD that is not installed fails the list; the
 * watch retries with its backoff and logs each failure, and nothing is collected
 * meanwhile.
 */
import type { Config } from "../config.ts";
import { SECRET_TYPE } from "../core/labels.ts";
import { LINK_API_VERSION, linksPath } from "../core/link.ts";
import type { KubeClient } from "../kube/client.ts";
import { Watcher } from "../kube/watcher.ts";
import type { Logger } from "../log.ts";
import type { EventRequest } from "../protocol/messages.ts";
import { computeLinkRegistry, isLinkSourceKey, type LinkRegistry, NO_LINKS } from "./link-registry.ts";
import { linkReports, NOTHING_REPORTED_OF_LINKS, type ReportedLinks } from "./link-reports.ts";
import { type StoredCredentials, type StoredLink, storedCredentials, storedLink } from "./link-stored.ts";

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
  #scheduled = false;
  #stopped = false;

  constructor(options: LinkControllerOptions) {
    this.#o = options;
    const parseOptions = {
      allowFilePaths: options.config.allowKubeconfigFilePaths,
      allowInsecure: options.config.allowInsecureRemotes,
    };
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
    for (const [what, watcher] of [
      ["Links", this.#links],
      ["the Links' credentials Secrets", this.#secrets],
    ] as const) {
      watcher.on("change", () => this.#schedule());
      watcher.on("listed", () => this.#schedule());
      watcher.on("failure", (f) =>
        options.logger.warn(
          { failure: f, namespace: options.namespace },
          `listing ${what} in ${options.namespace} failed: ${f.message}`,
        ),
      );
    }
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
    this.#stopped = true;
    await Promise.all([this.#links.stop(), this.#secrets.stop()]);
  }

  /** Computes the registry again (the clusters this replica reports changed). */
  refresh(): void {
    if (this.listed) this.#schedule();
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

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      if (!this.#stopped && this.listed) this.#reconcile();
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
