/**
 * A tenant's fires per second, held on the node that hands them out: one token bucket per
 * tenant (src/base/token-buckets.ts) sized to one second of its rate. The hand-out asks allows()
 * before each run of the tenant and calls taken() for each run it hands out; a run refused stays
 * queued in its group, in its turn (hand-out-queue.ts), and goes out once a token is there:
 * delayed, never dropped, and other tenants' runs pass it meanwhile. The rate is the tenant's
 * share on this node of its cluster-wide limit (TenantLimits.firesPerSecond), given by `rateOf`.
 *
 * Throttled fires are counted for the metrics: a run handed out at a step at which (or at the
 * one before which) the tenant's bucket ran dry waited for it. Pure: time comes in by step().
 */
import { RecentCounts } from '../base/recent-counts.js';
import { TokenBuckets, type BucketLimit } from '../base/token-buckets.js';

/** How often buckets that refilled are dropped. */
const PRUNE_EVERY_MS = 1_000;

export class TenantFireRate {
  private readonly buckets = new TokenBuckets();
  private readonly fired = new RecentCounts();
  private readonly throttled = new RecentCounts();
  private nowMs = 0;
  private nextPruneMs = 0;
  /** Tenants refused at this step, and at the one before. */
  private refusedNow = new Set<string>();
  private refusedBefore = new Set<string>();

  constructor(
    /** Fires per second the tenant may hand out on this node (> 0; Infinity: no limit). */
    private readonly rateOf: (tenant: string) => number,
    /** Told of each fire handed out after waiting for its tenant's rate. */
    private readonly onThrottled: (tenant: string) => void = () => {},
  ) {}

  /** Starts a hand-out step at `nowMs`. */
  step(nowMs: number): void {
    this.nowMs = nowMs;
    const before = this.refusedBefore;
    before.clear();
    this.refusedBefore = this.refusedNow;
    this.refusedNow = before;
    if (nowMs >= this.nextPruneMs) {
      this.nextPruneMs = nowMs + PRUNE_EVERY_MS;
      this.buckets.prune(nowMs, (t) => this.limitOf(t) ?? { rate: 1, burst: 0 });
    }
  }

  /** Whether the tenant may hand out one more run now. */
  allows(tenant: string): boolean {
    const limit = this.limitOf(tenant);
    if (limit === undefined || this.buckets.available(tenant, this.nowMs, limit) >= 1) return true;
    this.refusedNow.add(tenant);
    return false;
  }

  /** A run of the tenant was handed out. */
  taken(tenant: string): void {
    const limit = this.limitOf(tenant);
    if (limit !== undefined) this.buckets.take(tenant, this.nowMs, limit);
    this.fired.add(tenant, this.nowMs);
    if (this.refusedNow.has(tenant) || this.refusedBefore.has(tenant)) {
      this.throttled.add(tenant, this.nowMs);
      this.onThrottled(tenant);
    }
  }

  /** Runs of the tenant handed out here in the last complete second before `nowMs`. */
  firedLastSecond(tenant: string, nowMs: number): number {
    return this.fired.lastSecond(tenant, nowMs);
  }

  /** Of those, the ones that waited for the tenant's rate. */
  throttledLastSecond(tenant: string, nowMs: number): number {
    return this.throttled.lastSecond(tenant, nowMs);
  }

  /** Tenants with a bucket not full (for tests: memory follows recent activity). */
  get trackedCount(): number {
    return this.buckets.size;
  }

  /** The tenant's bucket; undefined for no limit (an infinite rate). */
  private limitOf(tenant: string): BucketLimit | undefined {
    const rate = this.rateOf(tenant);
    if (!Number.isFinite(rate)) return undefined;
    return { rate, burst: Math.max(1, rate) };
  }
}
