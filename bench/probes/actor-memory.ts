/**
 * Memory per remote-cluster actor: K credentials Secrets (distinct cluster names) all
 * pointing at one real remote API server with S exported Services, one worker thread
 * per cluster. Reports process RSS before the controller starts, once every cluster is
 * synced, and (RSS − baseline) / K. Writes bench/results/actor-memory-<K>.json.
 *
 * Usage: node bench/probes/actor-memory.ts [K=20] [S=10]
 */
import { writeFileSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import { Fleet } from "../../test/helpers/fleet.ts";
import { eventually } from "../../test/helpers/kube.ts";

const K = Number(process.argv[2] ?? 20);
const S = Number(process.argv[3] ?? 10);
const mb = (bytes: number) => Math.round((bytes / 1024 / 1024) * 10) / 10;

const fleet = await Fleet.start(["remote"]);
try {
  await fleet.createGateway("remote", { ingress: [{ ip: "198.18.0.1" }] });
  for (let i = 0; i < S; i++) await fleet.createService("remote", "bench", `svc-${i}`);
  for (let k = 0; k < K; k++) await fleet.register("remote", { clusterName: `c${k}` });
  globalThis.gc?.();
  const baseline = process.memoryUsage().rss;
  const started = Date.now();
  const supervisor = fleet.startInProcess({ logLevel: "silent" });
  await eventually(
    "every cluster synced",
    () => {
      const rows = supervisor.status().clusters;
      return rows.length === K && rows.every((r) => r.state === "synced") ? true : undefined;
    },
    300_000,
    200,
  );
  const syncedMs = Date.now() - started;
  await eventually(
    "all mirrors written",
    () => (supervisor.status().writer?.queueDepth === 0 ? true : undefined),
    300_000,
    200,
  );
  await new Promise((r) => setTimeout(r, 3000));
  const rss = process.memoryUsage().rss;
  const result = {
    scenario: "actor-memory",
    clusters: K,
    servicesPerCluster: S,
    baselineRssMb: mb(baseline),
    rssMb: mb(rss),
    perClusterRssMb: Math.round(((rss - baseline) / K / 1024 / 1024) * 100) / 100,
    allSyncedMs: syncedMs,
    machine: { cpus: cpus().length, memGb: Math.round(totalmem() / 2 ** 30), node: process.version },
    date: new Date().toISOString(),
  };
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  writeFileSync(new URL(`../results/actor-memory-${K}.json`, import.meta.url), `${JSON.stringify(result, null, 2)}\n`);
  await supervisor.stop();
} finally {
  await fleet.stop();
}
