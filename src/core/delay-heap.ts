/** The work queue's delayed adds: a binary min-heap ordered by due time, then by insertion. */

export interface Delayed<K> {
  readonly key: K;
  readonly due: number;
  readonly seq: number;
}

const before = <K>(a: Delayed<K>, b: Delayed<K>): boolean => a.due < b.due || (a.due === b.due && a.seq < b.seq);

export class DelayHeap<K> {
  readonly #heap: Delayed<K>[] = [];

  get size(): number {
    return this.#heap.length;
  }

  peek(): Delayed<K> | undefined {
    return this.#heap[0];
  }

  push(entry: Delayed<K>): void {
    const heap = this.#heap;
    heap.push(entry);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const p = heap[parent] as Delayed<K>;
      if (!before(entry, p)) break;
      heap[i] = p;
      i = parent;
    }
    heap[i] = entry;
  }

  pop(): Delayed<K> | undefined {
    const heap = this.#heap;
    const top = heap[0];
    const last = heap.pop();
    if (top === undefined || last === undefined || heap.length === 0) return top;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= heap.length) break;
      const right = left + 1;
      const leftEntry = heap[left] as Delayed<K>;
      const rightEntry = heap[right];
      const child = rightEntry !== undefined && before(rightEntry, leftEntry) ? right : left;
      const childEntry = heap[child] as Delayed<K>;
      if (!before(childEntry, last)) break;
      heap[i] = childEntry;
      i = child;
    }
    heap[i] = last;
    return top;
  }

  clear(): void {
    this.#heap.length = 0;
  }
}
