/**
 * The per-tenant metrics of a node (label `tenant`): fires by outcome, first-attempt lag,
 * throttled fires, deliveries queued and in flight, the age of the oldest queued delivery, and
 * DLQ size. Only the top N tenants by activity are named; the rest share `other`
 * (tenant-labels.ts), so each metric has at most N + 1 tenant values whatever the tenant count.
 *
 * The hot path (one call per attempt) only adds to a per-tenant tally found by one map lookup:
 * which label a tenant's events go to is decided at scrape time, after the ranking, so a tenant
 * named at a scrape gets everything it did since the one before, and a tenant moved out hands
 * what it did since to `other`. Its series are removed then: a tenant that comes back starts its
 * counters again at 0, which rate() and increase() read as a counter reset.
 */
import { Counter, Gauge, Histogram, type LabelValues, type Registry } from 'prom-client';
import type { Clock } from '../base/clock.js';
import { OTHER_TENANT, TenantLabeler, type TenantRankChange } from './tenant-labels.js';

/** How an attempt handed to delivery ended; `not_started` = dropped before it was sent. */
export type FireOutcome = 'success' | 'retry' | 'fail' | 'not_started';

export const FIRE_OUTCOMES: readonly FireOutcome[] = ['success', 'retry', 'fail', 'not_started'];

/** What the node tells the per-tenant gauges at scrape time. */
export interface TenantMetricsSource {
  deliveryQueued(): number;
  deliveryInflight(): number;
  /** Deliveries of the tenant queued (fair queue) and in flight on this node. */
  tenantDeliveries(tenant: string): { readonly queued: number; readonly inflight: number };
  /** Each tenant with deliveries queued on this node, and how long its oldest one has waited. */
  tenantQueueAgesMs(): Iterable<readonly [tenant: string, ageMs: number]>;
  /** Runs in the DLQ by tenant, over the data groups this node leads. */
  deadRunsByTenant(): ReadonlyMap<string, number>;
}

export interface TenantMetricsOptions {
  /** Tenants labelled by name (--metrics-tenants); the rest are `other`. */
  readonly topN: number;
  /** Read at scrape time only, for the ranking. */
  readonly clock: Clock;
}

/**
 * Buckets of every fire lag histogram, node-wide and per tenant (so they compare): fire lag is
 * milliseconds on a healthy cluster and seconds in a spike or after a failover.
 */
export const FIRE_LAG_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** A tenant's events since the last flush. */
interface Tally {
  handedOut: number;
  readonly outcomes: Record<FireOutcome, number>;
  throttled: number;
  /** Any event since the last scrape: the tenant is alive, even with nothing handed out. */
  active: boolean;
}

/** The label objects of one tenant value, made once: prom-client keeps them by reference. */
interface Series {
  readonly tenant: LabelValues<'tenant'>;
  readonly outcomes: Readonly<Record<FireOutcome, LabelValues<'tenant' | 'outcome'>>>;
}

function seriesOf(tenant: string): Series {
  return {
    tenant: { tenant },
    outcomes: {
      success: { tenant, outcome: 'success' },
      retry: { tenant, outcome: 'retry' },
      fail: { tenant, outcome: 'fail' },
      not_started: { tenant, outcome: 'not_started' },
    },
  };
}

/**
 * First-attempt lags with their tenants, in bulk (like ObservationBuffer): the tenant of each is
 * resolved to its label when flushed. Stores string references only: nothing is allocated per
 * observation.
 */
class TenantLagBuffer {
  private readonly values: Float64Array;
  private readonly tenants: string[];
  private count = 0;

  constructor(
    private readonly observe: (tenant: string, seconds: number) => void,
    capacity = 16_384,
  ) {
    this.values = new Float64Array(capacity);
    this.tenants = new Array<string>(capacity).fill('');
  }

  add(tenant: string, seconds: number): void {
    this.values[this.count] = seconds;
    this.tenants[this.count++] = tenant;
    if (this.count === this.values.length) this.flush();
  }

  flush(): void {
    const n = this.count;
    this.count = 0;
    for (let i = 0; i < n; i++) this.observe(this.tenants[i]!, this.values[i]!);
  }
}

export class TenantMetrics {
  readonly labeler: TenantLabeler;
  private readonly clock: Clock;
  private readonly tallies = new Map<string, Tally>();
  /** Some tally has counts not yet flushed: each scrape flushes from several collects. */
  private unflushed = false;
  /** The named tenants' label objects. */
  private readonly series = new Map<string, Series>();
  private readonly other = seriesOf(OTHER_TENANT);
  private readonly fires: Counter<'tenant' | 'outcome'>;
  private readonly lag: Histogram<'tenant'>;
  private readonly lagPending: TenantLagBuffer;
  private readonly throttledFires: Counter<'tenant'>;

  constructor(
    private readonly source: TenantMetricsSource,
    registers: Registry[],
    options: TenantMetricsOptions,
  ) {
    this.labeler = new TenantLabeler({ topN: options.topN });
    this.clock = options.clock;
    this.fires = new Counter({
      name: 'tickraft_tenant_fires_total',
      help: 'Delivery attempts by tenant and outcome, as tickraft_fires_total; tenant is one of the top --metrics-tenants by activity on this node, or other (a tenant that drops out and comes back restarts at 0)',
      labelNames: ['tenant', 'outcome'],
      registers,
      collect: () => this.flush(),
    });
    this.lag = new Histogram({
      name: 'tickraft_tenant_fire_lag_seconds',
      help: 'Slot time to the hand-out of its first delivery attempt, by tenant (top --metrics-tenants, or other)',
      labelNames: ['tenant'],
      buckets: FIRE_LAG_BUCKETS,
      registers,
      collect: () => this.flush(),
    });
    this.lagPending = new TenantLagBuffer((tenant, s) =>
      this.lag.observe(this.labelsOf(tenant).tenant, s),
    );
    this.throttledFires = new Counter({
      name: 'tickraft_tenant_fires_throttled_total',
      help: 'Runs handed out late because the tenant was at its fire rate limit, by tenant (top --metrics-tenants, or other)',
      labelNames: ['tenant'],
      registers,
      collect: () => this.flush(),
    });
    this.gauges(registers);
    this.expose(this.other);
  }

  private gauges(registers: Registry[]): void {
    const source = this.source;
    this.tenantGauge(
      registers,
      'tickraft_tenant_deliveries_queued',
      'Delivery attempts of the tenant queued on this node (fair queue), not yet sent (top --metrics-tenants, or other)',
      () => this.namedAndRest((t) => source.tenantDeliveries(t).queued, source.deliveryQueued()),
    );
    this.tenantGauge(
      registers,
      'tickraft_tenant_deliveries_inflight',
      'Delivery attempts of the tenant being sent by this node (top --metrics-tenants, or other)',
      () =>
        this.namedAndRest((t) => source.tenantDeliveries(t).inflight, source.deliveryInflight()),
    );
    this.tenantGauge(
      registers,
      'tickraft_tenant_queue_oldest_seconds',
      "Age of the tenant's oldest delivery attempt queued on this node, 0 when none (top --metrics-tenants; other: the oldest of the rest)",
      () => {
        const values: [string, number][] = [];
        let other = 0;
        for (const [tenant, ageMs] of source.tenantQueueAgesMs()) {
          const seconds = Math.max(0, ageMs) / 1000;
          if (this.series.has(tenant)) values.push([tenant, seconds]);
          else other = Math.max(other, seconds);
        }
        return { values, other };
      },
    );
    this.tenantGauge(
      registers,
      'tickraft_tenant_dead_runs',
      'Runs in the DLQ by tenant (top --metrics-tenants, or other), over the groups this node leads: each group is counted by its leader only, so sum by (tenant) over the nodes',
      () => {
        const values: [string, number][] = [];
        let other = 0;
        for (const [tenant, n] of source.deadRunsByTenant()) {
          if (this.series.has(tenant)) values.push([tenant, n]);
          else other += n;
        }
        return { values, other };
      },
    );
  }

  /**
   * A gauge read at scrape time: every named tenant (0 unless `read` gives a value) and `other`.
   * Reset first, so that a tenant that dropped out leaves no series behind.
   */
  private tenantGauge(
    registers: Registry[],
    name: string,
    help: string,
    read: () => { values: Iterable<readonly [string, number]>; other: number },
  ): void {
    const gauge: Gauge<'tenant'> = new Gauge({
      name,
      help,
      labelNames: ['tenant'],
      registers,
      collect: () => {
        gauge.reset();
        for (const s of this.series.values()) gauge.set(s.tenant, 0);
        const { values, other } = read();
        for (const [tenant, v] of values) {
          const s = this.series.get(tenant);
          if (s !== undefined) gauge.set(s.tenant, v);
        }
        gauge.set(this.other.tenant, other);
      },
    });
  }

  /** Each named tenant's count, and `other`: what the node's total leaves. */
  private namedAndRest(
    countOf: (tenant: string) => number,
    total: number,
  ): { values: [string, number][]; other: number } {
    const values: [string, number][] = [];
    let named = 0;
    for (const tenant of this.series.keys()) {
      const n = countOf(tenant);
      named += n;
      values.push([tenant, n]);
    }
    return { values, other: Math.max(0, total - named) };
  }

  // -----------------------------------------------------------------------------------------
  // Hot path: one map lookup, a few additions; a tally is allocated once per tenant.

  handedOut(tenant: string, attempt: number, lagSeconds: number): void {
    const t = this.tallyOf(tenant);
    t.handedOut++;
    t.active = true;
    if (attempt === 1) this.lagPending.add(tenant, lagSeconds);
  }

  finished(tenant: string, outcome: FireOutcome): void {
    const t = this.tallyOf(tenant);
    t.outcomes[outcome]++;
    t.active = true;
    this.unflushed = true;
  }

  throttled(tenant: string, n: number): void {
    const t = this.tallyOf(tenant);
    t.throttled += n;
    t.active = true;
    this.unflushed = true;
  }

  private tallyOf(tenant: string): Tally {
    let t = this.tallies.get(tenant);
    if (t === undefined) {
      t = {
        handedOut: 0,
        outcomes: { success: 0, retry: 0, fail: 0, not_started: 0 },
        throttled: 0,
        active: false,
      };
      this.tallies.set(tenant, t);
    }
    return t;
  }

  // -----------------------------------------------------------------------------------------
  // Scrape time

  /**
   * Before the registry is read: hands the activity since the last scrape to the ranking, ranks
   * when due, moves series for what changed, and flushes every tally to its label.
   */
  beforeScrape(): void {
    for (const [tenant, t] of this.tallies) {
      if (!t.active) continue;
      this.labeler.record(tenant, t.handedOut);
      t.handedOut = 0;
      t.active = false;
    }
    const change = this.labeler.rank(this.clock.monotonicMs());
    // Events of a tenant that dropped out since are flushed below, to `other`.
    if (change !== undefined) this.apply(change);
    this.flush();
  }

  private apply(change: TenantRankChange): void {
    for (const tenant of change.dropped) {
      const s = this.series.get(tenant);
      if (s === undefined) continue;
      this.series.delete(tenant);
      for (const o of FIRE_OUTCOMES) this.fires.remove(s.outcomes[o]);
      this.lag.remove(s.tenant);
      this.throttledFires.remove(s.tenant);
    }
    for (const tenant of change.added) {
      const s = seriesOf(tenant);
      this.series.set(tenant, s);
      this.expose(s);
    }
    // Forgotten tenants were idle for the labeler's forget time: their tallies are all zero.
    for (const tenant of change.forgotten) this.tallies.delete(tenant);
  }

  /** A tenant value's counters exist from the start, at 0, so that rate() works at once. */
  private expose(s: Series): void {
    for (const o of FIRE_OUTCOMES) this.fires.inc(s.outcomes[o], 0);
    this.lag.zero(s.tenant);
    this.throttledFires.inc(s.tenant, 0);
  }

  private labelsOf(tenant: string): Series {
    return this.series.get(tenant) ?? this.other;
  }

  /** Every tally and buffered lag into prom-client, under the current labels. */
  private flush(): void {
    this.lagPending.flush();
    if (!this.unflushed) return;
    this.unflushed = false;
    for (const [tenant, t] of this.tallies) {
      if (t.throttled === 0 && !anyOutcome(t)) continue;
      const s = this.labelsOf(tenant);
      for (const o of FIRE_OUTCOMES) {
        const n = t.outcomes[o];
        if (n > 0) this.fires.inc(s.outcomes[o], n);
        t.outcomes[o] = 0;
      }
      if (t.throttled > 0) this.throttledFires.inc(s.tenant, t.throttled);
      t.throttled = 0;
    }
  }
}

function anyOutcome(t: Tally): boolean {
  const o = t.outcomes;
  return o.success + o.retry + o.fail + o.not_started > 0;
}
