/** The /metrics text of an in-process controller, as its admin server would serve it (not leader-elected). */
import { createMetrics } from "../../src/admin/metrics.ts";
import type { Supervisor } from "../../src/supervisor/supervisor.ts";

export function supervisorMetrics(controller: Supervisor): Promise<string> {
  return createMetrics({
    fleet: () => controller.status(),
    counters: () => controller.counters(),
    leadership: () => ({ enabled: false, leading: true, identity: "test" }),
    threadHeaps: async () => [],
  }).metrics();
}
