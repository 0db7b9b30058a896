/**
 * What differs in the actor of a cluster a Link registers (SPEC §15), in one place, so
 * that the actor wires the same parts for both kinds of registration:
 * - the remote Services as the gateway machinery and the desired sender read them,
 *   plus the Link's gateway under its own key (core/link-gateway.ts: a static gateway);
 * - the probe of that gateway, from the Link instead of annotations;
 * - the fleet-wide member selector: the Link's `federatedServiceSelector` instead of
 *   `--federated-selector`.
 * A cluster a Secret registers gets the watcher, the annotations and the flag unchanged.
 */
import type { ClusterSettings } from "../../src/core/desired.ts";
import type { MemberSelector } from "../../src/core/federated.ts";
import { linkGatewayRef, linkGatewayService, linkProbeSpec } from "../../src/core/link-gateway.ts";
import { objectKey, type Service } from "../../src/core/objects.ts";
import type { ProbeSpecOutcome } from "../../src/core/probe-spec.ts";
import type { Watcher, WatcherStats } from "../../src/kube/watcher.ts";

/** The remote Services, with a Link's gateway answering under its key (never listed among them). */
export class ClusterServices {
  readonly #watcher: Watcher<Service>;
  readonly #gatewayKey: string | undefined;
  readonly #gateway: Service | undefined;

  constructor(settings: ClusterSettings, watcher: Watcher<Service>) {
    this.#watcher = watcher;
    const link = settings.link;
    this.#gateway = link ? linkGatewayService(link) : undefined;
    this.#gatewayKey = link ? objectKey(linkGatewayRef(link)) : undefined;
  }

  get(key: string): Service | undefined {
    return key === this.#gatewayKey ? this.#gateway : this.#watcher.get(key);
  }

  /** The remote Services only (a complete desired set is computed from these). */
  values(): IterableIterator<Service> {
    return this.#watcher.values();
  }

  get hasSynced(): boolean {
    return this.#watcher.hasSynced;
  }

  get stats(): WatcherStats {
    return this.#watcher.stats;
  }
}

/** The probe of a Link's gateway (the Link's probe spec); undefined for a Secret's cluster. */
export function linkProbeSpecOf(
  settings: ClusterSettings,
): ((key: string, gateway: Service) => ProbeSpecOutcome) | undefined {
  const link = settings.link;
  if (!link) return undefined;
  const key = objectKey(linkGatewayRef(link));
  const outcome = linkProbeSpec(link);
  // Only the Link's own key: nothing else can be a gateway of a Link's cluster.
  return (gatewayKey) => (gatewayKey === key ? outcome : { problems: [] });
}

/** The member selector of the cluster: the Link's, else the run's `--federated-selector`. */
export function memberSelectorOf(settings: ClusterSettings, flag: MemberSelector): MemberSelector {
  if (!settings.link) return flag;
  return settings.link.federatedSelector ?? { matchLabels: {}, matchExpressions: [] };
}
