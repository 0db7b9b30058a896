/**
 * The stages in which the local writer sends one key's planned writes. A plan is an
 * ordered list, and most of its order matters: a Namespace before what lives in it, a
 * new Service before its slices (they need its uid), an existing Service after its
 * addresses, deletes after the writes (a Service's delete last). What does not: writes
 * of distinct EndpointSlices listed one after another. Each is its own object with its
 * own resourceVersion precondition, and none is read to write another, so they go out
 * together: a fleet-wide Service's tier switch rewrites a part per member cluster (SPEC
 * §14), and sent one after another they held the key, and a worker, for one round trip
 * each.
 *
 * Invariants (test/unit/write-stages.test.ts):
 * - the stages, concatenated, are the actions in their order;
 * - a stage of more than one action holds only creates and updates of EndpointSlices,
 *   each a different slice;
 * - every other action is a stage of its own, so each order the plan states between it
 *   and anything else holds.
 */
import type { WriteAction } from "./mirror-kinds.ts";

/** The slice `action` creates or updates (`namespace/name`); undefined for any other action. */
function sliceWritten(action: WriteAction): string | undefined {
  if (action.kind !== "EndpointSlice" || action.verb === "delete") return undefined;
  return "namespace" in action ? `${action.namespace}/${action.name}` : undefined;
}

export function writeStages(actions: readonly WriteAction[]): WriteAction[][] {
  const stages: WriteAction[][] = [];
  /** The stage of slice writes being gathered, and the slices it writes. */
  let run: { stage: WriteAction[]; slices: Set<string> } | undefined;
  for (const action of actions) {
    const slice = sliceWritten(action);
    if (slice !== undefined && run && !run.slices.has(slice)) {
      run.stage.push(action);
      run.slices.add(slice);
      continue;
    }
    const stage = [action];
    stages.push(stage);
    run = slice !== undefined ? { stage, slices: new Set([slice]) } : undefined;
  }
  return stages;
}
