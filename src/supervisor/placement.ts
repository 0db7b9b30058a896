/**
 * Placement of remote-cluster actors on actor threads, as a pure function.
 *
 * With `--max-threads N` (N > 0) every registered cluster is assigned a thread slot
 * 0..N-1. The assignment is:
 * - stable: a cluster keeps its slot for as long as it is registered (a crash, a
 *   restart or a credentials rotation never moves it; adding or removing another
 *   cluster never moves it either);
 * - filling before packing: up to N clusters each get a slot of their own;
 * - balanced for additions: a new cluster goes to the least-loaded slot (lowest index
 *   on a tie), so as long as clusters are only added, slot sizes differ by at most 1.
 *   Removals can leave slots uneven; the next additions fill the emptiest slots first.
 *   Existing actors are never moved to even out (moving one means restarting it).
 *
 * N = 0 means unlimited: one thread per cluster for the life of each incarnation; the
 * supervisor does not use this function then.
 */

/** Cluster name → thread slot (0..maxThreads-1). */
export type Assignment = ReadonlyMap<string, number>;

/**
 * @param clusters the registered clusters (any order; they are placed in sorted order)
 * @param current the previous assignment (clusters no longer registered are dropped)
 * @param maxThreads N > 0: the number of slots
 * @throws RangeError when maxThreads is not a positive integer
 */
export function placeClusters(
  clusters: Iterable<string>,
  current: Assignment,
  maxThreads: number,
): Map<string, number> {
  if (!Number.isInteger(maxThreads) || maxThreads < 1)
    throw new RangeError(`maxThreads must be a positive integer, got ${maxThreads}`);
  const names = [...new Set(clusters)].sort();
  const next = new Map<string, number>();
  const load = new Array<number>(maxThreads).fill(0);
  for (const name of names) {
    const slot = current.get(name);
    if (slot !== undefined && Number.isInteger(slot) && slot >= 0 && slot < maxThreads) {
      next.set(name, slot);
      load[slot] = (load[slot] ?? 0) + 1;
    }
  }
  for (const name of names) {
    if (next.has(name)) continue;
    let best = 0;
    for (let slot = 1; slot < maxThreads; slot++) if ((load[slot] ?? 0) < (load[best] ?? 0)) best = slot;
    next.set(name, best);
    load[best] = (load[best] ?? 0) + 1;
  }
  return next;
}

/** Slot sizes of an assignment (index = slot). */
export function slotSizes(assignment: Assignment, maxThreads: number): number[] {
  const sizes = new Array<number>(maxThreads).fill(0);
  for (const slot of assignment.values()) sizes[slot] = (sizes[slot] ?? 0) + 1;
  return sizes;
}
