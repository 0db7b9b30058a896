/**
 * First-in-first-out structures of the work queue and the write rate limit: a plain
 * FIFO, and a FIFO split into lanes that take turns (round robin), so that one lane
 * with a long backlog never delays another lane's next item by more than one turn.
 */

/** A FIFO with O(1) push and shift. */
export class Fifo<T> {
  #items: T[] = [];
  #head = 0;

  get length(): number {
    return this.#items.length - this.#head;
  }

  push(item: T): void {
    this.#items.push(item);
  }

  shift(): T | undefined {
    if (this.#head >= this.#items.length) return undefined;
    const item = this.#items[this.#head];
    this.#head++;
    if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return item;
  }

  clear(): void {
    this.#items = [];
    this.#head = 0;
  }
}

/**
 * Items in named lanes, each lane first in first out; `shift` serves the lanes that hold
 * items in turn, one item per turn (round robin, in the order the lanes last became
 * non-empty or were last served). With one lane it is a plain FIFO.
 *
 * Fairness: an item pushed to a lane that was empty is shifted after at most one item of
 * every other lane that holds items, whatever their lengths. An item behind k items of
 * its own lane waits at most (k + 1) turns.
 *
 * Invariants: a lane is in the turn order exactly once while it holds items and never
 * when it is empty; empty lanes are forgotten, so memory follows the items held, not
 * the lanes ever seen.
 */
export class LanedFifo<T> {
  readonly #lanes = new Map<string, Fifo<T>>();
  /** Lanes holding items, in the order they are served. */
  readonly #turns = new Fifo<string>();
  #length = 0;

  /** Items held, over all lanes. */
  get length(): number {
    return this.#length;
  }

  /** Lanes holding items. */
  get lanes(): number {
    return this.#lanes.size;
  }

  /** Whether `lane` holds items. */
  has(lane: string): boolean {
    return this.#lanes.has(lane);
  }

  push(lane: string, item: T): void {
    let fifo = this.#lanes.get(lane);
    if (!fifo) {
      fifo = new Fifo<T>();
      this.#lanes.set(lane, fifo);
      this.#turns.push(lane);
    }
    fifo.push(item);
    this.#length++;
  }

  /** The next item of the lane whose turn it is; undefined when every lane is empty. */
  shift(): T | undefined {
    return this.next()?.item;
  }

  /**
   * The next item and its lane, the lane whose turn it is; undefined when every lane is
   * empty. With `allow`, lanes it refuses are passed over (each goes behind the lanes
   * served before it, keeping its items): undefined when it refuses every lane holding
   * items. Each lane is asked at most once per call.
   */
  next(allow?: (lane: string) => boolean): { readonly item: T; readonly lane: string } | undefined {
    let lane = this.#turns.shift();
    if (allow !== undefined) {
      for (let asked = 1; lane !== undefined && !allow(lane); asked++) {
        this.#turns.push(lane);
        lane = asked < this.#turns.length ? this.#turns.shift() : undefined;
      }
    }
    if (lane === undefined) return undefined;
    const fifo = this.#lanes.get(lane);
    const item = fifo?.shift();
    if (fifo === undefined || item === undefined) {
      // Unreachable by the invariants; forget the lane rather than loop on it.
      this.#lanes.delete(lane);
      return this.next(allow);
    }
    this.#length--;
    if (fifo.length > 0) this.#turns.push(lane);
    else this.#lanes.delete(lane);
    return { item, lane };
  }

  clear(): void {
    this.#lanes.clear();
    this.#turns.clear();
    this.#length = 0;
  }
}
