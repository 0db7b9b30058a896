/**
 * The actor's report of the API answers it holds (`actor.load`): when a shared thread's
 * heap runs out, the supervisor charges the actor that held the most
 * (src/supervisor/actor-endings.ts), not its neighbours. An actor's heap is mostly
 * what it lists, and one large answer (and the objects decoded from it) is what
 * outgrows a thread's limit.
 *
 * Reported in steps: when the bytes held pass `LOAD_REPORT_BYTES`, at each doubling above
 * it, at each halving back, and once when they fall below (0). So an answer of the
 * default 64 MiB cap costs at most a few messages up and as many down, and the small
 * answers of a steady cluster none.
 */

/** Bytes of answers held from which the actor reports them: far above a page of an ordinary list. */
export const LOAD_REPORT_BYTES = 8 * 2 ** 20;

export class LoadReporter {
  readonly #send: (bytes: number) => void;
  /** 0: below LOAD_REPORT_BYTES; n ≥ 1: at least LOAD_REPORT_BYTES · 2^(n-1). */
  #level = 0;

  constructor(send: (bytes: number) => void) {
    this.#send = send;
  }

  /** The bytes held now (the API client's `onHeldBytes`). */
  held(bytes: number): void {
    const level = bytes < LOAD_REPORT_BYTES ? 0 : Math.floor(Math.log2(bytes / LOAD_REPORT_BYTES)) + 1;
    if (level === this.#level) return;
    this.#level = level;
    this.#send(level === 0 ? 0 : bytes);
  }
}
