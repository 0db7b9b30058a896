/**
 * The local cluster's own Service as a member of a fleet-wide Service (SPEC §14, "local
 * first"): a local Service `<ns>/<svc>` that the member selector matches joins
 * `<ns>/<svc>-federated` with its own EndpointSlices copied as a part (local-part.ts:
 * pod addresses, conditions, hostname, nodeName, zone), under the local cluster's name
 * (`--cluster-name`). Pure: no I/O, no mutation of inputs.
 *
 * Invariants (unit tested):
 * - a Service the selector does not match, or of type ExternalName (it has no
 *   endpoints to copy), or without ports, or fleet-mirror's own (a mirror or a
 *   fleet-wide Service), is no member;
 * - the member's ports are the Service's, compared with the remote members' like any
 *   member's (SPEC §11); its ready endpoints are its slices' endpoints whose `ready`
 *   condition holds.
 */
import { carryPorts } from "./desired.ts";
import { type FederatedMember, federatedName, isMember, type MemberSelector } from "./federated.ts";
import { MIRRORED_SERVICE } from "./labels.ts";
import { localPartOf } from "./local-part.ts";
import type { EndpointSlice, Service } from "./objects.ts";

/** The member local Service `service` stands for, or undefined when it is none. */
export function localMemberFor(
  cluster: string,
  selector: MemberSelector,
  service: Service,
  slices: readonly EndpointSlice[],
): FederatedMember | undefined {
  if (!isMember(selector, service) || service.spec?.type === "ExternalName") return undefined;
  if (service.metadata.labels?.[MIRRORED_SERVICE] === "true") return undefined;
  const ports = carryPorts(service);
  if (ports.length === 0) return undefined;
  const namespace = service.metadata.namespace ?? "default";
  const part = localPartOf(slices);
  return {
    cluster,
    namespace,
    name: federatedName(service.metadata.name),
    remote: `${namespace}/${service.metadata.name}`,
    ports,
    addresses: [],
    notReadyAddresses: [],
    endpointPorts: part.endpointPorts,
    endpoints: part.endpoints,
  };
}
