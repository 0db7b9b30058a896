/**
 * A Link's `status` as linkerd's service mirror writes it (SPEC §15), as a pure function
 * of what fleet-mirror knows of the Link's cluster and of the status observed now.
 *
 * Shape (linkerd's v1alpha3): `mirrorServices` and `federatedServices`, one entry per
 * remote Service: `controllerName: linkerd.io/service-mirror`, `remoteRef` (group
 * `core`, kind `Service`, name, namespace) and ONE condition of type `Mirrored`: status
 * `True` with reason `Mirrored` (and `localRef`, the local Service), or `False` with
 * reason `InvalidService`, `Error` or `MissingNamespace` and a message.
 *
 * Rules:
 * - an entry whose state is not known yet (a mirror wanted but not observed, nor blocked)
 *   keeps the entry observed for it, if any: no flapping while a write is on its way;
 * - `lastTransitionTime` is the observed one while the condition's status stays the same
 *   (a new reason or message keeps it), else `now`;
 * - entries are compared as a set (linkerd appends in event order; the order is not
 *   content), so a converged linkerd status is left as it is: "only where it differs";
 * - entries of another controller (another `controllerName`) are kept as they are.
 */

export const LINK_CONTROLLER_NAME = "linkerd.io/service-mirror";
export const MIRRORED_CONDITION = "Mirrored";
export type MirroredReason = "Mirrored" | "InvalidService" | "Error" | "MissingNamespace";

export interface ObjectRef {
  readonly group?: string;
  readonly kind?: string;
  readonly name?: string;
  readonly namespace?: string;
}

export interface LinkCondition {
  readonly type: string;
  readonly status: string;
  readonly reason?: string;
  readonly message?: string;
  readonly lastTransitionTime?: string;
  readonly localRef?: ObjectRef;
  readonly [field: string]: unknown;
}

export interface ServiceStatus {
  readonly controllerName?: string;
  readonly remoteRef?: ObjectRef;
  readonly conditions?: readonly LinkCondition[];
  readonly [field: string]: unknown;
}

export interface LinkStatus {
  readonly mirrorServices?: readonly ServiceStatus[];
  readonly federatedServices?: readonly ServiceStatus[];
  readonly [field: string]: unknown;
}

/** What fleet-mirror knows of one remote Service's mirror (or fleet-wide membership). */
export type EntryState =
  | { readonly known: false }
  | {
      readonly known: true;
      readonly mirrored: boolean;
      readonly reason: MirroredReason;
      readonly message: string;
      /** The local Service, `namespace/name`, when mirrored. */
      readonly local?: string;
    };

/** Per list, remote Service `namespace/name` → its state. */
export interface LinkStatusInput {
  readonly mirrorServices: ReadonlyMap<string, EntryState>;
  readonly federatedServices: ReadonlyMap<string, EntryState>;
}

const ref = (key: string): ObjectRef => {
  const slash = key.indexOf("/");
  return { group: "core", kind: "Service", name: key.slice(slash + 1), namespace: key.slice(0, slash) };
};

const remoteKeyOf = (entry: ServiceStatus): string =>
  `${entry.remoteRef?.namespace ?? ""}/${entry.remoteRef?.name ?? ""}`;

const ours = (entry: ServiceStatus): boolean => (entry.controllerName ?? LINK_CONTROLLER_NAME) === LINK_CONTROLLER_NAME;

/** A timestamp as the API server writes one (RFC 3339, whole seconds, UTC). */
export function statusTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
}

function entryFor(key: string, state: EntryState & { known: true }, observed: ServiceStatus | undefined, now: string) {
  const before = observed?.conditions?.find((c) => c.type === MIRRORED_CONDITION);
  const status = state.mirrored ? "True" : "False";
  const condition: LinkCondition = {
    type: MIRRORED_CONDITION,
    status,
    reason: state.reason,
    message: state.message,
    lastTransitionTime: before?.status === status && before.lastTransitionTime ? before.lastTransitionTime : now,
    ...(state.local ? { localRef: ref(state.local) } : {}),
  };
  return { controllerName: LINK_CONTROLLER_NAME, remoteRef: ref(key), conditions: [condition] };
}

function list(
  states: ReadonlyMap<string, EntryState>,
  observed: readonly ServiceStatus[] | undefined,
  now: string,
): ServiceStatus[] {
  const byKey = new Map<string, ServiceStatus>();
  const foreign: ServiceStatus[] = [];
  for (const entry of observed ?? []) {
    if (!ours(entry)) foreign.push(entry);
    else if (!byKey.has(remoteKeyOf(entry))) byKey.set(remoteKeyOf(entry), entry);
  }
  const out: ServiceStatus[] = [...foreign];
  for (const key of [...states.keys()].sort()) {
    const state = states.get(key);
    const before = byKey.get(key);
    if (!state?.known) {
      if (before) out.push(before);
    } else out.push(entryFor(key, state, before, now));
  }
  return out;
}

/** An entry as compared: the fields linkerd writes, the API server's defaults filled in. */
function comparable(entry: ServiceStatus): string {
  const r = (x: ObjectRef | undefined) =>
    x ? [x.group || "core", x.kind || "Service", x.namespace ?? "", x.name ?? ""] : null;
  const conditions = (entry.conditions ?? []).map((c) => [
    c.type,
    c.status,
    c.reason ?? "",
    c.message ?? "",
    c.lastTransitionTime ?? "",
    r(c.localRef),
  ]);
  return JSON.stringify([entry.controllerName ?? "", r(entry.remoteRef), conditions]);
}

const sameList = (a: readonly ServiceStatus[] | undefined, b: readonly ServiceStatus[] | undefined): boolean => {
  const norm = (l: readonly ServiceStatus[] | undefined) => (l ?? []).map(comparable).sort().join("\n");
  return norm(a) === norm(b);
};

/**
 * The Link's status fleet-mirror wants, and whether it differs from `observed`. `patch`
 * is the merge patch that writes it (an empty list is written as `null`: the field is
 * removed, where linkerd would leave its last entry).
 */
export function desiredLinkStatus(
  input: LinkStatusInput,
  observed: LinkStatus | undefined,
  nowMs: number,
): { readonly changed: boolean; readonly patch: { readonly status: Record<string, unknown> } } {
  const now = statusTime(nowMs);
  const mirrorServices = list(input.mirrorServices, observed?.mirrorServices, now);
  const federatedServices = list(input.federatedServices, observed?.federatedServices, now);
  const changed =
    !sameList(mirrorServices, observed?.mirrorServices) || !sameList(federatedServices, observed?.federatedServices);
  return {
    changed,
    patch: {
      status: {
        mirrorServices: mirrorServices.length > 0 ? mirrorServices : null,
        federatedServices: federatedServices.length > 0 ? federatedServices : null,
      },
    },
  };
}
