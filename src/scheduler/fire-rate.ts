/**
 * A data group's fire rate as its leader sees it: first attempts handed out, per second of their
 * slots, averaged over a sliding window (one counter per second in a ring). The meta leader
 * splits a group whose rate passes `--split-fire-rate`, so the figure must not jump on a single
 * busy second (the window smooths a :00 spike out), nor read high just after a reset (it divides
 * by at least `minSpanMs`), nor count a new leader's catch-up of slots missed before it led (each
 * fire counts at its slot's time, and slots before the reset are left out). Pure: the caller
 * passes the times in.
 */

export interface FireRateOptions {
  /** The averaging window. @default 60000 */
  readonly windowMs?: number;
  /** Width of one counter of the ring. @default 1000 */
  readonly bucketMs?: number;
  /**
   * The least time a rate is averaged over: just after a reset (a new leadership, a split) a
   * few fires in the first second would otherwise read as a high rate. @default 10000
   */
  readonly minSpanMs?: number;
}

export class FireRateMeter {
  private readonly bucketMs: number;
  private readonly minSpanMs: number;
  /** Counters of the ring; `ids[i]` says which bucket (time / bucketMs) `counts[i]` holds. */
  private readonly counts: number[];
  private readonly ids: number[];
  /** Fires before this time are not counted (the meter was reset then). */
  private sinceMs: number;

  constructor(startMs: number, opts: FireRateOptions = {}) {
    this.bucketMs = opts.bucketMs ?? 1000;
    const windowMs = opts.windowMs ?? 60_000;
    this.minSpanMs = opts.minSpanMs ?? 10_000;
    if (!(this.bucketMs > 0) || !(windowMs >= this.bucketMs) || !(this.minSpanMs > 0))
      throw new RangeError('FireRateMeter: bucketMs > 0, windowMs >= bucketMs, minSpanMs > 0');
    const n = Math.ceil(windowMs / this.bucketMs);
    this.counts = new Array<number>(n).fill(0);
    this.ids = new Array<number>(n).fill(-Infinity);
    this.sinceMs = startMs;
  }

  /** Forgets everything counted: the group's jobs or its leader changed at `nowMs`. */
  reset(nowMs: number): void {
    this.counts.fill(0);
    this.ids.fill(-Infinity);
    this.sinceMs = nowMs;
  }

  /**
   * Counts `n` first attempts of the slot at `slotMs`. A slot before the last reset, or older
   * than the window the ring holds, is not counted.
   */
  record(slotMs: number, n = 1): void {
    if (slotMs < this.sinceMs) return;
    const id = Math.floor(slotMs / this.bucketMs);
    const i = mod(id, this.counts.length);
    const held = this.ids[i]!;
    if (held > id) return;
    if (held !== id) {
      this.ids[i] = id;
      this.counts[i] = 0;
    }
    this.counts[i]! += n;
  }

  /**
   * Fires per second over the window ending at `nowMs`: the fires of the slots in it divided by
   * the time it covers since the last reset, that time taken as at least `minSpanMs`.
   */
  ratePerSec(nowMs: number): number {
    const n = this.counts.length;
    const cur = Math.floor(nowMs / this.bucketMs);
    const oldest = cur - n + 1;
    let fires = 0;
    for (let i = 0; i < n; i++) {
      const id = this.ids[i]!;
      // A bucket past `cur` is from before the clock stepped back: not in this window.
      if (id >= oldest && id <= cur) fires += this.counts[i]!;
    }
    const from = Math.max(this.sinceMs, oldest * this.bucketMs);
    const spanMs = Math.max(this.minSpanMs, nowMs - from);
    return (fires * 1000) / spanMs;
  }
}

function mod(a: number, n: number): number {
  return ((a % n) + n) % n;
}
