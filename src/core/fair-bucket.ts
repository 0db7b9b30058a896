/**
 * A token bucket whose waiting callers take turns by lane (the local writer: by cluster),
 * so that one cluster with many writes waiting never makes another cluster's write wait
 * for all of them, and never for the bucket to refill: a busy lane cannot spend the
 * bucket's last tokens, which are kept for the lanes that write little.
 */
import { type Clock, systemClock, type TimerHandle } from "./clock.ts";
import { LanedFifo } from "./fifo.ts";
import { TokenBucket } from "./rate-limit.ts";

/** When heavy lanes have waited this long without a token, one of their callers is served from the reserve: delayed, never starved. */
export const HEAVY_MAX_WAIT_MS = 1_000;
/** The window over which a lane's tokens are counted to tell whether it is heavy. */
const WINDOW_MS = 1_000;

/**
 * `qps` tokens per second, at most `burst` stored, the bucket starting full (TokenBucket's
 * rules; `qps <= 0`: unlimited).
 *
 * Lanes are light or heavy. A lane is heavy while it took at least `heavyPerWindow`
 * tokens (a quarter of the rate's tokens per second, at least 2) in the current or the
 * previous second: a cluster converging or churning. The bucket keeps a reserve of
 * ⌊burst / 2⌋ tokens that only light lanes may spend, so a quiet cluster's write goes out
 * at once while a busy one holds the rest of the rate, however long its backlog; a
 * heavy lane alone still gets the whole rate (it takes every token above the reserve as
 * it falls due), and loses only half the burst.
 *
 * Waiting callers: light lanes' first, taking turns (round robin over the lanes with
 * callers waiting, one token per turn; first come, first served within a lane); then
 * heavy lanes' the same way, each while the bucket holds more than the reserve; and when
 * heavy lanes have waited HEAVY_MAX_WAIT_MS without a token, one of them from the
 * reserve (so light lanes that take the whole rate delay the heavy ones, never starve
 * them, and a heavy backlog spends at most one reserve token per HEAVY_MAX_WAIT_MS).
 *
 * Tokens are never lost or handed out twice: a caller is resolved only with a token
 * taken from the bucket for it. Waiting callers are held until served (no abort): the
 * writer's calls always end, at the rate's pace. Memory: the lanes that took a token in
 * the last two windows, and the callers waiting.
 */
export class FairTokenBucket {
  readonly #bucket: TokenBucket;
  readonly #clock: Clock;
  readonly #reserve: number;
  readonly #heavyPerWindow: number;
  /** Waiting callers, each resolved (and its token counted) when served. */
  readonly #light = new LanedFifo<() => void>();
  readonly #heavy = new LanedFifo<() => void>();
  /** Tokens taken by lane in the current window and the one before. */
  #current = new Map<string, number>();
  #previous = new Map<string, number>();
  #windowStart: number;
  /** Since when heavy lanes have waited without a token (meaningful while some wait). */
  #heavyWaitingSince = 0;
  #timer: TimerHandle | undefined;

  /** @throws RangeError as TokenBucket's constructor. */
  constructor(qps: number, burst: number, clock: Clock = systemClock) {
    this.#bucket = new TokenBucket(qps, burst, clock);
    this.#clock = clock;
    this.#reserve = this.#bucket.unlimited ? 0 : Math.floor(burst / 2);
    this.#heavyPerWindow = Math.max(2, Math.ceil(qps / 4));
    this.#windowStart = clock.now();
  }

  /** Callers waiting for a token. */
  get waiting(): number {
    return this.#light.length + this.#heavy.length;
  }

  /** Whether `lane` counts as heavy now (it took many tokens lately). */
  isHeavy(lane: string): boolean {
    this.#roll();
    return (
      (this.#current.get(lane) ?? 0) >= this.#heavyPerWindow || (this.#previous.get(lane) ?? 0) >= this.#heavyPerWindow
    );
  }

  /** Resolves once a token is taken for this caller, in `lane`'s turn. */
  take(lane: string): Promise<void> {
    const heavy = this.isHeavy(lane);
    const queue = heavy ? this.#heavy : this.#light;
    if (
      this.#light.length === 0 &&
      queue.length === 0 &&
      !this.#heavyStarved() &&
      this.#bucket.tryTake(heavy ? this.#reserve : 0)
    ) {
      this.#count(lane);
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      if (heavy && this.#heavy.length === 0) this.#heavyWaitingSince = this.#clock.now();
      queue.push(lane, () => {
        this.#count(lane);
        resolve();
      });
      this.#arm();
    });
  }

  #serveHeavy(): void {
    this.#heavy.shift()?.();
    this.#heavyWaitingSince = this.#clock.now();
  }

  #count(lane: string): void {
    this.#roll();
    this.#current.set(lane, (this.#current.get(lane) ?? 0) + 1);
  }

  /** Starts a new window when the current one is over (the one before it is forgotten). */
  #roll(): void {
    const now = this.#clock.now();
    if (now - this.#windowStart < WINDOW_MS) return;
    this.#previous = now - this.#windowStart < 2 * WINDOW_MS ? this.#current : new Map();
    this.#current = new Map();
    this.#windowStart = now;
  }

  /** One timer at a time, due when the next waiting caller may be served. */
  #arm(): void {
    if (this.#timer !== undefined || this.waiting === 0) return;
    let delay: number;
    if (this.#light.length > 0 || this.#heavyStarved()) delay = this.#bucket.delayUntilNextToken();
    else {
      const starved = Math.max(0, this.#heavyWaitingSince + HEAVY_MAX_WAIT_MS - this.#clock.now());
      delay = Math.min(
        this.#bucket.delayUntilNextToken(this.#reserve),
        Math.max(starved, this.#bucket.delayUntilNextToken()),
      );
    }
    this.#timer = this.#clock.setTimeout(() => {
      this.#timer = undefined;
      this.#release();
    }, delay);
  }

  /** Heavy lanes have waited HEAVY_MAX_WAIT_MS without a token: the next token is theirs. */
  #heavyStarved(): boolean {
    return this.#heavy.length > 0 && this.#clock.now() - this.#heavyWaitingSince >= HEAVY_MAX_WAIT_MS;
  }

  /** Hands every token due now to the waiting callers: a starved heavy lane's, light lanes', then heavy ones'. */
  #release(): void {
    if (this.#heavyStarved() && this.#bucket.tryTake()) this.#serveHeavy();
    while (this.#light.length > 0 && this.#bucket.tryTake()) this.#light.shift()?.();
    while (this.#light.length === 0 && this.#heavy.length > 0 && this.#bucket.tryTake(this.#reserve))
      this.#serveHeavy();
    this.#arm();
  }
}
