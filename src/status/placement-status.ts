/**
 * The placement of remote-cluster actors on threads, as data: the supervisor computes it
 * (src/supervisor/default-placement.ts), the admin server, the metrics and `status` read it.
 * Types only, so readers never import the supervisor.
 */
/** The placement in force, as `status` (/status) and /metrics show it. */
export interface PlacementStatus {
  /** How it was chosen: `auto` (the default), `isolated` (`--max-threads 0`) or `fixed` (`--max-threads N`). */
  readonly setting: "auto" | "isolated" | "fixed";
  /** In force now: `isolated` (a thread per cluster) or `packed` (threads shared by clusters). */
  readonly mode: "isolated" | "packed";
  /** Registered clusters with an actor. */
  readonly clusters: number;
  /** Actor threads alive now. */
  readonly threads: number;
  /** Packed: the thread slots; isolated: null (a thread per cluster). */
  readonly packedThreads: number | null;
  /** The most clusters that share one thread's fate now (heap exhaustion, a spinning event loop); 0 with no cluster. */
  readonly blastRadius: number;
  /** One line: the rule's inputs and outcome. */
  readonly reason: string;
}
