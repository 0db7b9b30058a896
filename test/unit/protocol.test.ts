/**
 * The cross-thread protocol's decoders: every valid message decodes to an equal value,
 * every malformed one is rejected with a ProtocolError naming the message type and the
 * path of the bad field, however deep it is.
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { MessageChannel } from "node:worker_threads";
import type { DesiredMirror } from "../../src/core/desired.ts";
import type { FederatedMember } from "../../src/core/federated.ts";
import { type SerializedError, serializeError } from "../../src/protocol/errors.ts";
import {
  type ClusterStatus,
  decodeFromRemoteActor,
  decodeFromWriter,
  decodeToActorFromWriter,
  decodeToRemoteActor,
  decodeToWriter,
  decodeToWriterFromActor,
  type FromRemoteActor,
  type FromWriter,
  MAX_CAUSE_DEPTH,
  ProtocolError,
  type ToActorFromWriter,
  type ToRemoteActor,
  type ToWriter,
  type ToWriterFromActor,
  WRITE_DURATION_BUCKETS,
  type WriterStatus,
} from "../../src/protocol/messages.ts";

const channel = new MessageChannel();
after(() => {
  channel.port1.close();
  channel.port2.close();
});

const mirror: DesiredMirror = {
  cluster: "east",
  namespace: "shop",
  name: "cart-east",
  remote: "shop/cart",
  labels: { "mirror.linkerd.io/mirrored-service": "true", "mirror.linkerd.io/cluster-name": "east" },
  serviceAnnotations: { "mirror.linkerd.io/remote-svc-fq-name": "cart.shop.svc.cluster.local" },
  ports: [
    { name: "http", protocol: "TCP", port: 80, targetPort: 8080 },
    { protocol: "UDP", port: 53, targetPort: "dns" },
  ],
  endpointsAnnotations: { "mirror.linkerd.io/remote-svc-fq-name": "cart.shop.svc.cluster.local" },
  addresses: ["198.18.0.10", "198.18.0.11"],
  notReadyAddresses: [],
  endpointPorts: [{ name: "http", protocol: "TCP", port: 4143 }],
};

const clusterStatus: ClusterStatus = {
  cluster: "east",
  epoch: 3,
  state: "synced",
  since: 1_700_000_000_000,
  lastSyncedAt: 1_700_000_000_500,
  exportedServices: 2,
  mirrors: 1,
  problems: [{ cluster: "east", remote: "shop/x", reason: "no-ports", message: "Service shop/x has no ports" }],
  lastFailure: { phase: "watch", reason: "ECONNRESET", message: "socket hang up", attempt: 2, retryInMs: 750 },
  gateways: [
    { key: "gw/gateway", usable: true },
    { key: "gw/other", usable: false, reason: "gateway Service not found" },
  ],
  watch: { lists: 1, watchesStarted: 2, failures: 1, relistsOnGone: 0 },
  failuresByReason: { ECONNRESET: 1 },
  protocolErrors: 0,
};

const error: SerializedError = {
  name: "KubeApiError",
  message: "list failed",
  where: "remote-cluster/east: list /api/v1/services",
  retryable: true,
  code: 503,
  cause: { name: "Error", message: "socket hang up", code: "ECONNRESET" },
};

const writerStatus: WriterStatus = {
  ready: true,
  queueDepth: 0,
  inFlight: 1,
  writes: { "create/Service/ok": 4, "update/Endpoints/409": 1 },
  retries: 1,
  writeDuration: { buckets: WRITE_DURATION_BUCKETS.map((_, i) => i), sum: 0.25, count: 11 },
  clusters: {
    east: {
      mirrors: 1,
      blocked: [{ key: "shop/cart-east", reason: "user-owned", message: "owned by a user" }],
      complete: true,
    },
  },
  lastError: error,
};

const connection = { server: "https://127.0.0.1:6443", caPem: "PEM", auth: { kind: "token", token: "t" } } as const;

function init(writerPort = channel.port1): Extract<ToRemoteActor, { type: "actor.init" }> {
  return {
    type: "actor.init",
    cluster: {
      name: "east",
      domain: "cluster.local",
      excludedNamespaces: ["kube-system"],
      defaultGateway: { name: "linkerd-gateway", namespace: "linkerd-multicluster" },
    },
    epoch: 3,
    connection,
    options: {
      resolvePeriodMs: 60_000,
      maxInFlight: 2,
      batchDelayMs: 10,
      logLevel: "info",
      memberSelector: { key: "mirror.linkerd.io/federated", value: "member" },
      testHooks: true,
    },
    writerPort,
  };
}

const batch: ToWriterFromActor = {
  type: "desired.batch",
  cluster: "east",
  epoch: 3,
  seq: 7,
  complete: false,
  upserts: [mirror],
  deletes: ["shop/old-east"],
};

const fleetMember: FederatedMember = {
  cluster: "east",
  namespace: "shop",
  name: "web-federated",
  remote: "shop/web",
  ports: [{ name: "http", protocol: "TCP", port: 80, targetPort: 8080 }],
  addresses: ["198.18.0.10", "198.18.0.11"],
  notReadyAddresses: ["198.18.0.11"],
  endpointPorts: [{ name: "http", protocol: "TCP", port: 4143 }],
  identity: "gw.east",
};

const valid: { decode: (value: unknown) => unknown; message: unknown }[] = [
  { decode: decodeToRemoteActor, message: init() },
  { decode: decodeToRemoteActor, message: { type: "actor.attach-writer", cluster: "east", writerPort: channel.port2 } },
  { decode: decodeToRemoteActor, message: { type: "actor.stop", cluster: "east" } },
  { decode: decodeToRemoteActor, message: { type: "actor.inject-fault", cluster: "east", kind: "oom" } },
  { decode: decodeFromRemoteActor, message: { type: "actor.ready", cluster: "east", epoch: 3 } },
  { decode: decodeFromRemoteActor, message: { type: "actor.status", status: clusterStatus } },
  { decode: decodeFromRemoteActor, message: { type: "actor.stopped", cluster: "east", epoch: 3 } },
  { decode: decodeFromRemoteActor, message: { type: "actor.failed", cluster: "east", epoch: 3, error } },
  { decode: decodeFromRemoteActor, message: { type: "actor.load", cluster: "east", epoch: 3, bytes: 8_388_608 } },
  { decode: decodeToWriterFromActor, message: batch },
  { decode: decodeToWriterFromActor, message: { ...batch, complete: true, upserts: [], deletes: [] } },
  {
    decode: decodeToWriterFromActor,
    message: { ...batch, members: [fleetMember], memberDeletes: ["shop/db-federated"] },
  },
  {
    decode: decodeToWriterFromActor,
    message: {
      ...batch,
      complete: true,
      deletes: [],
      mcsExportsUnknown: true,
      upserts: [{ ...mirror, hostsUnknown: true }],
    },
  },
  { decode: decodeToActorFromWriter, message: { type: "desired.ack", cluster: "east", epoch: 3, seq: 7 } },
  {
    decode: decodeToActorFromWriter,
    message: { type: "desired.ack", cluster: "east", epoch: 3, seq: 0, resend: true },
  },
  {
    decode: decodeToWriter,
    message: {
      type: "writer.init",
      connection: { server: "https://127.0.0.1:6443", auth: { kind: "token-file", path: "/var/run/token" } },
      options: {
        createNamespaces: false,
        excludedNamespaces: ["kube-system"],
        concurrency: 4,
        qps: 0,
        burst: 10,
        resyncPeriodMs: 600_000,
        blockedRecheckMs: 30_000,
        endpointsApi: "endpoints",
        logLevel: "info",
        namespace: "fleet-mirror",
        fenced: true,
      },
    },
  },
  { decode: decodeToWriter, message: { type: "writer.attach", cluster: "east", epoch: 3, port: channel.port2 } },
  { decode: decodeToWriter, message: { type: "writer.clusters", keep: ["east", "west"] } },
  { decode: decodeToWriter, message: { type: "writer.clusters", keep: ["east", "west"], order: ["west", "east"] } },
  {
    decode: decodeToWriter,
    message: {
      type: "writer.event",
      event: {
        involved: { kind: "Secret", namespace: "fleet-mirror", name: "east", uid: "u-1", apiVersion: "v1" },
        type: "Warning",
        reason: "InvalidCredentials",
        message: "no server",
      },
    },
  },
  { decode: decodeToWriter, message: { type: "writer.fence", writableUntil: 123_456.5 } },
  {
    decode: decodeToWriter,
    message: { type: "writer.shards", seq: 3, held: [{ shard: 0, writableUntil: 123_456.5 }] },
  },
  { decode: decodeToWriter, message: { type: "writer.shards", seq: 4, held: [] } },
  { decode: decodeFromWriter, message: { type: "writer.shards-fenced", seq: 4 } },
  { decode: decodeToWriter, message: { type: "writer.stop" } },
  { decode: decodeFromWriter, message: { type: "writer.ready" } },
  { decode: decodeFromWriter, message: { type: "writer.status", status: writerStatus } },
  { decode: decodeFromWriter, message: { type: "writer.stopped" } },
  { decode: decodeFromWriter, message: { type: "writer.failed", error } },
];

describe("protocol decoders", () => {
  for (const { decode, message } of valid) {
    const type = (message as { type: string }).type;
    it(`decode a valid ${type} to an equal value, ports being the same instances`, () => {
      const decoded = decode(message);
      assert.deepEqual(decoded, message);
      for (const key of ["writerPort", "port"]) {
        const port = (message as Record<string, unknown>)[key];
        if (port) assert.equal((decoded as Record<string, unknown>)[key], port);
      }
    });
  }

  it("a real serializeError chain decodes unchanged", () => {
    const serialized = serializeError(new Error("outer", { cause: new Error("inner", { cause: "root" }) }), "here");
    const message: FromWriter = { type: "writer.failed", error: serialized };
    assert.deepEqual(decodeFromWriter(message), message);
  });

  it("a status whose problems is not a list is rejected, so the supervisor never iterates it", () => {
    // The defect of issue 10: only cluster and epoch of actor.status were checked.
    assert.throws(
      () => decodeFromRemoteActor({ type: "actor.status", status: { ...clusterStatus, problems: "x" } }),
      (e: unknown) =>
        e instanceof ProtocolError && e.message === 'actor.status: status.problems: expected Array but received "x"',
    );
  });
});

/** A value 40 levels deep down `cause`, or cyclic: structured clone carries both. */
function deepError(levels: number): SerializedError {
  let e: SerializedError = { name: "Error", message: "root" };
  for (let i = 0; i < levels; i++) e = { name: "Error", message: `level ${i}`, cause: e };
  return e;
}
const cyclic: { name: string; message: string; cause?: unknown } = { name: "Error", message: "loop" };
cyclic.cause = cyclic;

const noPorts = { ...mirror, ports: [{ protocol: "TCP", port: "80" }] };
const { blocked: _blocked, ...eastWithoutBlocked } = writerStatus.clusters["east"] ?? { blocked: [] };
const { reason: _reason, ...problemWithoutReason } = clusterStatus.problems[0] ?? { reason: "" };

const malformed: { decode: (value: unknown) => unknown; message: unknown; error: string }[] = [
  { decode: decodeFromRemoteActor, message: null, error: "from remote actor: expected Object but received null" },
  { decode: decodeFromRemoteActor, message: { type: "actor.nope" }, error: "from remote actor: type: expected (" },
  {
    decode: decodeFromRemoteActor,
    message: { type: "actor.load", cluster: "east", epoch: 3, bytes: -1 },
    error: "actor.load: bytes: must be >= 0",
  },
  {
    decode: decodeFromRemoteActor,
    message: { type: "actor.status", status: { ...clusterStatus, problems: [problemWithoutReason] } },
    error: "actor.status: status.problems[0].reason: required field is missing",
  },
  {
    decode: decodeFromRemoteActor,
    message: { type: "actor.status", status: { ...clusterStatus, problems: [{ ...problemWithoutReason, reason: 7 }] } },
    error: "actor.status: status.problems[0].reason: expected (",
  },
  {
    decode: decodeFromRemoteActor,
    message: { type: "actor.status", status: { ...clusterStatus, gateways: [{ key: "gw/g", usable: "yes" }] } },
    error: 'actor.status: status.gateways[0].usable: expected boolean but received "yes"',
  },
  {
    decode: decodeFromRemoteActor,
    message: { type: "actor.status", status: { ...clusterStatus, watch: { lists: 1 } } },
    error: "actor.status: status.watch.watchesStarted: required field is missing",
  },
  {
    decode: decodeFromRemoteActor,
    message: { type: "actor.status", status: { ...clusterStatus, failuresByReason: { "http-500": -1 } } },
    error: 'actor.status: status.failuresByReason["http-500"]: must be >= 0',
  },
  {
    decode: decodeFromRemoteActor,
    message: { type: "actor.status", status: { ...clusterStatus, lastFailure: { phase: "sleep" } } },
    error: 'actor.status: status.lastFailure.phase: expected ("list" | "watch") but received "sleep"',
  },
  {
    decode: decodeFromRemoteActor,
    message: { type: "actor.failed", cluster: "east", epoch: 1, error: deepError(40) },
    error: `actor.failed: error${".cause".repeat(MAX_CAUSE_DEPTH + 1)}: cause chain deeper than ${MAX_CAUSE_DEPTH} levels`,
  },
  {
    decode: decodeFromRemoteActor,
    message: { type: "actor.failed", cluster: "east", epoch: 1, error: cyclic },
    error: `actor.failed: error${".cause".repeat(MAX_CAUSE_DEPTH + 1)}: cause chain deeper than ${MAX_CAUSE_DEPTH} levels`,
  },
  {
    decode: decodeFromRemoteActor,
    message: { type: "actor.ready", cluster: "east", epoch: 1.5 },
    error: "actor.ready: epoch: must be an integer",
  },
  {
    decode: decodeToRemoteActor,
    message: { ...init(), writerPort: {} },
    error: "actor.init: writerPort: expected MessagePort but received Object",
  },
  {
    decode: decodeToRemoteActor,
    message: { ...init(), connection: { server: "https://x", auth: { kind: "exec", command: "sh" } } },
    error: 'actor.init: connection.auth.kind: expected ("token" | "client-certificate" | "token-file" | "anonymous")',
  },
  {
    decode: decodeToRemoteActor,
    message: { ...init(), options: { ...init().options, maxInFlight: 0 } } as unknown,
    error: "actor.init: options.maxInFlight: must be >= 1",
  },
  {
    decode: decodeToRemoteActor,
    message: {
      ...init(),
      cluster: {
        name: "east",
        domain: "cluster.local",
        excludedNamespaces: [1],
        defaultGateway: { name: "linkerd-gateway", namespace: "linkerd-multicluster" },
      },
    },
    error: "actor.init: cluster.excludedNamespaces[0]: expected string but received 1",
  },
  {
    decode: decodeToRemoteActor,
    message: { type: "actor.inject-fault", cluster: "east", kind: "segfault" },
    error: 'actor.inject-fault: kind: expected ("throw" | "reject" | "exit" | "oom") but received "segfault"',
  },
  {
    decode: decodeToWriterFromActor,
    message: { ...batch, upserts: [noPorts] },
    error: 'desired.batch: upserts[0].ports[0].port: expected number but received "80"',
  },
  {
    decode: decodeToWriterFromActor,
    message: { ...batch, upserts: [{ ...mirror, labels: { "mirror.linkerd.io/cluster-name": 1 } }] },
    error: 'desired.batch: upserts[0].labels["mirror.linkerd.io/cluster-name"]: expected string but received 1',
  },
  {
    decode: decodeToWriterFromActor,
    message: { ...batch, upserts: [{ ...mirror, addresses: ["198.18.0.10", null] }] },
    error: "desired.batch: upserts[0].addresses[1]: expected string but received null",
  },
  {
    decode: decodeToWriterFromActor,
    message: { ...batch, upserts: [{ ...mirror, endpointPorts: [{ protocol: "TCP", port: 70000 }] }] },
    error: "desired.batch: upserts[0].endpointPorts[0].port: must be 1-65535",
  },
  {
    decode: decodeToWriterFromActor,
    message: { ...batch, upserts: [{ ...mirror, cluster: "west" }] },
    error: "desired.batch: upserts[0].cluster: upsert for cluster west on east's channel",
  },
  {
    decode: decodeToWriterFromActor,
    message: { ...batch, members: [{ ...fleetMember, cluster: "west" }] },
    error: "desired.batch: members[0].cluster: member of cluster west on east's channel",
  },
  {
    decode: decodeToWriterFromActor,
    message: { ...batch, members: [{ ...fleetMember, notReadyAddresses: [7] }] },
    error: "desired.batch: members[0].notReadyAddresses[0]: expected string but received 7",
  },
  {
    decode: decodeToWriterFromActor,
    message: { ...batch, members: [{ ...fleetMember, ports: [] }] },
    error: "desired.batch: members[0].ports: must not be empty",
  },
  {
    decode: decodeToWriterFromActor,
    message: { ...batch, memberDeletes: ["no-slash"] },
    error: "desired.batch: memberDeletes[0]: must be namespace/name",
  },
  {
    decode: decodeToWriterFromActor,
    message: { ...batch, complete: false, mcsExportsUnknown: true },
    error: "desired.batch: mcsExportsUnknown: only on a complete batch without mcsExports or mcsExportDeletes",
  },
  {
    decode: decodeToWriterFromActor,
    message: { ...batch, complete: true, deletes: [], mcsExportsUnknown: false },
    error: "desired.batch: mcsExportsUnknown: expected true but received false",
  },
  {
    decode: decodeToWriterFromActor,
    message: { ...batch, upserts: [{ ...mirror, headless: { hosts: [] }, hostsUnknown: true }] },
    error: "desired.batch: upserts[0]: hostsUnknown: only on an ordinary mirror (no headless)",
  },
  {
    decode: decodeToWriterFromActor,
    message: { ...batch, deletes: ["no-slash"] },
    error: "desired.batch: deletes[0]: must be namespace/name",
  },
  {
    decode: decodeToActorFromWriter,
    message: { type: "desired.ack", cluster: "east", epoch: 3, seq: 1, resend: false },
    error: "desired.ack: resend: expected true but received false",
  },
  {
    decode: decodeToWriter,
    message: {
      type: "writer.event",
      event: { involved: { kind: "Secret", namespace: "ns", name: "s", apiVersion: "v1" }, type: "Normal", reason: 5 },
    },
    error: "writer.event: event.reason: expected string but received 5",
  },
  {
    decode: decodeToWriter,
    message: { type: "writer.clusters", keep: "east" },
    error: 'writer.clusters: keep: expected Array but received "east"',
  },
  {
    decode: decodeToWriter,
    message: { type: "writer.attach", cluster: "east", epoch: 1, port: null },
    error: "writer.attach: port: expected MessagePort but received null",
  },
  {
    decode: decodeToWriter,
    message: {
      type: "writer.init",
      connection: { server: "https://127.0.0.1:6443", auth: { kind: "token-file", path: "/var/run/token" } },
      options: {
        createNamespaces: true,
        excludedNamespaces: [],
        concurrency: 4,
        qps: 0,
        burst: 10,
        resyncPeriodMs: 600_000,
        blockedRecheckMs: 30_000,
        endpointsApi: "slices",
        logLevel: "info",
        namespace: "fleet-mirror",
      },
    },
    error: "writer.init: options.endpointsApi: ",
  },
  {
    decode: decodeToWriter,
    message: { type: "writer.fence", writableUntil: Number.NaN },
    error: "writer.fence: writableUntil: expected number but received NaN",
  },
  {
    decode: decodeToWriter,
    message: { type: "writer.shards", seq: 1, held: [{ shard: -1, writableUntil: 5 }] },
    error: "writer.shards: held[0].shard: must be >= 0",
  },
  {
    decode: decodeToWriter,
    message: { type: "writer.shards", seq: 1, held: [{ shard: 2, writableUntil: Number.POSITIVE_INFINITY }] },
    error: "writer.shards: held[0].writableUntil: Invalid finite",
  },
  {
    decode: decodeFromWriter,
    message: { type: "writer.status", status: { ...writerStatus, clusters: { east: eastWithoutBlocked } } },
    error: "writer.status: status.clusters.east.blocked: required field is missing",
  },
  {
    decode: decodeFromWriter,
    message: { type: "writer.status", status: { ...writerStatus, writeDuration: { buckets: [1], sum: 0, count: 1 } } },
    error: `writer.status: status.writeDuration.buckets: must have ${WRITE_DURATION_BUCKETS.length} buckets`,
  },
  {
    decode: decodeFromWriter,
    message: {
      type: "writer.status",
      status: {
        ...writerStatus,
        federated: [{ key: "shop/web-federated", clusters: ["east"], kept: [], ready: -1, notReady: 0 }],
      },
    },
    error: "writer.status: status.federated[0].ready: must be >= 0",
  },
  {
    decode: decodeFromWriter,
    message: { type: "writer.status", status: { ...writerStatus, lastError: { name: "E", message: 1 } } },
    error: "writer.status: status.lastError.message: expected string but received 1",
  },
];

describe("protocol decoders reject malformed messages with the path of the bad field", () => {
  for (const { decode, message, error } of malformed) {
    it(`reject with "${error}"`, () => {
      assert.throws(
        () => decode(message),
        (e: unknown) => {
          assert.ok(e instanceof ProtocolError, `not a ProtocolError: ${String(e)}`);
          assert.ok(e.message.startsWith(error), `message: ${e.message}`);
          return true;
        },
      );
    });
  }
});

// Compile-time: the exported message types are the ones the actors post.
const _typed: [FromRemoteActor, ToActorFromWriter, ToWriter] = [
  { type: "actor.ready", cluster: "east", epoch: 1 },
  { type: "desired.ack", cluster: "east", epoch: 1, seq: 1, resend: true },
  { type: "writer.stop" },
];
