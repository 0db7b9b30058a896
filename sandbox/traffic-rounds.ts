/**
 * Counting real traffic (traffic.ts) in rounds: the traffic tests, the traffic bench and
 * the demo's traffic line send a few requests at a fixed pace and count every outcome
 * by the cluster that answered (or the error). The judging functions are pure.
 */
import type { Outcome } from "./traffic-client.ts";

/** One round: when it started (ms since the epoch) and one outcome per request. */
export interface Round {
  readonly atMs: number;
  readonly outcomes: readonly Outcome[];
}

export interface Tally {
  /** Answers by the cluster named in them. */
  readonly answers: Readonly<Record<string, number>>;
  /** Failed requests by error code. */
  readonly errors: Readonly<Record<string, number>>;
  readonly total: number;
}

export function tally(outcomes: readonly Outcome[]): Tally {
  const answers: Record<string, number> = {};
  const errors: Record<string, number> = {};
  for (const outcome of outcomes) {
    if ("answer" in outcome) answers[outcome.answer] = (answers[outcome.answer] ?? 0) + 1;
    else errors[outcome.error] = (errors[outcome.error] ?? 0) + 1;
  }
  return { answers, errors, total: outcomes.length };
}

/** How an error code reads in a tally: what a person watching needs to tell apart. */
const ERROR_WORDS: Readonly<Record<string, string>> = {
  ECONNREFUSED: "refused",
  ENOTFOUND: "no such name",
  EAI_AGAIN: "no such name",
  TIMEOUT: "timed out",
};

/** `east 7, west 3` / `refused 2`: a tally in one line. */
export function describeTally(t: Tally): string {
  const errors = new Map<string, number>();
  for (const [code, n] of Object.entries(t.errors)) {
    const word = ERROR_WORDS[code] ?? code;
    errors.set(word, (errors.get(word) ?? 0) + n);
  }
  const parts = [
    ...Object.entries(t.answers)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([cluster, n]) => `${cluster} ${n}`),
    ...[...errors].sort(([a], [b]) => a.localeCompare(b)).map(([word, n]) => `${word} ${n}`),
  ];
  return parts.length > 0 ? parts.join(", ") : "none";
}

/** True when every outcome is an answer from one of `clusters`. */
export function allAnsweredBy(outcomes: readonly Outcome[], clusters: readonly string[]): boolean {
  return outcomes.every((o) => "answer" in o && clusters.includes(o.answer));
}

/**
 * The index of the first round of the trailing run of rounds in which `ok` holds, or
 * undefined when the last round fails it: from that round on, every round was ok.
 */
export function settledFrom(rounds: readonly Round[], ok: (round: Round) => boolean): number | undefined {
  let first: number | undefined;
  for (const [i, round] of rounds.entries()) {
    if (!ok(round)) first = undefined;
    else first ??= i;
  }
  return first;
}

/**
 * Sends a round every `roundMs` (each waits for the one before: a slow round delays the
 * next, never overlaps it) until `done(rounds)` or `maxMs` have passed since the first.
 */
export async function sendRounds(
  send: () => Promise<readonly Outcome[]>,
  options: { readonly roundMs: number; readonly maxMs: number; readonly done: (rounds: readonly Round[]) => boolean },
): Promise<Round[]> {
  const rounds: Round[] = [];
  const started = Date.now();
  for (let i = 0; ; i++) {
    const due = started + i * options.roundMs;
    if (due > Date.now()) await new Promise((resolve) => setTimeout(resolve, due - Date.now()));
    const atMs = Date.now();
    rounds.push({ atMs, outcomes: await send() });
    if (options.done(rounds) || Date.now() - started > options.maxMs) return rounds;
  }
}

export interface FailoverRun {
  /** Seconds from the gateway's death to the first round from which on every request was answered by a survivor; undefined if never. */
  readonly failoverS: number | undefined;
  /** Seconds of rounds after that, every request answered by a survivor. */
  readonly stableS: number;
  /** Requests sent, and those that failed, before the failover. */
  readonly sent: number;
  readonly failedBefore: number;
  readonly rounds: readonly Round[];
}

/**
 * Judges rounds sent after a gateway died at `diedAtMs`: when every request began to be
 * answered by `survivors` alone, and for how long that held.
 */
export function judgeFailover(rounds: readonly Round[], diedAtMs: number, survivors: readonly string[]): FailoverRun {
  const from = settledFrom(rounds, (r) => r.outcomes.length > 0 && allAnsweredBy(r.outcomes, survivors));
  const first = from === undefined ? undefined : rounds[from];
  const last = rounds.at(-1);
  const before = from === undefined ? rounds : rounds.slice(0, from);
  return {
    failoverS: first ? Math.max(0, first.atMs - diedAtMs) / 1000 : undefined,
    stableS: first && last ? (last.atMs - first.atMs) / 1000 : 0,
    sent: rounds.reduce((n, r) => n + r.outcomes.length, 0),
    failedBefore: before.reduce((n, r) => n + r.outcomes.filter((o) => "error" in o).length, 0),
    rounds,
  };
}
