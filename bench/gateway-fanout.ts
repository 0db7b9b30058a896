/**
 * Gateway fan-out: one gateway IP change on a remote that K clusters point at, with S
 * exported Services behind that gateway (K × S = 2 000 mirrors; smoke: 2 × 10). The
 * clock runs from the remote status write until a watch on the local mirror address
 * objects (the `<mirror>-ipv4` EndpointSlices in the default mode, the Endpoints in
 * `endpoints` mode) has seen every one of them point at the new IP. Both modes run side
 * by side, EndpointSlices first, each on a fresh world shaped the same.
 *
 * The limit: a bare client making the same writes on identical objects (copies of the
 * 2 000 mirror Services and address objects of that mode in a fresh namespace, created
 * untimed, a slice owned by its Service copy) with the same concurrency (16): per
 * mirror, one PUT of the slice or Endpoints to the new IP, then one PUT of the Service
 * with its new `mirror.linkerd.io/remote-gateway-resource-version` annotation (SPEC §3:
 * the Service carries the gateway's resourceVersion, so a gateway change rewrites both
 * objects of every mirror). ratio = bare time / fleet-mirror time.
 */
import { REMOTE_GATEWAY_RESOURCE_VERSION, SERVICE_NAME_LABEL } from "../src/core/labels.ts";
import type { EndpointSlice, Endpoints, KubeObject, Service } from "../src/core/objects.ts";
import { converge, WRITE_CONCURRENCY } from "./cold-convergence.ts";
import {
  addressesPath,
  addressesPointAt,
  BENCH_MODES,
  type BenchMode,
  type BenchOptions,
  CountingWatch,
  collectionPath,
  copyAddressesForCreate,
  copyForCreate,
  diffCounts,
  ensureLocalNamespace,
  GATEWAY_PORT,
  localAdminClient,
  localWritesByKind,
  printTable,
  round,
  runPool,
  type ScenarioResult,
  splitWrites,
  waitWriterIdle,
  writeResult,
} from "./harness.ts";

const NEW_IP = "198.18.0.99";

export async function runGatewayFanout(opts: BenchOptions): Promise<ScenarioResult> {
  const size = opts.smoke ? { clusters: 2, services: 10 } : { clusters: 20, services: 100 };
  const rows: Awaited<ReturnType<typeof fanoutOnce>>[] = [];
  for (const mode of BENCH_MODES) rows.push(await fanoutOnce(size, mode));
  printTable("gateway fan-out, both --endpoints-api modes (ratio = bare-client time / fleet-mirror time)", rows);
  writeResult(opts.out, "gateway-fanout", { smoke: opts.smoke, writeConcurrency: WRITE_CONCURRENCY, runs: rows });
  const ratio = (mode: BenchMode) => rows.find((r) => r.endpointsApi === mode)?.ratio ?? null;
  return {
    result: { runs: rows },
    summary: opts.smoke
      ? {}
      : { gateway_fanout_ratio: ratio("endpointslices"), gateway_fanout_ratio_endpoints_mode: ratio("endpoints") },
  };
}

/** The new address list of a copied address object: the one gateway endpoint at NEW_IP. */
function pointedAtNewIp(mode: BenchMode, obj: KubeObject): Endpoints | EndpointSlice {
  if (mode === "endpoints") {
    const ep = obj as Endpoints;
    return {
      ...ep,
      subsets: [{ addresses: [{ ip: NEW_IP }], ports: ep.subsets?.[0]?.ports ?? [{ port: GATEWAY_PORT }] }],
    };
  }
  const slice = obj as EndpointSlice;
  const conditions = { ready: true, serving: true, terminating: false };
  return { ...slice, endpoints: [{ addresses: [NEW_IP], conditions }] };
}

async function fanoutOnce(size: { clusters: number; services: number }, mode: BenchMode) {
  const run = await converge(size.clusters, size.services, mode);
  const { fleet, supervisor } = run;
  const client = localAdminClient(fleet);
  try {
    const watch = new CountingWatch<KubeObject>(client, addressesPath(mode), (obj) =>
      addressesPointAt(mode, obj, NEW_IP),
    );
    await watch.start();
    // The Service write of a mirror may follow its address write after the writer was
    // idle for a moment: the writes are counted once every Service carries the new
    // gateway resourceVersion too.
    const serviceWatch = new CountingWatch<Service>(client, "/api/v1/services", () => false);
    await serviceWatch.start();
    const kindsBefore = await localWritesByKind(fleet);
    const started = Date.now();
    const gateway = await fleet.setGatewayIngress("remote", [{ ip: NEW_IP }]);
    const version = gateway.metadata?.resourceVersion;
    serviceWatch.expect((svc) => svc.metadata.annotations?.[REMOTE_GATEWAY_RESOURCE_VERSION] === version);
    await watch.until(run.mirrors);
    const fleetMs = Date.now() - started;
    await serviceWatch.until(run.mirrors);
    await serviceWatch.stop();
    await waitWriterIdle(supervisor);
    const fleetWritesByKind = diffCounts(await localWritesByKind(fleet), kindsBefore);
    const { fleetMirror: fleetWrites, mirroringController } = splitWrites(mode, fleetWritesByKind);
    await watch.stop();
    await supervisor.stop();

    // The bare-client limit: the same two writes per mirror on copies of the same objects.
    const ns = "bare-fanout";
    await ensureLocalNamespace(client, ns);
    const services = new Map(run.services.map((svc) => [svc.metadata.name, svc]));
    const copies: { addresses: KubeObject; service: Service }[] = [];
    await runPool(run.addresses, WRITE_CONCURRENCY, async (obj) => {
      const mirror = mode === "endpoints" ? obj.metadata.name : obj.metadata.labels?.[SERVICE_NAME_LABEL];
      const svc = mirror === undefined ? undefined : services.get(mirror);
      if (!svc) throw new Error(`no mirror Service for ${mode} ${obj.metadata.name}`);
      const service = await client.request<Service>("POST", collectionPath("services", ns), {
        body: copyForCreate(svc, ns),
      });
      const body = copyAddressesForCreate(mode, obj, ns, { name: svc.metadata.name, uid: service.metadata.uid });
      const addresses = await client.request<KubeObject>("POST", collectionPath(mode, ns), { body });
      copies.push({ addresses, service });
    });
    const bareStarted = Date.now();
    await runPool(copies, WRITE_CONCURRENCY, async ({ addresses, service: svc }) => {
      await client.request("PUT", `${collectionPath(mode, ns)}/${addresses.metadata.name}`, {
        body: pointedAtNewIp(mode, addresses),
      });
      const annotations = { ...svc.metadata.annotations, [REMOTE_GATEWAY_RESOURCE_VERSION]: "bare-client" };
      await client.request("PUT", `${collectionPath("services", ns)}/${svc.metadata.name}`, {
        body: { ...svc, metadata: { ...svc.metadata, annotations } },
      });
    });
    const bareMs = Date.now() - bareStarted;
    return {
      endpointsApi: mode,
      clusters: size.clusters,
      servicesPerCluster: size.services,
      mirrors: run.mirrors,
      fleetMs,
      bareMs,
      ratio: round(bareMs / fleetMs, 3),
      fleetWrites,
      fleetWritesByKind: JSON.stringify(fleetWritesByKind),
      writesPerMirror: round(fleetWrites / run.mirrors, 3),
      mirroringControllerWrites: mirroringController,
    };
  } finally {
    client.close();
    await fleet.stop();
  }
}
