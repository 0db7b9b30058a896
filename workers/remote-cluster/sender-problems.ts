/**
 * The problems of a cluster's remote Services, as the desired sender last computed
 * them, one per remote key and role (SPEC §3 mirrors, §11 members, §12 headless hosts
 * and MCS exports): a change is logged once and makes a status due.
 */
import type { MirrorProblem } from "../../src/core/desired.ts";
import type { LineLogger } from "../../src/log/json-lines.ts";

/**
 * What a problem is a problem of: a Service's mirror, its hosts, its membership, its
 * ServiceExport, or the whole key refused by the cluster's quota (mirror-quota.ts).
 */
export type ProblemRole = "exported" | "headless" | "member" | "mcs" | "quota";

const ROLES: readonly ProblemRole[] = ["exported", "headless", "member", "mcs", "quota"];

export class SenderProblems {
  readonly #byRole = new Map<ProblemRole, Map<string, MirrorProblem>>(ROLES.map((role) => [role, new Map()]));
  readonly #log: LineLogger;
  readonly #changed: () => void;

  constructor(log: LineLogger, changed: () => void) {
    this.#log = log;
    this.#changed = changed;
  }

  /** Every current problem, by role in the order above. */
  all(): MirrorProblem[] {
    return [...this.#byRole.values()].flatMap((problems) => [...problems.values()]);
  }

  /** Clears the problems of remote keys not in `keys` (gone from the cluster). */
  retain(keys: ReadonlySet<string>): void {
    for (const role of ROLES)
      for (const key of [...this.#of(role).keys()]) if (!keys.has(key)) this.set(role, key, undefined);
  }

  /** Records (or clears) a problem of one remote key; a change is logged and published. */
  set(role: ProblemRole, key: string, problem: MirrorProblem | undefined): void {
    const problems = this.#of(role);
    const previous = problems.get(key);
    if (previous?.message === problem?.message && previous?.reason === problem?.reason) return;
    this.#changed();
    const what =
      role === "exported"
        ? `exported Service ${key} is not mirrored`
        : role === "headless"
          ? `headless Service ${key} has hosts that are not mirrored`
          : role === "member"
            ? `Service ${key} is not a member`
            : role === "mcs"
              ? `ServiceExport ${key} does not export`
              : `remote key ${key} is over its cluster's quota of local Services`;
    if (problem) {
      problems.set(key, problem);
      this.#log.warn({ remote: key, reason: problem.reason }, `${what}: ${problem.message}`);
    } else {
      problems.delete(key);
      if (previous) this.#log.info({ remote: key }, `${what} any more: the problem is gone`);
    }
  }

  #of(role: ProblemRole): Map<string, MirrorProblem> {
    const problems = this.#byRole.get(role);
    if (!problems) throw new Error(`no problems of role ${role}`);
    return problems;
  }
}
