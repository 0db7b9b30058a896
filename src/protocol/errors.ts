/**
 * Errors as plain data, so they cross threads (structured clone keeps no class) and
 * land in logs and status without losing their cause chain.
 */
export interface SerializedError {
  readonly name: string;
  readonly message: string;
  /** Where it happened, e.g. `remote-cluster/east: list /api/v1/services`. */
  readonly where?: string;
  /** Whether retrying the same operation can help. */
  readonly retryable?: boolean;
  readonly code?: string | number;
  readonly stack?: string;
  readonly cause?: SerializedError;
}

function field(value: unknown, key: string): unknown {
  return typeof value === "object" && value !== null ? (value as Record<string, unknown>)[key] : undefined;
}

/** Turns anything thrown into plain data; follows `cause` up to 5 levels. */
export function serializeError(error: unknown, where?: string, depth = 0): SerializedError {
  if (error instanceof Error) {
    const code = field(error, "code") ?? field(error, "status");
    const retryable = field(error, "retryable");
    return {
      name: error.name,
      message: error.message,
      ...(where ? { where } : {}),
      ...(typeof retryable === "boolean" ? { retryable } : {}),
      ...(typeof code === "string" || typeof code === "number" ? { code } : {}),
      ...(error.stack ? { stack: error.stack } : {}),
      ...(error.cause !== undefined && depth < 5 ? { cause: serializeError(error.cause, undefined, depth + 1) } : {}),
    };
  }
  return {
    name: "NonError",
    message: typeof error === "string" ? error : (JSON.stringify(error) ?? String(error)),
    ...(where ? { where } : {}),
  };
}

/** One line: `where: message (caused by: ...)`. */
export function describeError(error: SerializedError): string {
  const head = `${error.where ? `${error.where}: ` : ""}${error.message}`;
  return error.cause ? `${head} (caused by: ${describeError(error.cause)})` : head;
}
