/**
 * Which tenants get a `tenant` label of their own in the per-tenant metrics, and which share
 * `other`: the cardinality guard. Every tenant series costs memory in this node and in
 * Prometheus, and a cluster may hold many thousands of tenants, so only the `topN` most active
 * (attempts handed out on this node, exponentially decayed) are named. Every metric then has at
 * most topN + 1 tenant values, and named + other always add up to the node's total.
 *
 * Activity is recorded per tenant and folded into a decayed score at each ranking. Ranking runs
 * at scrape time, at most every `rerankEveryMs`: a ranking can move a tenant out, and each move
 * out restarts that tenant's counters when it comes back (rate() treats that as a reset), so
 * rankings must not flap with every scrape. The one exception is a free slot: while fewer than
 * topN tenants are named nobody can be pushed out, so a new tenant is named at the next scrape.
 * Tenants idle for `forgetAfterMs` are forgotten, so memory follows recent activity, not every
 * tenant ever seen. Pure: time comes in as an argument.
 */
import { ValidationError, type FieldViolation } from '../base/errors.js';

/**
 * The label value shared by every tenant not in the top N. It is also a valid tenant id: a tenant
 * really called `other` is never named, its series would be indistinguishable from the aggregate.
 */
export const OTHER_TENANT = 'other';

/** The most tenants --metrics-tenants may name: beyond that a label per tenant is the problem. */
export const TENANT_LABELS_MAX = 1000;

/** Tenants named unless --metrics-tenants says otherwise. */
export const DEFAULT_METRICS_TENANTS = 20;

export const INVALID_TENANT_LABEL_OPTIONS = 'OBSERVE_INVALID_OPTIONS';

export interface TenantLabelerOptions {
  /** Tenants labelled by name; 0 puts every tenant under `other`. */
  readonly topN: number;
  /** Activity loses half its weight in this long. @default 600000 (10 minutes) */
  readonly halfLifeMs?: number;
  /** Least time between two rankings (a free slot excepted). @default 5000 */
  readonly rerankEveryMs?: number;
  /** A tenant with no activity for this long is forgotten. @default 3600000 (1 hour) */
  readonly forgetAfterMs?: number;
}

/** What a ranking changed; the caller adds and removes series accordingly. */
export interface TenantRankChange {
  /** Named from now on, and not before. */
  readonly added: readonly string[];
  /** Named before, not any more: their series should be removed. */
  readonly dropped: readonly string[];
  /** No longer tracked at all (idle for forgetAfterMs); any that were named are in `dropped` too. */
  readonly forgotten: readonly string[];
}

interface Activity {
  /** Decayed activity as of the last ranking. */
  score: number;
  /** Recorded since the last ranking, not yet in `score`. */
  pending: number;
  /** Recorded at all since the last ranking (a record of 0 still says the tenant is alive). */
  seen: boolean;
  /** The ranking at which it was last seen. */
  lastSeenMs: number;
}

export class TenantLabeler {
  readonly topN: number;
  private readonly halfLifeMs: number;
  private readonly rerankEveryMs: number;
  private readonly forgetAfterMs: number;
  private readonly activity = new Map<string, Activity>();
  /** In rank order, most active first. */
  private namedSet = new Set<string>();
  private rankedAtMs: number | undefined;
  /** A tenant not named was recorded since the last ranking. */
  private newcomer = false;

  constructor(options: TenantLabelerOptions) {
    const violations: FieldViolation[] = [];
    const int = (field: keyof TenantLabelerOptions, value: number, lo: number, hi: number) => {
      if (!(Number.isSafeInteger(value) && value >= lo && value <= hi))
        violations.push({ field, reason: `must be an integer in [${lo}, ${hi}], got ${value}` });
      return value;
    };
    this.topN = int('topN', options.topN, 0, TENANT_LABELS_MAX);
    this.halfLifeMs = int('halfLifeMs', options.halfLifeMs ?? 600_000, 1, 2 ** 40);
    this.rerankEveryMs = int('rerankEveryMs', options.rerankEveryMs ?? 5_000, 0, 2 ** 40);
    this.forgetAfterMs = int('forgetAfterMs', options.forgetAfterMs ?? 3_600_000, 1, 2 ** 40);
    if (violations.length > 0) throw new ValidationError(INVALID_TENANT_LABEL_OPTIONS, violations);
  }

  /** Counts `n` (≥ 0) units of activity of the tenant; it is ranked with them at the next rank(). */
  record(tenant: string, n: number): void {
    let a = this.activity.get(tenant);
    if (a === undefined) {
      a = { score: 0, pending: 0, seen: false, lastSeenMs: 0 };
      this.activity.set(tenant, a);
    }
    a.pending += n;
    a.seen = true;
    if (!this.namedSet.has(tenant) && tenant !== OTHER_TENANT) this.newcomer = true;
  }

  /** The tenant's label as of the last ranking: its own name in the top N, else `other`. */
  labelOf(tenant: string): string {
    return this.namedSet.has(tenant) ? tenant : OTHER_TENANT;
  }

  isNamed(tenant: string): boolean {
    return this.namedSet.has(tenant);
  }

  /** The named tenants, most active first (as of the last ranking). */
  get named(): ReadonlySet<string> {
    return this.namedSet;
  }

  /** Tenants whose activity is tracked (for tests: memory follows recent activity). */
  get trackedCount(): number {
    return this.activity.size;
  }

  /**
   * Ranks again when due: the first call, `rerankEveryMs` after the last ranking, or at once
   * while a slot is free and a tenant not named has shown activity. Returns what changed, or
   * undefined when it was not due. `nowMs` must not go back (a monotonic clock).
   */
  rank(nowMs: number): TenantRankChange | undefined {
    const last = this.rankedAtMs;
    const due =
      last === undefined ||
      nowMs - last >= this.rerankEveryMs ||
      (this.newcomer && this.namedSet.size < this.topN);
    if (!due) return undefined;
    const decay =
      last === undefined ? 1 : Math.pow(0.5, Math.max(0, nowMs - last) / this.halfLifeMs);
    this.rankedAtMs = nowMs;
    this.newcomer = false;
    const forgotten: string[] = [];
    const candidates: { tenant: string; score: number }[] = [];
    for (const [tenant, a] of this.activity) {
      a.score = a.score * decay + a.pending;
      a.pending = 0;
      if (a.seen) a.lastSeenMs = nowMs;
      a.seen = false;
      if (nowMs - a.lastSeenMs >= this.forgetAfterMs) {
        this.activity.delete(tenant);
        forgotten.push(tenant);
        continue;
      }
      if (tenant !== OTHER_TENANT) candidates.push({ tenant, score: a.score });
    }
    // Ties go to the smaller name, so that every node given the same activity names the same
    // tenants, and a scrape repeated with nothing new changes nothing.
    candidates.sort((x, y) =>
      y.score !== x.score
        ? y.score - x.score
        : x.tenant < y.tenant
          ? -1
          : x.tenant > y.tenant
            ? 1
            : 0,
    );
    const next = new Set<string>();
    for (let i = 0; i < candidates.length && i < this.topN; i++) next.add(candidates[i]!.tenant);
    const added = [...next].filter((t) => !this.namedSet.has(t));
    const dropped = [...this.namedSet].filter((t) => !next.has(t));
    this.namedSet = next;
    return { added, dropped, forgotten };
  }
}
