/**
 * The I/O shell around each data group's GroupDispatcher: it reads the wall clock and the Raft
 * facts (leader, term, lease, applied term), steps the dispatcher, proposes what it returns as
 * one batch per group, hands its deliveries to the DeliveryRunner, and reports every proposal's
 * fate and every attempt's end back. It runs on a short timer (the wheel's resolution) and after
 * every loop turn of the host, so a due slot waits for neither a Raft tick nor an idle loop.
 *
 * Graceful hand-over (deploys, start-up balancing): handOver() first drains the group's
 * dispatcher — no new intents or deliveries, in-flight attempts finish and their results commit —
 * and only then asks Raft to transfer, so the next leader has nothing to redo.
 */
import type { Clock } from '../base/clock.js';
import type { Rand } from '../base/rand.js';
import { planRetry } from '../delivery/backoff.js';
import {
  deliveryOriginOf,
  type DeliveryRequest,
  type DeliveryRunner,
  type StartVerdict,
} from '../delivery/delivery-runner.js';
import { handOutBudget, handOutGateOf } from '../delivery/hand-out-pace.js';
import { TenantFireRate } from '../delivery/tenant-fire-rate.js';
import type { HandOutAdmission } from '../scheduler/hand-out-queue.js';
import type { AttemptReport } from '../delivery/webhook.js';
import type { RunOutputStore } from '../delivery/run-output-store.js';
import type { GroupReplica } from '../multiraft/group-replica.js';
import type { MultiRaftHost } from '../multiraft/host.js';
import type { NodeId } from '../raft/messages.js';
import {
  encodeSchedulerCommand,
  type CompleteRunCommand,
  type FireIntent,
  type SchedulerCommand,
} from '../scheduler/commands.js';
import { isTerminal } from '../scheduler/model.js';
import type { Tracing } from '../observe/tracing.js';
import { RunWatchers, type RunListener } from './run-watchers.js';
import {
  GroupDispatcher,
  type DeliveryOrder,
  type DispatcherOptions,
  type DispatchStep,
  type Leadership,
  type ProposalFate,
  type ResultRelease,
  type RunCompletion,
  type UpstreamQuery,
} from '../scheduler/dispatcher.js';
import type { UpstreamReader } from '../api/api-node.js';
import { FireRateMeter } from '../scheduler/fire-rate.js';
import { RotatingPass } from '../scheduler/rotating-pass.js';
import type { DataGroupStateMachine } from './data-group-state-machine.js';

/**
 * Where the runtime reports what it does, for metrics (src/observe/metrics.ts NodeMetrics matches
 * it). Called on the hot path: implementations must be cheap and must not throw.
 */
export interface SchedulerObserver {
  /**
   * An attempt of a job of `tenant` in data group `groupId` went to the delivery runner (`nowMs`
   * wall clock).
   */
  deliveryHandedOut(
    attempt: number,
    slotMs: number,
    nowMs: number,
    tenant: string,
    groupId: number,
  ): void;
  /** An attempt's result came back; `not_started` = it was dropped before being sent. */
  deliveryFinished(
    attempt: number,
    outcome: 'success' | 'retry' | 'fail' | 'not_started',
    slotMs: number,
    nowMs: number,
    tenant: string,
    groupId: number,
  ): void;
  /** A proposal batch settled: `result` is committed, dropped or unknown. */
  proposalSettled(result: ProposalFate, durationMs: number): void;
  /** Runs of the tenant handed out after waiting for its fire rate (tenant-fire-rate.ts). */
  fireThrottled?(tenant: string, n: number): void;
}

export interface SchedulerRuntimeOptions {
  readonly host: MultiRaftHost;
  readonly runner: DeliveryRunner;
  readonly clock: Clock;
  /** Retry jitter. */
  readonly rand: Rand;
  /** How often the dispatchers are stepped when nothing else wakes them. @default 10 */
  readonly pollMs?: number;
  /** Longest a hand-over waits for in-flight attempts before it transfers anyway. @default 10000 */
  readonly drainMaxMs?: number;
  readonly dispatcher?: Partial<Omit<DispatcherOptions, 'startMs' | 'retryAt'>>;
  readonly onError?: (err: unknown) => void;
  readonly observer?: SchedulerObserver;
  /**
   * Fires per second a tenant may hand out on this node (its share of its limit); absent, no
   * tenant is held to a rate.
   */
  readonly fireRateOf?: (tenant: string) => number;
  /**
   * How long before its next due work a quiet group wakes (wakeBeforeDue): at least the
   * longest failover (two election timeouts and the election itself). @default 2000
   */
  readonly dueWakeLeadMs?: number;
  /** Where webhook answers' outputs are kept beside the log; absent: nowhere. */
  readonly runOutputs?: RunOutputStore;
  /** Spans of delivery attempts (src/observe/tracing.ts); absent: none. */
  readonly tracing?: Tracing;
  /**
   * Longest stepAll() runs before it leaves the groups it has not reached to a follow-up step
   * at the next turn of the event loop (rotating-pass.ts); absent: every step visits them all.
   */
  readonly stepSliceMs?: number;
}

interface GroupRuntime {
  readonly groupId: number;
  readonly sm: DataGroupStateMachine;
  readonly dispatcher: GroupDispatcher;
  /** The term this node led the group in at the last step; 0 = not leader. */
  ledTerm: number;
  /** First attempts handed out, per second of their slots, while this node leads. */
  readonly fireRate: FireRateMeter;
  /** The group's children at the last step: a split applied since resets the meter. */
  children: number;
  /** ownerOf(groupId, ownerTerm), built once per term rather than once per attempt. */
  owner: string;
  ownerTerm: number;
  /** setDueSoon is on for this group until then (wall ms); undefined while it is off. */
  awakeUntilMs: number | undefined;
  /** How this replica's latest campaign and leadership went (leadershipTimeline). */
  readonly timeline: LeadershipTimeline;
}

/**
 * When this replica's latest leadership reached each stage, as wall-clock ms seen at the
 * runtime's steps (every 10 ms and after every loop turn); 0 until reached. What a failover
 * spends on each stage: the campaign starts once the leader is missed (detection), then the
 * election, the new term's no-op applied, the lease, and the first attempt handed out.
 */
export interface LeadershipTimeline {
  /** The term led (0 while campaigning or before any leadership). */
  term: number;
  /** This replica last became a (pre-)candidate (a leader that never campaigned here: 0). */
  campaignAtMs: number;
  campaigning: boolean;
  electedAtMs: number;
  caughtUpAtMs: number;
  leaseAtMs: number;
  firstHandOutAtMs: number;
}

interface HandOver {
  readonly to: NodeId;
  readonly sinceMs: number;
  askedAtMs: number;
  /** Raft took the transfer on (leadTransferee was `to`) at some step since it was asked. */
  transferSeen: boolean;
}

export interface SchedulerRuntimeStats {
  steps: number;
  proposed: number;
  delivered: number;
  results: number;
}

/**
 * Attempt results a node proposes per step, over all its groups. Results held during a spike
 * are released together (the backlog ends, or their time is up); without a cap a dozen groups
 * would each log a full entry at once, and every replica would apply them all in one loop
 * turn, long enough to delay heartbeats on a loaded machine.
 */
export const RESULTS_PER_STEP = 1024;

/**
 * How far ahead requests are rendered, as a share of the look-ahead: well inside it, so that
 * the intents of a slot have committed before the slot comes within reach (foresee()).
 */
const RENDER_AHEAD_SHARE = 0.5;

/** Requests rendered per step at most (about 10 µs each): a few ms of a quiet loop turn. */
export const RENDERS_PER_STEP = 256;

/**
 * Between the planning-index scans of consecutive group ids (a prime number of ms, so that the
 * phases of a node's groups, taken modulo 20 s, spread instead of repeating).
 */
const PLANNING_SCAN_PHASE_STEP_MS = 1_291;

export class SchedulerRuntime {
  private readonly groups = new Map<number, GroupRuntime>();
  /** The groups in the order stepAll() visits them; it starts one further at each step. */
  private groupOrder: GroupRuntime[] = [];
  private readonly rotation = new RotatingPass();
  private followUp = false;
  private readonly handOvers = new Map<number, HandOver>();
  private timer: NodeJS.Timeout | undefined;
  private stepping = false;
  readonly stats: SchedulerRuntimeStats = { steps: 0, proposed: 0, delivered: 0, results: 0 };

  /**
   * Whether the delivery queue has room for a tenant's run to an origin (hand-out-pace.ts), and
   * the tenant is within its fire rate.
   */
  private readonly admits: HandOutAdmission;
  private readonly fireRate: TenantFireRate | undefined;
  private readonly taken: ((tenant: string) => void) | undefined;

  private readonly dueWakeLeadMs: number;

  private readonly watchers = new RunWatchers();
  /** Reads a waiting run's upstreams where they live; none until the API sets it. */
  private upstreamReader: UpstreamReader | undefined;

  /** Some group here had runs waiting for upstreams at the last step. */
  private anyWaiting = false;

  /**
   * A run of a group hosted here changed: if it finished, the runs here waiting for its job are
   * read again at once rather than at their next poll (an upstream in another node's group is
   * found by the poll alone).
   */
  private upstreamMayHaveChanged(sm: DataGroupStateMachine, fireId: string): void {
    const run = sm.scheduler.runs.get(fireId);
    if (run === undefined || !isTerminal(run.status)) return;
    for (const g of this.groups.values()) g.dispatcher.upstreamChanged(run.jobId);
  }

  /** How waiting runs' upstreams are read (the API routes each to its group's leader). */
  setUpstreamReader(reader: UpstreamReader): void {
    this.upstreamReader = reader;
  }

  constructor(private readonly opts: SchedulerRuntimeOptions) {
    this.dueWakeLeadMs = opts.dueWakeLeadMs ?? 2000;
    const observer = opts.observer;
    this.fireRate =
      opts.fireRateOf &&
      new TenantFireRate(opts.fireRateOf, (tenant) => observer?.fireThrottled?.(tenant, 1));
    const gate = handOutGateOf(opts.runner, this.fireRate);
    this.admits = gate.admits;
    this.taken = gate.taken;
  }

  /** Starts dispatching for a data group hosted here (every replica keeps its indexes). */
  attach(groupId: number, sm: DataGroupStateMachine): GroupDispatcher {
    const clock = this.opts.clock;
    const rand = this.opts.rand;
    const dispatcher = new GroupDispatcher(sm.scheduler, {
      ...this.opts.dispatcher,
      // The groups' scans of their job tables for the planning index spread over ~20 s.
      planningScanPhaseMs: (groupId * PLANNING_SCAN_PHASE_STEP_MS) % 20_000,
      startMs: clock.nowMs(),
      originOf: deliveryOriginOf,
      retryAt: (job, attempt, slotMs, nowMs, retryAfterMs) =>
        planRetry(job.retry, attempt, slotMs, nowMs, retryAfterMs, rand),
    });
    sm.onRestore = () => dispatcher.rebuild();
    dispatcher.onRunTouched = (fireId) => {
      this.watchers.touched(groupId, fireId);
      if (this.anyWaiting) this.upstreamMayHaveChanged(sm, fireId);
    };
    this.groups.set(groupId, {
      groupId,
      sm,
      dispatcher,
      ledTerm: 0,
      fireRate: new FireRateMeter(clock.nowMs()),
      children: sm.childIds.length,
      owner: ownerOf(groupId, 0),
      ownerTerm: 0,
      awakeUntilMs: undefined,
      timeline: {
        term: 0,
        campaignAtMs: 0,
        campaigning: false,
        electedAtMs: 0,
        caughtUpAtMs: 0,
        leaseAtMs: 0,
        firstHandOutAtMs: 0,
      },
    });
    this.groupOrder = [...this.groups.values()];
    return dispatcher;
  }

  /** Stops dispatching for a group whose replica left this node (a replica move). */
  detach(groupId: number): void {
    this.groups.delete(groupId);
    this.groupOrder = [...this.groups.values()];
    this.handOvers.delete(groupId);
  }

  dispatcherOf(groupId: number): GroupDispatcher | undefined {
    return this.groups.get(groupId)?.dispatcher;
  }

  /**
   * The group's fire rate (first attempts handed out per second, over the last minute) while
   * this node leads it; 0 on a follower, which hands nothing out and so knows no rate.
   */
  /** The group's leadership timeline on this replica (a copy), for the debug status. */
  leadershipTimeline(groupId: number): LeadershipTimeline | undefined {
    const t = this.groups.get(groupId)?.timeline;
    return t && { ...t };
  }

  fireRatePerSec(groupId: number): number {
    const g = this.groups.get(groupId);
    if (!g || g.ledTerm === 0) return 0;
    return g.fireRate.ratePerSec(this.opts.clock.nowMs());
  }

  /**
   * The tenant's runs handed out here in the last complete second, and how many of them waited
   * for its fire rate.
   */
  tenantFires(tenant: string): { readonly fired: number; readonly throttled: number } {
    const nowMs = this.opts.clock.nowMs();
    return {
      fired: this.fireRate?.firedLastSecond(tenant, nowMs) ?? 0,
      throttled: this.fireRate?.throttledLastSecond(tenant, nowMs) ?? 0,
    };
  }

  start(): void {
    this.timer = setInterval(() => this.stepAll(), this.opts.pollMs ?? 10);
  }

  private stopped = false;

  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private lastStepMs = 0;

  /**
   * After a loop turn: steps the dispatchers unless they were stepped within the last couple
   * of milliseconds. Under load the loop turns many times per millisecond; stepping at each
   * would cost more than it gains, and a step's results share one entry anyway.
   */
  stepAfterTurn(): void {
    if (this.opts.clock.monotonicMs() - this.lastStepMs >= 2) this.stepAll();
  }

  /**
   * Steps every group's dispatcher once. Safe to call at any time between loop turns. The
   * groups share one hand-out budget: what the delivery queue lacks to hold
   * DELIVERY_QUEUE_TARGET attempts that could start (hand-out-pace.ts), and each run is handed
   * out only if the queue has room for its tenant and origin. A group left with due runs gets
   * the first share at a later step (the order rotates), and when the budget ran out while the
   * queue had room another step follows at the next loop turn, after the runner has started
   * sending. With `stepSliceMs`, a step that has run that long leaves the groups it has not
   * reached to a follow-up step at the next turn of the event loop, which starts with them.
   */
  stepAll(): void {
    if (this.stepping) return;
    this.lastStepMs = this.opts.clock.monotonicMs();
    this.stepping = true;
    try {
      const nowMs = this.opts.clock.nowMs();
      const runner = this.opts.runner;
      const budget = handOutBudget(runner);
      this.anyWaiting = false;
      for (const g of this.groups.values())
        if (g.dispatcher.waitingCount > 0) this.anyWaiting = true;
      this.fireRate?.step(nowMs);
      // Deliveries wait for this node to send them (in the runner below their caps, or due and
      // not handed out at the last step for want of budget): the groups hold their results back
      // meanwhile. Attempts behind a slow endpoint's cap do not count: they wait for answers,
      // and a result held for them would be held for everybody.
      const sending = this.backlogAtLastStep || runner.startableCount > 0;
      let left = budget;
      let resultsLeft = RESULTS_PER_STEP;
      let backlog = false;
      const order = this.groupOrder;
      const clock = this.opts.clock;
      const pass = this.rotation.run(
        order.length,
        (i) => {
          const g = order[i]!;
          const stepped = this.stepGroup(g, nowMs, left, { hold: sending, max: resultsLeft });
          left -= stepped.handedOut;
          resultsLeft -= stepped.results;
          if (g.ledTerm !== 0 && g.dispatcher.handOutCapped) backlog = true;
        },
        () => clock.monotonicMs(),
        this.opts.stepSliceMs,
      );
      // A cut pass did not see the groups it left: what they had left stands until it does.
      this.backlogAtLastStep = backlog || (pass.cut && this.backlogAtLastStep);
      if (!pass.cut && !sending && !backlog) this.renderAhead(nowMs);
      this.opts.runner.sweepRendered();
      // Budget used up with room in the queue (it is what the runner lacks): go on at the next
      // turn. With the queue full the runner's own completions turn the loop (stepAfterTurn).
      // A cut pass goes on at once with the groups it did not reach.
      if (pass.cut || (backlog && budget > 0 && left === 0)) this.scheduleFollowUp();
      this.progressHandOvers(nowMs);
    } catch (err) {
      this.opts.onError?.(err);
    } finally {
      this.stepping = false;
    }
  }

  /**
   * Renders the requests of runs due soon (GroupDispatcher.foresee), at most RENDERS_PER_STEP
   * per step and only while nothing waits to be sent: the seconds before a :00 spike are quiet,
   * and a request rendered then costs the spike nothing but the send.
   */
  private renderAhead(nowMs: number): void {
    let left = RENDERS_PER_STEP;
    for (const g of this.groupOrder) {
      if (g.ledTerm === 0) continue;
      const untilMs = nowMs + g.dispatcher.lookAheadMs * RENDER_AHEAD_SHARE;
      for (const order of g.dispatcher.foresee(nowMs, untilMs, left)) {
        this.opts.runner.prerender(order);
        left--;
      }
      if (left <= 0) return;
    }
  }

  /** Some group led here had due runs it could not hand out yet at the last stepAll(). */
  private backlogAtLastStep = false;

  private scheduleFollowUp(): void {
    if (this.followUp) return;
    this.followUp = true;
    setImmediate(() => {
      this.followUp = false;
      if (!this.stopped) this.stepAll();
    });
  }

  /**
   * Steps one group, handing out at most `budget` runs and proposing results as `results`
   * allows; returns how many runs it handed out and how many results it proposed.
   */
  private stepGroup(
    g: GroupRuntime,
    nowMs: number,
    budget: number,
    results: ResultRelease,
  ): { handedOut: number; results: number } {
    const replica = this.opts.host.groups.get(g.groupId);
    if (!replica) return NOTHING_STEPPED;
    g.dispatcher.afterApply();
    let leadership: Leadership | undefined;
    if (replica.isLeader) {
      const term = replica.node.raft.term;
      leadership = {
        term,
        leaseValid: this.leaseHolds(g.groupId),
        caughtUp: replica.appliedTerm === term,
        handedOver: replica.node.raft.leadsByTransfer,
      };
    }
    // A quiesced group has no lease (no heartbeats, no quorum acks): wake it while runs are
    // live so that it holds a lease when their slots come.
    if (leadership && g.dispatcher.hasLiveWork && replica.node.isQuiesced())
      this.opts.host.report(g.groupId, { kind: 'wake' });
    this.wakeBeforeDue(g, replica, nowMs);
    const term = leadership?.term ?? 0;
    if (g.ledTerm !== 0 && g.ledTerm !== term) {
      // Leadership ended: attempts not yet started are the next leader's to make.
      this.opts.runner.dropQueued(ownerOf(g.groupId, g.ledTerm));
    }
    // The rate is of this leadership and of the jobs the group holds now: a new term, or a
    // split that moved half the jobs to a child, starts the count again.
    const children = g.sm.childIds.length;
    if ((term !== 0 && g.ledTerm !== term) || children !== g.children) g.fireRate.reset(nowMs);
    g.children = children;
    g.ledTerm = term;
    const step = g.dispatcher.step(nowMs, leadership, budget, results, this.admits, this.taken);
    this.stats.steps++;
    noteTimeline(g.timeline, replica.node.raft.role, leadership, step, nowMs);
    if (step.proposals.length > 0) this.propose(g, step.proposals, term);
    for (const order of step.deliveries) this.deliver(g, order);
    for (const q of step.upstreamQueries) this.readUpstreams(g, q);
    let proposedResults = 0;
    for (const c of step.proposals) {
      if (c.op === 'attempt-result') proposedResults++;
      else if (c.op === 'attempt-results') proposedResults += c.results.length;
    }
    return {
      handedOut: Math.min(budget, step.deliveries.length),
      results: proposedResults,
    };
  }

  /**
   * Every replica of a quiet group (leader or follower) wakes it a little before its applied
   * state next asks the leader to act, so that a leader that died or was cut off while the
   * group was quiet is replaced before the slot, within an election timeout of the wake,
   * instead of after three missed beacons. Asked of quiesced groups only (their state does not
   * change, so the answer is computed once); a group with nothing due soon stays quiet.
   */
  private wakeBeforeDue(g: GroupRuntime, replica: GroupReplica, nowMs: number): void {
    if (g.awakeUntilMs !== undefined) {
      if (nowMs <= g.awakeUntilMs) return;
      g.awakeUntilMs = undefined;
      this.opts.host.report(g.groupId, { kind: 'due-soon', on: false });
    }
    if (!replica.node.isQuiesced()) return;
    const dueMs = g.dispatcher.nextDueMs();
    if (dueMs === undefined || dueMs - nowMs > this.dueWakeLeadMs) return;
    g.awakeUntilMs = Math.max(nowMs, dueMs) + this.dueWakeLeadMs;
    this.opts.host.report(g.groupId, { kind: 'due-soon', on: true });
  }

  /**
   * The lease as Raft sees it, trusted only when Raft has been ticked up to the clock: after a
   * stall the loop has not ticked yet, and a lease that ran out meanwhile still looks valid.
   */
  private leaseHolds(groupId: number): boolean {
    const host = this.opts.host;
    const behind = host.ticksBehind();
    if (behind > 1) host.wake();
    // Ticks the clock has passed but Raft has not counted yet eat into the lease; one more for
    // the tick in progress.
    const remaining = host.groups.get(groupId)?.node.leaseRemainingTicks() ?? 0;
    return remaining > behind + 1;
  }

  /**
   * Whether an attempt queued by `owner` (group/term) may start now: `drop` once that term's
   * leadership is over, `wait` while the lease is momentarily not fresh (a busy loop has not
   * ticked Raft yet, or a heartbeat round is late), `start` otherwise. The lease verdict is
   * reused for a millisecond: thousands of attempts start per second during a spike.
   */
  mayStart(owner: string, request?: DeliveryRequest): StartVerdict {
    // Asked once per attempt: the owner's parts are parsed once per owner, not per attempt.
    let parsed = this.owners.get(owner);
    if (parsed === undefined) {
      const slash = owner.indexOf('/');
      parsed = { groupId: Number(owner.slice(0, slash)), term: Number(owner.slice(slash + 1)) };
      if (this.owners.size >= 4096) this.owners.clear();
      this.owners.set(owner, parsed);
    }
    const { groupId, term } = parsed;
    const replica = this.opts.host.groups.get(groupId);
    if (replica?.isLeader !== true || replica.node.raft.term !== term) return 'drop';
    // A pause or delete applied while the attempt waited in the delivery queue wins.
    const dispatcher = this.groups.get(groupId)?.dispatcher;
    if (request && dispatcher && !dispatcher.maySend(request)) return 'cancel';
    const nowMs = this.opts.clock.monotonicMs();
    const cached = this.leaseCache.get(groupId);
    if (cached !== undefined && cached.term === term && nowMs - cached.atMs < 1)
      return cached.holds ? 'start' : 'wait';
    const holds = this.leaseHolds(groupId);
    this.leaseCache.set(groupId, { term, atMs: nowMs, holds });
    return holds ? 'start' : 'wait';
  }

  private readonly leaseCache = new Map<number, { term: number; atMs: number; holds: boolean }>();
  /** Owners (group/term) seen by mayStart, parsed; a few per group over a node's life. */
  private readonly owners = new Map<string, { readonly groupId: number; readonly term: number }>();

  private propose(g: GroupRuntime, commands: SchedulerCommand[], term: number): void {
    this.stats.proposed += commands.length;
    const datas = commands.map(encodeSchedulerCommand);
    const clock = this.opts.clock;
    const observer = this.opts.observer;
    const sinceMs = clock.monotonicMs();
    const settle = (fate: ProposalFate): void => {
      observer?.proposalSettled(fate, clock.monotonicMs() - sinceMs);
      if (fate === 'committed' && this.opts.tracing?.enabled === true)
        this.resultsCommitted(commands, clock.nowMs());
      for (const c of commands) g.dispatcher.proposalSettled(c, fate, term);
    };
    this.opts.host.proposeBatch(g.groupId, datas).then(
      () => settle('committed'),
      (err: unknown) => settle(fateOf(err)),
    );
  }

  /** Ends the spans of the attempts whose results these committed commands hold. */
  private resultsCommitted(commands: readonly SchedulerCommand[], nowMs: number): void {
    const tracing = this.opts.tracing;
    if (tracing === undefined) return;
    for (const c of commands) {
      if (c.op === 'attempt-result') tracing.attemptCommitted(c.fireId, c.attempt, nowMs);
      else if (c.op === 'attempt-results')
        for (const r of c.results) tracing.attemptCommitted(r.fireId, r.attempt, nowMs);
    }
  }

  private deliver(g: GroupRuntime, order: DeliveryOrder): void {
    this.stats.delivered++;
    const observer = this.opts.observer;
    const nowMs = this.opts.clock.nowMs();
    if (order.attempt === 1) g.fireRate.record(order.slotMs);
    const tracing = this.opts.tracing;
    if (tracing?.enabled === true)
      tracing.attemptHandedOut({
        fireId: order.fireId,
        attempt: order.attempt,
        tenant: order.job.tenant,
        jobId: order.jobId,
        token: order.token,
        groupId: g.groupId,
        // A first attempt's story starts when its intent committed (the run was created).
        startMs:
          order.attempt === 1
            ? (g.sm.scheduler.runs.get(order.fireId)?.createdAtMs ?? nowMs)
            : nowMs,
        slotMs: order.slotMs,
        handedOutMs: nowMs,
      });
    observer?.deliveryHandedOut(order.attempt, order.slotMs, nowMs, order.job.tenant, g.groupId);
    if (g.ownerTerm !== order.term) {
      g.owner = ownerOf(g.groupId, order.term);
      g.ownerTerm = order.term;
    }
    this.opts.runner.submit(g.owner, order, (report: AttemptReport) => {
      this.stats.results++;
      if (tracing?.enabled === true) {
        const at = this.opts.clock.nowMs();
        tracing.attemptAnswered(
          order.fireId,
          order.attempt,
          at,
          report.code === 'DELIVERY_NOT_STARTED' ? 'not_started' : report.outcome,
          report.statusCode,
        );
        // Never sent: no result of it will commit.
        if (report.code === 'DELIVERY_NOT_STARTED')
          tracing.attemptCommitted(order.fireId, order.attempt, at);
      }
      if (report.code === 'DELIVERY_NOT_STARTED') {
        observer?.deliveryFinished(
          order.attempt,
          'not_started',
          order.slotMs,
          this.opts.clock.nowMs(),
          order.job.tenant,
          g.groupId,
        );
        g.dispatcher.attemptNotStarted(order, this.opts.clock.nowMs());
        return;
      }
      // The answer's body in full, on this node, which the attempt record names (its `node`).
      if (report.output !== undefined)
        this.opts.runOutputs?.put(
          order.fireId,
          order.attempt,
          report.output.text,
          report.output.truncated,
        );
      observer?.deliveryFinished(
        order.attempt,
        report.outcome,
        order.slotMs,
        this.opts.clock.nowMs(),
        order.job.tenant,
        g.groupId,
      );
      g.dispatcher.attemptDone(
        order,
        {
          outcome: report.outcome,
          statusCode: report.statusCode,
          durationMs: report.durationMs,
          error: report.error ?? report.code,
          responseExcerpt: report.responseExcerpt === '' ? undefined : report.responseExcerpt,
          retryAfterMs: report.retryAfterMs,
          isProvablyUndelivered: report.isProvablyUndelivered,
          worker: report.worker,
        },
        this.opts.clock.nowMs(),
      );
    });
  }

  /**
   * Reads each pending upstream of a waiting run where it lives and reports what was found; a
   * read that fails counts as pending (the run is asked again after its interval).
   */
  private readUpstreams(g: GroupRuntime, q: UpstreamQuery): void {
    const reader = this.upstreamReader;
    const pending = (job: string): { job: string; outcome: 'pending' } => ({
      job,
      outcome: 'pending',
    });
    const answers = q.jobs.map((job) =>
      reader === undefined
        ? Promise.resolve(pending(job))
        : reader(job, q.slotMs).then(
            (a) => (a.outcome === 'pending' ? pending(job) : { ...a, job, outcome: a.outcome }),
            () => pending(job),
          ),
    );
    void Promise.all(answers).then((all) =>
      g.dispatcher.upstreamAnswered(q, all, this.opts.clock.nowMs()),
    );
  }

  /** The intent settling a job's overdue slots before a change (GroupDispatcher.overdueIntent). */
  overdueIntent(groupId: number, jobId: string, nowMs: number): FireIntent | undefined {
    return this.groups.get(groupId)?.dispatcher.overdueIntent(jobId, nowMs);
  }

  /**
   * Calls `listener` with the fire id of every run of job `jobKey` in the group whose state or
   * flight changed on this replica; returns the function that stops it (RunService.WatchRuns).
   */
  watchRuns(groupId: number, jobKey: string, listener: RunListener): () => void {
    return this.watchers.watch(groupId, jobKey, listener);
  }

  /** Whether this node's leader of the group has an attempt of the run in flight. */
  isInFlight(groupId: number, fireId: string): boolean {
    return this.groups.get(groupId)?.dispatcher.isInFlight(fireId) === true;
  }

  /** The attempt of the run this node's leader of the group is making now (its output is here). */
  sendingAttempt(groupId: number, fireId: string): number | undefined {
    return this.groups.get(groupId)?.dispatcher.sendingAttempt(fireId);
  }

  /**
   * On the group's leader: the complete-run entry of a receiver's completion
   * (GroupDispatcher.completionCommand); undefined when the group is not hosted here.
   */
  completionCommand(
    groupId: number,
    completion: RunCompletion,
    nowMs: number,
  ): CompleteRunCommand | undefined {
    return this.groups.get(groupId)?.dispatcher.completionCommand(completion, nowMs);
  }

  // -------------------------------------------------------------------------------------
  // Graceful hand-over

  /** Drains the group's dispatcher, then transfers leadership to `to`. */
  handOver(groupId: number, to: NodeId): void {
    const g = this.groups.get(groupId);
    if (!g) {
      this.opts.host.report(groupId, { kind: 'transfer-leader', to });
      return;
    }
    if (this.handOvers.has(groupId)) return;
    g.dispatcher.beginDrain();
    this.handOvers.set(groupId, {
      to,
      sinceMs: this.opts.clock.nowMs(),
      askedAtMs: 0,
      transferSeen: false,
    });
  }

  /** The node a hand-over of the group under way goes to, if one is. */
  handOverTargetOf(groupId: number): NodeId | undefined {
    return this.handOvers.get(groupId)?.to;
  }

  /**
   * Gives a hand-over up (its target is no longer fit to lead, e.g. it announced it is
   * stopping): the group dispatches again here. A transfer Raft already took on runs out on
   * its own within an election timeout.
   */
  cancelHandOver(groupId: number): void {
    if (!this.handOvers.delete(groupId)) return;
    this.groups.get(groupId)?.dispatcher.endDrain();
  }

  /**
   * Drains the group's dispatcher on its leader (a split is about to commit): resolves once
   * nothing is in flight or unsettled, or after `maxMs`. endDrain() resumes dispatching. A
   * hand-over under way drains already and keeps its own drain.
   */
  async drain(groupId: number, maxMs: number): Promise<void> {
    const g = this.groups.get(groupId);
    if (!g) return;
    if (!this.handOvers.has(groupId)) g.dispatcher.beginDrain();
    const until = this.opts.clock.monotonicMs() + maxMs;
    while (!g.dispatcher.isDrained && this.opts.clock.monotonicMs() < until) {
      if (this.opts.host.groups.get(groupId)?.isLeader !== true) return;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  endDrain(groupId: number): void {
    if (this.handOvers.has(groupId)) return;
    this.groups.get(groupId)?.dispatcher.endDrain();
  }

  isHandingOver(groupId: number): boolean {
    return this.handOvers.has(groupId);
  }

  private progressHandOvers(nowMs: number): void {
    const drainMaxMs = this.opts.drainMaxMs ?? 10_000;
    for (const [groupId, h] of this.handOvers) {
      const g = this.groups.get(groupId);
      const replica = this.opts.host.groups.get(groupId);
      if (!g || !replica?.isLeader) {
        g?.dispatcher.endDrain();
        this.handOvers.delete(groupId);
        continue;
      }
      const drained = g.dispatcher.isDrained || nowMs - h.sinceMs > drainMaxMs;
      if (!drained) continue;
      if (h.askedAtMs !== 0) {
        if (replica.node.raft.leadTransferee === h.to) {
          h.transferSeen = true;
          continue;
        }
        if (h.transferSeen) {
          // Raft gave the transfer up (the target did not take over within an election
          // timeout: it is down, stopping or behind). Lead on at once and dispatch again, rather
          // than leave the group planning nothing while the target is away; whoever asked for
          // the hand-over decides whether to ask again.
          g.dispatcher.endDrain();
          this.handOvers.delete(groupId);
          continue;
        }
      }
      if (h.askedAtMs !== 0 && nowMs - h.askedAtMs < 1000) continue;
      if (h.askedAtMs !== 0 && nowMs - h.sinceMs > drainMaxMs + 5000) {
        // The transfer keeps failing (target lagging or gone): lead on, and dispatch again.
        g.dispatcher.endDrain();
        this.handOvers.delete(groupId);
        continue;
      }
      h.askedAtMs = nowMs;
      this.opts.host.report(groupId, { kind: 'transfer-leader', to: h.to });
    }
  }
}

const NOTHING_STEPPED = { handedOut: 0, results: 0 } as const;

function ownerOf(groupId: number, term: number): string {
  return `${groupId}/${term}`;
}

function fateOf(err: unknown): ProposalFate {
  const code = (err as { code?: unknown }).code;
  return code === 'RAFT_NOT_LEADER' || code === 'RAFT_PROPOSAL_DROPPED' ? 'dropped' : 'unknown';
}

function noteTimeline(
  t: LeadershipTimeline,
  role: string,
  leadership: Leadership | undefined,
  step: DispatchStep,
  nowMs: number,
): void {
  if (role === 'pre-candidate' || role === 'candidate') {
    // A campaign keeps its first moment through pre-vote and vote.
    if (!t.campaigning) {
      t.campaigning = true;
      t.campaignAtMs = nowMs;
      t.term = 0;
      t.electedAtMs = t.caughtUpAtMs = t.leaseAtMs = t.firstHandOutAtMs = 0;
    }
    return;
  }
  t.campaigning = false;
  if (!leadership) return;
  if (t.term !== leadership.term) {
    t.term = leadership.term;
    t.electedAtMs = nowMs;
    t.caughtUpAtMs = t.leaseAtMs = t.firstHandOutAtMs = 0;
  }
  if (t.caughtUpAtMs === 0 && leadership.caughtUp) t.caughtUpAtMs = nowMs;
  if (t.leaseAtMs === 0 && leadership.leaseValid) t.leaseAtMs = nowMs;
  if (
    t.firstHandOutAtMs === 0 &&
    (step.deliveries.length > 0 || step.proposals.some((c) => c.op === 'attempt-started'))
  )
    t.firstHandOutAtMs = nowMs;
}
