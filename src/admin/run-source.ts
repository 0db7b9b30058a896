/**
 * The AdminSource (and MetricsSource) of `fleet-mirror run`, read through getters: the
 * Supervisor exists only while this replica leads (leader election creates and stops
 * it), so nothing here holds on to one.
 *
 * Health (/healthz, liveness: a failure restarts the Pod):
 * - a standby (not leading) is healthy: the process answers;
 * - a leader whose controller is not built yet is healthy (it is starting);
 * - a leader is unhealthy only when its local writer is crash-looping: it exited
 *   `crashLoopAfter` (5) times within the restart policy's window (10 min) without
 *   becoming ready in between. A writer restarting after an occasional crash is healthy
 *   — the supervisor restarts it within seconds, and restarting the Pod would not help.
 * Readiness (/readyz): a standby is ready (reason "standby: not leading"); a leader is
 * ready once its local writer has listed the local mirrors. Remote clusters are never
 * consulted: one unreachable remote must not take the Pod out of its Service.
 */
import type { Leadership } from "../leader/leadership.ts";
import { type FleetCounters, type FleetView, mainThreadHeap, type ThreadHeap } from "../status/fleet-view.ts";
import type { MetricsSource } from "./metrics.ts";
import type { AdminSource, Check } from "./source.ts";

export function runAdminSource(
  supervisor: () => FleetView | undefined,
  leadership: () => Leadership,
): AdminSource & MetricsSource {
  const running = (): FleetView | undefined => (leadership().leading ? supervisor() : undefined);
  return {
    fleet: () => running()?.status(),
    counters: (): FleetCounters | undefined => running()?.counters(),
    leadership,
    threadHeaps: async (): Promise<readonly ThreadHeap[]> => {
      const s = supervisor();
      if (s) return s.threadHeapStatistics();
      return [mainThreadHeap()]; // no controller: the main thread is the only one
    },
    healthy(): Check {
      const s = running();
      if (!s) return { ok: true };
      const writer = s.writerHealth();
      if (writer.crashLooping)
        return {
          ok: false,
          reason: `local writer is crash-looping (${writer.recentFailures} exits without becoming ready)`,
        };
      return { ok: true };
    },
    ready(): Check {
      if (!leadership().leading) return { ok: true, reason: "standby: not leading" };
      const s = supervisor();
      if (!s) return { ok: false, reason: "controller not started yet" };
      if (!s.writerReady) return { ok: false, reason: "local writer has not listed the local mirrors yet" };
      return { ok: true };
    },
  };
}
