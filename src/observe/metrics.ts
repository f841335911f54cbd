/**
 * A node's Prometheus metrics (prom-client, one registry per node so that tests running several
 * nodes in one process never share series). Two kinds of source:
 *
 * - events, observed as they happen through the hooks below (the scheduler runtime hands a
 *   delivery out, a result comes back, a proposal settles, the loop commits, a leader changes);
 * - state, read at scrape time from the node (Raft term and indexes per group, wheel sizes, DLQ
 *   sizes, deliveries queued and in flight, the worker hub's count of leases lost), so the hot
 *   path pays nothing for it.
 *
 * The same per tenant, for the most active tenants of the node: tenant-metrics.ts.
 *
 * Every name starts with `tickraft_`; docs/OPERATIONS.md lists them.
 */
import {
  collectDefaultMetrics,
  Counter,
  Gauge,
  Histogram,
  Registry,
  type LabelValues,
} from 'prom-client';
import { SystemClock, type Clock } from '../base/clock.js';
import type { CommitStats, MultiRaftHost } from '../multiraft/host.js';
import { CountBuffer, ObservationBuffer } from './observation-buffer.js';
import { DEFAULT_METRICS_TENANTS } from './tenant-labels.js';
import { ROLE_CHANGE_REASONS, type RoleChangeReason } from './role-changes.js';
import {
  FIRE_LAG_BUCKETS,
  TenantMetrics,
  type FireOutcome,
  type TenantMetricsSource,
} from './tenant-metrics.js';

export type { FireOutcome } from './tenant-metrics.js';

/** What the scheduler side of a node exposes at scrape time, per data group hosted here. */
export interface SchedulerGroupFacts {
  readonly groupId: number;
  /** Jobs waiting in the planning wheel (each with a next slot). */
  readonly planningWheel: number;
  /** SCHEDULED runs waiting in the dispatch wheel. */
  readonly dispatchWheel: number;
  /** Runs in the DLQ (DEAD). */
  readonly deadRuns: number;
  /** Jobs the group holds (every replica knows). */
  readonly jobs: number;
  /** First attempts per second over the last minute, by slot time; 0 unless this node leads. */
  readonly fireRatePerSec: number;
}

/** The node as the metrics read it at scrape time. */
export interface MetricsSource extends TenantMetricsSource {
  readonly host: MultiRaftHost;
  schedulerGroups(): Iterable<SchedulerGroupFacts>;
  deliveryQueued(): number;
  deliveryInflight(): number;
  /** Pull-based workers connected to this node, by pool. */
  workersConnected(): ReadonlyMap<string, number>;
  /** Runs leased to workers now, and runs waiting on this node for a worker. */
  workerLeases(): { readonly held: number; readonly waiting: number };
  /**
   * Leases this node has ended without a completion since it started (cumulative): not renewed
   * within the lease, or held by a worker whose stream ended. Each sends its run to another
   * attempt.
   */
  workerLeasesLost(): { readonly notRenewed: number; readonly disconnected: number };
}

export interface NodeMetricsOptions {
  /** Tenants labelled by name in the per-tenant metrics (--metrics-tenants). @default 20 */
  readonly tenantLabels?: number;
  /** Read at scrape time, to rank the tenants. @default SystemClock */
  readonly clock?: Clock;
}

const PROPOSAL_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5];
const FSYNC_BUCKETS = [0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1];
const BATCH_BUCKETS = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 5000];

export class NodeMetrics {
  readonly registry = new Registry();
  private readonly fires: Counter<'outcome'>;
  private readonly retries: Counter;
  private readonly proposals: Histogram<'result'>;
  private readonly commitEntries: Histogram;
  private readonly commitGroups: Histogram;
  private readonly fsync: Histogram;
  private readonly leaderChanges: Counter<'group'>;
  private readonly held: Counter<'what'>;
  private readonly roleChanges: Counter<'reason'>;
  private readonly peerRefused: Counter<'reason'>;
  private readonly tenants: TenantMetrics;
  // Per-attempt observations wait here until a scrape (or a full buffer): see ObservationBuffer.
  private readonly lagStartPending: ObservationBuffer;
  private readonly lagResponsePending: ObservationBuffer;
  private readonly firesPending: CountBuffer<FireOutcome>;
  private retriesPending = 0;
  /** Label objects per group id, made once per group (lags are observed per attempt). */
  private readonly groupLabels = new Map<number, LabelValues<'group'>>();
  // Per-outcome label objects made once: observing an attempt allocates nothing.
  private readonly outcomeLabels: Record<FireOutcome, LabelValues<'outcome'>> = {
    success: { outcome: 'success' },
    retry: { outcome: 'retry' },
    fail: { outcome: 'fail' },
    not_started: { outcome: 'not_started' },
  };

  constructor(
    private readonly source: MetricsSource,
    nodeId: string,
    options: NodeMetricsOptions = {},
  ) {
    const registers = [this.registry];
    this.registry.setDefaultLabels({ node: nodeId });
    collectDefaultMetrics({ register: this.registry, prefix: 'tickraft_' });
    this.lagStartPending = this.fireLagByGroup(
      registers,
      'tickraft_fire_lag_start_seconds',
      'Slot time to the hand-out of its first delivery attempt, by group',
    );
    this.lagResponsePending = this.fireLagByGroup(
      registers,
      'tickraft_fire_lag_response_seconds',
      'Slot time to the end (response or failure) of its first delivery attempt, by group',
    );
    this.fires = new Counter({
      name: 'tickraft_fires_total',
      help: 'Delivery attempts by outcome (success, retry, fail, not_started)',
      labelNames: ['outcome'],
      registers,
      collect: () => this.firesPending.flush(),
    });
    this.firesPending = new CountBuffer((outcome, n) =>
      this.fires.inc(this.outcomeLabels[outcome], n),
    );
    // Every outcome is exported from the start (at 0), so rate() works before the first failure.
    for (const labels of Object.values(this.outcomeLabels)) this.fires.inc(labels, 0);
    this.retries = new Counter({
      name: 'tickraft_retries_total',
      help: 'Delivery attempts handed out after the first attempt of a run',
      registers,
      collect: () => {
        if (this.retriesPending > 0) this.retries.inc(this.retriesPending);
        this.retriesPending = 0;
      },
    });
    this.proposals = new Histogram({
      name: 'tickraft_proposal_seconds',
      help: 'Scheduler proposal batches: proposed to applied (or failed), by result',
      labelNames: ['result'],
      buckets: PROPOSAL_BUCKETS,
      registers,
    });
    this.commitEntries = new Histogram({
      name: 'tickraft_group_commit_entries',
      help: 'Log entries persisted per group commit (one LevelDB write for every group)',
      buckets: BATCH_BUCKETS,
      registers,
    });
    this.commitGroups = new Histogram({
      name: 'tickraft_group_commit_groups',
      help: 'Groups persisted per group commit',
      buckets: BATCH_BUCKETS,
      registers,
    });
    this.fsync = new Histogram({
      name: 'tickraft_group_commit_fsync_seconds',
      help: 'Time of the synced write of a group commit',
      buckets: FSYNC_BUCKETS,
      registers,
    });
    this.leaderChanges = new Counter({
      name: 'tickraft_leader_changes_total',
      help: 'Leader changes seen by this replica, per group (the first leader counts)',
      labelNames: ['group'],
      registers,
    });
    this.held = this.heldCounters(registers);
    this.roleChanges = roleChangeCounter(registers);
    this.peerRefused = new Counter({
      name: 'tickraft_peer_connections_refused_total',
      help: 'Connections to the peer port refused by mutual TLS, by reason (the certificate verdict or handshake error)',
      labelNames: ['reason'],
      registers,
    });
    this.raftGauges(registers);
    this.schedulerGauges(registers);
    this.workerLeaseLosses(registers);
    this.tenants = new TenantMetrics(source, registers, {
      topN: options.tenantLabels ?? DEFAULT_METRICS_TENANTS,
      clock: options.clock ?? SystemClock,
    });
  }

  /** How often this node was held (see loopHeld), and its leaders' heartbeats meanwhile. */
  private heldCounters(registers: Registry[]): Counter<'what'> {
    const held = new Counter({
      name: 'tickraft_loop_held_total',
      help: 'Times this node was held for half an election timeout or more, by what: event_loop (nothing ran) or raft_turn (one turn of the Raft loop); each is logged with where the time went',
      labelNames: ['what'],
      registers,
    });
    // Both exported from the start, so that rate() and increase() work before the first.
    for (const what of ['event_loop', 'raft_turn'] as const) held.inc({ what }, 0);
    const host = this.source.host;
    let beatsSeen = 0;
    new Counter({
      name: 'tickraft_raft_heartbeats_while_held_total',
      help: "Heartbeats this node's leaders sent while the Raft loop awaited a disk write",
      registers,
      collect() {
        const now = host.stats.heartbeatsWhileHeld;
        this.inc(Math.max(0, now - beatsSeen));
        beatsSeen = now;
      },
    });
    return held;
  }

  /**
   * A fire lag histogram by group, fed through the buffer returned (flushed by its scrape). By
   * group, because a lag confined to one group points at its leader (a slow disk, a busy node, a
   * group past its fire rate) where a node-wide figure would average it away. Only leaders
   * deliver, so a node has series for the groups it leads or has led.
   */
  private fireLagByGroup(registers: Registry[], name: string, help: string): ObservationBuffer {
    const pending = new ObservationBuffer((v, group) =>
      histogram.observe(this.groupLabel(group), v),
    );
    const histogram = new Histogram({
      name,
      help,
      labelNames: ['group'],
      buckets: FIRE_LAG_BUCKETS,
      registers,
      collect: () => pending.flush(),
    });
    return pending;
  }

  /**
   * Worker leases ended without a completion. The worker hub counts them as plain numbers since
   * the node started; each scrape adds what is new since the one before, so the hub needs no
   * prom-client and a lost lease costs it one increment. Both causes are exported from the
   * start (at 0), so that rate() and increase() work before the first loss.
   */
  private workerLeaseLosses(registers: Registry[]): void {
    const source = this.source;
    let seen = { notRenewed: 0, disconnected: 0 };
    new Counter({
      name: 'tickraft_worker_leases_expired_total',
      help: 'Worker leases this node ended without a completion, by cause: not_renewed (the lease ran out) or disconnected (the worker stream ended); each run goes to another attempt',
      labelNames: ['cause'],
      registers,
      collect() {
        const now = source.workerLeasesLost();
        this.inc({ cause: 'not_renewed' }, Math.max(0, now.notRenewed - seen.notRenewed));
        this.inc({ cause: 'disconnected' }, Math.max(0, now.disconnected - seen.disconnected));
        seen = { notRenewed: now.notRenewed, disconnected: now.disconnected };
      },
    });
  }

  /** Per-group Raft gauges, read from the node at scrape time. */
  private raftGauges(registers: Registry[]): void {
    const source = this.source;
    const raftGauge = (name: string, help: string, read: (g: RaftFacts) => number): void => {
      new Gauge({
        name,
        help,
        labelNames: ['group'],
        registers,
        collect() {
          // Groups may have gone away since the last scrape: start from an empty series set.
          this.reset();
          for (const g of source.host.groups.values()) {
            const r = g.node.raft;
            this.set(
              { group: String(g.groupId) },
              read({ term: r.term, commit: r.log.committed, applied: g.appliedIndex, r }),
            );
          }
        },
      });
    };
    raftGauge('tickraft_raft_term', 'Raft term of each group hosted here', (g) => g.term);
    raftGauge(
      'tickraft_raft_commit_index',
      'Commit index of each group hosted here',
      (g) => g.commit,
    );
    raftGauge(
      'tickraft_raft_applied_index',
      'Applied index of each group hosted here',
      (g) => g.applied,
    );
    raftGauge('tickraft_raft_is_leader', '1 where this node leads the group', (g) =>
      g.r.role === 'leader' ? 1 : 0,
    );
  }

  /** Per-group scheduler gauges and the delivery queue, read from the node at scrape time. */
  private schedulerGauges(registers: Registry[]): void {
    const source = this.source;
    const schedGauge = (
      name: string,
      help: string,
      read: (g: SchedulerGroupFacts) => number,
    ): void => {
      new Gauge({
        name,
        help,
        labelNames: ['group'],
        registers,
        collect() {
          this.reset();
          for (const g of source.schedulerGroups()) this.set({ group: String(g.groupId) }, read(g));
        },
      });
    };
    schedGauge(
      'tickraft_planning_wheel_entries',
      'Jobs with a next slot (the planning index: in its wheel when due within ~41 s, else found by its scan of the job table), per group',
      (g) => g.planningWheel,
    );
    schedGauge(
      'tickraft_dispatch_wheel_entries',
      'Scheduled runs waiting in the dispatch wheel (due-index), per group',
      (g) => g.dispatchWheel,
    );
    schedGauge(
      'tickraft_dead_runs',
      'Runs in the DLQ, per group (every replica reports it: aggregate with max by group)',
      (g) => g.deadRuns,
    );
    schedGauge(
      'tickraft_group_jobs',
      'Jobs held by each group hosted here (every replica reports it: aggregate with max by group)',
      (g) => g.jobs,
    );
    schedGauge(
      'tickraft_group_fire_rate_per_second',
      'First attempts per second over the last minute, by slot time, of each group this node leads (0 on followers); what --split-fire-rate compares against',
      (g) => g.fireRatePerSec,
    );
    new Gauge({
      name: 'tickraft_deliveries_inflight',
      help: 'Delivery attempts being sent by this node',
      registers,
      collect() {
        this.set(source.deliveryInflight());
      },
    });
    new Gauge({
      name: 'tickraft_deliveries_queued',
      help: 'Delivery attempts queued on this node (fair queue), not yet sent',
      registers,
      collect() {
        this.set(source.deliveryQueued());
      },
    });
    new Gauge({
      name: 'tickraft_workers_connected',
      help: 'Pull-based workers with a Work stream open to this node, by pool',
      labelNames: ['pool'],
      registers,
      collect() {
        this.reset();
        for (const [pool, n] of source.workersConnected()) this.set({ pool }, n);
      },
    });
    new Gauge({
      name: 'tickraft_worker_leases',
      help: 'Runs leased to workers by this node (state=held), and runs waiting here for a worker of their pool (state=waiting)',
      labelNames: ['state'],
      registers,
      collect() {
        const l = source.workerLeases();
        this.set({ state: 'held' }, l.held);
        this.set({ state: 'waiting' }, l.waiting);
      },
    });
  }

  // -----------------------------------------------------------------------------------------
  // Event hooks (structurally match SchedulerObserver in src/server/scheduler-runtime.ts)

  deliveryHandedOut(
    attempt: number,
    slotMs: number,
    nowMs: number,
    tenant: string,
    groupId: number,
  ): void {
    const lag = Math.max(0, nowMs - slotMs) / 1000;
    if (attempt === 1) this.lagStartPending.add(lag, groupId);
    else this.retriesPending++;
    this.tenants.handedOut(tenant, attempt, lag);
  }

  deliveryFinished(
    attempt: number,
    outcome: FireOutcome,
    slotMs: number,
    nowMs: number,
    tenant: string,
    groupId: number,
  ): void {
    this.firesPending.add(outcome);
    if (attempt === 1 && outcome !== 'not_started')
      this.lagResponsePending.add(Math.max(0, nowMs - slotMs) / 1000, groupId);
    this.tenants.finished(tenant, outcome);
  }

  /**
   * `n` runs of the tenant were handed out late because it was at its fire rate limit (the
   * fire-rate limiter calls it through SchedulerObserver.fireThrottled).
   */
  fireThrottled(tenant: string, n = 1): void {
    this.tenants.throttled(tenant, n);
  }

  proposalSettled(result: string, durationMs: number): void {
    this.proposals.observe({ result }, durationMs / 1000);
  }

  /** Called by the host after each group commit (MultiRaftHost.onCommit). */
  commitDone(s: CommitStats): void {
    this.commitEntries.observe(s.entries);
    this.commitGroups.observe(s.groups);
    this.fsync.observe(s.fsyncMs / 1000);
  }

  loopHeld(what: 'event_loop' | 'raft_turn'): void {
    this.held.inc({ what });
  }

  roleChanged(reason: RoleChangeReason): void {
    this.roleChanges.inc({ reason: labelOf(reason) });
  }

  leaderChanged(groupId: number): void {
    this.leaderChanges.inc(this.groupLabel(groupId));
  }

  private groupLabel(groupId: number): LabelValues<'group'> {
    let labels = this.groupLabels.get(groupId);
    if (labels === undefined) {
      labels = { group: String(groupId) };
      this.groupLabels.set(groupId, labels);
    }
    return labels;
  }

  /** Mutual TLS refused a connection to the peer port; `reason` is a code (a bounded set). */
  peerConnectionRefused(reason: string): void {
    this.peerRefused.inc({ reason: reason.slice(0, 64) });
  }

  /**
   * The Prometheus text exposition of every metric: the scrape. The tenants are ranked here, so
   * reading `registry` directly shows the per-tenant series under the last ranking.
   */
  async render(): Promise<{ contentType: string; body: string }> {
    this.tenants.beforeScrape();
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}

interface RaftFacts {
  readonly term: number;
  readonly commit: number;
  readonly applied: number;
  readonly r: { readonly role: string };
}

/** Why the replicas here changed role (role-changes.ts); every reason exported from the start. */
function roleChangeCounter(registers: Registry[]): Counter<'reason'> {
  const counter = new Counter({
    name: 'tickraft_raft_role_changes_total',
    help: 'Role changes of the replicas here, by why: leader_silent (a follower campaigned), check_quorum (a leader heard no quorum), higher_term (a leader saw a later term), transfer (a transferee campaigned), campaign_lost',
    labelNames: ['reason'],
    registers,
  });
  for (const reason of ROLE_CHANGE_REASONS) counter.inc({ reason: labelOf(reason) }, 0);
  return counter;
}

/** A role change's reason as a Prometheus label value (snake case). */
function labelOf(reason: RoleChangeReason): string {
  return reason.replaceAll('-', '_');
}
