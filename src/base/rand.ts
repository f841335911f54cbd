/**
 * The only randomness deterministic code may use: a seeded generator passed in as an argument.
 * sfc32 (Chris Doty-Humphrey's small fast counter) is tiny, passes PractRand at this scale, and
 * its whole state is four 32-bit words, so a run is replayed exactly from its seed.
 */

export interface Rand {
  /** A uniform integer in [0, bound). `bound` must be a positive safe integer. */
  int(bound: number): number;
  /** A uniform float in [0, 1). */
  float(): number;
}

export class SeededRand implements Rand {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(seed: number) {
    // splitmix32 spreads a small seed over the four state words.
    let s = seed >>> 0;
    const next = (): number => {
      s = (s + 0x9e3779b9) >>> 0;
      let z = s;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.a = next();
    this.b = next();
    this.c = next();
    this.d = next();
    for (let i = 0; i < 12; i++) this.u32();
  }

  u32(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return t >>> 0;
  }

  float(): number {
    return this.u32() / 4294967296;
  }

  int(bound: number): number {
    if (!(Number.isSafeInteger(bound) && bound > 0)) {
      throw new RangeError(`bound must be a positive safe integer, got ${bound}`);
    }
    return Math.floor(this.float() * bound);
  }

  /** True with probability `p`. */
  chance(p: number): boolean {
    return this.float() < p;
  }

  /** A child generator whose stream does not depend on how much this one is used later. */
  fork(): SeededRand {
    return new SeededRand(this.u32());
  }
}
