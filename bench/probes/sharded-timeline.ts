/**
 * Where a sharded cold start spends its time (diagnostic for `sharded_converge_ratio`,
 * not part of `npm run bench`): the world of bench/sharded.ts, converged once by one
 * replica (`--leader-elect`) and, every mirror deleted, by three (`--shards 12`), at
 * info level with the local API server's audit log on. Per replica, ms after the spawn:
 * process ready ("fleet-mirror starting"), membership Lease created (its acquireTime),
 * join settled, actor threads started ahead of the shards, first and last shard (or the
 * single Lease) held, writer ready, first and last cluster synced, first and last mirror
 * write (audit log, by Pod identity); and each replica's CPU-seconds by thread when the
 * first mirror appears and when every mirror is right (on split CPUs, the three
 * replicas' sum against the one replica's is what their shared CPU had to run).
 *
 *   node bench/probes/sharded-timeline.ts [--entry src|dist] [--clusters-per-remote 100] [--services 5] [--runs 1] [--split-cpus]
 *
 * `--split-cpus`: as the sharded scenario's split pair, the control plane (and this
 * process) on the first CPU, the replicas on the others (bench/cpu-affinity.ts).
 */
import { parseArgs } from "node:util";
import { CoordinationV1Api } from "@kubernetes/client-node";
import type { Service } from "../../src/core/objects.ts";
import { AuditLog, MIRROR_RESOURCES } from "../../test/helpers/audit.ts";
import { CONTROLLER_NAMESPACE, Fleet } from "../../test/helpers/fleet.ts";
import { type Replica, Replicas } from "../../test/helpers/replicas.ts";
import { cpuSplit, descendants, pin } from "../cpu-affinity.ts";
import { listAll, localAdminClient, MIRROR_SELECTOR, runPool, sleep } from "../harness.ts";
import { collectionPath } from "../mirror-objects.ts";
import { threadCpuSeconds } from "../process-cpu.ts";
import { shapeShardedWorld } from "../sharded.ts";

const { values } = parseArgs({
  options: {
    entry: { type: "string", default: "src" },
    "clusters-per-remote": { type: "string", default: "100" },
    services: { type: "string", default: "5" },
    runs: { type: "string", default: "1" },
    "split-cpus": { type: "boolean", default: false },
  },
});
const entry = values.entry === "dist" ? "dist" : "src";
const remotes = ["east", "west", "north"];
const perRemote = Number(values["clusters-per-remote"]);
const services = Number(values.services);
const mirrors = remotes.length * perRemote * services;
// As the sharded scenario: the default placement, no client-side write limit.
const ARGS = ["--write-qps", "0", "--log-level", "info"];

const fleet = await Fleet.start(remotes, { audit: true });
const replicas = new Replicas(fleet);
const client = localAdminClient(fleet);
const local = fleet.plane.cluster("local");
if (!local.auditLogPath) throw new Error("no audit log");
const audit = new AuditLog(local.auditLogPath, fleet.kubeConfig("local"));
const leases = fleet.kubeConfig("local").makeApiClient(CoordinationV1Api);

function firstLast(times: number[]): string {
  if (times.length === 0) return "-";
  return `${Math.round(Math.min(...times))}..${Math.round(Math.max(...times))}`;
}

async function timeline(replica: Replica, spawned: number): Promise<Record<string, string>> {
  const lines = replica.logLines();
  const at = (pattern: RegExp): number[] =>
    lines.filter((l) => typeof l["msg"] === "string" && pattern.test(l["msg"])).map((l) => Number(l["time"]) - spawned);
  const joined = lines.find((l) => typeof l["msg"] === "string" && l["msg"].startsWith("membership settled"));
  const list = await leases.listNamespacedLease({ namespace: CONTROLLER_NAMESPACE });
  const member = list.items.find(
    (l) => l.metadata?.name?.includes("-member-") && l.spec?.holderIdentity === replica.name,
  );
  const created = member?.metadata?.creationTimestamp;
  const writes = audit
    .writes({ identity: replica.name, resources: MIRROR_RESOURCES, since: spawned })
    .map((w) => w.receivedAt - spawned);
  return {
    replica: replica.name,
    ready: firstLast(at(/^fleet-mirror starting/)),
    memberLease: created ? String(new Date(created).getTime() - spawned) : "-",
    settled: joined ? `${Math.round(Number(joined["time"]) - spawned)} (joining ${joined["joiningMs"]})` : "-",
    warm: firstLast(at(/ahead of the shards$/)),
    held: firstLast(at(/^holding shard|: leading$/)),
    writerReady: firstLast(at(/writer ready/)),
    synced: firstLast(at(/ is synced$/)),
    writes: `${firstLast(writes)} (${writes.length})`,
  };
}

async function converge(names: string[], args: string[]): Promise<void> {
  const spawned = Date.now();
  const placed = split ? { cpus: split.controller } : {};
  await Promise.all(names.map((name) => replicas.add(name, { args, entry, ...placed })));
  let first = 0;
  for (;;) {
    const n = (await listAll<Service>(client, "/api/v1/services", MIRROR_SELECTOR)).length;
    if (n > 0 && first === 0) {
      first = Date.now() - spawned;
      printCpu("first mirror", names);
    }
    if (n === mirrors) break;
    await sleep(250);
  }
  const total = Date.now() - spawned;
  printCpu("every mirror", names);
  await sleep(1_000);
  await audit.flush();
  process.stdout.write(`${names.length} replica(s), entry ${entry}: first Service ${first} ms, all ${total} ms\n`);
  for (const name of names) process.stdout.write(`${JSON.stringify(await timeline(replicas.get(name), spawned))}\n`);
  for (const name of names) await replicas.get(name).kill();
  const all = await listAll<Service>(client, "/api/v1/services", MIRROR_SELECTOR);
  await runPool(all, 16, async (svc) => {
    await client.request("DELETE", `${collectionPath("services", svc.metadata.namespace ?? "")}/${svc.metadata.name}`);
  });
  await leases.deleteCollectionNamespacedLease({ namespace: CONTROLLER_NAMESPACE });
  while ((await listAll(client, "/api/v1/services", MIRROR_SELECTOR)).length > 0) await sleep(250);
  await replicas.stop();
}

/** Each replica's CPU-seconds so far by thread name (V8Worker: V8's own threads, GC and compilers). */
function printCpu(at: string, names: string[]): void {
  for (const name of names) {
    const pid = replicas.get(name).pid;
    if (pid === undefined) continue;
    const threads = [...threadCpuSeconds(pid)].map(([thread, s]) => `${thread}=${s.toFixed(2)}`).join(" ");
    process.stdout.write(`CPU-s at the ${at}, ${name}: ${threads}\n`);
  }
}
const split = values["split-cpus"] ? cpuSplit() : undefined;
try {
  await shapeShardedWorld(fleet, remotes, perRemote, services);
  if (split) pin([process.pid, ...descendants(process.pid)], split.controlPlane);
  for (let run = 0; run < Number(values.runs); run++) {
    await converge(["solo"], ["--leader-elect", ...ARGS]);
    await converge(["fm-0", "fm-1", "fm-2"], ["--leader-elect", "--shards", "12", "--expected-replicas", "3", ...ARGS]);
  }
} finally {
  client.close();
  await replicas.stop();
  await fleet.stop();
}
