/**
 * Sharding across replicas (`--shards`), with real `fleet-mirror run` processes from
 * `dist/` (`npm run build` first), as the image runs them and as the other process
 * scenarios do (each its own Pod and Pod-bound token, see test/helpers/replicas.ts):
 *
 * - `sharded_converge_ratio`: cold convergence of one world (R remote API servers, K
 *   cluster names spread over them, S exported Services each: K × S mirrors) by ONE
 *   replica (`--leader-elect`, today's HA Deployment) and then, every mirror deleted,
 *   by THREE replicas with `--shards 12`; ratio = one-replica time / three-replica time
 *   (≥ 0.9: sharding costs nothing). Both run as deploy/ and deploy/sharded/ run them
 *   (the default placement; the three with `--expected-replicas 3`) but with
 *   `--write-qps 0`, so the bound is the local API server's write rate, which the
 *   replicas share, not a client-side limit each would have for itself (at the default
 *   50 writes/s, three replicas would have three times the budget). The clock runs
 *   from the spawn of the processes until every mirror Service and its EndpointSlice is
 *   right (a label-selected list every 500 ms). The split-CPU pair (below) is run
 *   SPLIT_PAIRS times; the figure is the median pair's ratio, every pair is in the JSON.
 * - `shard_failover_s`: the three replicas converged and settled (shards spread evenly),
 *   kill -9 of the one holding the most shards; at the same instant a new Service is
 *   exported from every remote. The figure is the time until the new Service's mirror
 *   exists in every cluster of the killed replica's shards: the shards were taken over
 *   (after the Lease duration, the product default), their clusters synced and their
 *   writes flowing again. Target: the Lease duration + 10 s.
 *
 * Default timings (`defaultConfig()`), default `--endpoints-api` (EndpointSlices).
 *
 * What bounds `sharded_converge_ratio` (docs/DESIGN.md §7, and bench/HISTORY.md, sharded cold start): both
 * runs write the same 3 000 objects into ONE local API server with no client-side
 * limit, so most of either time is that server's (and etcd's) write throughput, which
 * three replicas share, not multiply. Three replicas can win only what runs in parallel
 * per process (each syncs a third of the clusters), and lose: (1) start-up, paid once:
 * three processes starting on the same cores, then the join (until each replica sees
 * the three: `--expected-replicas`; without it one retry period more, 2 s by default),
 * before which no actor starts, though each replica's writer and its actor threads start
 * during it; (2) in the write phase, each write is decoded by the one replica whose
 * shard it belongs to (its writer watches only its own shards' mirrors since the ninth
 * round; before, all three decoded every write on the cores the API server needs). On a
 * 2-core machine shared with the API servers, the
 * ratio is ≈ (one-replica time) / (one-replica time + ≈ 2–3 s of start-up), so it rises
 * with the fleet's size and falls with a faster local API server; run on a busy machine
 * it is dominated by whatever else runs (figures of 0.23 to 2.0 in one session).
 */
import { fileURLToPath } from "node:url";
import { CoordinationV1Api } from "@kubernetes/client-node";
import { applyRbacYaml } from "../sandbox/rbac.ts";
import { defaultConfig } from "../src/config.ts";
import { SERVICE_NAME_LABEL } from "../src/core/labels.ts";
import { shardLeaseName } from "../src/core/lease-names.ts";
import type { KubeObject, Service } from "../src/core/objects.ts";
import { shardOf } from "../src/core/shards.ts";
import type { KubeClient } from "../src/kube/client.ts";
import { CONTROLLER_NAMESPACE, Fleet } from "../test/helpers/fleet.ts";
import { type Replica, Replicas } from "../test/helpers/replicas.ts";
import { cpuSplit, descendants, pin } from "./cpu-affinity.ts";
import {
  type BenchOptions,
  listAll,
  localAdminClient,
  MIRROR_SELECTOR,
  printTable,
  progress,
  round,
  runPool,
  type ScenarioResult,
  shapeRemote,
  sleep,
  writeResult,
} from "./harness.ts";
import { addressesPath, addressesPointAt, collectionPath, serviceHasPort } from "./mirror-objects.ts";

const NAMESPACE = "bench";
const GATEWAY_IP = "198.18.0.10";
const SHARDS = 12;
const COMMON_ARGS = ["--write-qps", "0", "--log-level", "warn"];
const TIMEOUT_MS = 1_800_000;
/** Split-CPU pairs per run; the median pair's ratio is `sharded_converge_ratio`. */
const SPLIT_PAIRS = 3;

/** Counts of right mirrors (Service with port 80, slice pointing at the gateway) of `names` (all when omitted). */
export async function rightMirrors(client: KubeClient, names?: ReadonlySet<string>): Promise<number> {
  const [services, slices] = await Promise.all([
    listAll<Service>(client, "/api/v1/services", MIRROR_SELECTOR),
    listAll<KubeObject>(client, addressesPath("endpointslices"), MIRROR_SELECTOR),
  ]);
  const wanted = (name: string | undefined) => names === undefined || names.has(name ?? "");
  const okServices = new Set(
    services.filter((s) => wanted(s.metadata.name) && serviceHasPort(s, 80)).map((s) => s.metadata.name),
  );
  const slicedServices = new Set(
    slices
      .filter((a) => addressesPointAt("endpointslices", a, GATEWAY_IP))
      .map((a) => a.metadata.labels?.[SERVICE_NAME_LABEL]),
  );
  return [...okServices].filter((name) => slicedServices.has(name)).length;
}

/**
 * Polls until `count()` reaches `expected`; returns ms since `started`. `first`, when
 * given, gets the ms since `started` at which the count was first above 0.
 */
async function waitFor(
  what: string,
  expected: number,
  count: () => Promise<number>,
  started: number,
  first?: (ms: number) => void,
) {
  let reported = Date.now();
  let seen = false;
  for (;;) {
    const n = await count();
    if (n > 0 && !seen) {
      seen = true;
      first?.(Date.now() - started);
    }
    if (n === expected) return Date.now() - started;
    if (Date.now() - reported > 10_000) {
      reported = Date.now();
      progress(`${what}: ${n} of ${expected}`);
    }
    if (Date.now() - started > TIMEOUT_MS) throw new Error(`${what}: ${n} of ${expected} after ${TIMEOUT_MS} ms`);
    await sleep(500);
  }
}

/**
 * The world of the sharded scenarios (this one, sharded-timeline.ts, sharded-pairs.ts):
 * the shard Leases' RBAC, and on every remote `clustersPerRemote` cluster names ×
 * `services` exported Services at one gateway. Returns the cluster names.
 */
export async function shapeShardedWorld(
  fleet: Fleet,
  remotes: readonly string[],
  clustersPerRemote: number,
  services: number,
): Promise<string[]> {
  await applyRbacYaml(
    fleet.kubeConfig("local"),
    fileURLToPath(new URL("../deploy/sharded/rbac-shards.yaml", import.meta.url)),
  );
  const names = await Promise.all(
    remotes.map((remote) =>
      shapeRemote(fleet, remote, {
        services,
        clusters: clustersPerRemote,
        gatewayIp: GATEWAY_IP,
        namespace: NAMESPACE,
        prefix: `${remote}-`,
      }),
    ),
  );
  return names.flat();
}

/** Deletes every mirror Service (their slices go with them: owner references) and every Lease of the controller. */
export async function resetLocal(fleet: Fleet, client: KubeClient): Promise<void> {
  const services = await listAll<Service>(client, "/api/v1/services", MIRROR_SELECTOR);
  await runPool(services, 16, async (svc) => {
    await client.request("DELETE", `${collectionPath("services", svc.metadata.namespace ?? "")}/${svc.metadata.name}`);
  });
  const leases = fleet.kubeConfig("local").makeApiClient(CoordinationV1Api);
  await leases.deleteCollectionNamespacedLease({ namespace: CONTROLLER_NAMESPACE });
  await waitFor(
    "mirrors deleted",
    0,
    async () => (await listAll(client, "/api/v1/services", MIRROR_SELECTOR)).length,
    Date.now(),
  );
  await waitFor(
    "mirror slices collected",
    0,
    async () => (await listAll(client, addressesPath("endpointslices"), MIRROR_SELECTOR)).length,
    Date.now(),
  );
}

/** Shard → holder from the shard Leases. */
async function holders(fleet: Fleet): Promise<string[]> {
  const list = await fleet.kubeConfig("local").makeApiClient(CoordinationV1Api).listNamespacedLease({
    namespace: CONTROLLER_NAMESPACE,
  });
  const byName = new Map(list.items.map((l) => [l.metadata?.name ?? "", l.spec?.holderIdentity ?? ""]));
  return Array.from({ length: SHARDS }, (_, shard) => byName.get(shardLeaseName("fleet-mirror", SHARDS, shard)) ?? "");
}

async function waitForEvenHolders(fleet: Fleet, identities: readonly string[]): Promise<string[]> {
  const started = Date.now();
  for (;;) {
    const h = await holders(fleet);
    const counts = identities.map((id) => h.filter((x) => x === id).length);
    const low = Math.floor(SHARDS / identities.length);
    if (h.every((x) => identities.includes(x)) && counts.every((n) => n >= low && n <= low + 1)) return h;
    if (Date.now() - started > TIMEOUT_MS) throw new Error(`shards not spread over ${identities}: ${h}`);
    await sleep(250);
  }
}

interface PairTimes {
  readonly names: readonly string[];
  readonly oneMs: number;
  readonly threeMs: number;
  readonly oneFirstMs: number;
  readonly threeFirstMs: number;
}

/**
 * Cold convergence of the world by one replica (`--leader-elect`), then, every mirror
 * deleted, by three (`--shards`); the three are left running. `cpus`: where the
 * replicas run (default: anywhere); `prefix` keeps replica names unique across pairs.
 */
async function convergePair(
  fleet: Fleet,
  replicas: Replicas,
  client: KubeClient,
  world: { mirrors: number; clusters: number; services: number; cpus?: string; prefix?: string },
): Promise<PairTimes> {
  const prefix = world.prefix ?? "";
  const where = world.cpus ? ` on CPUs ${world.cpus}` : "";
  const placed = world.cpus ? { cpus: world.cpus } : {};
  // From the replicas' spawn until every mirror is right; `firstMs`: until the first was.
  const converge = async (what: string, spawn: () => Promise<unknown>) => {
    const started = Date.now();
    await spawn();
    let firstMs = 0;
    const ms = await waitFor(
      what,
      world.mirrors,
      () => rightMirrors(client),
      started,
      (at) => {
        firstMs = at;
      },
    );
    return { ms, firstMs };
  };
  progress(`sharded: one replica${where} converging ${world.clusters} clusters × ${world.services} Services`);
  const one = await converge("one replica converging", () =>
    replicas.add(`${prefix}solo`, { args: ["--leader-elect", ...COMMON_ARGS], entry: "dist", ...placed }),
  );
  await replicas.get(`${prefix}solo`).kill();
  await resetLocal(fleet, client);

  progress(`sharded: three replicas${where} (--shards ${SHARDS}) converging the same world`);
  const names = [0, 1, 2].map((i) => `${prefix}fm-${i}`);
  // As deploy/sharded/ runs them: --expected-replicas is the Deployment's replica count.
  const args = ["--leader-elect", "--shards", String(SHARDS), "--expected-replicas", "3", ...COMMON_ARGS];
  const three = await converge("three replicas converging", () =>
    Promise.all(names.map((name) => replicas.add(name, { args, entry: "dist", ...placed }))),
  );
  return { names, oneMs: one.ms, threeMs: three.ms, oneFirstMs: one.firstMs, threeFirstMs: three.firstMs };
}

export async function runSharded(opts: BenchOptions): Promise<ScenarioResult> {
  const size = opts.smoke
    ? { remotes: ["east", "west"], clustersPerRemote: 6, services: 2 }
    : { remotes: ["east", "west", "north"], clustersPerRemote: 100, services: 5 };
  const clusters = size.remotes.length * size.clustersPerRemote;
  const mirrors = clusters * size.services;
  const defaults = defaultConfig({});
  const fleet = await Fleet.start(size.remotes);
  const replicas = new Replicas(fleet);
  const client = localAdminClient(fleet);
  try {
    const clusterNames = await shapeShardedWorld(fleet, size.remotes, size.clustersPerRemote, size.services);

    const shared = await convergePair(fleet, replicas, client, { mirrors, clusters, services: size.services });
    const names = shared.names;
    const before = await waitForEvenHolders(fleet, names);

    // kill -9 of the replica holding the most shards, and a new Service everywhere.
    const victim: Replica = names
      .map((name) => replicas.get(name))
      .reduce((a, b) =>
        before.filter((h) => h === b.name).length > before.filter((h) => h === a.name).length ? b : a,
      );
    const movedShards = before.flatMap((h, shard) => (h === victim.name ? [shard] : []));
    const moved = clusterNames.filter((c) => movedShards.includes(shardOf(c, SHARDS)));
    progress(`sharded: kill -9 of ${victim.name} (shards ${movedShards.join(",")}: ${moved.length} clusters)`);
    const killed = Date.now();
    await victim.kill();
    const survivors = names.filter((n) => n !== victim.name);
    // Polled beside the mirror waits; a failure here is reported as null, not thrown unobserved.
    const heldAgain = waitForEvenHolders(fleet, survivors).then(
      () => Date.now() - killed,
      (error: unknown) => {
        progress(`shards not spread over the survivors: ${error instanceof Error ? error.message : String(error)}`);
        return null;
      },
    );
    await Promise.all(size.remotes.map((remote) => fleet.createService(remote, NAMESPACE, "after-kill")));
    const movedNames = new Set(moved.map((c) => `after-kill-${c}`));
    const allNames = new Set(clusterNames.map((c) => `after-kill-${c}`));
    const movedMs = await waitFor(
      "moved clusters mirroring again",
      moved.length,
      () => rightMirrors(client, movedNames),
      killed,
    );
    const allMs = await waitFor(
      "every cluster mirroring the new Service",
      clusters,
      () => rightMirrors(client, allNames),
      killed,
    );
    const takenMs = await heldAgain;

    // The same pair again with the control plane on its own CPU and the replicas on the
    // other(s): the arrangement of a real cluster, where the replicas take no CPU from
    // the API server and its write rate is what they share.
    // Several pairs: one pair's ratio of two times on a shared machine moved by ±0.15
    // between runs of the same build (bench/HISTORY.md); the median pair is the figure.
    const split = cpuSplit();
    const splitPairs: PairTimes[] = [];
    if (split) {
      await replicas.stop();
      // The same world as the first pair: without the Service the failover added.
      await Promise.all(size.remotes.map((remote) => fleet.deleteService(remote, NAMESPACE, "after-kill")));
      await resetLocal(fleet, client);
      pin([process.pid, ...descendants(process.pid)], split.controlPlane);
      try {
        for (let i = 0; i < (opts.smoke ? 1 : SPLIT_PAIRS); i++) {
          if (i > 0) {
            await replicas.stop();
            await resetLocal(fleet, client);
          }
          splitPairs.push(
            await convergePair(fleet, replicas, client, {
              mirrors,
              clusters,
              services: size.services,
              cpus: split.controller,
              prefix: `split${i}-`,
            }),
          );
        }
      } finally {
        // The scenarios after this one run on every CPU again.
        pin([process.pid, ...descendants(process.pid)], split.every);
      }
    }
    const pairRatio = (pair: PairTimes) => round(pair.oneMs / pair.threeMs, 2);
    const byRatio = [...splitPairs].sort((a, b) => pairRatio(a) - pairRatio(b));
    const splitPair = byRatio[Math.floor((byRatio.length - 1) / 2)];

    const row = {
      clusters,
      servicesPerCluster: size.services,
      mirrors,
      shards: SHARDS,
      oneReplicaConvergeMs: shared.oneMs,
      threeReplicasConvergeMs: shared.threeMs,
      // Start-up (processes, threads, shard Leases) apart from the write phase after it.
      oneReplicaFirstMirrorMs: shared.oneFirstMs,
      threeReplicasFirstMirrorMs: shared.threeFirstMs,
      ratio: round(shared.oneMs / shared.threeMs, 2),
      // The control plane on one CPU, the replicas on the other(s) (null: one CPU only).
      cpus: split ? `control plane ${split.controlPlane}, replicas ${split.controller}` : null,
      splitOneReplicaConvergeMs: splitPair?.oneMs ?? null,
      splitThreeReplicasConvergeMs: splitPair?.threeMs ?? null,
      splitOneReplicaFirstMirrorMs: splitPair?.oneFirstMs ?? null,
      splitThreeReplicasFirstMirrorMs: splitPair?.threeFirstMs ?? null,
      splitRatio: splitPair ? pairRatio(splitPair) : null,
      // Every split pair, in run order (the fields above are the median pair's).
      splitPairs: splitPairs.map((pair) => ({
        oneMs: pair.oneMs,
        threeMs: pair.threeMs,
        oneFirstMs: pair.oneFirstMs,
        threeFirstMs: pair.threeFirstMs,
        ratio: pairRatio(pair),
      })),
      leaseDurationMs: defaults.leaseDurationMs,
      movedShards: movedShards.length,
      movedClusters: moved.length,
      failoverMovedMs: movedMs,
      failoverAllMs: allMs,
      shardsHeldAgainByMs: takenMs,
    };
    const { splitPairs: pairs, ...printed } = row;
    printTable("sharding: cold convergence 1 vs 3 replicas, and kill -9 of one of 3", [printed]);
    if (pairs.length > 1) printTable("sharding: every split-CPU pair (the median's ratio is the figure)", pairs);
    const result = {
      smoke: opts.smoke,
      writeQps: "unlimited",
      maxThreadsPerReplica: "auto (the default placement)",
      entry: "dist/src/main.js run",
      runs: [row],
    };
    writeResult(opts.out, "sharded", result);
    return {
      result,
      summary: {
        sharded_converge_ratio: row.splitRatio,
        sharded_converge_ratio_shared_cpus: row.ratio,
        shard_failover_s: round(movedMs / 1_000, 2),
      },
    };
  } finally {
    client.close();
    await replicas.stop();
    await fleet.stop();
  }
}
