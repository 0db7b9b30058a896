/**
 * Schemas of the data types that cross threads but are declared elsewhere (the pure
 * core and the kube adapter own them; they are not moved here). Each schema has a
 * compile-time check that its output (made readonly) and the declared type accept the
 * same values, so a field added to one and not the other fails the build, not a
 * message at run time.
 */
import * as v from "valibot";
import type { ConnectionSpec } from "../core/connection.ts";
import type { ClusterSettings, DesiredMirror, MirrorProblem, SkipReason } from "../core/desired.ts";
import type { FederatedMember } from "../core/federated.ts";
import type { McsExport } from "../core/mcs.ts";
import { type Agree, type Assert, count, type DeepReadonly, name, stringRecord } from "./codec.ts";

/** A TCP/UDP/SCTP port number. */
const portNumber = v.pipe(
  v.number(),
  v.integer("must be an integer"),
  v.minValue(1, "must be 1-65535"),
  v.maxValue(65535, "must be 1-65535"),
);

const mirrorServicePort = v.object({
  name: v.exactOptional(v.string()),
  protocol: v.string(),
  port: portNumber,
  targetPort: v.exactOptional(v.union([portNumber, name])),
});

const mirrorEndpointPort = v.object({
  name: v.exactOptional(v.string()),
  protocol: v.string(),
  port: portNumber,
});

const desiredMirrorFields = v.object({
  cluster: name,
  namespace: name,
  name,
  remote: v.string(),
  labels: stringRecord,
  serviceAnnotations: stringRecord,
  ports: v.array(mirrorServicePort),
  endpointsAnnotations: stringRecord,
  addresses: v.array(v.string()),
  notReadyAddresses: v.array(v.string()),
  endpointPorts: v.array(mirrorEndpointPort),
  headless: v.exactOptional(
    v.object({
      hosts: v.array(v.object({ hostname: name, service: name, address: v.exactOptional(v.string()) })),
    }),
  ),
  hostsUnknown: v.exactOptional(v.literal(true)),
  serviceAnnotationsExact: v.exactOptional(v.literal(true)),
  serviceOnly: v.exactOptional(v.literal(true)),
});
/** `hostsUnknown` marks an ordinary mirror: never next to `headless`. */
const desiredMirror = v.pipe(
  desiredMirrorFields,
  v.check((m) => !(m.headless && m.hostsUnknown), "hostsUnknown: only on an ordinary mirror (no headless)"),
);
type _DesiredMirrorAgrees = Assert<Agree<DeepReadonly<v.InferOutput<typeof desiredMirror>>, DesiredMirror>>;
export const DesiredMirrorSchema: v.GenericSchema<DesiredMirror> = desiredMirror;

const federatedMember = v.object({
  cluster: name,
  namespace: name,
  name,
  remote: v.string(),
  ports: v.pipe(v.array(mirrorServicePort), v.minLength(1, "must not be empty")),
  addresses: v.array(v.string()),
  notReadyAddresses: v.array(v.string()),
  endpointPorts: v.array(mirrorEndpointPort),
  identity: v.exactOptional(v.string()),
  endpoints: v.exactOptional(
    v.array(
      v.object({
        addresses: v.array(v.string()),
        conditions: v.object({ ready: v.boolean(), serving: v.boolean(), terminating: v.boolean() }),
        hostname: v.exactOptional(v.string()),
        nodeName: v.exactOptional(v.string()),
        zone: v.exactOptional(v.string()),
      }),
    ),
  ),
});
type _FederatedMemberAgrees = Assert<Agree<DeepReadonly<v.InferOutput<typeof federatedMember>>, FederatedMember>>;
export const FederatedMemberSchema: v.GenericSchema<FederatedMember> = federatedMember;

const importPort = v.object({
  name: v.exactOptional(v.string()),
  protocol: v.string(),
  port: count,
  appProtocol: v.exactOptional(v.string()),
});
const exportedSpec = v.object({
  type: v.picklist(["ClusterSetIP", "Headless"]),
  ports: v.array(importPort),
  sessionAffinity: v.string(),
  sessionAffinityConfig: v.exactOptional(
    v.object({ clientIP: v.exactOptional(v.object({ timeoutSeconds: v.exactOptional(count) })) }),
  ),
  internalTrafficPolicy: v.exactOptional(v.string()),
  trafficDistribution: v.exactOptional(v.string()),
});
const mcsExport = v.object({ ...federatedMember.entries, exportedAt: v.string(), spec: exportedSpec });
type _McsExportAgrees = Assert<Agree<DeepReadonly<v.InferOutput<typeof mcsExport>>, McsExport>>;
export const McsExportSchema: v.GenericSchema<McsExport> = mcsExport;

const SKIP_REASONS = [
  "mirror-name-invalid",
  "no-ports",
  "excluded-namespace",
  "export-label-value",
  "headless-hostname-invalid",
  "service-export-without-service",
  "service-export-invalid-type",
  "export-mode-forbidden",
  "cluster-quota",
] as const;
type _SkipReasonsAgree = Assert<Agree<(typeof SKIP_REASONS)[number], SkipReason>>;

const mirrorProblem = v.object({
  cluster: v.string(),
  remote: v.string(),
  reason: v.picklist(SKIP_REASONS),
  message: v.string(),
});
type _MirrorProblemAgrees = Assert<Agree<DeepReadonly<v.InferOutput<typeof mirrorProblem>>, MirrorProblem>>;
export const MirrorProblemSchema: v.GenericSchema<MirrorProblem> = mirrorProblem;

const gatewayRef = v.object({ name, namespace: name });

const labelSelector = v.object({
  matchLabels: v.record(v.string(), v.string()),
  matchExpressions: v.array(
    v.object({
      key: name,
      operator: v.picklist(["In", "NotIn", "Exists", "DoesNotExist"]),
      values: v.array(v.string()),
    }),
  ),
});

/** A Link's settings (SPEC §15; core/link.ts). */
const linkSettings = v.object({
  link: v.string(),
  selector: v.exactOptional(labelSelector),
  remoteDiscoverySelector: v.exactOptional(labelSelector),
  federatedSelector: v.exactOptional(labelSelector),
  excludedLabels: v.array(v.string()),
  excludedAnnotations: v.array(v.string()),
  gateway: v.object({
    addresses: v.array(v.string()),
    port: v.exactOptional(portNumber),
    identity: v.string(),
    probe: v.exactOptional(
      v.object({
        port: portNumber,
        path: v.string(),
        periodMs: v.pipe(count, v.minValue(1, "must be >= 1")),
        timeoutMs: v.pipe(count, v.minValue(1, "must be >= 1")),
        failureThreshold: v.pipe(count, v.minValue(1, "must be >= 1")),
      }),
    ),
    probeProblems: v.array(v.string()),
  }),
});

const clusterSettings = v.object({
  name,
  domain: v.string(),
  excludedNamespaces: v.array(v.string()),
  defaultGateway: gatewayRef,
  exportSelector: v.exactOptional(v.object({ key: name, value: v.string() })),
  maxMirrors: v.exactOptional(count),
  maxHeadlessHosts: v.exactOptional(v.pipe(count, v.minValue(1, "must be >= 1"))),
  link: v.exactOptional(linkSettings),
});
type _ClusterSettingsAgree = Assert<Agree<DeepReadonly<v.InferOutput<typeof clusterSettings>>, ClusterSettings>>;
export const ClusterSettingsSchema: v.GenericSchema<ClusterSettings> = clusterSettings;

const connectionSpec = v.object({
  server: name,
  caPem: v.exactOptional(v.string()),
  insecureSkipTlsVerify: v.exactOptional(v.boolean()),
  tlsServerName: v.exactOptional(v.string()),
  auth: v.variant("kind", [
    v.object({ kind: v.literal("token"), token: v.string() }),
    v.object({ kind: v.literal("client-certificate"), certPem: v.string(), keyPem: v.string() }),
    v.object({ kind: v.literal("token-file"), path: v.string() }),
    v.object({ kind: v.literal("anonymous") }),
  ]),
});
type _ConnectionSpecAgrees = Assert<Agree<DeepReadonly<v.InferOutput<typeof connectionSpec>>, ConnectionSpec>>;
export const ConnectionSpecSchema: v.GenericSchema<ConnectionSpec> = connectionSpec;
