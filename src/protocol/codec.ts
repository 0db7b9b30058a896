/**
 * Boundary decoding: turns a schema into a decoder that either returns the message,
 * deeply checked, or throws a `ProtocolError` naming the message type and the path of
 * the first bad field, e.g. `actor.status: status.problems[0].reason: expected string
 * but received 5`.
 *
 * Decoded values are fresh copies: object schemas drop keys they do not name, so a
 * receiver never sees a field its schema did not check. MessagePorts are passed through
 * as the same instances.
 */
import type { MessagePort } from "node:worker_threads";
import * as v from "valibot";

/** A cross-thread message (or a field of one) that does not have the shape its port expects. */
export class ProtocolError extends Error {
  override name = "ProtocolError";
}

/** Schema output, readonly all the way down (ports and functions are left as they are). */
export type DeepReadonly<T> = T extends MessagePort | ((...args: never[]) => unknown) | string | number | boolean
  ? T
  : T extends readonly (infer E)[]
    ? readonly DeepReadonly<E>[]
    : T extends object
      ? { readonly [K in keyof T]: DeepReadonly<T[K]> }
      : T;

/**
 * `true` when A and B accept the same values (mutually assignable; `readonly` aside).
 * Used as compile-time checks that a schema agrees with a type declared elsewhere.
 */
export type Agree<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
/** Fails to compile unless its argument is `true`. */
export type Assert<T extends true> = T;

/** Received values in error messages are cut short: a message must stay one readable line. */
const RECEIVED_MAX = 60;

function pathOf(issue: v.BaseIssue<unknown>): string {
  let out = "";
  for (const item of issue.path ?? []) {
    const key = item.key;
    if (typeof key === "number") out += `[${key}]`;
    else if (typeof key === "string" && /^[A-Za-z_$][\w$]*$/.test(key)) out += out === "" ? key : `.${key}`;
    else out += `[${JSON.stringify(String(key))}]`;
  }
  return out;
}

function detailOf(issue: v.BaseIssue<unknown>): string {
  if (issue.kind !== "schema" || issue.type === "custom" || issue.expected === null) return issue.message;
  // An object schema reports a missing key with the key's name as `expected`.
  if (issue.type === "object" && issue.received === "undefined") return "required field is missing";
  const received = issue.received.length > RECEIVED_MAX ? `${issue.received.slice(0, RECEIVED_MAX)}…` : issue.received;
  return `expected ${issue.expected} but received ${received}`;
}

/**
 * A decoder for messages of one port. `port` names the port in errors when the message
 * type itself is missing or unknown (e.g. `to writer: type: expected ... but received "x"`).
 *
 * @throws ProtocolError for any value `schema` rejects; never anything else.
 */
export function decoder<S extends v.GenericSchema>(port: string, schema: S): (value: unknown) => v.InferOutput<S> {
  return (value) => {
    const result = v.safeParse(schema, value, { abortEarly: true });
    if (result.success) return result.output;
    const issue = result.issues[0];
    const path = pathOf(issue);
    const type = (value as { type?: unknown } | null | undefined)?.type;
    // An unknown or missing type is named by the port; anything else by the message type.
    const where = typeof type === "string" && path !== "type" ? type : port;
    throw new ProtocolError(`${where}: ${path === "" ? "" : `${path}: `}${detailOf(issue)}`);
  };
}

// Scalars used by every schema, with their invariants.

/** A count or an index: a non-negative integer. */
export const count = v.pipe(v.number(), v.safeInteger("must be an integer"), v.minValue(0, "must be >= 0"));
/** A finite number (durations, timestamps, sums). */
export const finite = v.pipe(v.number(), v.finite("must be a finite number"));
/** A non-empty string (names, keys). */
export const name = v.pipe(v.string(), v.nonEmpty("must not be empty"));
export const stringRecord = v.record(v.string(), v.string());
export const countRecord = v.record(v.string(), count);
