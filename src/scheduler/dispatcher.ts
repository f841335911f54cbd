/**
 * The firing protocol of one data group (docs/ARCHITECTURE.md, The firing protocol and The failure
 * table), as a pure state machine around the replicated SchedulerStateMachine. Every replica keeps
 * the derived indexes (due wheels, live runs per job, at-most-once runs in DISPATCHED) in step with
 * what it applies, so a new leader starts at once; only the leader steps the protocol:
 *
 * 1. plan: jobs whose next slot is inside the look-ahead become fire intents, proposed in
 *    batches (one entry holds up to `intentsPerEntry` intents);
 * 2. dispatch: at a run's due time, while the lease holds and the run is SCHEDULED in applied
 *    state, an at-least-once run is handed to delivery at once with a token from this term;
 *    an at-most-once run first proposes attempt-started and is handed over only when that
 *    entry has been applied here (its token comes from the entry);
 * 3. report: a finished attempt becomes an attempt-result entry (the retry time computed here
 *    by the injected planner, so followers never recompute it);
 * 4. recover: a new leader, once it has applied everything committed before its term, marks
 *    every at-most-once run left DISPATCHED by an earlier term as UNKNOWN; at-least-once runs
 *    are simply SCHEDULED still and go out again (same fire id, higher token).
 *
 * The runtime (src/server or the simulator) owns I/O: it calls afterApply() after each batch of
 * applied entries, step() with the clock's reading and the leadership facts, proposes what step
 * returns, reports each proposal's fate with proposalSettled(), performs the deliveries, and
 * reports each with attemptDone(). Nothing here reads a clock, the network or randomness.
 */
import { assertionFailed } from '../base/assert.js';
import { formatInstant } from '../schedule/civil.js';
import { parseSchedule, type Schedule } from '../schedule/parse.js';
import type {
  AttemptResultCommand,
  CompleteRunCommand,
  FireIntent,
  MissedRun,
  SchedulerCommand,
  UpstreamSettlement,
} from './commands.js';
import { MinHeap } from '../base/min-heap.js';
import { DueIndex } from './due-index.js';
import {
  ADMIT_ALL,
  HandOutQueue,
  type HandOutAdmission,
  type HandOutLane,
} from './hand-out-queue.js';
import { nextToken, TOKENS_PER_TERM } from './fencing.js';
import { planIntents, planOverdue } from './intent-planner.js';
import { DEFAULT_RUN_RETENTION, type RunRetention } from '../placement/run-retention.js';
import {
  attemptsMade,
  fireIdOf,
  isTerminal,
  isWaitingForUpstream,
  jobForRun,
  maxConcurrencyOf,
  type AttemptOutcome,
  type Job,
  type Run,
} from './model.js';
import type { SchedulerStateMachine } from './state-machine.js';

/** What the runtime knows of this replica's Raft role at the moment it calls step(). */
export interface Leadership {
  readonly term: number;
  /** The leader lease holds: no other node can be leader now, so delivering is safe. */
  readonly leaseValid: boolean;
  /**
   * This replica has applied an entry of its own term, hence everything committed before it:
   * its applied state is the truth the previous leaders left.
   */
  readonly caughtUp: boolean;
  /**
   * The leadership was handed over (a transfer): the predecessor drained first, so every
   * attempt it started has its result committed, and none of its sends is unrecorded.
   */
  readonly handedOver?: boolean;
}

/** One attempt handed to delivery. */
const NOTHING_TAKEN = (): void => {};

export interface DeliveryOrder {
  readonly fireId: string;
  readonly jobId: string;
  readonly slotMs: number;
  readonly attempt: number;
  readonly token: number;
  /** The leader term the order was given in; a result from another term is discarded. */
  readonly term: number;
  /** The job as it was when the attempt was authorised (target, payload, tenant, deadline). */
  readonly job: Job;
}

/** How an attempt ended, as delivery observed it (src/delivery/webhook.ts AttemptReport). */
export interface AttemptFinished {
  readonly outcome: AttemptOutcome;
  readonly statusCode?: number | undefined;
  readonly durationMs: number;
  readonly error?: string | undefined;
  readonly responseExcerpt?: string | undefined;
  readonly retryAfterMs?: number | undefined;
  /** The request certainly never reached the target: the one retry at-most-once allows. */
  readonly isProvablyUndelivered: boolean;
  /** The worker that held the lease of a leased run. */
  readonly worker?: string | undefined;
}

/** What a receiver says of a RUNNING run it completes (RunService.CompleteRun). */
export interface RunCompletion {
  readonly fireId: string;
  readonly token: number;
  readonly outcome: AttemptOutcome;
  readonly error?: string | undefined;
  /** Its excerpt, for the attempt record. */
  readonly output?: string | undefined;
  /** A retryable failure's wish for the wait before the next attempt. */
  readonly retryAfterMs?: number | undefined;
  /** The node that keeps the full output beside the log (the one serving the call), if any. */
  readonly outputNode?: string | undefined;
}

export interface DispatcherOptions {
  /** Slots due within this much of now are proposed as intents. @default 3000 */
  readonly lookAheadMs?: number;
  /** How late a slot may be and still fire as on time (elections, GC). @default 5000 */
  readonly misfireThresholdMs?: number;
  /** Intents per fire-intents entry. @default 512 */
  readonly intentsPerEntry?: number;
  /** Intents planned per step; the rest wait for the next step. @default 8192 */
  readonly intentsPerStep?: number;
  /** Deliveries handed out per step; the rest wait for the next step. @default 16384 */
  readonly deliveriesPerStep?: number;
  /** Attempt results per attempt-results entry. @default 1024 */
  readonly resultsPerEntry?: number;
  /**
   * How far apart the nodes' wall clocks may be. A run is due by the clock of the leader that
   * sends it; a new leader whose clock is behind its predecessor's must count runs due this
   * much after its own now among those its predecessor may have sent. @default 1000
   */
  readonly clockSkewMs?: number;
  /**
   * Longest an attempt result may be held back while the runtime reports a delivery backlog
   * (step's `holdResults`): the results of a spike then go to the log after its sends, as few
   * large entries, instead of being proposed, replicated, stored and applied on every replica
   * while the sends still queue. 0 never holds. @default 0
   */
  readonly resultHoldMs?: number;
  /**
   * Most results held at once: beyond it, full entries leave even while the backlog lasts, so
   * that a very long backlog holds bounded memory. @default 16 × resultsPerEntry
   */
  readonly heldResultsMax?: number;
  /** Resolution of the wheels. @default 10 */
  readonly tickMs?: number;
  /**
   * The delivery origin of a target URL, which the hand-out's admission is asked about (the
   * runtime passes delivery-runner.ts deliveryOriginOf). @default the URL itself
   */
  readonly originOf?: (url: string) => string;
  /**
   * The tenant's run retention (from the meta group on the leader's node): its leader proposes
   * purge-runs for finished runs beyond it. @default DEFAULT_RUN_RETENTION for every tenant
   */
  readonly retentionOf?: (tenant: string) => RunRetention;
  /**
   * Offsets this group's scans of the job table for the planning index (PlanningIndex
   * scanPhaseMs), so that the groups of a node do not all scan in the same step. @default 0
   */
  readonly planningScanPhaseMs?: number;
  /** Where the wheels start (the runtime's clock when the replica is created). */
  readonly startMs: number;
  /** This replica's node id, recorded in the attempts its leader sends. */
  readonly nodeId?: string;
  /**
   * When a failed attempt may be tried again, or undefined when it must not (the runtime passes
   * src/delivery/backoff.ts planRetry with its Rand, so a seed replays the leader's choices).
   */
  readonly retryAt: RetryPlanner;
}

export type RetryPlanner = (
  job: Job,
  attempt: number,
  slotMs: number,
  nowMs: number,
  retryAfterMs: number | undefined,
) => number | undefined;

export interface DispatchStep {
  /** Commands to propose, in order; report each one's fate with proposalSettled(). */
  readonly proposals: SchedulerCommand[];
  /** Attempts to perform now; report each one's end with attemptDone(). */
  readonly deliveries: DeliveryOrder[];
  /**
   * Runs waiting for their upstreams whose state to read now (in the upstreams' groups: the
   * runtime's I/O); report each answer with upstreamAnswered().
   */
  readonly upstreamQueries: UpstreamQuery[];
}

/** A waiting run's pending upstreams, to read for its slot. */
export interface UpstreamQuery {
  readonly fireId: string;
  readonly slotMs: number;
  /** The upstream job keys still pending. */
  readonly jobs: readonly string[];
  /** The term that asked; an answer for another term is dropped. */
  readonly term: number;
}

/** How often a waiting run's pending upstreams are read again. */
export const UPSTREAM_POLL_MS = 1000;

export type ProposalFate = 'committed' | 'dropped' | 'unknown';

/** How the runtime lets a step propose attempt results. */
export interface ResultRelease {
  /** Deliveries wait to be sent on this node: hold results back (at most resultHoldMs). */
  readonly hold: boolean;
  /**
   * Most results this step may propose (the node's share left for this step), so that the
   * results held by many groups do not reach the log, and every replica's apply, at once.
   */
  readonly max: number;
}

/** No holding, no cap: every result is proposed at the step after its attempt ended. */
export const RELEASE_ALL: ResultRelease = { hold: false, max: Number.POSITIVE_INFINITY };

/** A run this leader has authorised and not yet seen resolved in applied state. */
type InFlight =
  /** at-most-once: attempt-started proposed, waiting for it to apply. */
  | { readonly phase: 'starting'; readonly attempt: number }
  /** Handed to delivery; waiting for attemptDone(). */
  | { readonly phase: 'delivering'; readonly attempt: number }
  /**
   * miss-runs proposed (a stale first attempt its misfire policy drops, or a skip policy's run
   * whose job is full); waiting to apply.
   */
  | { readonly phase: 'missing'; readonly attempt: number }
  /** attempt-result proposed; waiting for it to apply. */
  | {
      readonly phase: 'reporting';
      readonly attempt: number;
      readonly command: AttemptResultCommand;
    }
  /** A RUNNING run's completion deadline passed: its complete-run proposed, waiting to apply. */
  | { readonly phase: 'expiring'; readonly attempt: number; readonly completeByMs: number };

/** The leader's memory, valid for one term; dropped (and its ids re-indexed) when it ends. */
interface TermState {
  readonly term: number;
  /** Jobs popped from the planning wheel, waiting to be planned. */
  readonly planQueue: Set<string>;
  /** Jobs whose intent is proposed and not settled. */
  readonly pendingIntents: Set<string>;
  /**
   * Runs popped from the dispatch wheel, waiting for a delivery slot (lease, step cap, room in
   * the delivery queue for their tenant and origin), in hand-out order (hand-out-queue.ts).
   */
  readonly dispatchQueue: HandOutQueue;
  /**
   * Since when runs have been waiting in dispatchQueue only because a step's hand-out cap was
   * reached or the delivery queue had no room for them (the lease held throughout); undefined
   * when the last step handed out all it could. Such a wait is this leader's own pace, or its
   * tenant's endpoint's, not an outage: lateness for the misfire policy is measured up to this
   * moment, so a spike larger than one step's cap, or a backlog behind an endpoint that does
   * not answer, never turns into MISSED runs however long it takes to hand out.
   */
  cappedSinceMs: number | undefined;
  /** The last step stopped at its hand-out cap with runs it could have handed out. */
  stoppedAtCap: boolean;
  /** A purge-runs of the retention sweep is proposed and not settled. */
  purgeInFlight: boolean;
  /** When the retention sweep goes on next. */
  nextSweepMs: number;
  /** Runs held back by a buffer_* overlap policy (the job is full), per job, in slot order. */
  readonly held: Map<string, string[]>;
  readonly inFlight: Map<string, InFlight>;
  /** Highest token this term handed out per job (at-least-once tokens are not in the log yet). */
  readonly issued: Map<string, number>;
  /** Orders ready to hand out at the next step (at-most-once runs whose start applied). */
  readonly readyOrders: DeliveryOrder[];
  /** Commands to propose at the next step. */
  readonly outbox: SchedulerCommand[];
  /**
   * Attempt results held back while deliveries are queued (resultHoldMs), oldest first. They
   * are in no log: a leader change loses them, like results of attempts still in flight.
   */
  readonly heldResults: AttemptResultCommand[];
  /** When the oldest held result was held; undefined when none is. */
  resultsHeldSinceMs: number | undefined;
  /**
   * Runs already returned by foresee() this term, so that each is foreseen once; a run leaves
   * the set when it is popped for dispatch.
   */
  readonly foreseen: Set<string>;
  /** Every run due before this was visited by foresee() (those scheduled later are not). */
  foreseenUntilMs: number;
  /** Commands proposed and not settled. */
  unsettled: number;
  /** The earlier terms' DISPATCHED runs have been marked (or the mark is proposed). */
  recovered: boolean;
  /**
   * Runs whose lost attempt (lost-attempts) is proposed and not applied yet, with its number:
   * they wait, so that their next send is numbered after it.
   */
  readonly lostPending: Map<string, number>;
  /** Waiting runs: when their upstreams are read next (absent: now); in flight: Infinity. */
  readonly upstreamAskAt: Map<string, number>;
}

export class GroupDispatcher {
  readonly index: DueIndex;
  /** Slots due within this much of now are proposed as intents. */
  readonly lookAheadMs: number;
  private readonly misfireThresholdMs: number;
  private readonly intentsPerEntry: number;
  private readonly intentsPerStep: number;
  private readonly deliveriesPerStep: number;
  private readonly resultsPerEntry: number;
  private readonly clockSkewMs: number;
  private readonly resultHoldMs: number;
  private readonly heldResultsMax: number;
  private readonly retryAt: RetryPlanner;
  private readonly originOf: (url: string) => string;
  private readonly retentionOf: (tenant: string) => RunRetention;
  /** Where the retention sweep goes on: the jobs with runs, a few hundred per sweep. */
  private retentionCursor: Iterator<string> | undefined;
  /** Non-terminal runs per job (derived, every replica). */
  private readonly liveRuns = new Map<string, Set<string>>();
  /** How many runs liveRuns holds in all. */
  private liveRunCount = 0;
  /** at-most-once runs whose attempt started and has no result (derived, every replica). */
  private readonly dispatched = new Set<string>();
  /** SCHEDULED runs waiting for an upstream (derived, every replica). */
  private readonly waiting = new Set<string>();
  /** RUNNING runs (a receiver completes them later) and their deadlines (derived). */
  private readonly awaiting = new Map<string, number>();
  /**
   * The same deadlines, soonest first, for the leader to find those that passed. Entries are
   * not removed when a run completes or its deadline moves: one that no longer matches
   * `awaiting` is skipped when it comes up.
   */
  private readonly deadlines = new MinHeap<readonly [number, string]>((a, b) => a[0] < b[0]);
  private readonly nodeId: string | undefined;
  /**
   * Told of every run whose applied state changed, or that this leader started or stopped
   * having in flight (what a run shows, run-view.ts, may have changed): WatchRuns follows runs
   * through it. Synchronous; it must not change this dispatcher.
   */
  onRunTouched: ((fireId: string) => void) | undefined;
  private readonly schedules = new Map<string, { version: number; schedule: Schedule }>();
  private leader: TermState | undefined;
  private draining = false;

  constructor(
    readonly sm: SchedulerStateMachine,
    options: DispatcherOptions,
  ) {
    this.lookAheadMs = options.lookAheadMs ?? 3000;
    this.misfireThresholdMs = options.misfireThresholdMs ?? 5000;
    this.intentsPerEntry = options.intentsPerEntry ?? 512;
    this.intentsPerStep = options.intentsPerStep ?? 8192;
    this.deliveriesPerStep = options.deliveriesPerStep ?? 16_384;
    this.resultsPerEntry = options.resultsPerEntry ?? 1024;
    this.clockSkewMs = options.clockSkewMs ?? 1000;
    this.resultHoldMs = options.resultHoldMs ?? 0;
    this.heldResultsMax = options.heldResultsMax ?? 16 * this.resultsPerEntry;
    this.retryAt = options.retryAt;
    this.nodeId = options.nodeId;
    this.originOf = options.originOf ?? ((url) => url);
    this.retentionOf = options.retentionOf ?? (() => DEFAULT_RUN_RETENTION);
    this.index = new DueIndex(
      {
        lookAheadMs: this.lookAheadMs,
        startMs: options.startMs,
        tickMs: options.tickMs ?? 10,
        ...(options.planningScanPhaseMs !== undefined && {
          scanPhaseMs: options.planningScanPhaseMs,
        }),
      },
      sm.jobs,
    );
    this.rebuild();
  }

  /** Derives every index from the whole applied state (a new dispatcher, or after a restore). */
  rebuild(): void {
    this.nextDueCache = undefined;
    this.sm.takeTouched();
    this.liveRuns.clear();
    this.liveRunCount = 0;
    this.dispatched.clear();
    this.waiting.clear();
    this.awaiting.clear();
    this.deadlines.clear();
    this.index.planning.reload();
    this.index.syncRestoredRuns(this.sm);
    // Finished runs need no tracking: the sets were just cleared.
    for (const [fireId, run] of this.sm.runs.liveEntries()) this.trackRun(fireId, run);
    this.retentionCursor = undefined;
  }

  /** The term this replica holds leader state for (until its next step sees it ended). */
  get leaderTerm(): number | undefined {
    return this.leader?.term;
  }

  /** Runs waiting for an upstream in this group. */
  get waitingCount(): number {
    return this.waiting.size;
  }

  /** Leader state of the current term, for tests and metrics. */
  get inFlightCount(): number {
    return this.leader?.inFlight.size ?? 0;
  }

  /**
   * Runs not finished (waiting for their slot or a retry, or in flight) or intents pending: the
   * group must stay awake (not quiesce), because delivering needs a fresh lease at the slot.
   */
  get hasLiveWork(): boolean {
    const ls = this.leader;
    // A RUNNING run waits for its receiver, maybe for days: its deadline is in nextDueMs(),
    // which wakes the group in time, so it alone does not keep the group awake.
    return (
      this.liveRunCount > this.awaiting.size ||
      (ls !== undefined && (ls.pendingIntents.size > 0 || ls.inFlight.size > 0))
    );
  }

  /** nextDueMs()'s answer until applied state changes ('none': nothing is ever due). */
  private nextDueCache: number | 'none' | undefined;

  /**
   * When applied state next asks the leader to act: a job's planning time (its next slot minus
   * the look-ahead) or a SCHEDULED run's due time; undefined when nothing is ever due. Every
   * replica can answer, so the followers of a quiet group know when it must have a live
   * leader. A full pass the first time after a change: ask it of quiet groups only.
   */
  nextDueMs(): number | undefined {
    if (this.nextDueCache === undefined) {
      const due = this.index.nextDueMs(this.sm.jobs);
      // The earliest deadline of a RUNNING run (an entry no longer current only wakes early).
      const deadline = this.deadlines.peek()?.[0];
      this.nextDueCache = due === undefined ? (deadline ?? 'none') : Math.min(due, deadline ?? due);
    }
    return this.nextDueCache === 'none' ? undefined : this.nextDueCache;
  }

  get isDraining(): boolean {
    return this.draining;
  }

  // -------------------------------------------------------------------------------------
  // Derived state (every replica)

  /** Brings the derived indexes and the leader's bookkeeping up to date with applied state. */
  afterApply(): void {
    const { created, jobs, runs, restored } = this.sm.takeTouched();
    if (restored) {
      // A snapshot replaced the state (a follower far behind its leader): derive it all again.
      this.rebuild();
      return;
    }
    if (created.ids.length > 0 || jobs.length > 0 || runs.length > 0) this.nextDueCache = undefined;
    this.index.syncCreated(created);
    if (jobs.length === 0 && runs.length === 0) return;
    const gone: string[] = [];
    this.index.syncJobs(this.sm, jobs, gone);
    this.index.syncRuns(this.sm, runs);
    const ls = this.leader;
    const release = new Set<string>();
    const touched = this.onRunTouched;
    for (const fireId of runs) {
      const run = this.sm.runs.get(fireId);
      this.trackRun(fireId, run);
      if (ls) {
        const jobId = run?.jobId ?? jobIdOfFireId(fireId);
        const f = ls.inFlight.get(fireId);
        if (f !== undefined && this.onRunChanged(ls, fireId, run, f)) release.add(jobId);
        if (!run || isTerminal(run.status)) release.add(jobId);
      }
      // Only a group with waiting runs pays a lookup per applied run (a spike applies thousands).
      if (ls && ls.upstreamAskAt.size > 0 && !this.waiting.has(fireId))
        ls.upstreamAskAt.delete(fireId);
      // After the leader's bookkeeping: what the run shows depends on both.
      touched?.(fireId);
    }
    for (const jobId of gone) {
      this.schedules.delete(jobId);
      release.add(jobId);
    }
    if (ls) for (const jobId of release) this.releaseHeld(ls, jobId);
  }

  private trackRun(fireId: string, run: Run | undefined): void {
    const jobId = run?.jobId ?? jobIdOfFireId(fireId);
    if (run && !isTerminal(run.status)) {
      let set = this.liveRuns.get(jobId);
      if (!set) this.liveRuns.set(jobId, (set = new Set()));
      if (!set.has(fireId)) this.liveRunCount++;
      set.add(fireId);
    } else {
      const set = this.liveRuns.get(jobId);
      if (set?.delete(fireId) === true) {
        this.liveRunCount--;
        if (set.size === 0) this.liveRuns.delete(jobId);
      }
    }
    if (run?.status === 'DISPATCHED') this.dispatched.add(fireId);
    else this.dispatched.delete(fireId);
    if (run?.status === 'SCHEDULED' && isWaitingForUpstream(run)) this.waiting.add(fireId);
    else this.waiting.delete(fireId);
    const completeByMs = run?.status === 'RUNNING' ? run.completeByMs : undefined;
    if (completeByMs === undefined) this.awaiting.delete(fireId);
    else if (this.awaiting.get(fireId) !== completeByMs) {
      this.awaiting.set(fireId, completeByMs);
      this.deadlines.push([completeByMs, fireId]);
    }
  }

  /**
   * Whether this leader has the run's attempt in flight: being started, sent or leased, or its
   * result not yet applied. A run in flight shows as RUNNING although applied state still says
   * SCHEDULED (an at-least-once send reaches the log only with its result).
   */
  isInFlight(fireId: string): boolean {
    const f = this.leader?.inFlight.get(fireId);
    return f !== undefined && f.phase !== 'missing';
  }

  /**
   * The attempt of the run this leader makes now (being started, sent or leased, or its result
   * not yet applied), if any: its output is on this node. An at-least-once attempt is not in the
   * applied state until its result is, and a RUNNING run's deadline ending is not an attempt.
   */
  sendingAttempt(fireId: string): number | undefined {
    const f = this.leader?.inFlight.get(fireId);
    return f !== undefined &&
      (f.phase === 'starting' || f.phase === 'delivering' || f.phase === 'reporting')
      ? f.attempt
      : undefined;
  }

  /**
   * The complete-run entry for a receiver's completion, on the leader: the retry time of a
   * retryable failure computed here (as for any attempt), everything else as given. Whether it
   * names the run's current attempt is the state machine's to decide when it applies.
   */
  completionCommand(c: RunCompletion, nowMs: number): CompleteRunCommand {
    const run = this.sm.runs.get(c.fireId);
    const job = run === undefined ? undefined : this.sm.jobs.get(run.jobId);
    // At most once means one request per run: a receiver's retryable failure ends the run
    // (DEAD, replayable from the DLQ) as an attempt that may have reached it does.
    const atMostOnce = job?.delivery === 'at_most_once';
    const outcome = c.outcome === 'retry' && atMostOnce ? 'fail' : c.outcome;
    const retryAtMs =
      outcome === 'retry' && run !== undefined && job !== undefined
        ? this.retryAt(job, Math.max(1, attemptsMade(run)), run.slotMs, nowMs, c.retryAfterMs)
        : undefined;
    return {
      op: 'complete-run',
      atMs: nowMs,
      fireId: c.fireId,
      token: c.token,
      outcome,
      error:
        outcome === c.outcome
          ? c.error
          : `at-most-once: not retried (the receiver asked to retry: ${c.error ?? 'no reason given'})`,
      output: c.output,
      retryAtMs,
      ...(c.outputNode !== undefined && { outputNode: c.outputNode }),
    };
  }

  /**
   * Waiting runs whose upstreams are due to be read: one query per run (its pending upstreams).
   * A run waiting past its job's retry.maxAgeMs gives up instead: its pending upstreams are
   * settled as `timeout` (so a cycle made by two racing updates, or an upstream paused for good,
   * ends in SKIPPED runs rather than runs that wait forever).
   */
  private askUpstreams(ls: TermState, nowMs: number, out: UpstreamQuery[]): void {
    if (this.waiting.size === 0) return;
    const timedOut: { fireId: string; upstream: UpstreamSettlement[] }[] = [];
    for (const fireId of this.waiting) {
      if ((ls.upstreamAskAt.get(fireId) ?? 0) > nowMs || ls.inFlight.has(fireId)) continue;
      const run = this.sm.runs.get(fireId);
      if (run === undefined || run.upstream === undefined) continue;
      const pending = run.upstream.filter((u) => u.outcome === undefined).map((u) => u.job);
      const maxAgeMs = this.sm.jobs.specOf(run.jobId)?.retry.maxAgeMs ?? 0;
      if (nowMs - run.slotMs > maxAgeMs) {
        timedOut.push({ fireId, upstream: pending.map((job) => ({ job, outcome: 'timeout' })) });
        ls.upstreamAskAt.set(fireId, Number.POSITIVE_INFINITY);
        continue;
      }
      ls.upstreamAskAt.set(fireId, Number.POSITIVE_INFINITY);
      out.push({ fireId, slotMs: run.slotMs, jobs: pending, term: ls.term });
    }
    if (timedOut.length > 0)
      ls.outbox.push({ op: 'upstream-settled', atMs: nowMs, runs: timedOut });
  }

  /**
   * What a query found (answerUpstream for each job it named). The settled ones are proposed;
   * the run is asked again after UPSTREAM_POLL_MS (sooner when upstreamChanged() says so).
   */
  upstreamAnswered(
    q: UpstreamQuery,
    answers: readonly (
      UpstreamSettlement | { readonly job: string; readonly outcome: 'pending' }
    )[],
    nowMs: number,
  ): void {
    const ls = this.leader;
    if (!ls || ls.term !== q.term) return;
    const settled: UpstreamSettlement[] = [];
    for (const a of answers) if (a.outcome !== 'pending') settled.push(a);
    if (settled.length > 0)
      ls.outbox.push({
        op: 'upstream-settled',
        atMs: nowMs,
        runs: [{ fireId: q.fireId, upstream: settled }],
      });
    ls.upstreamAskAt.set(q.fireId, nowMs + UPSTREAM_POLL_MS);
  }

  /**
   * A job's run finished somewhere this node sees (a group it hosts applied it): the runs here
   * waiting for that job are read again at the next step instead of after their poll interval.
   */
  upstreamChanged(jobKey: string): void {
    const ls = this.leader;
    if (!ls || this.waiting.size === 0) return;
    for (const fireId of this.waiting) {
      const run = this.sm.runs.get(fireId);
      if (!run?.upstream?.some((u) => u.job === jobKey && u.outcome === undefined)) continue;
      if (ls.upstreamAskAt.get(fireId) !== Number.POSITIVE_INFINITY)
        ls.upstreamAskAt.delete(fireId);
    }
  }

  /**
   * RUNNING runs whose receiver neither completed them nor sent a heartbeat in time: each is
   * retried by its job's policy (at least once) or fails (at most once: the receiver may have
   * done the work), as one complete-run entry per run naming the deadline it saw pass.
   */
  private expireCompletions(ls: TermState, nowMs: number): void {
    for (;;) {
      const top = this.deadlines.peek();
      if (top === undefined || top[0] > nowMs) return;
      this.deadlines.pop();
      const [completeByMs, fireId] = top;
      if (this.awaiting.get(fireId) !== completeByMs || ls.inFlight.has(fireId)) continue;
      const run = this.sm.runs.get(fireId);
      const last = run?.attempts[run.attempts.length - 1];
      if (run === undefined || last === undefined) continue;
      const job = this.sm.jobs.get(run.jobId);
      const atMostOnce = job === undefined || job.delivery === 'at_most_once';
      const outcome: AttemptOutcome = atMostOnce ? 'fail' : 'retry';
      const retryAtMs =
        job !== undefined && !atMostOnce
          ? this.retryAt(job, attemptsMade(run), run.slotMs, nowMs, undefined)
          : undefined;
      ls.inFlight.set(fireId, { phase: 'expiring', attempt: last.attempt, completeByMs });
      ls.outbox.push({
        op: 'complete-run',
        atMs: nowMs,
        fireId,
        token: last.token,
        outcome,
        error: `${COMPLETION_TIMEOUT_ERROR} (deadline ${formatInstant(completeByMs)})`,
        output: undefined,
        retryAtMs,
        ifCompleteByMs: completeByMs,
      });
    }
  }

  /** A run this leader has in flight changed in applied state. True when it left flight. */
  private onRunChanged(ls: TermState, fireId: string, run: Run | undefined, f: InFlight): boolean {
    const last = run?.attempts[run.attempts.length - 1];
    switch (f.phase) {
      case 'starting':
        if (run?.status === 'DISPATCHED' && last?.attempt === f.attempt) {
          if (termOfToken(last.token) !== ls.term) return false;
          const job = this.sm.jobs.get(run.jobId);
          if (!job) return false;
          ls.inFlight.set(fireId, { phase: 'delivering', attempt: f.attempt });
          ls.readyOrders.push(order(run, job, f.attempt, last.token, ls.term));
          return false;
        }
        // Refused (paused, deleted, or another attempt won): nothing was sent.
        if (run?.status !== 'SCHEDULED' || last?.attempt === f.attempt) {
          ls.inFlight.delete(fireId);
          return true;
        }
        return false;
      case 'delivering':
        return false;
      case 'expiring':
        if (run?.status === 'RUNNING' && run.completeByMs === f.completeByMs) return false;
        ls.inFlight.delete(fireId);
        return true;
      case 'missing':
        if (run?.status === 'SCHEDULED') return false;
        ls.inFlight.delete(fireId);
        return true;
      case 'reporting': {
        const mine = run?.attempts.find((a) => a.attempt === f.attempt);
        if (!run || mine?.outcome !== undefined) {
          ls.inFlight.delete(fireId);
          return true;
        }
        return false;
      }
    }
  }

  // -------------------------------------------------------------------------------------
  // The leader's step

  /**
   * One turn of the protocol at `nowMs`. `leadership` undefined means this replica is not the
   * leader: any leader state of an earlier term is dropped and its ids go back to the wheels.
   * `maxDeliveries` caps this step's at-least-once hand-outs (never above `deliveriesPerStep`):
   * the runtime hands a spike out in chunks, the rest stays queued for the next step. `admits`
   * says whether the node's delivery queue has room for one more run of a tenant to an origin;
   * a run refused stays queued here (hand-out-queue.ts), and so do the rest of its origin's.
   * `results.hold` says the runtime still has deliveries waiting to be sent: attempt results
   * are then held back (at most `resultHoldMs`, at most `heldResultsMax` of them) and
   * proposed together once the backlog is gone; while draining they go out without waiting.
   * At most `results.max` are proposed in one step; the rest wait for the next. `taken` is told
   * the tenant of each run handed out (an order, or an at-most-once start), as it is taken, so
   * that an admission that counts (a tenant's fire rate) sees the step's own hand-outs.
   */
  step(
    nowMs: number,
    leadership: Leadership | undefined,
    maxDeliveries: number = this.deliveriesPerStep,
    results: ResultRelease = RELEASE_ALL,
    admits: HandOutAdmission = ADMIT_ALL,
    taken: (tenant: string) => void = NOTHING_TAKEN,
  ): DispatchStep {
    const out: DispatchStep = { proposals: [], deliveries: [], upstreamQueries: [] };
    this.leadingUncaughtUp = leadership !== undefined && !leadership.caughtUp;
    if (!leadership || (this.leader && this.leader.term !== leadership.term)) this.endTerm();
    if (!leadership || !leadership.caughtUp) return out;
    if (!this.leader) this.leader = newTermState(leadership.term, (id) => this.laneOf(id));
    const ls = this.leader;
    if (!ls.recovered) this.recover(ls, nowMs, leadership.handedOver === true);
    if (!this.draining) {
      for (const { key } of this.index.planning.advance(nowMs)) ls.planQueue.add(key);
      this.plan(ls, nowMs);
      for (const { key } of this.index.dispatch.advance(nowMs)) ls.dispatchQueue.add(key);
      this.sweepRetention(ls, nowMs);
      this.expireCompletions(ls, nowMs);
      this.askUpstreams(ls, nowMs, out.upstreamQueries);
      if (leadership.leaseValid)
        this.dispatch(ls, nowMs, out.deliveries, maxDeliveries, admits, taken);
      else {
        // Runs held back by a lapsed lease wait for a reason outside this leader's pace.
        ls.cappedSinceMs = undefined;
        ls.stoppedAtCap = false;
      }
    } else {
      ls.cappedSinceMs = undefined;
      ls.stoppedAtCap = false;
    }
    // Orders whose at-most-once start applied go out even while draining: the start is
    // committed, and not sending would only turn the run UNKNOWN under the next leader.
    if (leadership.leaseValid && ls.readyOrders.length > 0) {
      for (const o of ls.readyOrders.splice(0)) {
        if (this.stillWanted(o)) {
          out.deliveries.push(o);
          continue;
        }
        // A pause or delete applied between the start and this step: it was acknowledged
        // before anything left, so nothing may leave now. The attempt provably never went out.
        this.attemptDone(
          o,
          {
            outcome: 'retry',
            durationMs: 0,
            error: 'not sent: job paused or deleted after the attempt started',
            isProvablyUndelivered: true,
          },
          nowMs,
        );
      }
    }
    if (ls.outbox.length > 0 || ls.heldResults.length > 0)
      this.flushOutbox(ls, nowMs, out.proposals, results.hold && !this.draining, results.max);
    return out;
  }

  /**
   * The outbox as proposals, attempt results coalesced into few entries. With `hold`, results
   * of at-least-once runs stay back until the oldest has waited `resultHoldMs`; beyond
   * `heldResultsMax` held, full entries leave and the rest waits on. At most `max` leave.
   */
  private flushOutbox(
    ls: TermState,
    nowMs: number,
    proposals: SchedulerCommand[],
    hold: boolean,
    max: number,
  ): void {
    const held = ls.heldResults;
    for (const c of ls.outbox.splice(0)) {
      if (c.op === 'attempt-result' && !this.isAtMostOnceRun(c.fireId)) held.push(c);
      else proposals.push(c);
    }
    if (held.length > 0) {
      ls.resultsHeldSinceMs ??= nowMs;
      const expired = nowMs - ls.resultsHeldSinceMs >= this.resultHoldMs;
      let take = held.length;
      // Under a hold nothing leaves until the oldest result's time is up, unless too many wait:
      // then the full entries do.
      if (hold && !expired)
        take = held.length > this.heldResultsMax ? take - (take % this.resultsPerEntry) : 0;
      take = Math.min(Math.max(0, max), take);
      for (let i = 0; i < take; i += this.resultsPerEntry) {
        const results = held.slice(i, Math.min(take, i + this.resultsPerEntry));
        proposals.push(
          results.length === 1 ? results[0]! : { op: 'attempt-results', atMs: nowMs, results },
        );
      }
      held.splice(0, take);
      if (held.length === 0) ls.resultsHeldSinceMs = undefined;
    }
    ls.unsettled += proposals.length;
  }

  /**
   * An at-most-once run's result is never held: a leader lost while holding it would leave the
   * run to be marked UNKNOWN although its webhook was answered. Its attempt-started entry
   * already costs a commit per send, so one more small entry changes little.
   */
  private isAtMostOnceRun(fireId: string): boolean {
    const run = this.sm.runs.get(fireId);
    return run !== undefined && this.sm.jobs.specOf(run.jobId)?.delivery === 'at_most_once';
  }

  /**
   * The orders this leader would hand out for runs due in (nowMs, untilMs] if nothing changed
   * before their slots, at most `max`, each run once per term: at-least-once runs SCHEDULED in
   * applied state, of a job not paused with no other live run, so that the token they would
   * get is known now. The runtime renders their requests ahead of the slot (a :00 spike then
   * spends its CPU on sending); a guess that turns out wrong costs only the render, because
   * delivery checks the attempt and token it rendered against the order it is given.
   *
   * Each call goes on where the last one stopped: a run that enters the wheel due before that
   * point (created after its slot came within `untilMs`) is not foreseen, and is rendered when
   * it is sent, as any other. Intents commit about one look-ahead before their slots, so an
   * `untilMs` well inside the look-ahead sees them all.
   */
  foresee(nowMs: number, untilMs: number, max: number): DeliveryOrder[] {
    const ls = this.leader;
    const out: DeliveryOrder[] = [];
    if (!ls || this.draining || max <= 0) return out;
    // A set grown by runs cancelled before their slot is cheap to forget: a run foreseen again
    // is only rendered again.
    if (ls.foreseen.size > 4 * Math.max(4096, this.index.dispatch.size)) ls.foreseen.clear();
    let stoppedAtMs: number | undefined;
    this.index.dispatch.peek(Math.max(nowMs + 1, ls.foreseenUntilMs), untilMs, (fireId, dueMs) => {
      if (out.length >= max) {
        // From the start of this bucket next time: its keys are in no due order.
        const tickMs = this.index.dispatch.tickMs;
        stoppedAtMs = Math.floor(dueMs / tickMs) * tickMs;
        return false;
      }
      if (ls.foreseen.has(fireId) || ls.inFlight.has(fireId)) return true;
      ls.foreseen.add(fireId);
      const run = this.sm.runs.get(fireId);
      if (!run || run.status !== 'SCHEDULED' || this.liveRuns.get(run.jobId)?.size !== 1)
        return true;
      const job = this.sm.jobs.get(run.jobId);
      if (!job || job.paused || job.delivery !== 'at_least_once') return true;
      const token = nextToken(Math.max(job.lastToken, ls.issued.get(job.id) ?? 0), ls.term);
      out.push(order(run, job, run.attempts.length + 1, token, ls.term));
      return true;
    });
    ls.foreseenUntilMs = stoppedAtMs ?? Math.max(ls.foreseenUntilMs, untilMs + 1);
    return out;
  }

  /**
   * Whether an attempt handed out may still be sent now, asked just before the send: its job is
   * neither paused nor deleted and its run is still where the hand-out left it (at-least-once:
   * SCHEDULED, at this attempt; at-most-once: DISPATCHED with this attempt started). An attempt
   * waits in the delivery queue for its tenant's or origin's turn; a pause or delete committed
   * meanwhile was acknowledged before anything left, so it wins.
   *
   * An update committed meanwhile wins over an at-least-once attempt too: the order carries the
   * definition it was handed out with, and the job now has another. The run was either
   * superseded (its slot belongs to the new definition, which did not plan it) or is still
   * owed; then it goes back to the dispatcher (attemptNotStarted) and out again with the
   * definition it has now. An at-most-once attempt whose start committed before the update is
   * already an attempt: it finishes as it started.
   */
  maySend(o: Pick<DeliveryOrder, 'fireId' | 'attempt' | 'job'>): boolean {
    const run = this.sm.runs.get(o.fireId);
    if (this.sm.jobs.pausedOf(o.job.id) !== false || !run) return false;
    if (o.job.delivery === 'at_most_once')
      return run.status === 'DISPATCHED' && run.attempts.length === o.attempt;
    return (
      run.status === 'SCHEDULED' &&
      run.attempts.length + 1 === o.attempt &&
      this.sm.jobs.versionOf(o.job.id) === o.job.version
    );
  }

  /**
   * The intent that records the job's overdue slots (planOverdue) before a change of the job
   * recomputes its next slot from now; undefined when nothing is overdue. Asked by the API on
   * this group's leader, proposed in one batch with the change.
   */
  overdueIntent(jobId: string, nowMs: number): FireIntent | undefined {
    const job = this.sm.jobs.get(jobId);
    if (!job) return undefined;
    const ls = this.leader;
    return planOverdue(job, {
      nowMs,
      misfireThresholdMs: this.misfireThresholdMs,
      compile: (j) => this.compile(j),
      inFlightRuns: (id) => (ls ? this.activeRuns(ls, id) : 0),
      bufferedRuns: (id) => (this.liveRuns.get(id)?.size ?? 0) - (ls ? this.activeRuns(ls, id) : 0),
    });
  }

  /** An at-most-once order whose start applied may still go out (no pause or delete since). */
  private stillWanted(o: DeliveryOrder): boolean {
    const run = this.sm.runs.get(o.fireId);
    return this.sm.jobs.pausedOf(o.jobId) === false && run?.status === 'DISPATCHED';
  }

  private recover(ls: TermState, nowMs: number, handedOver: boolean): void {
    ls.recovered = true;
    const lost: string[] = [];
    for (const fireId of this.dispatched) {
      const run = this.sm.runs.get(fireId);
      const last = run?.attempts[run.attempts.length - 1];
      if (last && termOfToken(last.token) < ls.term) lost.push(fireId);
    }
    if (lost.length > 0) ls.outbox.push({ op: 'mark-unknown', atMs: nowMs, fireIds: lost });
    if (!handedOver) this.recordLostSends(ls, nowMs);
  }

  /**
   * An at-least-once send reaches the log only with its result. A run that was already due
   * when this leader took over may therefore have been sent by a leader now gone, and sending
   * it again under the same attempt number would show a receiver one attempt twice. Each such
   * run gets an attempt of unknown fate first (lost-attempts), and waits for it to apply: the
   * send that follows is numbered after it. Runs due later (by more than the clocks may differ:
   * its predecessor sent by its own clock) cannot have been sent by anyone.
   */
  private recordLostSends(ls: TermState, nowMs: number): void {
    let runs: { fireId: string; attempt: number }[] = [];
    const flush = (): void => {
      if (runs.length === 0) return;
      ls.outbox.push({ op: 'lost-attempts', atMs: nowMs, term: ls.term, runs });
      runs = [];
    };
    for (const [jobId, fireIds] of this.liveRuns) {
      // Paused jobs too: a run sent before the pause goes out again after the resume.
      if (this.sm.jobs.specOf(jobId)?.delivery !== 'at_least_once') continue;
      for (const fireId of fireIds) {
        const run = this.sm.runs.get(fireId);
        if (
          run?.status !== 'SCHEDULED' ||
          run.dueAtMs > nowMs + this.clockSkewMs ||
          ls.lostPending.has(fireId)
        )
          continue;
        const attempt = run.attempts.length + 1;
        ls.lostPending.set(fireId, attempt);
        runs.push({ fireId, attempt });
        if (runs.length >= this.resultsPerEntry) flush();
      }
    }
    flush();
  }

  private plan(ls: TermState, nowMs: number): void {
    if (ls.planQueue.size === 0) return;
    const candidates: Job[] = [];
    for (const jobId of ls.planQueue) {
      if (ls.pendingIntents.has(jobId)) continue;
      const job = this.sm.jobs.get(jobId);
      if (job?.nextFireAtMs === undefined || job.nextFireAtMs > nowMs + this.lookAheadMs) {
        // Gone, finished, or moved later (the wheel holds it again through afterApply).
        ls.planQueue.delete(jobId);
        continue;
      }
      candidates.push(job);
      if (candidates.length >= this.intentsPerStep) break;
    }
    if (candidates.length === 0) return;
    const intents = planIntents({
      jobs: candidates,
      nowMs,
      lookAheadMs: this.lookAheadMs,
      misfireThresholdMs: this.misfireThresholdMs,
      maxIntents: this.intentsPerStep,
      compile: (job) => this.compile(job),
      inFlightRuns: (jobId) => this.activeRuns(ls, jobId),
      bufferedRuns: (jobId) => (this.liveRuns.get(jobId)?.size ?? 0) - this.activeRuns(ls, jobId),
    });
    for (const intent of intents) {
      ls.planQueue.delete(intent.jobId);
      ls.pendingIntents.add(intent.jobId);
    }
    for (let i = 0; i < intents.length; i += this.intentsPerEntry) {
      const batch: FireIntent[] = intents.slice(i, i + this.intentsPerEntry);
      ls.outbox.push({ op: 'fire-intents', atMs: nowMs, term: ls.term, intents: batch });
    }
  }

  private compile(job: Job): Schedule {
    const cached = this.schedules.get(job.id);
    if (cached?.version === job.version) return cached.schedule;
    // The spec was validated before it entered the log, so this parse cannot fail.
    const schedule = parseSchedule(job.schedule, {
      timezone: job.timezone,
      anchorMs: job.anchorMs ?? job.createdAtMs,
    });
    this.schedules.set(job.id, { version: job.version, schedule });
    return schedule;
  }

  /**
   * Runs of the job started and not finished: in flight here, DISPATCHED, or awaiting retry
   * (what the overlap policy's `maxConcurrency` counts). `except` is left out of the count, and
   * counting stops at `max`.
   */
  private activeRuns(
    ls: TermState,
    jobId: string,
    except?: string,
    max = Number.POSITIVE_INFINITY,
  ): number {
    let n = 0;
    for (const fireId of this.liveRuns.get(jobId) ?? []) {
      if (n >= max) break;
      if (fireId !== except && this.isActive(ls, fireId)) n++;
    }
    return n;
  }

  private isActive(ls: TermState, fireId: string): boolean {
    const f = ls.inFlight.get(fireId);
    // A run being recorded MISSED or SKIPPED (miss-runs proposed) never went out: counting it
    // would make its job look full, and skip or hold the runs after it for nothing.
    if (f !== undefined) return f.phase !== 'missing';
    const run = this.sm.runs.get(fireId);
    return run !== undefined && (run.status === 'DISPATCHED' || attemptsMade(run) > 0);
  }

  private dispatch(
    ls: TermState,
    nowMs: number,
    deliveries: DeliveryOrder[],
    maxDeliveries: number,
    admits: HandOutAdmission,
    taken: (tenant: string) => void,
  ): void {
    let handed = 0;
    const missed: MissedRun[] = [];
    const deferred: string[] = [];
    const limit = Math.min(maxDeliveries, this.deliveriesPerStep);
    // Lateness is judged as of the moment the cap first held runs back (see cappedSinceMs).
    const judgedAtMs = Math.min(nowMs, ls.cappedSinceMs ?? nowMs);
    let refused = false;
    const admitsHere: HandOutAdmission = (tenant, origin) => {
      if (admits(tenant, origin)) return true;
      refused = true;
      return false;
    };
    let capped = false;
    for (const fireId of ls.dispatchQueue.order(admitsHere)) {
      if (handed >= limit) {
        capped = true;
        break;
      }
      ls.dispatchQueue.delete(fireId);
      ls.foreseen.delete(fireId);
      const run = this.sm.runs.get(fireId);
      // Only a run SCHEDULED in applied state, of a job not paused, goes out: a committed
      // cancel, pause or delete wins over a slot not yet started.
      if (!run || run.status !== 'SCHEDULED' || this.sm.jobs.pausedOf(run.jobId) !== false)
        continue;
      if (run.dueAtMs > nowMs || ls.inFlight.has(fireId)) continue;
      const lostAttempt = ls.lostPending.get(fireId);
      if (lostAttempt !== undefined) {
        if (run.attempts.length < lostAttempt) {
          deferred.push(fireId);
          continue;
        }
        ls.lostPending.delete(fireId);
      }
      const job = this.sm.jobs.get(run.jobId)!;
      // Buffered runs wait on purpose, so lateness says nothing about an outage for them.
      // Waiting for its upstreams: it goes back to the wheel once they are settled.
      if (isWaitingForUpstream(run)) continue;
      // A run that waited for its upstreams waited on purpose: lateness says nothing either.
      const isStale =
        !run.manual &&
        run.upstream === undefined &&
        attemptsMade(run) === 0 &&
        job.overlap.policy !== 'buffer_one' &&
        job.overlap.policy !== 'buffer_all' &&
        judgedAtMs - run.slotMs > this.misfireThresholdMs;
      const catchingUp =
        job.nextFireAtMs !== undefined &&
        job.nextFireAtMs <= nowMs &&
        (ls.pendingIntents.has(job.id) || ls.planQueue.has(job.id));
      if (isStale && catchingUp) {
        // The job's own catch-up is being planned: decide once its runs exist (fire_once must
        // see them to coalesce).
        deferred.push(fireId);
        continue;
      }
      const stale = isStale ? this.staleReason(ls, job, run, judgedAtMs) : undefined;
      if (stale !== undefined) {
        ls.inFlight.set(fireId, { phase: 'missing', attempt: 1 });
        missed.push({ fireId, reason: stale });
        continue;
      }
      if (this.mustSkip(ls, job, run)) {
        ls.inFlight.set(fireId, { phase: 'missing', attempt: 1 });
        missed.push({ fireId, reason: 'run_in_flight', status: 'SKIPPED' });
        continue;
      }
      if (this.mustWait(ls, job, fireId)) {
        hold(ls, job.id, fireId, this.sm);
        continue;
      }
      const attempt = run.attempts.length + 1;
      taken(job.tenant);
      if (job.delivery === 'at_most_once') {
        ls.inFlight.set(fireId, { phase: 'starting', attempt });
        ls.outbox.push({ op: 'attempt-started', atMs: nowMs, term: ls.term, fireId, attempt });
        continue;
      }
      const token = nextToken(Math.max(job.lastToken, ls.issued.get(job.id) ?? 0), ls.term);
      ls.issued.set(job.id, token);
      ls.inFlight.set(fireId, { phase: 'delivering', attempt });
      deliveries.push(order(run, job, attempt, token, ls.term));
      this.onRunTouched?.(fireId);
      handed++;
    }
    if (missed.length > 0) ls.outbox.push({ op: 'miss-runs', atMs: nowMs, runs: missed });
    for (const fireId of deferred) ls.dispatchQueue.add(fireId);
    ls.cappedSinceMs = capped || refused ? judgedAtMs : undefined;
    ls.stoppedAtCap = capped;
  }

  /**
   * The retention sweep: once a second, RETENTION_JOBS_PER_SWEEP more jobs with runs are
   * checked against their tenant's retention, and the finished runs beyond it (oldest first,
   * by count, or finished longer ago than its age) are proposed as one purge-runs entry. One
   * entry at a time; a pass over all jobs takes (jobs / 256) s, so a run outlives its age by
   * at most that. The state machine's own caps bound the state even when no sweep runs.
   */
  private sweepRetention(ls: TermState, nowMs: number): void {
    if (ls.purgeInFlight || nowMs < ls.nextSweepMs) return;
    ls.nextSweepMs = nowMs + RETENTION_SWEEP_EVERY_MS;
    const purge: string[] = [];
    this.retentionCursor ??= this.sm.jobsWithRuns();
    for (let n = 0; n < RETENTION_JOBS_PER_SWEEP && purge.length < PURGES_PER_ENTRY; n++) {
      const next = this.retentionCursor.next();
      if (next.done === true) {
        this.retentionCursor = undefined;
        break;
      }
      this.beyondRetention(next.value, nowMs, purge);
    }
    if (purge.length === 0) return;
    ls.outbox.push({ op: 'purge-runs', atMs: nowMs, fireIds: purge });
    ls.purgeInFlight = true;
  }

  /** Adds the job's finished runs beyond its tenant's retention to `out`. */
  private beyondRetention(jobId: string, nowMs: number, out: string[]): void {
    // A key without a tenant (the scheduler's own tests) has the default retention.
    const slash = jobId.indexOf('/');
    const r = this.retentionOf(slash > 0 ? jobId.slice(0, slash) : '');
    // By slot and finish time: the finished runs are not decoded.
    const history: [number, number | undefined][] = [];
    const dead: [number, number | undefined][] = [];
    this.sm.runs.forEachOf(jobId, (slotMs, status, finishedAtMs) => {
      if (status === 'DEAD') dead.push([slotMs, finishedAtMs]);
      else if (isTerminal(status)) history.push([slotMs, finishedAtMs]);
    });
    const pick = (runs: [number, number | undefined][], keep: number, maxAgeMs: number): void => {
      // Oldest first (runs are listed as they were created): beyond the count, then by age.
      let excess = runs.length - keep;
      for (const [slotMs, finishedAtMs] of runs) {
        const old = finishedAtMs !== undefined && finishedAtMs + maxAgeMs <= nowMs;
        if (excess > 0 || old) out.push(fireIdOf(jobId, slotMs));
        excess--;
      }
    };
    pick(history, r.historyPerJob, r.historyMaxAgeMs);
    pick(dead, r.deadPerJob, r.deadMaxAgeMs);
  }

  /** Runs waiting for a hand-out (due, lease permitting, room in the delivery queue). */
  get dispatchBacklog(): number {
    return this.leader?.dispatchQueue.size ?? 0;
  }

  /**
   * The last step stopped at its hand-out cap: runs the delivery queue has room for wait, and
   * another step soon hands them out. Runs waiting for room (their endpoint is slow) do not
   * count: they wait for answers, not for this node.
   */
  get handOutCapped(): boolean {
    return this.leader?.stoppedAtCap ?? false;
  }

  /**
   * A run planned before an outage (its intent committed) whose slot passed long before anyone
   * could deliver it: the job's misfire policy decides as it would have at planning. Retries,
   * manual runs and runs late by less than the misfire threshold go out as usual.
   */
  private staleReason(ls: TermState, job: Job, run: Run, nowMs: number): string | undefined {
    const lateMs = nowMs - run.slotMs;
    if (lateMs > Math.max(job.misfire.catchUpWindowMs, this.misfireThresholdMs))
      return 'outside_catch_up_window';
    switch (job.misfire.policy) {
      case 'skip':
        return 'skip_policy';
      case 'fire_all':
        return undefined;
      case 'fire_once':
        // Only the newest late slot fires; an older one coalesces into any newer slot that
        // fired or will (whatever its state now: it may already have succeeded).
        for (const r of this.sm.runsOf(job.id)) {
          if (
            r.slotMs > run.slotMs &&
            r.slotMs <= nowMs &&
            !r.manual &&
            r.status !== 'MISSED' &&
            r.status !== 'SKIPPED' &&
            r.status !== 'CANCELLED' &&
            ls.inFlight.get(r.fireId)?.phase !== 'missing'
          )
            return 'coalesced';
        }
        return undefined;
    }
  }

  /**
   * overlap skip: a slot's first attempt whose job already has `maxConcurrency` other runs
   * active is SKIPPED (`run_in_flight`) instead of going out. Planning checked the count a
   * look-ahead before the slot, when the runs planned before it had not started yet (a schedule
   * faster than the look-ahead plans several slots at once, a misfire policy fires several late
   * ones): this is where the limit holds. Retries are active already, and manual runs (trigger,
   * backfill) are asked for by a caller, so neither is skipped; both count for the others.
   */
  private mustSkip(ls: TermState, job: Job, run: Run): boolean {
    if (job.overlap.policy !== 'skip' || run.manual || attemptsMade(run) > 0) return false;
    const max = maxConcurrencyOf(job.overlap);
    return this.activeRuns(ls, job.id, run.fireId, max) >= max;
  }

  /** buffer_one / buffer_all: a run waits while its job has `maxConcurrency` other runs active. */
  private mustWait(ls: TermState, job: Job, fireId: string): boolean {
    if (job.overlap.policy !== 'buffer_one' && job.overlap.policy !== 'buffer_all') return false;
    const max = maxConcurrencyOf(job.overlap);
    return this.activeRuns(ls, job.id, fireId, max) >= max;
  }

  private releaseHeld(ls: TermState, jobId: string): void {
    const held = ls.held.get(jobId);
    if (!held) return;
    ls.held.delete(jobId);
    // Back to the queue in slot order; dispatch() lets the oldest go while the job has room
    // (maxConcurrency) and holds the rest again.
    for (const fireId of held) ls.dispatchQueue.add(fireId);
  }

  // -------------------------------------------------------------------------------------
  // Reports from the runtime

  /**
   * The attempts made of the order's run, this one included: attempts of unknown fate under a
   * lost leader count neither for the backoff nor the limit. Asked only of a retry, so that a
   * spike's successes cost no lookup.
   */
  private attemptsMadeWith(o: DeliveryOrder): number {
    const run = this.sm.runs.get(o.fireId);
    if (!run) return o.attempt;
    // An at-least-once attempt is recorded by its result; an at-most-once one when it started.
    return attemptsMade(run) + (run.attempts.length < o.attempt ? 1 : 0);
  }

  /** A delivery ended. Its result is proposed at the next step (or discarded: another term). */
  attemptDone(o: DeliveryOrder, finished: AttemptFinished, nowMs: number): void {
    const ls = this.leader;
    const f = ls?.inFlight.get(o.fireId);
    if (!ls || ls.term !== o.term || f?.phase !== 'delivering' || f.attempt !== o.attempt) return;
    let outcome = finished.outcome;
    let error = finished.error;
    // At most once: a second send is allowed only when the first provably never left.
    if (
      outcome === 'retry' &&
      o.job.delivery === 'at_most_once' &&
      !finished.isProvablyUndelivered
    ) {
      outcome = 'fail';
      error = `at-most-once: not retried after a possible delivery (${error ?? finished.statusCode ?? 'error'})`;
    }
    const retryAtMs =
      outcome === 'retry'
        ? this.retryAt(o.job, this.attemptsMadeWith(o), o.slotMs, nowMs, finished.retryAfterMs)
        : undefined;
    // A receiver that takes the run to finish it later (its target allows it) answers 202.
    const completionTimeoutMs = o.job.target.completionTimeoutMs;
    const accepted =
      outcome === 'success' && finished.statusCode === 202 && completionTimeoutMs !== undefined;
    const command: AttemptResultCommand = {
      op: 'attempt-result',
      atMs: nowMs,
      fireId: o.fireId,
      attempt: o.attempt,
      token: o.token,
      outcome: accepted ? 'accepted' : outcome,
      statusCode: finished.statusCode,
      durationMs: finished.durationMs,
      error,
      responseExcerpt: finished.responseExcerpt,
      retryAtMs,
      ...(accepted && { completeByMs: nowMs + completionTimeoutMs }),
      ...(this.nodeId !== undefined && { node: this.nodeId }),
      ...(finished.worker !== undefined && { worker: finished.worker }),
    };
    ls.inFlight.set(o.fireId, { phase: 'reporting', attempt: o.attempt, command });
    ls.outbox.push(command);
  }

  /**
   * A delivery that never started (its lease or leadership lapsed while it waited in the
   * delivery queue). An at-least-once run goes back to the queue as if it had not been handed
   * out: it was no attempt. An at-most-once run has a committed start, so it ends like a
   * provably undelivered attempt (retried by its policy).
   */
  attemptNotStarted(o: DeliveryOrder, nowMs: number): void {
    const ls = this.leader;
    const f = ls?.inFlight.get(o.fireId);
    if (!ls || ls.term !== o.term || f?.phase !== 'delivering' || f.attempt !== o.attempt) return;
    if (o.job.delivery === 'at_most_once') {
      this.attemptDone(
        o,
        { outcome: 'retry', durationMs: 0, error: 'not started', isProvablyUndelivered: true },
        nowMs,
      );
      return;
    }
    ls.inFlight.delete(o.fireId);
    ls.dispatchQueue.add(o.fireId);
    this.onRunTouched?.(o.fireId);
  }

  /**
   * What became of a proposed command. A committed one has been applied already (afterApply
   * saw it); a dropped or unknown one is planned or reported again if this term still holds.
   */
  proposalSettled(c: SchedulerCommand, fate: ProposalFate, term: number): void {
    const ls = this.leader;
    if (!ls || ls.term !== term) return;
    ls.unsettled--;
    if (c.op === 'fire-intents') {
      for (const i of c.intents) {
        ls.pendingIntents.delete(i.jobId);
        // Committed: applied (or stale) and re-indexed; otherwise plan it again. An intent
        // that commits twice is a no-op the second time (expectedNextFireAtMs).
        if (fate !== 'committed') ls.planQueue.add(i.jobId);
      }
      return;
    }
    if (c.op === 'upstream-settled') {
      // Applied: the runs moved on (or are asked again after their interval). Otherwise: ask
      // again at the next step.
      for (const r of c.runs)
        if (fate === 'committed') ls.upstreamAskAt.set(r.fireId, 0);
        else ls.upstreamAskAt.delete(r.fireId);
      return;
    }
    if (c.op === 'complete-run') {
      // A deadline's expiry not in the log: look at the run again at the next step.
      const f = ls.inFlight.get(c.fireId);
      if (fate !== 'committed' && f?.phase === 'expiring') {
        ls.inFlight.delete(c.fireId);
        this.deadlines.push([f.completeByMs, c.fireId]);
      }
      return;
    }
    if (c.op === 'purge-runs') {
      // Dropped or unknown: the runs are found again by a later pass of the sweep.
      ls.purgeInFlight = false;
      return;
    }
    if (fate === 'committed') return;
    switch (c.op) {
      case 'attempt-result':
        // Re-applying a result is a no-op, so proposing it again is safe.
        if (ls.inFlight.get(c.fireId)?.phase === 'reporting') ls.outbox.push(c);
        break;
      case 'attempt-results':
        for (const r of c.results)
          if (ls.inFlight.get(r.fireId)?.phase === 'reporting') ls.outbox.push(r);
        break;
      case 'attempt-started':
        if (fate === 'dropped' && ls.inFlight.get(c.fireId)?.phase === 'starting') {
          ls.inFlight.delete(c.fireId);
          ls.dispatchQueue.add(c.fireId);
        }
        break;
      case 'mark-unknown':
        ls.recovered = false;
        break;
      case 'lost-attempts':
        // Not in the log: find the runs again (a run that moved on meanwhile is left out).
        for (const r of c.runs) ls.lostPending.delete(r.fireId);
        ls.recovered = false;
        break;
      case 'miss-runs':
        for (const r of c.runs) {
          if (ls.inFlight.get(r.fireId)?.phase !== 'missing') continue;
          ls.inFlight.delete(r.fireId);
          ls.dispatchQueue.add(r.fireId);
        }
        break;
      default:
        break;
    }
  }

  // -------------------------------------------------------------------------------------
  // Leadership changes and graceful hand-over

  /** Stop starting work: no new intents or deliveries; in-flight attempts finish and report. */
  beginDrain(): void {
    this.draining = true;
  }

  endDrain(): void {
    this.draining = false;
  }

  /** Draining and nothing left in flight or unsettled: safe to hand leadership over. */
  get isDrained(): boolean {
    const ls = this.leader;
    if (!this.draining) return false;
    // A leader that has not caught up with its term yet has not recorded what its
    // predecessors may have sent (recover): its successor, told the leadership was handed
    // over, would not record it either.
    if (!ls) return !this.leadingUncaughtUp;
    return (
      ls.recovered &&
      ls.lostPending.size === 0 &&
      ls.inFlight.size === 0 &&
      ls.unsettled === 0 &&
      ls.outbox.length === 0 &&
      ls.heldResults.length === 0
    );
  }

  /** The last step saw this replica lead a term it had not caught up with yet. */
  private leadingUncaughtUp = false;

  /** Where a run waits for its hand-out: its job's priority, tenant and delivery origin. */
  private laneOf(fireId: string): HandOutLane | undefined {
    const run = this.sm.runs.get(fireId);
    // The job's shared definition, not a copy of the whole job: asked once per hand-out.
    const spec = run && this.sm.jobs.specOf(run.jobId);
    if (!spec) return undefined;
    return { priority: spec.priority, tenant: spec.tenant, origin: this.originOf(spec.target.url) };
  }

  /** Drops the leader's memory; every id it held goes back to the wheels from applied state. */
  private endTerm(): void {
    const ls = this.leader;
    this.draining = false;
    if (!ls) return;
    this.leader = undefined;
    this.index.syncJobs(this.sm, [...ls.planQueue, ...ls.pendingIntents]);
    const runs = new Set<string>([...ls.dispatchQueue.ids(), ...ls.inFlight.keys()]);
    // Expiries this term proposed and never saw apply: the next leader finds them again.
    for (const [fireId, f] of ls.inFlight)
      if (f.phase === 'expiring') this.deadlines.push([f.completeByMs, fireId]);
    for (const held of ls.held.values()) for (const id of held) runs.add(id);
    this.index.syncRuns(this.sm, [...runs]);
  }
}

/** How often the retention sweep goes on, and how far. */
const RETENTION_SWEEP_EVERY_MS = 1000;
const RETENTION_JOBS_PER_SWEEP = 256;
const PURGES_PER_ENTRY = 1024;

function newTermState(
  term: number,
  laneOf: (fireId: string) => HandOutLane | undefined,
): TermState {
  return {
    term,
    planQueue: new Set(),
    pendingIntents: new Set(),
    dispatchQueue: new HandOutQueue(laneOf),
    cappedSinceMs: undefined,
    stoppedAtCap: false,
    purgeInFlight: false,
    nextSweepMs: 0,
    held: new Map(),
    inFlight: new Map(),
    issued: new Map(),
    readyOrders: [],
    outbox: [],
    heldResults: [],
    resultsHeldSinceMs: undefined,
    foreseen: new Set(),
    foreseenUntilMs: 0,
    unsettled: 0,
    recovered: false,
    lostPending: new Map(),
    upstreamAskAt: new Map(),
  };
}

function hold(ls: TermState, jobId: string, fireId: string, sm: SchedulerStateMachine): void {
  let list = ls.held.get(jobId);
  if (!list) ls.held.set(jobId, (list = []));
  if (list.includes(fireId)) return;
  list.push(fireId);
  const slot = (id: string): number => sm.runs.get(id)?.slotMs ?? 0;
  list.sort((a, b) => slot(a) - slot(b));
}

/** The error a RUNNING attempt records when its receiver let its completion deadline pass. */
export const COMPLETION_TIMEOUT_ERROR =
  'COMPLETION_TIMEOUT: no CompleteRun or Heartbeat before the completion deadline';

function order(run: Run, job: Job, attempt: number, token: number, term: number): DeliveryOrder {
  return {
    fireId: run.fireId,
    jobId: run.jobId,
    slotMs: run.slotMs,
    attempt,
    token,
    term,
    job: jobForRun(job, run),
  };
}

export function termOfToken(token: number): number {
  return Math.floor(token / TOKENS_PER_TERM);
}

function jobIdOfFireId(fireId: string): string {
  const at = fireId.lastIndexOf(':');
  if (!(at > 0)) assertionFailed(`fire id ${fireId} has no slot`);
  return fireId.slice(0, at);
}
