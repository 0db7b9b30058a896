/**
 * Seeded draws for the chaos schedule: a tiny PRNG and the picks made from it. The same
 * seed always yields the same sequence, so a failing schedule is replayed from its seed.
 */

/** mulberry32: a tiny 32-bit PRNG, good enough to shuffle a test and fully determined by its seed. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** Picks drawn from one random stream; each call consumes a fixed number of draws. */
export class Draw {
  readonly random: () => number;

  constructor(random: () => number) {
    this.random = random;
  }

  /** An integer in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.random() * (max - min + 1));
  }

  pick<T>(items: readonly T[]): T {
    const item = items[Math.floor(this.random() * items.length)];
    if (item === undefined) throw new Error("pick from an empty list");
    return item;
  }

  /** A value chosen with probability proportional to its weight. */
  weighted<T>(choices: readonly (readonly [number, T])[]): T {
    const total = choices.reduce((sum, [w]) => sum + w, 0);
    let r = this.random() * total;
    for (const [w, value] of choices) {
      r -= w;
      if (r < 0) return value;
    }
    const last = choices[choices.length - 1];
    if (!last) throw new Error("weighted pick from an empty list");
    return last[1];
  }
}
