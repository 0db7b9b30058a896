/**
 * What one remote Service (and its ServiceExport) of one cluster asks of the local
 * cluster: its mirrors (SPEC §3; a headless Service's headless and per-host mirrors,
 * §12), its fleet-wide member (§11), its MCS export (§12), and the problem of each role.
 * Pure: everything observed comes in through `ClusterObservation`; the remote actor's
 * desired sender calls it for every changed key and sends the difference.
 *
 * Invariants:
 * - every role uses this cluster's own view of its gateway (never another cluster's);
 * - `mirrors` undefined means "not known yet" (a headless Service whose hostnames have not
 *   been listed): the caller keeps what it sent, it never reads this as "no mirrors"; a
 *   complete set, which must say something of every Service, sends `unknownMirrors`
 *   (the ordinary mirror marked `hostsUnknown`: the writer keeps a headless mirror);
 * - `problems.headless` is decided only when the mirrors are known.
 */
import type { AddressPolicy } from "./address-policy.ts";
import {
  type ClusterSettings,
  type DesiredMirror,
  desiredMirrorFor,
  type GatewayView,
  type MirrorProblem,
  viewGateway,
} from "./desired.ts";
import { exportOf, type GatewayRef } from "./export.ts";
import { desiredMemberFor, type FederatedMember, type MemberSelector, memberGateway } from "./federated.ts";
import { type HeadlessHosts, headlessOutcome, isHeadless } from "./headless.ts";
import { type McsExport, mcsExportFor, type ServiceExport } from "./mcs.ts";
import { objectKey, type Service } from "./objects.ts";
import { partitionedView } from "./partition.ts";

/** What is observed of one remote cluster, as the desired computation reads it. */
export interface ClusterObservation {
  readonly settings: ClusterSettings;
  /** Remote Services with this label are fleet-wide members (SPEC §11). */
  readonly memberSelector: MemberSelector;
  /** The remote Service `key` (`namespace/name`), as last listed or watched. */
  service(key: string): Service | undefined;
  /** The remote ServiceExport `key`, as last listed or watched (SPEC §12). */
  serviceExport(key: string): ServiceExport | undefined;
  /** The addresses of a gateway hostname, undefined while it has not resolved. */
  lookupHostname(hostname: string): readonly string[] | undefined;
  /** The dead addresses of gateway `key` (SPEC §10); undefined when it is not probed. */
  deadAddresses(gatewayKey: string): ReadonlySet<string> | undefined;
  /** Which gateway addresses may be used (SPEC §10, core/address-policy.ts); absent: the built-in policy. */
  addressPolicy?(): AddressPolicy;
  /** The cluster's API server has been unreachable for `--stale-after` (SPEC §14, partition.ts); absent: never. */
  partitioned?(): boolean;
  /** The hostnames of exported headless Service `key` (SPEC §12). */
  headlessHosts(key: string): HeadlessHosts;
  /** The headless Service of `namespace` that keeps per-host name `<hostname>-<c>`. */
  hostClaimant(namespace: string, hostname: string): string | undefined;
}

/** One remote key's desired state in every role, and the problem of each role (undefined: none). */
export interface ServiceDesired {
  readonly mirrors: readonly DesiredMirror[] | undefined;
  /** While `mirrors` is undefined: what a complete set sends instead (see the invariants). */
  readonly unknownMirrors?: readonly DesiredMirror[];
  readonly member: FederatedMember | undefined;
  readonly mcs: McsExport | undefined;
  readonly problems: {
    readonly exported: MirrorProblem | undefined;
    /** Absent while the mirrors are not known (the previous problem stands). */
    readonly headless?: MirrorProblem | undefined;
    readonly member: MirrorProblem | undefined;
    readonly mcs: MirrorProblem | undefined;
  };
}

/**
 * Gateway views computed once per pass: many Services share a gateway, and a view
 * resolves hostnames and reads probe state. Key: the gateway's `namespace/name`, "" for none.
 */
export type GatewayViews = Map<string, GatewayView>;

/** This cluster's view of gateway `gw` (a missing ref views as a missing gateway), memoized in `views`. */
export function gatewayViewOf(
  observed: ClusterObservation,
  gw: GatewayRef | undefined,
  views: GatewayViews,
): GatewayView {
  const key = gw ? objectKey(gw) : "";
  let view = views.get(key);
  if (!view) {
    const dead = observed.deadAddresses(key);
    view = viewGateway(observed.service(key), (h) => observed.lookupHostname(h), dead, observed.addressPolicy?.());
    if (observed.partitioned?.() === true) view = partitionedView(view, dead !== undefined);
    views.set(key, view);
  }
  return view;
}

/** What remote key `key` (a Service, a ServiceExport, or both) asks of the local cluster now. */
export function desiredOfService(observed: ClusterObservation, key: string, views: GatewayViews): ServiceDesired {
  const service = observed.service(key);
  const settings = observed.settings;
  const decision = service ? exportOf(settings, service) : undefined;
  const outcome = service
    ? desiredMirrorFor(
        settings,
        service,
        gatewayViewOf(observed, decision?.kind === "exported" ? decision.gateway : undefined, views),
        decision,
      )
    : ({ kind: "not-exported" } as const);
  const {
    mirrors,
    unknown,
    problem: hostProblem,
  }: ReturnType<typeof headlessOutcome> = outcome.kind === "mirror" && isHeadless(service)
    ? headlessOutcome(
        key,
        outcome.mirror,
        observed.headlessHosts(key),
        {
          exported: (namespace, name) => {
            const other = observed.service(objectKey({ namespace, name }));
            return other !== undefined && exportOf(settings, other).kind === "exported";
          },
          hostClaimant: (namespace, hostname) => observed.hostClaimant(namespace, hostname),
        },
        settings.maxHeadlessHosts,
      )
    : { mirrors: outcome.kind === "mirror" ? [outcome.mirror] : [] };
  const membership = service
    ? desiredMemberFor(
        settings,
        observed.memberSelector,
        service,
        gatewayViewOf(observed, memberGateway(settings, service), views),
      )
    : ({ kind: "not-member" } as const);
  const serviceExport = observed.serviceExport(key);
  const exported = serviceExport
    ? mcsExportFor(settings, serviceExport, service, gatewayViewOf(observed, settings.defaultGateway, views))
    : undefined;
  return {
    mirrors,
    ...(unknown ? { unknownMirrors: unknown } : {}),
    member: membership.kind === "member" ? membership.member : undefined,
    mcs: exported?.kind === "export" ? exported.export : undefined,
    problems: {
      exported: outcome.kind === "problem" ? outcome.problem : undefined,
      ...(mirrors ? { headless: hostProblem } : {}),
      member: membership.kind === "problem" ? membership.problem : undefined,
      mcs: exported?.kind === "problem" ? exported.problem : undefined,
    },
  };
}
