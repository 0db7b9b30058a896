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

/** What one window of WINDOW_MS saw. */
interface Window {
  /** Tokens taken, by lane. */
  readonly taken: Map<string, number>;
  /**
   * Lanes that took a token while light and have not turned heavy since (a cluster's
   * first tokens, before it counts as heavy, must not cap it).
   */
  readonly light: Set<string>;
  /**
   * Lanes the busy share held: they stay heavy through this window and the next. A held
   * lane takes fewer tokens than the heavy threshold when the share is below it (at the
   * default 50 writes/s, 12.5 a second against 13); without this it would turn light
   * between two of its writes and spend the quiet lanes' reserve.
   */
  readonly held: Set<string>;
}

function emptyWindow(): Window {
  return { taken: new Map(), light: new Set(), held: new Set() };
}

/**
 * `qps` tokens per second, at most `burst` stored, the bucket starting full (TokenBucket's
 * rules; `qps <= 0`: unlimited).
 *
 * Lanes are light or heavy. A lane is heavy while it took at least `heavyPerWindow`
 * tokens (a quarter of the rate's tokens per second, at least 2) in the current or the
 * previous second, while callers of it wait among the heavy ones, or while the busy
 * share held it in the current or the previous second: a cluster converging or churning. The bucket keeps a reserve of ⌊burst / 2⌋ tokens that only
 * light lanes may spend, so a quiet cluster's write goes out at once while a busy one
 * holds the rest of the rate, however long its backlog; a heavy lane alone still gets
 * the whole rate (it takes every token above the reserve as it falls due), and loses
 * only half the burst.
 *
 * The busy share (`busyPercent` of the rate, 100: none): while light lanes write (took a
 * token in the current or the previous second, or wait for one), the heavy lanes
 * together take at most this share of the rate, evenly spread (a second bucket of that
 * rate and a burst of a tenth of a second's tokens). This is not work-conserving on
 * purpose: every write costs the local API server CPU that the quiet clusters' writes
 * then wait for, and a cluster churning at full speed would double their latency even
 * when it only takes the tokens they leave. With no light lane writing, the cap lifts
 * within two seconds, and a busy lane has the whole rate again. Callers that `take`
 * as exempt are not held by the share (the writer: writes that move traffic, such as a
 * failover's, and the objects all clusters share): they wait only for the reserve.
 *
 * Waiting callers: light lanes' first, taking turns (round robin over the lanes with
 * callers waiting, one token per turn; first come, first served within a lane); then
 * heavy lanes' the same way, each while the bucket holds more than the reserve (and the
 * busy share has a token); and when heavy lanes have waited HEAVY_MAX_WAIT_MS without a
 * token, one of them from the reserve (so light lanes that take the whole rate delay the
 * heavy ones, never starve them, and a heavy backlog spends at most one reserve token
 * per HEAVY_MAX_WAIT_MS).
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
  /** The heavy lanes' share of the rate while light lanes write; undefined: no cap. */
  readonly #busy: TokenBucket | undefined;
  /** Waiting callers, each resolved (and its token counted) when served. */
  readonly #light = new LanedFifo<() => void>();
  readonly #heavy = new LanedFifo<() => void>();
  /** Callers held by the busy share, by lane, since the start (`held`). */
  readonly #held = new Map<string, number>();
  /** Heavy lanes' callers that the busy share does not hold (`take`'s `exempt`). */
  readonly #heavyExempt = new LanedFifo<() => void>();
  /** What the current window saw, and the one before it. */
  #current = emptyWindow();
  #previous = emptyWindow();
  #windowStart: number;
  /** Since when heavy lanes have waited without a token (meaningful while some wait). */
  #heavyWaitingSince = 0;
  #timer: TimerHandle | undefined;

  /**
   * @param busyPercent the heavy lanes' share of the rate while light lanes write, in
   *   percent (1–100; 100: no cap).
   * @throws RangeError as TokenBucket's constructor, or for a busyPercent out of range.
   */
  constructor(qps: number, burst: number, clock: Clock = systemClock, busyPercent = 100) {
    if (!(Number.isInteger(busyPercent) && busyPercent >= 1 && busyPercent <= 100))
      throw new RangeError(`FairTokenBucket busyPercent must be an integer from 1 to 100 (got ${busyPercent})`);
    this.#bucket = new TokenBucket(qps, burst, clock);
    this.#clock = clock;
    this.#reserve = this.#bucket.unlimited ? 0 : Math.floor(burst / 2);
    this.#heavyPerWindow = Math.max(2, Math.ceil(qps / 4));
    const busyQps = (qps * busyPercent) / 100;
    this.#busy =
      this.#bucket.unlimited || busyPercent === 100
        ? undefined
        : new TokenBucket(busyQps, Math.max(1, Math.ceil(busyQps / 10)), clock);
    this.#windowStart = clock.now();
  }

  /** Callers waiting for a token. */
  get waiting(): number {
    return this.#light.length + this.#heavy.length + this.#heavyExempt.length;
  }

  /** Whether `lane` counts as heavy now (it took many tokens lately). */
  isHeavy(lane: string): boolean {
    this.#roll();
    return (
      (this.#current.taken.get(lane) ?? 0) >= this.#heavyPerWindow ||
      (this.#previous.taken.get(lane) ?? 0) >= this.#heavyPerWindow ||
      this.#heavy.has(lane) ||
      this.#heavyExempt.has(lane) ||
      this.#current.held.has(lane) ||
      this.#previous.held.has(lane)
    );
  }

  /**
   * Callers held by the busy share, by lane, since the start: a heavy lane's caller
   * that waited and was served while the share capped (the writer: a cluster's writes
   * held while quieter clusters wrote). Lanes never held are absent.
   */
  get held(): ReadonlyMap<string, number> {
    return this.#held;
  }

  /** Whether the busy share caps the heavy lanes now: light lanes wrote lately, or wait. */
  get capped(): boolean {
    if (this.#busy === undefined) return false;
    this.#roll();
    return this.#light.length > 0 || this.#current.light.size > 0 || this.#previous.light.size > 0;
  }

  /**
   * Whether a key of `lane` may take another of the writer's `workers`, `inFlight` of
   * them held by the lane already: while the busy share caps, a heavy lane holds at most
   * half of them. Its keys would only wait there for their tokens, and a quiet cluster's
   * key for a free worker.
   */
  mayStart(lane: string, inFlight: number, workers: number): boolean {
    return inFlight < Math.max(1, Math.floor(workers / 2)) || !this.capped || !this.isHeavy(lane);
  }

  /**
   * Resolves once a token is taken for this caller, in `lane`'s turn. `exempt`: the busy
   * share does not hold this caller back (the writer: a write that moves traffic, or one
   * of the objects all clusters share); the reserve still does.
   */
  take(lane: string, exempt = false): Promise<void> {
    const heavy = this.isHeavy(lane);
    const queue = !heavy ? this.#light : exempt ? this.#heavyExempt : this.#heavy;
    if (
      this.#light.length === 0 &&
      queue.length === 0 &&
      !this.#heavyStarved() &&
      (!heavy ? this.#bucket.tryTake() : exempt ? this.#bucket.tryTake(this.#reserve) : this.#tryTakeHeavy())
    ) {
      this.#count(lane, !heavy);
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      if (heavy && this.#heavyWaiting === 0) this.#heavyWaitingSince = this.#clock.now();
      queue.push(lane, () => {
        this.#count(lane, !heavy);
        resolve();
      });
      this.#arm();
    });
  }

  /** A heavy lane's token: above the reserve, and within the busy share while it caps. */
  #tryTakeHeavy(): boolean {
    const busy = this.capped ? this.#busy : undefined;
    if (busy !== undefined && busy.delayUntilNextToken() > 0) return false;
    if (!this.#bucket.tryTake(this.#reserve)) return false;
    busy?.tryTake();
    return true;
  }

  /** ms until `#tryTakeHeavy` may succeed. */
  #heavyDelay(): number {
    const own = this.#bucket.delayUntilNextToken(this.#reserve);
    const busy = this.capped ? this.#busy : undefined;
    return busy === undefined ? own : Math.max(own, busy.delayUntilNextToken());
  }

  /** Heavy lanes' callers waiting, held by the busy share or not. */
  get #heavyWaiting(): number {
    return this.#heavy.length + this.#heavyExempt.length;
  }

  #serveHeavy(queue: LanedFifo<() => void>): void {
    const next = queue.next();
    if (next === undefined) return;
    if (queue === this.#heavy && this.capped) {
      this.#held.set(next.lane, (this.#held.get(next.lane) ?? 0) + 1);
      this.#current.held.add(next.lane);
    }
    next.item();
    this.#heavyWaitingSince = this.#clock.now();
  }

  #count(lane: string, light: boolean): void {
    this.#roll();
    const taken = (this.#current.taken.get(lane) ?? 0) + 1;
    this.#current.taken.set(lane, taken);
    if (taken >= this.#heavyPerWindow) {
      this.#current.light.delete(lane);
      this.#previous.light.delete(lane);
    } else if (light) this.#current.light.add(lane);
  }

  /** Starts a new window when the current one is over (the one before it is forgotten). */
  #roll(): void {
    const now = this.#clock.now();
    if (now - this.#windowStart < WINDOW_MS) return;
    this.#previous = now - this.#windowStart < 2 * WINDOW_MS ? this.#current : emptyWindow();
    this.#current = emptyWindow();
    this.#windowStart = now;
  }

  /** One timer at a time, due when the next waiting caller may be served. */
  #arm(): void {
    if (this.#timer !== undefined || this.waiting === 0) return;
    let delay: number;
    if (this.#light.length > 0 || this.#heavyStarved()) delay = this.#bucket.delayUntilNextToken();
    else {
      const starved = Math.max(0, this.#heavyWaitingSince + HEAVY_MAX_WAIT_MS - this.#clock.now());
      delay = Math.max(starved, this.#bucket.delayUntilNextToken());
      if (this.#heavyExempt.length > 0) delay = Math.min(delay, this.#bucket.delayUntilNextToken(this.#reserve));
      if (this.#heavy.length > 0) delay = Math.min(delay, this.#heavyDelay());
    }
    this.#timer = this.#clock.setTimeout(() => {
      this.#timer = undefined;
      this.#release();
    }, delay);
  }

  /** Heavy lanes have waited HEAVY_MAX_WAIT_MS without a token: the next token is theirs. */
  #heavyStarved(): boolean {
    return this.#heavyWaiting > 0 && this.#clock.now() - this.#heavyWaitingSince >= HEAVY_MAX_WAIT_MS;
  }

  /**
   * Hands every token due now to the waiting callers: a starved heavy lane's, light
   * lanes', heavy ones' that the busy share does not hold, then the other heavy ones'.
   */
  #release(): void {
    if (this.#heavyStarved() && this.#bucket.tryTake())
      this.#serveHeavy(this.#heavyExempt.length > 0 ? this.#heavyExempt : this.#heavy);
    while (this.#light.length > 0 && this.#bucket.tryTake()) this.#light.shift()?.();
    while (this.#light.length === 0 && this.#heavyExempt.length > 0 && this.#bucket.tryTake(this.#reserve))
      this.#serveHeavy(this.#heavyExempt);
    while (this.#light.length === 0 && this.#heavy.length > 0 && this.#tryTakeHeavy()) this.#serveHeavy(this.#heavy);
    this.#arm();
  }
}
