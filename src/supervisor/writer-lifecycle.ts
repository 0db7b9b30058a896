/**
 * The local writer's lifecycle in the supervisor, as a pure function:
 * `writerTransition(state, event, now) → { state, effects }`; writer-runner.ts performs
 * the effects. One writer thread at a time, restarted after every exit with the
 * restart policy's backoff (never given up on: without a writer nothing is mirrored).
 *
 * Events for the local API (`writer.event`) are handed over only while the writer is
 * ready. Meanwhile (starting, restarting) they wait in a bounded outbox, oldest dropped
 * when full (counted and logged), and are handed over in order when it is ready again:
 * an Event the supervisor reported is never lost silently between two writers.
 * Everything else the writer needs (keep set, attachments, fence) is state, re-sent to
 * every new writer when it is ready, so it needs no queue.
 */
import type { SerializedError } from "../protocol/errors.ts";
import { describeError } from "../protocol/errors.ts";
import type { EventRequest } from "../protocol/messages.ts";
import { decideRestart, type RestartPolicy } from "./restart-policy.ts";

/** Events waiting for a writer, at most. */
export const EVENT_OUTBOX_MAX = 1_000;

export interface WriterLifecycleState {
  readonly policy: RestartPolicy;
  readonly stopTimeoutMs: number;
  readonly phase: "idle" | "starting" | "ready" | "backoff" | "stopping" | "stopped";
  /** Exit times inside the policy's window, since it was last ready. */
  readonly failures: readonly number[];
  readonly restarts: number;
  readonly lastError: SerializedError | undefined;
  readonly outbox: readonly EventRequest[];
  readonly eventsDropped: number;
}

export type WriterLifecycleEvent =
  | { readonly type: "start" }
  | { readonly type: "ready" }
  | { readonly type: "failed"; readonly error: SerializedError }
  | { readonly type: "thread-error"; readonly error: SerializedError }
  | { readonly type: "exited"; readonly code: number }
  | { readonly type: "restart-timer-fired" }
  | { readonly type: "event"; readonly event: EventRequest }
  | { readonly type: "stop" }
  | { readonly type: "stop-timeout" };

export type WriterLifecycleEffect =
  /** Spawn a writer thread and post it `writer.init` (and the latest fence). */
  | { readonly type: "spawn" }
  /** The writer is ready: send it the keep set and a channel per running actor. */
  | { readonly type: "attach-all" }
  | { readonly type: "post-event"; readonly event: EventRequest }
  | { readonly type: "post-stop" }
  | { readonly type: "terminate" }
  | { readonly type: "start-timer"; readonly ms: number; readonly event: WriterLifecycleEvent }
  | { readonly type: "cancel-timer" }
  | {
      readonly type: "log";
      readonly level: "warn" | "error";
      readonly fields: Readonly<Record<string, unknown>>;
      readonly message: string;
    };

export interface WriterTransition {
  readonly state: WriterLifecycleState;
  readonly effects: readonly WriterLifecycleEffect[];
}

export function initialWriterState(policy: RestartPolicy, stopTimeoutMs: number): WriterLifecycleState {
  return {
    policy,
    stopTimeoutMs,
    phase: "idle",
    failures: [],
    restarts: 0,
    lastError: undefined,
    outbox: [],
    eventsDropped: 0,
  };
}

export function writerTransition(s: WriterLifecycleState, e: WriterLifecycleEvent, now: number): WriterTransition {
  switch (e.type) {
    case "start":
      return s.phase === "idle"
        ? { state: { ...s, phase: "starting" }, effects: [{ type: "spawn" }] }
        : { state: s, effects: [] };
    case "ready": {
      if (s.phase !== "starting") return { state: s, effects: [] };
      const effects: WriterLifecycleEffect[] = [{ type: "attach-all" }];
      for (const event of s.outbox) effects.push({ type: "post-event", event });
      return { state: { ...s, phase: "ready", failures: [], outbox: [] }, effects };
    }
    case "event": {
      if (s.phase === "ready") return { state: s, effects: [{ type: "post-event", event: e.event }] };
      if (s.phase === "stopping" || s.phase === "stopped") return { state: s, effects: [] }; // shutting down: no writer will take it
      const outbox = [...s.outbox, e.event];
      if (outbox.length <= EVENT_OUTBOX_MAX) return { state: { ...s, outbox }, effects: [] };
      const dropped = outbox.shift();
      const eventsDropped = s.eventsDropped + 1;
      const message = `no writer to take Event ${dropped?.reason} on ${dropped?.involved.kind} ${dropped?.involved.namespace}/${dropped?.involved.name}: dropped (outbox of ${EVENT_OUTBOX_MAX} full; ${eventsDropped} dropped so far)`;
      return {
        state: { ...s, outbox, eventsDropped },
        effects: [{ type: "log", level: "warn", fields: { eventsDropped }, message }],
      };
    }
    case "failed":
      return { state: { ...s, lastError: e.error }, effects: [{ type: "terminate" }] };
    case "thread-error":
      return { state: { ...s, lastError: e.error }, effects: [] };
    case "exited": {
      if (s.phase === "stopping" || s.phase === "stopped")
        return { state: { ...s, phase: "stopped" }, effects: [{ type: "cancel-timer" }] };
      if (s.phase !== "starting" && s.phase !== "ready") return { state: s, effects: [] };
      // A writer is never given up on: no crash loop here, only the backoff (health reports the loop).
      const decision = decideRestart([...s.failures, now], now, {
        ...s.policy,
        crashLoopAfter: Number.POSITIVE_INFINITY,
      });
      const why = s.lastError ? describeError(s.lastError) : `code ${e.code}`;
      return {
        state: { ...s, phase: "backoff", failures: decision.recent, restarts: s.restarts + 1, lastError: undefined },
        effects: [
          {
            type: "log",
            level: "error",
            fields: { code: e.code, err: s.lastError },
            message: `local writer exited (${why}); restarting in ${decision.delayMs} ms`,
          },
          { type: "start-timer", ms: decision.delayMs, event: { type: "restart-timer-fired" } },
        ],
      };
    }
    case "restart-timer-fired":
      return s.phase === "backoff"
        ? { state: { ...s, phase: "starting" }, effects: [{ type: "spawn" }] }
        : { state: s, effects: [] };
    case "stop":
      if (s.phase === "starting" || s.phase === "ready")
        return {
          state: { ...s, phase: "stopping" },
          effects: [
            { type: "post-stop" },
            { type: "start-timer", ms: s.stopTimeoutMs, event: { type: "stop-timeout" } },
          ],
        };
      if (s.phase === "stopping" || s.phase === "stopped") return { state: s, effects: [] };
      return { state: { ...s, phase: "stopped" }, effects: [{ type: "cancel-timer" }] };
    case "stop-timeout":
      return s.phase === "stopping" ? { state: s, effects: [{ type: "terminate" }] } : { state: s, effects: [] };
    default: {
      const never: never = e;
      throw new Error(`unknown writer lifecycle event ${JSON.stringify(never)}`);
    }
  }
}
