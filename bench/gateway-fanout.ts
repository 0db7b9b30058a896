/**
 * Gateway fan-out: one gateway IP change on a remote that K clusters point at, with S
 * exported Services behind that gateway (K × S = 2 000 mirrors; smoke: 2 × 10). The
 * clock runs from the remote status write until a watch on the local mirror Endpoints
 * has seen every one of them point at the new IP.
 *
 * The limit: a bare client making the same writes on identical objects (copies of the
 * 2 000 mirror Services and Endpoints in a fresh namespace, created untimed) with the
 * same concurrency (16): per mirror, one PUT of the Endpoints to the new IP, then one
 * PUT of the Service with its new `mirror.linkerd.io/remote-gateway-resource-version`
 * annotation (SPEC §3: the Service carries the gateway's resourceVersion, so a gateway
 * change rewrites both objects of every mirror). ratio = bare time / fleet-mirror time.
 */
import { REMOTE_GATEWAY_RESOURCE_VERSION } from "../src/core/labels.ts";
import type { Endpoints, Service } from "../src/core/objects.ts";
import { converge, WRITE_CONCURRENCY } from "./cold-convergence.ts";
import {
  type BenchOptions,
  CountingWatch,
  collectionPath,
  copyForCreate,
  diffCounts,
  endpointsPointAt,
  ensureLocalNamespace,
  GATEWAY_PORT,
  localAdminClient,
  localWritesByKind,
  printTable,
  round,
  runPool,
  type ScenarioResult,
  waitWriterIdle,
  writeResult,
} from "./harness.ts";

const NEW_IP = "198.18.0.99";

export async function runGatewayFanout(opts: BenchOptions): Promise<ScenarioResult> {
  const size = opts.smoke ? { clusters: 2, services: 10 } : { clusters: 20, services: 100 };
  const run = await converge(size.clusters, size.services);
  const { fleet, supervisor } = run;
  const client = localAdminClient(fleet);
  try {
    const watch = new CountingWatch<Endpoints>(client, "/api/v1/endpoints", (ep) => endpointsPointAt(ep, NEW_IP));
    await watch.start();
    const writesBefore = await fleet.localWriteCount();
    const kindsBefore = await localWritesByKind(fleet);
    const started = Date.now();
    await fleet.setGatewayIngress("remote", [{ ip: NEW_IP }]);
    await watch.until(run.mirrors);
    const fleetMs = Date.now() - started;
    await waitWriterIdle(supervisor);
    const fleetWrites = (await fleet.localWriteCount()) - writesBefore;
    const fleetWritesByKind = diffCounts(await localWritesByKind(fleet), kindsBefore);
    await watch.stop();
    await supervisor.stop();

    // The bare-client limit: the same two writes per mirror on copies of the same objects.
    const ns = "bare-fanout";
    await ensureLocalNamespace(client, ns);
    const services = new Map(run.services.map((svc) => [svc.metadata.name, svc]));
    const copies: { endpoints: Endpoints; service: Service }[] = [];
    await runPool(run.endpoints, WRITE_CONCURRENCY, async (ep) => {
      const svc = services.get(ep.metadata.name);
      if (!svc) throw new Error(`no mirror Service for Endpoints ${ep.metadata.name}`);
      const [endpoints, service] = await Promise.all([
        client.request<Endpoints>("POST", collectionPath("endpoints", ns), { body: copyForCreate(ep, ns) }),
        client.request<Service>("POST", collectionPath("services", ns), { body: copyForCreate(svc, ns) }),
      ]);
      copies.push({ endpoints, service });
    });
    const bareStarted = Date.now();
    await runPool(copies, WRITE_CONCURRENCY, async ({ endpoints: ep, service: svc }) => {
      const body = {
        ...ep,
        subsets: [{ addresses: [{ ip: NEW_IP }], ports: ep.subsets?.[0]?.ports ?? [{ port: GATEWAY_PORT }] }],
      };
      await client.request("PUT", `${collectionPath("endpoints", ns)}/${ep.metadata.name}`, { body });
      const annotations = { ...svc.metadata.annotations, [REMOTE_GATEWAY_RESOURCE_VERSION]: "bare-client" };
      await client.request("PUT", `${collectionPath("services", ns)}/${svc.metadata.name}`, {
        body: { ...svc, metadata: { ...svc.metadata, annotations } },
      });
    });
    const bareMs = Date.now() - bareStarted;
    const row = {
      clusters: size.clusters,
      servicesPerCluster: size.services,
      mirrors: run.mirrors,
      fleetMs,
      bareMs,
      ratio: round(bareMs / fleetMs, 3),
      fleetWrites,
      fleetWritesByKind: JSON.stringify(fleetWritesByKind),
      writesPerMirror: round(fleetWrites / run.mirrors, 3),
    };
    printTable("gateway fan-out (ratio = bare-client time / fleet-mirror time)", [row]);
    writeResult(opts.out, "gateway-fanout", { smoke: opts.smoke, writeConcurrency: WRITE_CONCURRENCY, ...row });
    return { result: row, summary: opts.smoke ? {} : { gateway_fanout_ratio: row.ratio } };
  } finally {
    client.close();
    await fleet.stop();
  }
}
