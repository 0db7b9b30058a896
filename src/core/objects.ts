/**
 * The few Kubernetes object shapes fleet-mirror reads and writes, as they appear in
 * JSON on the wire. Only the fields fleet-mirror uses are typed; everything else is
 * carried through untouched (`[field: string]: unknown`) so an update never drops a
 * field the API server or another controller set.
 *
 * Invariant: values of these types that come from a store are never mutated; code that
 * needs a changed object builds a new one (a cache mutated in place is one of the
 * defects of SPEC §8).
 */

export interface ObjectMeta {
  readonly name: string;
  readonly namespace?: string;
  readonly uid?: string;
  readonly resourceVersion?: string;
  readonly creationTimestamp?: string;
  readonly deletionTimestamp?: string;
  readonly labels?: Readonly<Record<string, string>>;
  readonly annotations?: Readonly<Record<string, string>>;
  readonly [field: string]: unknown;
}

export interface KubeObject {
  readonly apiVersion?: string;
  readonly kind?: string;
  readonly metadata: ObjectMeta;
}

export interface ServicePort {
  readonly name?: string;
  readonly protocol?: string;
  readonly port: number;
  readonly targetPort?: number | string;
  readonly nodePort?: number;
  readonly appProtocol?: string;
  readonly [field: string]: unknown;
}

export interface LoadBalancerIngress {
  readonly ip?: string;
  readonly hostname?: string;
  readonly [field: string]: unknown;
}

export interface Service extends KubeObject {
  readonly spec?: {
    readonly type?: string;
    readonly ports?: readonly ServicePort[];
    readonly selector?: Readonly<Record<string, string>>;
    readonly clusterIP?: string;
    readonly [field: string]: unknown;
  };
  readonly status?: {
    readonly loadBalancer?: { readonly ingress?: readonly LoadBalancerIngress[] };
    readonly [field: string]: unknown;
  };
}

export interface EndpointAddress {
  readonly ip: string;
  /** Set on a headless Service's endpoints: the DNS name `<hostname>.<service>.<ns>.svc` (SPEC §12). */
  readonly hostname?: string;
  readonly [field: string]: unknown;
}

export interface EndpointPort {
  readonly name?: string;
  readonly port: number;
  readonly protocol?: string;
  readonly [field: string]: unknown;
}

export interface EndpointSubset {
  readonly addresses?: readonly EndpointAddress[];
  readonly notReadyAddresses?: readonly EndpointAddress[];
  readonly ports?: readonly EndpointPort[];
}

export interface Endpoints extends KubeObject {
  readonly subsets?: readonly EndpointSubset[];
}

export interface Namespace extends KubeObject {}

export interface Secret extends KubeObject {
  readonly type?: string;
  /** base64-encoded values, as the API returns them. */
  readonly data?: Readonly<Record<string, string>>;
}

/** `namespace/name`, or `name` for cluster-scoped objects: the key every store and queue uses. */
export function objectKey(meta: { readonly namespace?: string | undefined; readonly name: string }): string {
  return meta.namespace ? `${meta.namespace}/${meta.name}` : meta.name;
}

/** Splits an object key; the inverse of `objectKey`. */
export function splitKey(key: string): { namespace: string | undefined; name: string } {
  const slash = key.indexOf("/");
  return slash < 0
    ? { namespace: undefined, name: key }
    : { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
}

/** One endpoint of an EndpointSlice (`discovery.k8s.io/v1`). */
export interface SliceEndpoint {
  readonly addresses: readonly string[];
  /** Set on a headless Service's endpoints (SPEC §12). */
  readonly hostname?: string;
  readonly conditions?: {
    readonly ready?: boolean;
    readonly serving?: boolean;
    readonly terminating?: boolean;
  };
  readonly [field: string]: unknown;
}

export interface SlicePort {
  readonly name?: string;
  readonly protocol?: string;
  readonly port?: number;
  readonly appProtocol?: string;
  readonly [field: string]: unknown;
}

/** An EndpointSlice; the API server answers `null` for an empty endpoints list. */
export interface EndpointSlice extends KubeObject {
  readonly addressType?: string;
  readonly endpoints?: readonly SliceEndpoint[] | null;
  readonly ports?: readonly SlicePort[] | null;
}

export interface OwnerReference {
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
  readonly uid: string;
  readonly controller?: boolean;
  readonly blockOwnerDeletion?: boolean;
}
