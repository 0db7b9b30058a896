/**
 * Links cost nothing (SPEC §15): cold convergence and memory of one world, K clusters ×
 * S Services (one remote API server, K cluster names pointing at it), registered once
 * by K annotated Secrets (SPEC §1) and once by K linkerd Links with their Secrets
 * (`run --links`). The remote Services carry the export label; the Secrets' clusters
 * export them by it through their default gateway (SPEC §12), the Links select them by
 * it and name the same gateway address and port, so both worlds ask for the same
 * mirrors. The runs come in pairs alternating which goes first (secrets, links; links,
 * secrets; … five pairs), each on a fresh world, so a drift of the machine's load
 * weighs on both alike.
 *
 * Each run is `fleet-mirror run` from dist/ (as memory.ts: the process's RSS is the
 * kernel's), default `--endpoints-api`, no write limit. Convergence: process start →
 * every cluster synced and the writer idle with every cluster's complete desired set
 * (/status every 500 ms), then every mirror listed and found right (listed again each
 * 500 ms until it is). RSS: VmRSS 35 s after that (3 s in a smoke run; see `settleMs`), and in the Links world after every
 * Link's status lists its mirrors too (its last work: the writer writes them once the
 * mirrors are written).
 * `links_converge_ratio` = the median over the pairs of Secrets' time / Links' time
 * (≥ 0.95: Links are no slower); `links_rss_ratio` = the median of Links' RSS /
 * Secrets' RSS (≤ 1.05).
 */
import { installLinkCrd } from "../sandbox/link-crd.ts";
import { applyRbacYaml } from "../sandbox/rbac.ts";
import { EXPORTED_LABEL } from "../src/core/export.ts";
import { linksPath } from "../src/core/link.ts";
import type { LinkStatus } from "../src/core/link-status.ts";
import type { KubeObject, Service } from "../src/core/objects.ts";
import { SETTLE_SPACING_MS } from "../src/heap-settle.ts";
import { Fleet } from "../test/helpers/fleet.ts";
import { createLink, createLinkSecret, LINKS_NAMESPACE, LINKS_RBAC, linkSpec } from "../test/helpers/links.ts";
import {
  type BenchOptions,
  GATEWAY_PORT,
  listAll,
  localAdminClient,
  MIRROR_SELECTOR,
  mb,
  percentile,
  printTable,
  progress,
  round,
  runPool,
  type ScenarioResult,
  shapeRemote,
  sleep,
  writeResult,
} from "./harness.ts";
import {
  adminMetrics,
  allSynced,
  processRss,
  startController,
  threadHeapsIn,
  waitStatus,
  writerSettled,
} from "./memory.ts";
import { addressesPath, addressesPointAt, serviceHasPort } from "./mirror-objects.ts";

type RegisteredBy = "secrets" | "links";
/**
 * Five pairs: one pair's ratio moves by more than the figure (measured 2026-12-07 on a
 * quiet machine: 14 pairs' convergence ratios from 0.69 to 1.18, RSS ratios 1.01–1.09).
 */
const PAIRS: readonly (readonly [RegisteredBy, RegisteredBy])[] = [
  ["secrets", "links"],
  ["links", "secrets"],
  ["secrets", "links"],
  ["links", "secrets"],
  ["secrets", "links"],
];
const GATEWAY_IP = "198.18.0.40";
/**
 * From the end of the work to the RSS read: longer than a thread's spacing between two
 * heap settles (heap-settle.ts), so that each world's threads have collected after their
 * last burst. Read 3 s after it, the figure was a draw of which world's last settle had
 * run: the Links world's last burst (its statuses) comes a few seconds after its mirrors',
 * inside the spacing of the settle those caused (five pairs' RSS ratios 1.006–1.119).
 */
const settleMs = (smoke: boolean): number => (smoke ? 3_000 : SETTLE_SPACING_MS + 5_000);

/** K Links and their Secrets, each naming the remote's gateway by address, selecting the export label. */
async function registerByLinks(fleet: Fleet, clusters: readonly string[]): Promise<void> {
  await fleet.ensureNamespace("local", LINKS_NAMESPACE);
  await installLinkCrd(fleet.kubeConfig("local"));
  await applyRbacYaml(fleet.kubeConfig("local"), LINKS_RBAC);
  await fleet.remoteToken("remote");
  await runPool(clusters, 8, async (cluster) => {
    await createLinkSecret(fleet, "remote", `cluster-credentials-${cluster}`);
    await createLink(
      fleet,
      cluster,
      linkSpec(cluster, {
        gatewayAddress: GATEWAY_IP,
        gatewayPort: String(GATEWAY_PORT),
        selector: { matchLabels: { [EXPORTED_LABEL]: "true" } },
      }),
    );
  });
}

/** Polls the local mirrors (every 500 ms, as memory.ts polls /status) until `mirrors` are right; resolves with that instant. */
async function everyMirrorRight(fleet: Fleet, mirrors: number, timeoutMs: number): Promise<number> {
  const client = localAdminClient(fleet);
  const deadline = Date.now() + timeoutMs;
  try {
    for (;;) {
      const [svcs, slices] = await Promise.all([
        listAll<Service>(client, "/api/v1/services", MIRROR_SELECTOR),
        listAll<KubeObject>(client, addressesPath("endpointslices"), MIRROR_SELECTOR),
      ]);
      const okServices = svcs.filter((s) => serviceHasPort(s, 80)).length;
      const okSlices = slices.filter((a) => addressesPointAt("endpointslices", a, GATEWAY_IP)).length;
      if (okServices === mirrors && okSlices === mirrors) return Date.now();
      if (Date.now() > deadline)
        throw new Error(
          `${okServices} Services and ${okSlices} slices right of ${mirrors} (${svcs.length}, ${slices.length} listed; a slice: ${JSON.stringify(slices[0] ?? null).slice(0, 1500)})`,
        );
      await sleep(500);
    }
  } finally {
    client.close();
  }
}

/** Link status patches the controller sent so far, from its /metrics text. */
function linkStatusPatchesIn(metrics: string): number {
  let sum = 0;
  for (const line of metrics.split("\n")) {
    const m = /^fleet_mirror_writes_total\{([^}]*)\} (\S+)$/.exec(line);
    if (m?.[1]?.includes('verb="patch"') && /resource="[^"]*link/i.test(m[1])) sum += Number(m[2]);
  }
  return sum;
}

/**
 * Polls the Links (every 500 ms) until each of `clusters` lists `services` mirrors, every
 * one `Mirrored`: the Links world's last work, its status patches, is done.
 */
async function everyLinkStatusRight(
  fleet: Fleet,
  clusters: number,
  services: number,
  timeoutMs: number,
): Promise<void> {
  const client = localAdminClient(fleet);
  const deadline = Date.now() + timeoutMs;
  type Listed = { items: { status?: LinkStatus }[] };
  const right = (status: LinkStatus | undefined): boolean =>
    status?.mirrorServices?.length === services &&
    status.mirrorServices.every((e) => e.conditions?.some((c) => c.type === "Mirrored" && c.status === "True"));
  try {
    for (;;) {
      const { items } = await client.request<Listed>("GET", linksPath(LINKS_NAMESPACE));
      const done = items.filter((l) => right(l.status)).length;
      if (done === clusters) return;
      if (Date.now() > deadline) throw new Error(`${done} of ${clusters} Links' statuses right`);
      await sleep(500);
    }
  } finally {
    client.close();
  }
}

async function run(
  by: RegisteredBy,
  clusters: number,
  services: number,
  timeoutMs: number,
  smoke: boolean,
): Promise<Record<string, unknown>> {
  const fleet = await Fleet.start(["remote"]);
  try {
    const names = await shapeRemote(fleet, "remote", {
      services,
      clusters,
      gatewayIp: GATEWAY_IP,
      exportBy: "label",
      register: by === "secrets",
    });
    if (by === "links") await registerByLinks(fleet, names);
    progress(`links: ${clusters} clusters × ${services} Services registered by ${by}, controller starting`);
    const started = Date.now();
    const [proc, admin] = await startController(fleet, [
      // The test fleet's processes default to `endpoints`: the default mode is asked for by name.
      "--endpoints-api",
      "endpointslices",
      ...(by === "links" ? ["--links", LINKS_NAMESPACE] : []),
    ]);
    try {
      await waitStatus(proc, admin, `${clusters} clusters synced`, allSynced(clusters), timeoutMs);
      const syncedMs = Date.now() - started;
      // Listing every mirror each 500 ms from the start loaded the API server the writer
      // was writing to (4 000 objects a poll): the mirrors are listed once the writer says
      // it is done, and again only if they are not right yet.
      await waitStatus(proc, admin, "the writer settled", writerSettled(clusters));
      const convergeMs = (await everyMirrorRight(fleet, clusters * services, timeoutMs)) - started;
      // The Links world's statuses are written once the mirrors are (SPEC §15: mirrors
      // first); its memory is measured once they are, as the other world's is once its
      // work is done, not in the middle of that burst.
      if (by === "links") await everyLinkStatusRight(fleet, clusters, services, timeoutMs);
      await sleep(settleMs(smoke));
      const memory = processRss(proc.child.pid ?? 0);
      const metrics = await adminMetrics(admin);
      const heaps = threadHeapsIn(metrics);
      const actorsHeap = [...heaps].filter(([t]) => t.startsWith("remote-cluster/")).reduce((sum, [, b]) => sum + b, 0);
      // The controller logs at warn: anything it said is a failure worth seeing beside the figures.
      const logged = proc.output.split("\n").filter((l) => l.trim() !== "");
      if (logged.length > 0)
        progress(
          `${by}: the controller logged ${logged.length} line(s): ${logged.slice(0, 5).join(" | ").slice(0, 1500)}`,
        );
      return {
        registeredBy: by,
        clusters,
        servicesPerCluster: services,
        mirrors: clusters * services,
        syncedMs,
        convergeMs,
        rssMb: mb(memory.rss),
        peakRssMb: mb(memory.peak),
        // Where the RSS is: anonymous against file-backed, and the V8 heaps in use by thread.
        rssAnonMb: mb(memory.anon),
        rssFileMb: mb(memory.file),
        threads: memory.threads,
        heapMainMb: mb(heaps.get("main") ?? Number.NaN),
        heapWriterMb: mb(heaps.get("local-writer") ?? Number.NaN),
        heapActorsMb: mb(actorsHeap),
        linkPatches: linkStatusPatchesIn(metrics),
        loggedLines: logged.length,
      };
    } finally {
      await proc.stop();
    }
  } finally {
    await fleet.stop();
  }
}

export async function runLinks(opts: BenchOptions): Promise<ScenarioResult> {
  const size = opts.smoke ? { clusters: 4, services: 3 } : { clusters: 100, services: 20 };
  const rows: Record<string, unknown>[] = [];
  const pairs = PAIRS.slice(0, opts.linksPairs ?? (opts.smoke ? 1 : PAIRS.length));
  for (const by of pairs.flat())
    rows.push(await run(by, size.clusters, size.services, opts.smoke ? 120_000 : 1_800_000, opts.smoke));
  const of = (by: RegisteredBy, key: string): number[] =>
    rows.filter((r) => r["registeredBy"] === by).map((r) => Number(r[key]));
  // Pair i is one run of each: Secrets' time over Links' time; Links' RSS over Secrets'.
  const convergeRatios = of("secrets", "convergeMs").map((s, i) =>
    round(s / (of("links", "convergeMs")[i] ?? Number.NaN), 3),
  );
  const rssRatios = of("links", "rssMb").map((l, i) => round(l / (of("secrets", "rssMb")[i] ?? Number.NaN), 3));
  // An odd number of pairs: the nearest-rank 50th percentile is their median.
  const convergeRatio = percentile(convergeRatios, 50) ?? Number.NaN;
  const rssRatio = percentile(rssRatios, 50) ?? Number.NaN;
  printTable(
    `Links against annotated Secrets (converge ratio = median of Secrets' / Links' time: ${convergeRatio}; RSS ratio = median of Links' / Secrets' RSS: ${rssRatio})`,
    rows,
  );
  writeResult(opts.out, "links", {
    smoke: opts.smoke,
    endpointsApi: "endpointslices",
    writeQps: "unlimited",
    pairs: pairs.length,
    order: rows.map((r) => r["registeredBy"]),
    convergeRatios,
    rssRatios,
    convergeRatio,
    rssRatio,
    runs: rows,
  });
  return {
    result: { runs: rows, convergeRatio, rssRatio },
    summary: opts.smoke ? {} : { links_converge_ratio: convergeRatio, links_rss_ratio: rssRatio },
  };
}
