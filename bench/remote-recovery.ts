/**
 * Recovery after a remote outage (`remote_recovery_s`): converge K clusters registered
 * on one remote API server, stop that API server for an outage long enough for every
 * actor's reconnect backoff to reach its bound, start it again, create one new exported
 * Service on it at once, and measure the time from "the remote answers again" until
 * that Service's mirror exists in the local cluster for every cluster (the slowest
 * cluster counts).
 */
import { Fleet } from "../test/helpers/fleet.ts";
import {
  type BenchOptions,
  listAll,
  localAdminClient,
  MIRROR_SELECTOR,
  printTable,
  progress,
  round,
  type ScenarioResult,
  shapeRemote,
  sleep,
  waitAllSynced,
  waitWriterIdle,
  writeResult,
} from "./harness.ts";

const GATEWAY_IP = "198.18.0.60";
const NAMESPACE = "bench";

export async function runRemoteRecovery(opts: BenchOptions): Promise<ScenarioResult> {
  const size = opts.smoke
    ? { clusters: 2, services: 3, outageMs: 5_000 }
    : { clusters: 10, services: 20, outageMs: 20_000 };
  const fleet = await Fleet.start(["remote"]);
  try {
    const clusters = await shapeRemote(fleet, "remote", {
      services: size.services,
      clusters: size.clusters,
      gatewayIp: GATEWAY_IP,
      namespace: NAMESPACE,
    });
    const supervisor = fleet.startInProcess({ logLevel: "silent", writeQps: 0, writeConcurrency: 16 });
    try {
      await waitAllSynced(supervisor, size.clusters);
      await waitWriterIdle(supervisor);
      progress(`remote recovery: ${size.clusters} clusters converged; stopping the remote API server`);
      await fleet.plane.stopApiServer("remote");
      // The outage is this scenario's input, not a wait for a state.
      await sleep(size.outageMs);
      await fleet.plane.startApiServer("remote");
      const back = Date.now();
      await fleet.createService("remote", NAMESPACE, "recovered");
      const created = Date.now() - back;
      const client = localAdminClient(fleet);
      const wanted = new Set(clusters.map((c) => `recovered-${c}`));
      const seenAt = new Map<string, number>();
      for (;;) {
        const mirrors = await listAll<{ metadata: { name: string } }>(
          client,
          `/api/v1/namespaces/${NAMESPACE}/services`,
          MIRROR_SELECTOR,
        );
        const now = Date.now();
        for (const m of mirrors)
          if (wanted.has(m.metadata.name) && !seenAt.has(m.metadata.name)) seenAt.set(m.metadata.name, now);
        if (seenAt.size === wanted.size) break;
        if (now - back > 300_000) throw new Error(`not recovered: ${seenAt.size} of ${wanted.size} mirrors`);
        await sleep(50);
      }
      client.close();
      const delays = [...seenAt.values()].map((t) => (t - back) / 1000).sort((a, b) => a - b);
      const row = {
        clusters: size.clusters,
        servicesPerCluster: size.services,
        outageS: size.outageMs / 1000,
        createAfterBackMs: created,
        firstMirrorS: round(delays[0] ?? 0),
        medianMirrorS: round(delays[Math.floor(delays.length / 2)] ?? 0),
        remoteRecoveryS: round(delays.at(-1) ?? 0),
      };
      printTable("recovery after a remote outage", [row]);
      writeResult(opts.out, "remote-recovery", { smoke: opts.smoke, ...row });
      return { result: row, summary: opts.smoke ? {} : { remote_recovery_s: row.remoteRecoveryS } };
    } finally {
      await supervisor.stop();
    }
  } finally {
    await fleet.stop();
  }
}
