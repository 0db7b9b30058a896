/** MCS exports for unit and actor tests (SPEC §12, §16): the spec a ClusterSetIP export of `ports` carries. */
import type { MirrorServicePort } from "../../src/core/desired.ts";
import type { ExportedSpec } from "../../src/core/mcs-spec.ts";

export function clusterSetSpec(ports: readonly MirrorServicePort[], fields: Partial<ExportedSpec> = {}): ExportedSpec {
  return {
    type: "ClusterSetIP",
    ports: ports.map((p) => ({ ...(p.name ? { name: p.name } : {}), protocol: p.protocol, port: p.port })),
    sessionAffinity: "None",
    ...fields,
  };
}
