/**
 * Token buckets by key (a tenant): each holds up to `burst` tokens and refills at `rate` per
 * second; a call costs tokens and is refused while too few are left. The rate and burst are
 * passed at every call, so a limit changed in the meta group applies at the next call. A full
 * bucket is the same as no bucket, so buckets that refilled are dropped by prune(): memory
 * follows the keys active in the last few seconds. Pure: time comes in as an argument.
 */

interface Bucket {
  tokens: number;
  atMs: number;
}

/** A bucket's rate (tokens per second, > 0) and size (tokens, ≥ 1). */
export interface BucketLimit {
  readonly rate: number;
  readonly burst: number;
}

export class TokenBuckets {
  private readonly buckets = new Map<string, Bucket>();

  /** Tokens `key` holds at `nowMs` (fractional while refilling). */
  available(key: string, nowMs: number, limit: BucketLimit): number {
    const b = this.buckets.get(key);
    if (b === undefined) return limit.burst;
    return Math.min(limit.burst, b.tokens + (Math.max(0, nowMs - b.atMs) * limit.rate) / 1000);
  }

  /**
   * Takes `cost` tokens when `key` holds them: 0. Otherwise takes nothing and answers how many
   * ms until it will (Infinity when the cost is above the bucket's size).
   */
  take(key: string, nowMs: number, limit: BucketLimit, cost = 1): number {
    const have = this.available(key, nowMs, limit);
    if (have >= cost) {
      this.buckets.set(key, { tokens: have - cost, atMs: nowMs });
      return 0;
    }
    if (cost > limit.burst) return Infinity;
    return Math.ceil(((cost - have) * 1000) / limit.rate);
  }

  /** Drops the buckets that are full again; `limitOf` gives each key's current limit. */
  prune(nowMs: number, limitOf: (key: string) => BucketLimit): void {
    for (const key of [...this.buckets.keys()]) {
      const limit = limitOf(key);
      if (this.available(key, nowMs, limit) >= limit.burst) this.buckets.delete(key);
    }
  }

  get size(): number {
    return this.buckets.size;
  }
}
