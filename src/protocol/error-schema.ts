/**
 * Schema of `SerializedError` (errors.ts), the error data every `*.failed` message and
 * the writer's status carry.
 *
 * The cause chain is decoded to at most `MAX_CAUSE_DEPTH` levels: `serializeError`
 * writes at most 6, and structured clone can carry a cycle (`a.cause === a`), which an
 * unbounded recursive schema would follow until the stack overflows.
 */
import * as v from "valibot";
import { type Agree, type Assert, finite } from "./codec.ts";
import type { SerializedError } from "./errors.ts";

/** Levels of `cause` a decoded error may have (the error itself is level 0). */
export const MAX_CAUSE_DEPTH = 8;

/** One level of the chain; `cause` decodes the next level down. */
function errorLevel(cause: v.GenericSchema<SerializedError>) {
  return v.object({
    name: v.string(),
    message: v.string(),
    where: v.exactOptional(v.string()),
    retryable: v.exactOptional(v.boolean()),
    code: v.exactOptional(v.union([v.string(), finite])),
    stack: v.exactOptional(v.string()),
    cause: v.exactOptional(cause),
  });
}
type _ErrorAgrees = Assert<Agree<v.InferOutput<ReturnType<typeof errorLevel>>, SerializedError>>;

/** Built once, bottom-up: the deepest level accepts no further cause. */
function chain(): v.GenericSchema<SerializedError> {
  let schema: v.GenericSchema<SerializedError> = v.custom<SerializedError>(
    () => false,
    `cause chain deeper than ${MAX_CAUSE_DEPTH} levels`,
  );
  for (let level = 0; level <= MAX_CAUSE_DEPTH; level++) schema = errorLevel(schema);
  return schema;
}

export const SerializedErrorSchema: v.GenericSchema<SerializedError> = chain();
