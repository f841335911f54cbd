/**
 * A hashed timing wheel (Varghese & Lauck) for the slots due soon, with an ordered index for
 * the ones beyond its horizon: insert and cancel are O(1) inside the horizon, and the far
 * slots move into the wheel as time advances. Pure: time is the `nowMs` handed to advance();
 * the wheel never reads a clock (timers drift, so the dispatcher passes the clock's reading).
 *
 * Keys are unique: scheduling a key again moves it. advance(now) returns every key due at or
 * before `now`, ordered by due time then by key, each exactly once.
 */
import { assert, assertionFailed } from '../base/assert.js';
import { FarIndex } from './far-index.js';

interface Item {
  readonly key: string;
  readonly dueMs: number;
}

export interface TimingWheelOptions {
  /** Resolution of the wheel. @default 10 */
  readonly tickMs?: number;
  /** Buckets; the horizon is tickMs × bucketCount. @default 4096 */
  readonly bucketCount?: number;
  /** Time the wheel starts at (nothing earlier is ever returned late). */
  readonly startMs: number;
}

export class TimingWheel {
  readonly tickMs: number;
  readonly bucketCount: number;
  private readonly buckets: Map<string, number>[];
  /**
   * key → due time minus baseMs, for every key the wheel or the far index holds. Stored as an
   * offset because an offset within about 24 days is a small integer V8 keeps in the map entry
   * itself, where an absolute time in ms would be a separately allocated number per key.
   */
  private readonly dueOf = new Map<string, number>();
  private readonly baseMs: number;
  /** The few due times that do not survive the offset round trip exactly (fractional ms). */
  private readonly inexactDue = new Map<string, number>();
  /** Keys beyond the horizon, ordered by (dueMs, key); stale entries are skipped. */
  private readonly far = new FarIndex();
  /** Start of the tick the wheel has advanced to: everything before it was returned. */
  private cursorMs: number;

  constructor(options: TimingWheelOptions) {
    this.tickMs = options.tickMs ?? 10;
    this.bucketCount = options.bucketCount ?? 4096;
    assert(
      this.tickMs >= 1 && Number.isSafeInteger(this.tickMs),
      'tickMs must be a positive integer',
    );
    assert(this.bucketCount >= 2, 'bucketCount must be at least 2');
    this.buckets = Array.from({ length: this.bucketCount }, () => new Map<string, number>());
    this.cursorMs = this.tickStart(options.startMs);
    this.baseMs = this.cursorMs;
  }

  get size(): number {
    return this.dueOf.size;
  }

  /** Keys held beyond the wheel's horizon (the far index), for metrics. */
  get farSize(): number {
    let n = 0;
    this.far.forEach((key, dueMs) => {
      if (this.isLive(key, dueMs) && !this.inWheel(dueMs)) n++;
    });
    return n;
  }

  private forget(key: string): void {
    this.dueOf.delete(key);
    if (this.inexactDue.size > 0) this.inexactDue.delete(key);
  }

  private isLive(key: string, dueMs: number): boolean {
    return this.dueAt(key) === dueMs;
  }

  has(key: string): boolean {
    return this.dueOf.has(key);
  }

  /** Every key held, in the wheel or beyond its horizon. */
  keys(): IterableIterator<string> {
    return this.dueOf.keys();
  }

  dueAt(key: string): number | undefined {
    const offset = this.dueOf.get(key);
    if (offset === undefined) return undefined;
    return this.inexactDue.get(key) ?? this.baseMs + offset;
  }

  private tickStart(ms: number): number {
    return Math.floor(ms / this.tickMs) * this.tickMs;
  }

  private horizonMs(): number {
    return this.cursorMs + this.tickMs * this.bucketCount;
  }

  private inWheel(dueMs: number): boolean {
    return dueMs < this.horizonMs();
  }

  private bucketOf(dueMs: number): Map<string, number> {
    // Items already due (before the cursor) go to the cursor's bucket and come out next.
    const tick = Math.floor(Math.max(dueMs, this.cursorMs) / this.tickMs);
    return this.buckets[((tick % this.bucketCount) + this.bucketCount) % this.bucketCount]!;
  }

  schedule(key: string, dueMs: number): void {
    if (!Number.isFinite(dueMs)) assertionFailed(`due time of ${key} must be finite`);
    this.cancel(key);
    const offset = dueMs - this.baseMs;
    if (this.baseMs + offset === dueMs) this.dueOf.set(key, offset);
    else {
      // A fraction of a ms that the offset would round away: keep the time itself.
      this.dueOf.set(key, 0);
      this.inexactDue.set(key, dueMs);
    }
    if (this.inWheel(dueMs)) this.bucketOf(dueMs).set(key, dueMs);
    else {
      this.far.push(key, dueMs);
      // Moves and cancels leave stale heap items behind. A wheel that is never advanced (a
      // follower's) would keep them forever, so rebuild once they outnumber the live keys.
      if (this.far.size > 2 * this.dueOf.size + 1024) this.compactFar();
    }
  }

  private compactFar(): void {
    const live: Item[] = [];
    this.far.forEach((key, dueMs) => {
      if (this.isLive(key, dueMs) && !this.inWheel(dueMs)) live.push({ key, dueMs });
    });
    this.far.clear();
    // Several stale copies of one (key, due) may remain identical; keep one.
    const seen = new Set<string>();
    for (const it of live) {
      if (seen.has(it.key)) continue;
      seen.add(it.key);
      this.far.push(it.key, it.dueMs);
    }
  }

  /** Removes every key; the wheel stays where it advanced to. */
  clear(): void {
    for (const bucket of this.buckets) bucket.clear();
    this.dueOf.clear();
    this.inexactDue.clear();
    this.far.clear();
  }

  cancel(key: string): boolean {
    const due = this.dueAt(key);
    if (due === undefined) return false;
    this.forget(key);
    // A far entry is left in the heap and skipped when it surfaces (lazy deletion).
    if (this.inWheel(due)) this.bucketOf(due).delete(key);
    return true;
  }

  /** Every key due at or before `nowMs`, in (due, key) order, removed from the wheel. */
  advance(nowMs: number): { key: string; dueMs: number }[] {
    const out: Item[] = [];
    const endTick = this.tickStart(nowMs);
    // Walk at most one full turn of buckets; past that every bucket has been visited.
    const steps = Math.min(
      this.bucketCount,
      Math.max(0, (endTick - this.cursorMs) / this.tickMs + 1),
    );
    for (let i = 0; i < steps; i++) {
      const bucketStart = this.cursorMs + i * this.tickMs;
      const bucket = this.bucketOf(bucketStart);
      for (const [key, due] of bucket) {
        if (due <= nowMs) {
          out.push({ key, dueMs: due });
          bucket.delete(key);
          this.forget(key);
        }
      }
    }
    // Move the cursor, then pull the far items that now fall inside the horizon.
    if (endTick > this.cursorMs) this.cursorMs = endTick;
    this.pullFar(nowMs, out);
    out.sort((a, b) => a.dueMs - b.dueMs || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    return out;
  }

  private pullFar(nowMs: number, out: Item[]): void {
    const horizon = this.horizonMs();
    while (this.far.size > 0 && this.far.peekDue()! < horizon) {
      const it = this.far.pop();
      if (!this.isLive(it.key, it.dueMs)) continue; // cancelled or moved
      if (it.dueMs <= nowMs) {
        out.push(it);
        this.forget(it.key);
      } else {
        this.bucketOf(it.dueMs).set(it.key, it.dueMs);
      }
    }
  }

  /**
   * Visits the keys inside the horizon due in [fromMs, untilMs], bucket by bucket (within a
   * bucket in insertion order), without removing them, until `visit` returns false. Keys beyond
   * the horizon are not visited: this is a look at what comes soon, for work worth doing early.
   */
  peek(fromMs: number, untilMs: number, visit: (key: string, dueMs: number) => boolean): void {
    const until = Math.min(untilMs, this.horizonMs() - 1);
    const firstTick = this.tickStart(Math.max(fromMs, this.cursorMs));
    for (let tick = firstTick; tick <= until; tick += this.tickMs) {
      for (const [key, due] of this.bucketOf(tick)) {
        if (due >= fromMs && due <= untilMs && !visit(key, due)) return;
      }
    }
  }

  /** Earliest due time held, or undefined (for sleeping until it). O(size): for tests and idle waits. */
  nextDueMs(): number | undefined {
    let best: number | undefined;
    for (const key of this.dueOf.keys()) {
      const due = this.dueAt(key)!;
      if (best === undefined || due < best) best = due;
    }
    return best;
  }
}
