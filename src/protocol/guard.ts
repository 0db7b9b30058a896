/**
 * The receiving edge of a thread entry: every message from the parent port is decoded
 * here; one that does not decode is reported (one log line with the error and the
 * running count) and dropped, never thrown into the thread's event loop, where it
 * would end the thread and every actor on it. Both thread entries report alike.
 */
import { ProtocolError } from "./codec.ts";
import { type SerializedError, serializeError } from "./errors.ts";

/** The one logging call a guard needs (a pino Logger fits). */
export interface ProtocolErrorLog {
  error(fields: object, message: string): void;
}

/** Log line of every dropped message, the same in every thread. */
export const PROTOCOL_ERROR_LOG = "protocol error: message dropped";

export class InboundGuard<T> {
  readonly #decode: (value: unknown) => T;
  readonly #where: string;
  #rejected = 0;
  #last: SerializedError | undefined;

  /** `where` names the receiving edge in the reported error, e.g. `local-writer: parent port`. */
  constructor(decode: (value: unknown) => T, where: string) {
    this.#decode = decode;
    this.#where = where;
  }

  /** Messages rejected since the thread started: carried as `protocolErrors` in its status. */
  get rejected(): number {
    return this.#rejected;
  }

  /**
   * The decoded message, or undefined once `raw` has been reported to `log`, counted
   * and dropped. Never throws.
   */
  accept(raw: unknown, log: ProtocolErrorLog): T | undefined {
    try {
      return this.#decode(raw);
    } catch (error) {
      this.reject(error, log);
      return undefined;
    }
  }

  /** Reports and counts a message refused (did not decode, or e.g. a test hook that is off); returns the report. */
  reject(error: unknown, log: ProtocolErrorLog): SerializedError {
    this.#rejected += 1;
    const reported = error instanceof ProtocolError ? error : new ProtocolError(String(error), { cause: error });
    const err = serializeError(reported, this.#where);
    this.#last = err;
    log.error({ err, rejected: this.#rejected }, PROTOCOL_ERROR_LOG);
    return err;
  }

  /** The latest report, if any: what a refused init is answered with. */
  get lastRejection(): SerializedError | undefined {
    return this.#last;
  }
}
