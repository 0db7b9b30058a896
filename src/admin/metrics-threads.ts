/** Metrics of the threads: the placement of actors in force (src/supervisor/default-placement.ts) and each thread's V8 heap. */
import { Gauge } from "prom-client";
import type { ThreadHeap } from "../status/fleet-view.ts";
import type { PlacementStatus } from "../status/placement-status.ts";
import type { MetricBuilders } from "./metric-builders.ts";

/** Heap statistics fetched for one scrape are reused by the other heap gauge within this time. */
const HEAP_REUSE_MS = 500;

export function registerThreadMetrics(b: MetricBuilders): void {
  const { source } = b;
  // The placement in force (default-placement.ts); a standby has 0 threads and no info series.
  const placementGauge = (name: string, help: string, value: (p: PlacementStatus) => number): void =>
    b.labelled("gauge", name, help, [], (set) => {
      const placement = source.fleet()?.placement;
      if (placement) set({}, value(placement));
    });
  placementGauge("fleet_mirror_placement_threads", "Remote-cluster actor threads alive now.", (p) => p.threads);
  placementGauge(
    "fleet_mirror_placement_blast_radius_clusters",
    "The most clusters that share one actor thread's fate (heap exhaustion, a spinning event loop); 1 with a thread per cluster.",
    (p) => p.blastRadius,
  );
  placementGauge(
    "fleet_mirror_placement_packed_threads",
    "Shared actor thread slots once packed; 0 while every cluster has a thread of its own.",
    (p) => p.packedThreads ?? 0,
  );
  b.labelled(
    "gauge",
    "fleet_mirror_placement_info",
    "1 for the placement in force: setting (auto, isolated = --max-threads 0, fixed = --max-threads N) and mode (isolated, packed).",
    ["setting", "mode"],
    (set) => {
      const placement = source.fleet()?.placement;
      if (placement) set({ setting: placement.setting, mode: placement.mode }, 1);
    },
  );

  // Both heap gauges are read in one scrape: one request per thread serves both.
  let heaps: { readonly at: number; readonly promise: Promise<readonly ThreadHeap[]> } | undefined;
  const threadHeaps = (): Promise<readonly ThreadHeap[]> => {
    const now = Date.now();
    if (!heaps || now - heaps.at > HEAP_REUSE_MS) heaps = { at: now, promise: source.threadHeaps() };
    return heaps.promise;
  };
  for (const [name, help, pick] of [
    ["fleet_mirror_thread_heap_used_bytes", "V8 heap used by each thread.", (h: ThreadHeap) => h.used],
    ["fleet_mirror_thread_heap_limit_bytes", "V8 heap limit of each thread.", (h: ThreadHeap) => h.limit],
  ] as const) {
    new Gauge({
      name,
      help,
      labelNames: ["thread"],
      registers: [b.registry],
      async collect() {
        const current = await threadHeaps();
        this.reset();
        for (const h of current) this.set({ thread: h.thread }, pick(h));
      },
    });
  }
}
