/**
 * A token bucket whose waiting callers take turns by lane (the local writer: by cluster),
 * so that one cluster with many writes waiting never makes another cluster's write wait
 * for all of them: the share of the rate limit each busy lane gets is equal.
 */
import { type Clock, systemClock, type TimerHandle } from "./clock.ts";
import { LanedFifo } from "./fifo.ts";
import { TokenBucket } from "./rate-limit.ts";

/**
 * `qps` tokens per second, at most `burst` stored, the bucket starting full (TokenBucket's
 * rules; `qps <= 0`: unlimited). A `take` that finds a token free and nobody waiting gets
 * it at once; otherwise it waits in its lane. Each token that falls due goes to the lane
 * whose turn it is (round robin over the lanes with callers waiting, one token per turn;
 * first come, first served within a lane). So a caller of a lane nobody else waits in
 * gets a token after at most one token per other waiting lane, whatever their queues.
 *
 * Tokens are never lost or handed out twice: a caller is resolved only with a token
 * taken from the bucket for it. Waiting callers are held until served (no abort):
 * the writer's calls always end, at the rate's pace.
 */
export class FairTokenBucket {
  readonly #bucket: TokenBucket;
  readonly #clock: Clock;
  readonly #waiting = new LanedFifo<() => void>();
  #timer: TimerHandle | undefined;

  /** @throws RangeError as TokenBucket's constructor. */
  constructor(qps: number, burst: number, clock: Clock = systemClock) {
    this.#bucket = new TokenBucket(qps, burst, clock);
    this.#clock = clock;
  }

  /** Callers waiting for a token. */
  get waiting(): number {
    return this.#waiting.length;
  }

  /** Resolves once a token is taken for this caller, in `lane`'s turn. */
  take(lane: string): Promise<void> {
    if (this.#waiting.length === 0 && this.#bucket.tryTake()) return Promise.resolve();
    return new Promise<void>((resolve) => {
      this.#waiting.push(lane, resolve);
      this.#arm();
    });
  }

  /** One timer at a time, due when the bucket's next token is. */
  #arm(): void {
    if (this.#timer !== undefined || this.#waiting.length === 0) return;
    this.#timer = this.#clock.setTimeout(() => {
      this.#timer = undefined;
      this.#release();
    }, this.#bucket.delayUntilNextToken());
  }

  /** Hands every token due now to the waiting callers, lane by lane in turn. */
  #release(): void {
    while (this.#waiting.length > 0 && this.#bucket.tryTake()) this.#waiting.shift()?.();
    this.#arm();
  }
}
