/**
 * Credentials Secrets → registrations: watches the Secrets, parses each once per
 * version, computes the registry (registry.ts) and reports its changes (log lines and
 * Events on the Secrets, registry-reports.ts). Hands every new registry to `onRegistry`.
 *
 * The writer learns the set of clusters to keep only after a complete Secret list
 * (`listed`), so mirrors are never collected on partial knowledge (SPEC §6).
 *
 * Sharded, every replica computes the same registry, but only the replica hosting a
 * cluster reports it (`reportsFor`): one log line and one Event per change, not one per
 * replica. A cluster gained later is reported then (`refresh`).
 */
import type { Config } from "../config.ts";
import { SECRET_TYPE } from "../core/labels.ts";
import { objectKey } from "../core/objects.ts";
import type { KubeClient } from "../kube/client.ts";
import { Watcher } from "../kube/watcher.ts";
import type { Logger } from "../log.ts";
import type { EventRequest } from "../protocol/messages.ts";
import { credentialsParseOptions, OncePerTurn } from "./once-per-turn.ts";
import { computeRegistry, type LinkClaims, type RegistryState, type SecretEntry } from "./registry.ts";
import { NOTHING_REPORTED, type ReportedRegistry, registryReports } from "./registry-reports.ts";
import { type StoredSecret, storedSecret } from "./stored-secret.ts";

export interface RegistryControllerOptions {
  readonly config: Config;
  readonly client: KubeClient;
  readonly logger: Logger;
  readonly onRegistry: (registry: RegistryState) => void;
  readonly sendEvent: (event: EventRequest) => void;
  /**
   * Whether this replica reports (logs and Events) the registration of `cluster` (or,
   * for a Secret naming no cluster, of the Secret `secretKey`). Default: every one.
   */
  readonly reportsFor?: (cluster: string | undefined, secretKey: string) => boolean;
  /** What Links claim now (SPEC §15: a Link wins over a Secret); default: nothing. */
  readonly claims?: () => LinkClaims;
}

export class RegistryController {
  readonly #o: RegistryControllerOptions;
  /** Secrets in their stored form: parsed once per version, without their data (stored-secret.ts). */
  readonly #secrets: Watcher<StoredSecret>;
  #registry: RegistryState = {
    registered: new Map(),
    duplicates: [],
    invalid: [],
    keep: [],
    order: [],
    registeredAt: {},
    priorities: {},
  };
  readonly #winners = new Map<string, string>();
  #reported: ReportedRegistry = NOTHING_REPORTED;
  /** One pass per turn of the event loop (once-per-turn.ts says why). */
  readonly #pass = new OncePerTurn(() => this.#reconcile());

  constructor(options: RegistryControllerOptions) {
    this.#o = options;
    const parseOptions = credentialsParseOptions(options.config);
    this.#secrets = new Watcher<StoredSecret>({
      client: options.client,
      path: `/api/v1/namespaces/${options.config.namespace}/secrets`,
      expectedKind: "Secret",
      fieldSelector: `type=${SECRET_TYPE}`,
      // A kubeconfig is YAML (≈ 0.1–1 ms to parse): parsed once per version, as it arrives.
      keep: (secret, current) => storedSecret(secret, current, parseOptions),
    });
    this.#secrets.on("change", () => this.#pass.schedule());
    this.#secrets.on("listed", () => this.#pass.schedule());
    this.#secrets.on("failure", (f) =>
      options.logger.warn({ failure: f }, `listing credentials Secrets failed: ${f.message}`),
    );
  }

  get registry(): RegistryState {
    return this.#registry;
  }

  /** The Secrets were listed completely at least once. */
  get listed(): boolean {
    return this.#secrets.hasSynced;
  }

  start(): void {
    this.#secrets.start();
  }

  async stop(): Promise<void> {
    this.#pass.stop();
    await this.#secrets.stop();
  }

  /** Computes the registry again (e.g. the clusters this replica reports changed). */
  refresh(): void {
    if (this.#secrets.hasSynced) this.#pass.schedule();
  }

  /** An Event on the credentials Secret `secretKey`; nothing when the Secret is gone. */
  secretEvent(secretKey: string, type: "Normal" | "Warning", reason: string, message: string): void {
    const secret = this.#secrets.get(secretKey);
    if (!secret) return;
    this.#o.sendEvent({
      involved: {
        kind: "Secret",
        apiVersion: "v1",
        namespace: secret.metadata.namespace ?? this.#o.config.namespace,
        name: secret.metadata.name,
        ...(secret.metadata.uid ? { uid: secret.metadata.uid } : {}),
      },
      type,
      reason,
      message,
    });
  }

  /** The part of `registry` this replica reports (all of it unless `reportsFor` says otherwise). */
  #reportable(registry: RegistryState): RegistryState {
    const reportsFor = this.#o.reportsFor;
    if (!reportsFor) return registry;
    return {
      ...registry,
      registered: new Map([...registry.registered].filter(([cluster, r]) => reportsFor(cluster, r.secretKey))),
      duplicates: registry.duplicates.filter((d) => reportsFor(d.cluster, d.secretKey)),
      invalid: registry.invalid.filter((i) => reportsFor(i.cluster, i.secretKey)),
    };
  }

  #reconcile(): void {
    const entries: SecretEntry[] = [];
    const uids = new Set<string>();
    for (const secret of this.#secrets.values()) {
      entries.push({ secret, parsed: secret.parsed });
      uids.add(secret.metadata.uid ?? objectKey(secret.metadata));
    }
    const registry = computeRegistry(entries, this.#winners, this.#o.claims?.());
    this.#registry = registry;
    this.#winners.clear();
    for (const [cluster, r] of registry.registered) this.#winners.set(cluster, r.secretUid);
    const { reported, reports } = registryReports(this.#reported, this.#reportable(registry), uids);
    this.#reported = reported;
    for (const r of reports) {
      this.#o.logger[r.log.level]({ secret: r.secretKey, cluster: r.cluster, ...r.log.fields }, r.log.message);
      this.secretEvent(r.secretKey, r.eventType, r.reason, r.message);
    }
    this.#o.onRegistry(registry);
  }
}
