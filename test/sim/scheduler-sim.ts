/**
 * The scheduler simulator: one Raft group (3 or 5 SimNodes) replicating the
 * SchedulerStateMachine, a GroupDispatcher per node stepped on the node's own drifting clock,
 * and a simulated webhook receiver reached over its own lossy network. One seed drives
 * everything: the workload (cron jobs in several IANA zones around a real DST transition,
 * intervals, one-offs; pauses, resumes, deletes, triggers), the receiver's answers, and the
 * faults — kill -9 (also aimed between intent and send and between send and result),
 * partitions with the deposed leader still running, SIGSTOP-like pauses past the lease,
 * graceful transfers through drain, receiver outages, and a full-cluster stop across slots.
 *
 * Invariants (docs/ARCHITECTURE.md, The scheduler simulation), checked as each event happens and at
 * the end:
 *   (a) an at-most-once fire id reaches the receiver at most once;
 *   (b) an at-least-once fire id accepted (2xx) again only with a higher token and only after a
 *       failure (crash, partition, pause, election that was not a drained hand-over, lost or
 *       late webhook answer, refused connection);
 *   (c) no delivery is sent by a node that has not applied an acknowledged pause or delete of
 *       its job, nor while the job is paused or deleted in the sender's own applied state;
 *   (d) tokens strictly increase per job in the order deliveries are sent, cluster-wide; and a
 *       sender holding the lease means no node leads a later term (lease soundness);
 *   (e) after a healed liveness phase, every slot the schedule says came due (nextFire from the
 *       job's first applied create, minus the jumps a resume makes and what follows a delete;
 *       after an update, the new schedule's slots from the update's stamp on) has a run on some
 *       replica, MISSED/SKIPPED/CANCELLED ones with a reason, and none left CANCELLED as
 *       superseded by a version that owns it; every scheduled run is a real slot of the
 *       definition that owns it (a run an older definition planned for a later slot only if it
 *       was superseded, recorded as not fired, or attempted before the update); a SUCCEEDED run
 *       was accepted by the receiver;
 *   (f) an update owns the future: a first attempt of a slot is sent only if the sender's
 *       applied definition owns the slot (a slot of its schedule, or one before its update's
 *       stamp, owed by an older one), and an at-least-once one only with that very definition;
 *       an at-most-once attempt whose start committed under an older definition is held to that
 *       one. Retries and manual runs are exempt. Deliveries wait in a delivery queue now and
 *       then, and are checked again just before the send (GroupDispatcher.maySend), as the
 *       runtime does;
 *   (g) no two sends of a fire id carry the same attempt number, across leader changes too;
 *   (h) a run of a job with depends_on is sent only once every upstream is settled in the
 *       sender's applied state, and only if each settled as succeeded (or the job runs anyway
 *       on failure); each upstream run it names is SUCCEEDED in that state and was accepted by
 *       the receiver before this send (never before its upstreams);
 *   (i) a receiver's completion of a RUNNING run (a 202 answer, WebhookTarget
 *       completionTimeoutMs) is taken only with the token of the newest attempt the receiver
 *       has seen of that run: a deposed attempt's completion never finishes the run.
 * Progress also covers waiting runs (settled within their max age) and RUNNING ones (finished
 * by their completion deadline plus the bound).
 * Plus the Raft basics the scheduler relies on: one leader per term, one entry per index.
 *
 * Trace format as in cluster-sim.ts: `<virtual ms> <who> <what>`, chatter hashed only.
 */
import { SeededRand } from '../../src/base/rand.js';
import { isRetryableStatus } from '../../src/delivery/classify.js';
import { planRetry } from '../../src/delivery/backoff.js';
import { MemoryLogStorage } from '../../src/raft/log-storage.js';
import type { Entry, Message, NodeId } from '../../src/raft/messages.js';
import type { Ready } from '../../src/raft/ready.js';
import { nextFire } from '../../src/schedule/next-fire.js';
import { parseSchedule } from '../../src/schedule/parse.js';
import {
  decodeSchedulerCommand,
  encodeSchedulerCommand,
  type SchedulerCommand,
} from '../../src/scheduler/commands.js';
import {
  GroupDispatcher,
  termOfToken,
  type AttemptFinished,
  type DeliveryOrder,
  type ProposalFate,
} from '../../src/scheduler/dispatcher.js';
import {
  attemptsMade,
  isTerminal,
  type Job,
  type JobSpec,
  type OverlapPolicyName,
  type Run,
} from '../../src/scheduler/model.js';
import {
  DEFAULT_SCHEDULER_LIMITS,
  SchedulerStateMachine,
  SUPERSEDED_REASON_PREFIX,
  type ApplyResult,
  type SchedulerLimits,
} from '../../src/scheduler/state-machine.js';
import { answerUpstream } from '../../src/scheduler/upstream.js';
import { auditDispatcher, describeSnapshotDiff, SnapshotLedger } from './agreement.js';
import { describeMessage, InvariantViolation } from './cluster-sim.js';
import { EventQueue } from './event-queue.js';
import { TraceLog } from './trace-log.js';
import { CALM_NETWORK, SimNetwork, type NetworkProfile } from './sim-network.js';
import { SimNode, type ClientOp, type OpOutcome, type ReplicatedApp } from './sim-node.js';

const TICK_MS = 10;
const ELECTION_TICKS = 10;
const HEARTBEAT_TICKS = 2;
/** How often each node's runtime steps its dispatcher (its own clock). */
const STEP_MS = 5;
export const LOOK_AHEAD_MS = 500;
export const MISFIRE_THRESHOLD_MS = 1000;
const AUDIT_EVERY_STEPS = 40;
/**
 * How long after a run could go (due, not held back, faults healed) it must have finished:
 * the misfire threshold (a late slot may wait that long before it is judged), the look-ahead
 * (planning starts that early), and five election timeouts for a leader to settle.
 */
export const PROGRESS_BOUND_MS =
  MISFIRE_THRESHOLD_MS + LOOK_AHEAD_MS + 5 * 2 * ELECTION_TICKS * TICK_MS;
const RX: NodeId = 'rx';

/** Retention far beyond a run, so the final state still holds every run (invariant e). */
const SIM_LIMITS: SchedulerLimits = {
  ...DEFAULT_SCHEDULER_LIMITS,
  runsPerJobMax: 1_000_000,
  runRetentionMs: 1e12,
  finishedJobRetentionMs: 1e12,
  requestIdRetentionMs: 1e12,
};

/** Real 2026 DST transitions: the run starts a few seconds before one of them. */
export const DST_EPOCHS = [
  {
    name: 'US spring-forward',
    atMs: Date.UTC(2026, 2, 8, 7, 0, 0),
    zone: 'America/New_York',
    crons: ['*/5 * * * * *', '0 0 2 * * *', '30 59 1 * * *', '*/10 * 3 * * *', '*/10 * 2 * * *'],
  },
  {
    name: 'EU spring-forward',
    atMs: Date.UTC(2026, 2, 29, 1, 0, 0),
    zone: 'Europe/Berlin',
    crons: ['*/5 * * * * *', '0 0 2 * * *', '0 30 2 * * *', '55 59 1 * * *', '*/7 * 2 * * *'],
  },
  {
    name: 'EU fall-back',
    atMs: Date.UTC(2026, 9, 25, 1, 0, 0),
    zone: 'Europe/Berlin',
    crons: ['*/5 * 2 * * *', '*/4 59 2 * * *', '0 0 3 * * *', '*/6 * * * * *', '0 0 2 * * *'],
  },
  {
    name: 'US fall-back',
    atMs: Date.UTC(2026, 10, 1, 6, 0, 0),
    zone: 'America/New_York',
    crons: ['*/5 * 1 * * *', '*/4 59 1 * * *', '0 0 1 * * *', '0 0 2 * * *', '*/6 * * * * *'],
  },
] as const;

const OTHER_ZONES: readonly [string, string][] = [
  ['UTC', '*/3 * * * * *'],
  ['Asia/Kolkata', '*/6 * * * * *'],
  ['Australia/Lord_Howe', '*/4 * * * * *'],
  ['America/Sao_Paulo', '0/8 * * * * *'],
];

export interface SchedulerSimOptions {
  readonly seed: number;
  /** Virtual ms of the fault phase. @default 20000 */
  readonly safetyMs?: number;
  /** Virtual ms of the healed phase before the final checks. @default 6000 */
  readonly livenessMs?: number;
  /** No random faults, workload or receiver errors (scripted scenarios). */
  readonly calm?: boolean;
  readonly profile?: Partial<SchedFaultProfile>;
  /** Readable trace lines kept for a failure report. @default 80 */
  readonly traceTail?: number;
  /**
   * The dispatchers' resultHoldMs: a leader holds attempt results back while a delivery it
   * sent is unanswered (the runtime's delivery backlog). @default 0 (never; the traces of the
   * seeds recorded before it stay as they were)
   */
  readonly resultHoldMs?: number;
  /** Test seam: replaces the state machine of every replica (e.g. one with a known bug). */
  readonly makeStateMachine?: (limits: SchedulerLimits) => SchedulerStateMachine;
  /** Test seam: replaces the dispatcher (e.g. one with a known bug). */
  readonly makeDispatcher?: (sm: SchedulerStateMachine, startMs: number) => GroupDispatcher;
}

export interface SchedFaultProfile {
  voters: number;
  raftNet: NetworkProfile;
  webhookNet: NetworkProfile;
  /** Probability that a webhook connection is refused (provably undelivered). */
  refuseP: number;
  driftMax: number;
  skewMaxMs: number;
  faultEveryMs: number;
  crashP: number;
  leaderCrashP: number;
  /** Crash the sender right after a send: between send and result. */
  crashAfterSendP: number;
  /** Crash the proposer right after it proposes intents: between intent and send. */
  crashAfterIntentP: number;
  isolateLeaderP: number;
  partitionP: number;
  freezeP: number;
  gracefulP: number;
  rxOutageP: number;
  /** Chance that the run includes one full-cluster stop. */
  fullStopP: number;
  /** Chance that a delivery waits in the node's delivery queue before its send. */
  queueP: number;
  clientEveryMs: number;
  maxJobs: number;
  /** The receiver's answer mix for 'ok' endpoints. */
  rx5xxP: number;
  rx429P: number;
}

export interface SchedCounts {
  sends: number;
  receipts: number;
  accepted: number;
  duplicates: number;
  fencingRejections: number;
  timeouts: number;
  refused: number;
  crashes: number;
  crashesAfterSend: number;
  crashesAfterIntent: number;
  partitions: number;
  freezes: number;
  gracefulTransfers: number;
  fullStops: number;
  /** Deliveries that waited in a delivery queue, and those maySend then refused. */
  queued: number;
  queuedRefused: number;
  elections: number;
  clientOps: number;
  clientAcks: number;
  jobs: number;
  runs: number;
  succeeded: number;
  dead: number;
  unknown: number;
  missed: number;
  skipped: number;
  cancelled: number;
  /** Runs CANCELLED because an update superseded them. */
  superseded: number;
  /** Acknowledged updates. */
  updates: number;
  expectedSlots: number;
  /** Runs still unfinished at the end but within the progress bound. */
  unfinishedInBound: number;
  /** Derived-index audits, and state comparisons between replicas at the same index. */
  audits: number;
  agreementChecks: number;
  /** Sends of runs that waited for upstreams; runs SKIPPED because one did not succeed. */
  dependentSends: number;
  upstreamSkips: number;
  /** 202 answers; receivers' completions taken and refused (stale tokens, finished runs). */
  accepted202: number;
  completions: number;
  completionsRefused: number;
}

export interface SchedSimResult {
  readonly seed: number;
  readonly ok: boolean;
  readonly violation: string | undefined;
  readonly traceHash: string;
  readonly traceTail: readonly string[];
  readonly counts: SchedCounts;
  readonly events: number;
  readonly endMs: number;
  readonly epoch: string;
}

/** A delivery as the sending node performed it. */
export interface SentDelivery {
  readonly id: number;
  readonly node: NodeId;
  readonly incarnation: number;
  readonly order: DeliveryOrder;
  readonly atMs: number;
  readonly failureEpoch: number;
}

/** What the receiver saw. */
export interface Receipt {
  readonly deliveryId: number;
  readonly fireId: string;
  readonly jobId: string;
  readonly token: number;
  readonly attempt: number;
  readonly atMs: number;
  readonly from: NodeId;
  readonly status: number;
  readonly sendEpoch: number;
}

type Behavior = 'ok' | 'flaky' | 'slow' | 'down' | 'bad';

type SchedEvent =
  | { kind: 'tick'; node: NodeId; incarnation: number }
  | { kind: 'dstep'; node: NodeId; incarnation: number }
  | { kind: 'msg'; node: NodeId; m: Message }
  | { kind: 'persisted'; node: NodeId; incarnation: number }
  | { kind: 'op'; node: NodeId; op: ClientOp }
  | { kind: 'report-snap'; node: NodeId; to: NodeId; ok: boolean }
  | { kind: 'rx-recv'; id: number }
  | { kind: 'wh-answer'; id: number; status: number; retryAfterMs: number | undefined }
  | { kind: 'wh-refused'; id: number }
  | { kind: 'wh-timeout'; id: number }
  | { kind: 'fault' }
  | { kind: 'heal' }
  | { kind: 'restart'; node: NodeId }
  | { kind: 'unfreeze'; node: NodeId }
  | { kind: 'rx-up' }
  | { kind: 'full-stop' }
  | { kind: 'full-start' }
  | { kind: 'client' }
  | { kind: 'client-retry'; opKey: number }
  | { kind: 'call'; fn: () => void };

/** The replicated app of one node: the state machine and the dispatcher deriving from it. */
class SchedApp implements ReplicatedApp {
  readonly d: GroupDispatcher;
  /** Graceful hand-over in progress: drain, then transfer to `to`. */
  drain: { to: NodeId; startedAt: number; transferred: boolean } | undefined;

  constructor(
    readonly sm: SchedulerStateMachine,
    startMs: number,
    makeDispatcher: (sm: SchedulerStateMachine, startMs: number) => GroupDispatcher,
    private readonly observe: (
      e: Entry,
      c: SchedulerCommand,
      pre: Job | undefined,
      r: ApplyResult,
      sm: SchedulerStateMachine,
    ) => void,
  ) {
    this.d = makeDispatcher(this.sm, startMs);
  }

  applyEntry(e: Entry): ApplyResult {
    const c = decodeSchedulerCommand(e.data);
    const jobId = 'jobId' in c ? c.jobId : undefined;
    const pre = jobId !== undefined ? this.sm.jobs.get(jobId) : undefined;
    const preCopy = pre ? { ...pre } : undefined;
    const r = this.sm.applyCommand(c);
    this.observe(e, c, preCopy, r, this.sm);
    return r;
  }

  afterApply(): void {
    this.d.afterApply();
  }

  snapshot(): Uint8Array {
    return this.sm.snapshot();
  }

  restoreFrom(data: Uint8Array): void {
    // The bootstrap snapshot (initial membership) carries no state.
    if (data.byteLength === 0) return;
    this.sm.restore(data);
    this.d.rebuild();
  }
}

type SNode = SimNode<SchedApp>;

/** One definition of a job, from the create or update that applied it (first replica). */
interface JobVersion {
  readonly version: number;
  /** The stamp of its create or update: it owns the slots from here on. */
  readonly atMs: number;
  readonly spec: JobSpec;
  readonly firstSlot: number | undefined;
}

/** Per job, what the canonical (first-applied) log did to it, for invariants (e) and (f). */
interface JobHistory {
  spec: JobSpec;
  createdAtMs: number;
  firstSlot: number | undefined;
  /** Every definition in log order, the create's first. */
  versions: JobVersion[];
  /** [from, to): slots a resume jumped over, and [frontier, ∞) after a delete. */
  excused: [number, number][];
  deleted: boolean;
}

/** A client operation the workload keeps retrying until it is acknowledged. */
interface ClientTask {
  readonly key: number;
  readonly jobId: string;
  readonly kind: 'create' | 'update' | 'pause' | 'resume' | 'delete' | 'trigger';
  readonly spec?: JobSpec;
  readonly requestId?: string;
  tries: number;
  done: boolean;
}

interface ModelJob {
  state: 'active' | 'paused' | 'deleted';
  busy: boolean;
  spec: JobSpec;
}

export class SchedulerSim {
  readonly rand: SeededRand;
  private readonly q = new EventQueue<SchedEvent>();
  readonly net: SimNetwork;
  readonly whNet: SimNetwork;
  readonly nodes = new Map<NodeId, SNode>();
  private readonly clockRate = new Map<NodeId, number>();
  private readonly clockOffset = new Map<NodeId, number>();
  private readonly lastTickAt = new Map<NodeId, number>();
  private readonly frozen = new Map<NodeId, { since: number; stash: SchedEvent[] }>();
  private now = 0;
  private events = 0;
  private readonly traceLog: TraceLog;
  readonly profile: SchedFaultProfile;
  readonly t0: number;
  readonly epochName: string;
  private phase: 'safety' | 'liveness' = 'safety';
  /** Virtual time the faults healed (the liveness phase began). */
  private healedAt = 0;
  private readonly snapshots = new SnapshotLedger();
  private dispatcherSteps = 0;
  readonly counts: SchedCounts = {
    sends: 0,
    receipts: 0,
    accepted: 0,
    duplicates: 0,
    fencingRejections: 0,
    timeouts: 0,
    refused: 0,
    crashes: 0,
    crashesAfterSend: 0,
    crashesAfterIntent: 0,
    partitions: 0,
    freezes: 0,
    gracefulTransfers: 0,
    fullStops: 0,
    queued: 0,
    queuedRefused: 0,
    elections: 0,
    clientOps: 0,
    clientAcks: 0,
    jobs: 0,
    runs: 0,
    succeeded: 0,
    dead: 0,
    unknown: 0,
    missed: 0,
    skipped: 0,
    cancelled: 0,
    superseded: 0,
    updates: 0,
    expectedSlots: 0,
    unfinishedInBound: 0,
    audits: 0,
    agreementChecks: 0,
    dependentSends: 0,
    upstreamSkips: 0,
    accepted202: 0,
    completions: 0,
    completionsRefused: 0,
  };

  // Raft invariants.
  private readonly leaderOfTerm = new Map<number, NodeId>();
  private readonly appliedAt = new Map<number, string>();
  private maxFirstApplied = 0;

  // Webhooks.
  private nextDeliveryId = 1;
  readonly sent = new Map<number, SentDelivery>();
  private readonly pendingDelivery = new Set<number>();
  readonly receipts: Receipt[] = [];
  private readonly rxMaxTerm = new Map<string, number>();
  private readonly acceptedByFire = new Map<string, Receipt[]>();
  private readonly receivedAmo = new Map<string, Receipt>();
  /** Attempt numbers sent per fire id (invariant g). */
  private readonly sentAttempts = new Map<string, Set<number>>();
  private readonly lastSentToken = new Map<string, number>();
  private rxDown = false;
  private readonly behaviors = new Map<string, Behavior>();
  private failureEpoch = 0;
  private graceful: { from: NodeId; to: NodeId; term: number } | undefined;

  // Client workload and acknowledgements.
  private nextOpId = 1;
  private readonly dispatcherOps = new Map<
    number,
    { node: NodeId; incarnation: number; cmd: SchedulerCommand; term: number }
  >();
  private readonly clientOps = new Map<number, ClientTask>();
  private readonly tasks = new Map<number, ClientTask>();
  private nextTaskKey = 1;
  readonly model = new Map<string, ModelJob>();
  /** Acknowledged pauses and deletes: applied on the leader that proposed them, at `index`. */
  private readonly stopAcks = new Map<string, { index: number; atMs: number; what: string }[]>();
  readonly history = new Map<string, JobHistory>();
  private nextJobNumber = 1;

  /** Scenario hooks. */
  onLeader: ((node: SNode) => void) | undefined;
  onSend: ((s: SentDelivery) => void) | undefined;
  onPropose: ((node: SNode, c: SchedulerCommand) => void) | undefined;
  onReceipt: ((r: Receipt) => void) | undefined;
  /** Scenario hook: a fixed delay for this webhook request instead of the network's. */
  webhookDelay: ((s: SentDelivery) => number | undefined) | undefined;

  /** Scenario DSL: run `fn` after `delayMs` of virtual time (never inside a node's step). */
  later(delayMs: number, fn: () => void): void {
    this.q.push(this.now + delayMs, { kind: 'call', fn });
  }

  constructor(private readonly opts: SchedulerSimOptions) {
    this.rand = new SeededRand(opts.seed);
    this.traceLog = new TraceLog(opts.traceTail ?? 80);
    this.profile = { ...this.drawProfile(), ...opts.profile };
    const epoch = DST_EPOCHS[this.rand.int(DST_EPOCHS.length)]!;
    this.epochName = epoch.name;
    // The transition happens 3 to 12 s into the run.
    this.t0 = epoch.atMs - 3000 - this.rand.int(9000);
    this.dstEpoch = epoch;
    this.net = new SimNetwork(this.rand.fork(), opts.calm ? CALM_NETWORK : this.profile.raftNet);
    this.whNet = new SimNetwork(
      this.rand.fork(),
      opts.calm ? CALM_NETWORK : this.profile.webhookNet,
    );
  }

  private readonly dstEpoch: (typeof DST_EPOCHS)[number];

  private drawProfile(): SchedFaultProfile {
    const r = this.rand;
    const maybe = (p: number, max: number): number => (r.chance(p) ? r.float() * max : 0);
    return {
      voters: r.chance(0.7) ? 3 : 5,
      raftNet: {
        dropP: maybe(0.5, 0.05),
        duplicateP: maybe(0.3, 0.05),
        delayMinMs: 1,
        delayMaxMs: 2 + r.int(8),
        longDelayP: maybe(0.3, 0.02),
        longDelayMs: 100,
      },
      webhookNet: {
        dropP: maybe(0.5, 0.05),
        duplicateP: 0,
        delayMinMs: 1,
        delayMaxMs: 2 + r.int(30),
        longDelayP: maybe(0.3, 0.05),
        longDelayMs: 400,
      },
      refuseP: maybe(0.5, 0.05),
      driftMax: 0.01 * r.float(),
      skewMaxMs: r.int(50),
      faultEveryMs: 150 + r.int(250),
      crashP: maybe(0.5, 0.1),
      leaderCrashP: maybe(0.6, 0.15),
      crashAfterSendP: maybe(0.5, 0.03),
      crashAfterIntentP: maybe(0.5, 0.05),
      isolateLeaderP: maybe(0.6, 0.15),
      partitionP: maybe(0.4, 0.1),
      freezeP: maybe(0.5, 0.1),
      gracefulP: maybe(0.6, 0.15),
      rxOutageP: maybe(0.3, 0.05),
      fullStopP: 0.3,
      // Drawn in start(), for runs with faults only: a scripted (calm) scenario's draws stay.
      queueP: 0,
      clientEveryMs: 150 + r.int(400),
      maxJobs: 6 + r.int(10),
      rx5xxP: maybe(0.6, 0.15),
      rx429P: maybe(0.5, 0.1),
    };
  }

  // -------------------------------------------------------------------------------------
  // Trace

  private trace(who: string, line: string, keep = true): void {
    this.traceLog.add(this.now, who, line, keep);
  }

  private fail(what: string): never {
    throw new InvariantViolation(what);
  }

  // -------------------------------------------------------------------------------------
  // Nodes and clocks

  /** The node's wall clock: drifting rate and a fixed offset from true time. */
  wall(id: NodeId): number {
    return this.t0 + (this.clockOffset.get(id) ?? 0) + this.now * (this.clockRate.get(id) ?? 1);
  }

  private addNode(id: NodeId, voters: readonly NodeId[]): SNode {
    const nodeRand = this.rand.fork();
    const node: SNode = new SimNode<SchedApp>(
      {
        id,
        rand: nodeRand,
        makeApp: () => this.makeApp(id, nodeRand.fork()),
        hooks: {
          send: (from, m) => this.sendRaft(from, m),
          complete: (op, outcome) => this.complete(op, outcome),
          persistDelayMs: () => 0.2 + this.rand.float() * 3,
          now: () => this.now,
          trace: (n, line) => this.trace(n, line),
          onReady: (n, rd) => this.checkReady(n, rd),
          onApplied: (n, e) => this.checkApplied(n, e),
          onAdvanced: () => undefined,
          onStateAt: (n, index) => this.checkStateAt(n, index),
          onSnapshotTaken: (n, index, data) => this.checkSnapshot(n, index, data),
          schedulePersisted: (n, incarnation, delay) =>
            this.q.push(this.now + delay, { kind: 'persisted', node: n.id, incarnation }),
        },
        electionTimeoutTicks: ELECTION_TICKS,
        // As `tickraft serve` spreads election timers (src/config/node-config.ts): the lease
        // check runs against the spread the nodes use.
        electionJitterTicks: Math.ceil(ELECTION_TICKS / 2),
        heartbeatTicks: HEARTBEAT_TICKS,
        snapshotEveryEntries: 40,
        maxMsgBytes: 64 * 1024,
        quiesceAfterTicks: 0,
        makeRaft: undefined,
      },
      MemoryLogStorage.bootstrap(voters),
    );
    this.nodes.set(id, node);
    const drift = this.opts.calm ? 0 : this.profile.driftMax;
    this.clockRate.set(id, 1 + (this.rand.float() * 2 - 1) * drift);
    const skew = this.opts.calm ? 0 : this.profile.skewMaxMs;
    this.clockOffset.set(id, (this.rand.float() * 2 - 1) * skew);
    this.startClocks(node);
    return node;
  }

  private makeApp(id: NodeId, retryRand: SeededRand): SchedApp {
    const startMs = this.wall(id);
    const make =
      this.opts.makeDispatcher ??
      ((sm: SchedulerStateMachine, start: number) =>
        new GroupDispatcher(sm, {
          startMs: start,
          lookAheadMs: LOOK_AHEAD_MS,
          misfireThresholdMs: MISFIRE_THRESHOLD_MS,
          resultHoldMs: this.opts.resultHoldMs ?? 0,
          retryAt: (job, attempt, slot, now, retryAfter) =>
            planRetry(job.retry, attempt, slot, now, retryAfter, retryRand),
        }));
    const sm = this.opts.makeStateMachine?.(SIM_LIMITS) ?? new SchedulerStateMachine(SIM_LIMITS);
    return new SchedApp(sm, startMs, make, (e, c, pre, r, sm) =>
      this.observeApply(e, c, pre, r, sm),
    );
  }

  /**
   * Whole ticks the node's clock has passed since the ticks it last counted. The runtime
   * counts ticks from the clock (src/multiraft/ticker.ts), so after a stall the next reading
   * sees them all, whichever comes first: the tick timer or the dispatcher's step.
   */
  private owedTicks(n: SNode): number {
    const rate = this.clockRate.get(n.id) ?? 1;
    const since = this.now - (this.lastTickAt.get(n.id) ?? this.now);
    return Math.floor((since * rate) / TICK_MS + 1e-6);
  }

  private countTicks(n: SNode, ticks: number): void {
    const rate = this.clockRate.get(n.id) ?? 1;
    this.lastTickAt.set(n.id, (this.lastTickAt.get(n.id) ?? this.now) + (ticks * TICK_MS) / rate);
  }

  private startClocks(node: SNode, resetTicks = true): void {
    const rate = this.clockRate.get(node.id) ?? 1;
    if (resetTicks) this.lastTickAt.set(node.id, this.now);
    this.q.push(this.now + (this.rand.float() * TICK_MS) / rate, {
      kind: 'tick',
      node: node.id,
      incarnation: node.incarnation,
    });
    this.q.push(this.now + (this.rand.float() * STEP_MS) / rate, {
      kind: 'dstep',
      node: node.id,
      incarnation: node.incarnation,
    });
  }

  private sendRaft(from: SNode, m: Message): void {
    const delays = this.net.plan(m.from, m.to);
    const chatter = m.type === 'heartbeat' || m.type === 'heartbeat-resp';
    this.trace(
      m.from,
      `send ${describeMessage(m)} ${delays.length === 0 ? 'LOST' : delays.map((d) => d.toFixed(2)).join('+')}`,
      !chatter,
    );
    for (const d of delays) this.q.push(this.now + d, { kind: 'msg', node: m.to, m });
    if (m.type === 'snap') {
      const ok = delays.length > 0;
      const at = this.now + (delays[0] ?? 5);
      this.q.push(at, { kind: 'report-snap', node: from.id, to: m.to, ok });
    }
  }

  leader(): SNode | undefined {
    let best: SNode | undefined;
    for (const n of this.nodes.values()) {
      if (n.up && n.raft.role === 'leader' && (!best || n.raft.term > best.raft.term)) best = n;
    }
    return best;
  }

  // -------------------------------------------------------------------------------------
  // Raft-level checks the scheduler relies on

  private checkReady(node: SNode, rd: Ready): void {
    const r = node.raft;
    if (rd.softState?.role !== 'leader') return;
    const prior = this.leaderOfTerm.get(r.term);
    if (prior !== undefined && prior !== node.id)
      this.fail(`two leaders in term ${r.term}: ${prior} and ${node.id}`);
    if (prior === node.id) return;
    this.leaderOfTerm.set(r.term, node.id);
    this.counts.elections++;
    const g = this.graceful;
    const handedOver = g !== undefined && g.to === node.id && r.term === g.term + 1;
    this.graceful = undefined;
    // A drained hand-over is not a failure: invariant (b) allows no duplicate across it.
    if (!handedOver) this.failureEpoch++;
    this.trace(node.id, `became leader t${r.term}${handedOver ? ' (graceful hand-over)' : ''}`);
    this.onLeader?.(node);
  }

  private checkApplied(node: SNode, e: Entry): void {
    if (e.index !== node.lastApplied + 1)
      this.fail(`${node.id} applies ${e.index} after ${node.lastApplied}`);
    const key = `${e.term}:${e.type}:${Buffer.from(e.data).toString('base64')}`;
    const prior = this.appliedAt.get(e.index);
    if (prior !== undefined && prior !== key)
      this.fail(`${node.id} applied a different entry at ${e.index}`);
    this.appliedAt.set(e.index, key);
  }

  /** Sees every scheduler command applied; the first replica to apply an index records it. */
  private observeApply(
    e: Entry,
    c: SchedulerCommand,
    pre: Job | undefined,
    r: ApplyResult,
    sm: SchedulerStateMachine,
  ): void {
    if (e.index <= this.maxFirstApplied) return;
    this.maxFirstApplied = e.index;
    if (c.op === 'complete-run' && c.ifCompleteByMs === undefined) {
      if (!r.ok) this.counts.completionsRefused++;
      else {
        this.counts.completions++;
        const newest = this.rxNewestToken.get(c.fireId) ?? 0;
        if (c.token < newest)
          this.fail(
            `${c.fireId}: a completion with token ${c.token} was taken after the receiver saw token ${newest}`,
          );
      }
    }
    switch (c.op) {
      case 'create-job':
        if (r.ok && !r.duplicate) {
          this.history.set(c.jobId, {
            spec: c.spec,
            createdAtMs: c.atMs,
            firstSlot: c.nextFireAtMs,
            versions: [{ version: 1, atMs: c.atMs, spec: c.spec, firstSlot: c.nextFireAtMs }],
            excused: [],
            deleted: false,
          });
        }
        break;
      case 'update-job': {
        const h = this.history.get(c.jobId);
        if (!h || !r.ok || r.version === undefined) break;
        h.versions.push({
          version: r.version,
          atMs: c.atMs,
          spec: c.spec,
          firstSlot: c.nextFireAtMs,
        });
        // Slots of the old definition due before the stamp and not planned yet get no run: the
        // simulated client sends no settle intent with its update (the API does).
        const from = pre?.nextFireAtMs;
        if (from !== undefined && (c.nextFireAtMs === undefined || c.nextFireAtMs > from))
          h.excused.push([from, c.nextFireAtMs ?? Infinity]);
        break;
      }
      case 'resume-job': {
        const h = this.history.get(c.jobId);
        const from = pre?.nextFireAtMs;
        // A resume moves the frontier to the first slot after the resume: slots between the
        // old frontier and it never fire and are not recorded (docs/schedules.md: not fired while
        // paused).
        if (
          h &&
          r.ok &&
          from !== undefined &&
          c.nextFireAtMs !== undefined &&
          c.nextFireAtMs > from
        )
          h.excused.push([from, c.nextFireAtMs]);
        if (h && r.ok && from !== undefined && c.nextFireAtMs === undefined)
          h.excused.push([from, Infinity]);
        break;
      }
      case 'delete-job': {
        const h = this.history.get(c.jobId);
        if (h && r.ok) {
          h.deleted = true;
          h.excused.push([pre?.nextFireAtMs ?? -Infinity, Infinity]);
        }
        break;
      }
      default:
        break;
    }
    void sm;
  }

  // -------------------------------------------------------------------------------------
  // The runtime's dispatcher loop on one node

  private stepDispatcher(n: SNode): void {
    const app = n.app;
    const r = n.raft;
    const now = this.wall(n.id);
    // The lease is judged on the clock as read now: a stall between the last tick and this
    // step (SIGSTOP, GC) must not leave the lease looking valid.
    const owed = this.owedTicks(n);
    if (owed >= 1) {
      this.countTicks(n, owed);
      n.node.tick(owed);
      this.trace(n.id, `tick x${owed} before the dispatcher step`, owed > 1);
    }
    const isLeader = r.role === 'leader';
    if (!isLeader) app.drain = undefined;
    const leadership = isLeader
      ? {
          term: r.term,
          leaseValid: n.node.isLeaseValid(),
          caughtUp: n.lastAppliedTerm === r.term,
          handedOver: r.leadsByTransfer,
        }
      : undefined;
    const s = app.d.step(now, leadership, undefined, {
      hold: this.hasPendingDelivery(n),
      max: Number.POSITIVE_INFINITY,
    });
    for (const c of s.proposals) this.proposeFromDispatcher(n, c, r.term);
    for (const q of s.upstreamQueries) {
      // One group here: the upstream's state is the asking node's own, read a moment later (a
      // round trip to the upstream's leader). What a node applied is committed, so it may be
      // stale but never wrong; a crash in between loses the answer (asked again later).
      const incarnation = n.incarnation;
      this.later(1 + this.rand.float() * 20, () => {
        if (!n.up || n.incarnation !== incarnation) return;
        n.app.d.upstreamAnswered(
          q,
          q.jobs.map((job) => ({
            ...answerUpstream(n.app.sm, job, q.slotMs),
            job,
          })),
          this.wall(n.id),
        );
      });
    }
    for (const o of s.deliveries) {
      // A job's attempts leave the queue in order (one origin, FIFO): one queued makes the
      // later ones wait behind it.
      const behind = (this.queuedUntil.get(queueKey(n, o)) ?? -Infinity) >= this.now;
      if (behind || (!this.opts.calm && this.rand.chance(this.profile.queueP)))
        this.queueDelivery(n, o);
      else this.sendDelivery(n, o);
    }
    const dr = app.drain;
    if (isLeader && dr && !dr.transferred) {
      if (app.d.isDrained) {
        dr.transferred = true;
        this.graceful = { from: n.id, to: dr.to, term: r.term };
        const refused = n.node.transferLeader(dr.to);
        this.trace(n.id, `drained; transfer to ${dr.to} ${refused ? 'refused' : 'started'}`);
        this.counts.gracefulTransfers++;
      } else if (this.now - dr.startedAt > 2000) {
        app.d.endDrain();
        app.drain = undefined;
        this.trace(n.id, 'drain abandoned');
      }
    } else if (isLeader && dr?.transferred && this.now - dr.startedAt > 3000) {
      // The transfer did not happen (target down, or timed out): resume work.
      app.d.endDrain();
      app.drain = undefined;
      this.graceful = undefined;
      this.trace(n.id, 'transfer did not complete; drain ended');
    }
  }

  private proposeFromDispatcher(n: SNode, c: SchedulerCommand, term: number): void {
    const opId = this.nextOpId++;
    this.dispatcherOps.set(opId, { node: n.id, incarnation: n.incarnation, cmd: c, term });
    this.trace(n.id, `propose ${describeCommand(c)}`);
    n.proposeWrite({ opId, clientId: -2, kind: 'write', key: '', data: encodeSchedulerCommand(c) });
    this.onPropose?.(n, c);
    if (
      c.op === 'fire-intents' &&
      this.phase === 'safety' &&
      !this.opts.calm &&
      this.rand.chance(this.profile.crashAfterIntentP)
    ) {
      // Between intent and send: the intent may or may not commit before the crash.
      const id = n.id;
      this.q.push(this.now + this.rand.float() * 8, { kind: 'restart', node: `crash:${id}` });
      this.counts.crashesAfterIntent++;
    }
  }

  private complete(op: ClientOp, outcome: OpOutcome): void {
    const d = this.dispatcherOps.get(op.opId);
    if (d) {
      this.dispatcherOps.delete(op.opId);
      const n = this.nodes.get(d.node);
      if (!n?.up || n.incarnation !== d.incarnation) return;
      const fate: ProposalFate =
        outcome.status === 'ok' ? 'committed' : outcome.status === 'fail' ? 'dropped' : 'unknown';
      n.app.d.proposalSettled(d.cmd, fate, d.term);
      if (fate !== 'committed') this.trace(n.id, `settled ${fate} ${describeCommand(d.cmd)}`);
      return;
    }
    const task = this.clientOps.get(op.opId);
    if (!task) return;
    this.clientOps.delete(op.opId);
    this.clientOutcome(task, op, outcome);
  }

  // -------------------------------------------------------------------------------------
  // Webhooks: sender side

  /** A delivery this node sent is unanswered: the runtime would hold results back. */
  private hasPendingDelivery(n: SNode): boolean {
    if ((this.opts.resultHoldMs ?? 0) === 0) return false;
    for (const id of this.pendingDelivery) if (this.sent.get(id)?.node === n.id) return true;
    return false;
  }

  /**
   * The runtime's delivery queue: the attempt waits for its tenant's or origin's turn, then is
   * asked again just before the send (SchedulerRuntime.mayStart): still this term's leader with
   * its lease, and GroupDispatcher.maySend. Otherwise it never started (attemptNotStarted). A
   * crash loses the queue with the process.
   */
  private readonly queuedUntil = new Map<string, number>();

  private queueDelivery(n: SNode, o: DeliveryOrder): void {
    this.counts.queued++;
    const key = queueKey(n, o);
    const atMs = Math.max(
      this.now + this.rand.float() * (this.rand.chance(0.3) ? 400 : 40),
      (this.queuedUntil.get(key) ?? 0) + 0.01,
    );
    this.queuedUntil.set(key, atMs);
    const incarnation = n.incarnation;
    this.trace(n.id, `queue ${o.fireId} a${o.attempt} v${o.job.version}`);
    const attempt = (): void => {
      if (!n.up || n.incarnation !== incarnation) return;
      if (this.frozen.has(n.id)) {
        this.later(5, attempt);
        return;
      }
      n.deliver({
        kind: 'app',
        run: () => {
          if (!n.up || n.incarnation !== incarnation) return;
          const leads = n.raft.role === 'leader' && n.raft.term === o.term;
          if (leads && n.node.isLeaseValid() && n.app.d.maySend(o)) {
            this.sendDelivery(n, o);
            return;
          }
          this.counts.queuedRefused++;
          this.trace(n.id, `not sent ${o.fireId} a${o.attempt} v${o.job.version}`);
          n.app.d.attemptNotStarted(o, this.wall(n.id));
        },
      });
    };
    this.q.push(atMs, { kind: 'call', fn: attempt });
  }

  private sendDelivery(n: SNode, o: DeliveryOrder): void {
    const id = this.nextDeliveryId++;
    const s: SentDelivery = {
      id,
      node: n.id,
      incarnation: n.incarnation,
      order: o,
      atMs: this.now,
      failureEpoch: this.failureEpoch,
    };
    this.sent.set(id, s);
    this.counts.sends++;
    this.trace(
      n.id,
      `deliver #${id} ${o.fireId} a${o.attempt} tok t${termOfToken(o.token)}+${o.token % 2 ** 24}`,
    );
    this.checkSend(n, s);
    this.onSend?.(s);
    this.pendingDelivery.add(id);
    const deadline = o.job.attemptDeadlineMs / (this.clockRate.get(n.id) ?? 1);
    this.q.push(this.now + deadline, { kind: 'wh-timeout', id });
    if (this.rxDown || (!this.opts.calm && this.rand.chance(this.profile.refuseP))) {
      this.q.push(this.now + 0.5 + this.rand.float(), { kind: 'wh-refused', id });
    } else {
      const forced = this.webhookDelay?.(s);
      const delays = forced !== undefined ? [forced] : this.whNet.plan(n.id, RX);
      if (delays.length === 0) {
        this.failureEpoch++;
        this.trace('net', `webhook request #${id} lost`);
      } else {
        this.q.push(this.now + delays[0]!, { kind: 'rx-recv', id });
      }
    }
    if (
      this.phase === 'safety' &&
      !this.opts.calm &&
      this.rand.chance(this.profile.crashAfterSendP)
    ) {
      // Between send and result: the attempt is out, its result not yet committed.
      this.q.push(this.now + this.rand.float() * 20, { kind: 'restart', node: `crash:${n.id}` });
      this.counts.crashesAfterSend++;
    }
  }

  /** Invariants (c) and (d) at the moment a node sends. */
  private checkSend(n: SNode, s: SentDelivery): void {
    const o = s.order;
    const job = n.app.sm.jobs.get(o.jobId);
    if (!job) this.fail(`${n.id} sends ${o.fireId} (#${s.id}) but the job is deleted in its state`);
    if (job.paused)
      this.fail(
        `${n.id} sends ${o.fireId} (#${s.id}) while the job is paused in its own applied state`,
      );
    for (const ack of this.stopAcks.get(o.jobId) ?? []) {
      if (ack.index > n.lastApplied) {
        this.fail(
          `${n.id} sends ${o.fireId} (#${s.id}) after a ${ack.what} acknowledged at ${ack.atMs.toFixed(3)} (index ${ack.index}) that it has not applied (applied ${n.lastApplied})`,
        );
      }
    }
    this.checkOwned(n, s, job);
    this.checkUpstreams(n, s, job);
    // (g) Attempt numbers tell the truth: a send of a fire id never repeats an earlier send's
    // number, across leader changes too (a new leader records what its predecessor may have
    // sent before it sends again).
    const numbers = this.sentAttempts.get(o.fireId) ?? new Set<number>();
    if (numbers.has(o.attempt))
      this.fail(`${n.id} sends ${o.fireId} (#${s.id}) as attempt ${o.attempt} a second time`);
    numbers.add(o.attempt);
    this.sentAttempts.set(o.fireId, numbers);
    const last = this.lastSentToken.get(o.jobId);
    if (last !== undefined && o.token <= last)
      this.fail(
        `token ${o.token} for ${o.jobId} (#${s.id} by ${n.id}) not above the last sent ${last}`,
      );
    this.lastSentToken.set(o.jobId, o.token);
    if (termOfToken(o.token) !== n.raft.term)
      this.fail(`${n.id} in t${n.raft.term} sends a token of t${termOfToken(o.token)}`);
    if (!n.node.isLeaseValid()) this.fail(`${n.id} sends ${o.fireId} without a valid lease`);
    for (const other of this.nodes.values()) {
      if (other.up && other.raft.role === 'leader' && other.raft.term > n.raft.term)
        this.fail(
          `lease unsound: ${n.id} (t${n.raft.term}) sends while ${other.id} leads t${other.raft.term}`,
        );
    }
  }

  /** Invariant (h): a dependent run goes only after its upstreams succeeded. */
  private checkUpstreams(n: SNode, s: SentDelivery, job: Job): void {
    const run = n.app.sm.runs.get(s.order.fireId);
    if (run?.upstream === undefined) return;
    this.counts.dependentSends++;
    const policy = job.dependsOn?.onUpstreamFailure ?? 'skip';
    for (const u of run.upstream) {
      if (u.outcome === undefined)
        this.fail(`${n.id} sends ${run.fireId} while upstream ${u.job} is still pending`);
      if (u.outcome !== 'succeeded') {
        if (policy !== 'run')
          this.fail(`${n.id} sends ${run.fireId} although upstream ${u.job} is ${u.outcome}`);
        continue;
      }
      const up = u.fireId === undefined ? undefined : n.app.sm.runs.get(u.fireId);
      if (up?.status !== 'SUCCEEDED')
        this.fail(
          `${n.id} sends ${run.fireId} on upstream run ${u.fireId ?? '?'} which is ${up?.status ?? 'gone'} in its state`,
        );
      const accepted = this.acceptedByFire.get(u.fireId!) ?? [];
      if (!accepted.some((r) => r.atMs <= this.now) && !this.acceptedAsync.has(u.fireId!))
        this.fail(`${n.id} sends ${run.fireId} before the receiver accepted upstream ${u.fireId}`);
    }
  }

  /** Invariant (f): the slot of a first attempt belongs to the definition it is sent under. */
  private checkOwned(n: SNode, s: SentDelivery, job: Job): void {
    const o = s.order;
    const run = n.app.sm.runs.get(o.fireId);
    // A retry is exempt; an attempt numbered after one of unknown fate (an earlier leader may
    // have sent it) is the first one known to be made, and is checked.
    if (!run || run.manual) return;
    if (attemptsMade(run) > (o.job.delivery === 'at_most_once' ? 1 : 0)) return;
    if (o.job.delivery === 'at_least_once' && o.job.version !== job.version)
      this.fail(
        `${n.id} sends ${o.fireId} (#${s.id}) with definition v${o.job.version} while its job is at v${job.version}`,
      );
    const def = o.job.delivery === 'at_most_once' ? o.job : job;
    const why = this.notOwned(o.jobId, def.version, o.slotMs);
    if (why !== undefined) this.fail(`${n.id} sends ${o.fireId} (#${s.id}): ${why}`);
  }

  /** Why version `version` of the job does not own `slotMs`; undefined when it does. */
  private notOwned(jobId: string, version: number, slotMs: number): string | undefined {
    const h = this.history.get(jobId);
    const v = h?.versions.find((x) => x.version === version);
    if (!h || !v) return undefined;
    // Before its stamp, the slot was an older definition's to owe.
    if (slotMs < v.atMs) return undefined;
    if (isSlotOf(v, h, slotMs)) return undefined;
    return `${new Date(slotMs).toISOString()} is not a slot of v${version} (${v.spec.schedule} ${v.spec.timezone}, stamped ${new Date(v.atMs).toISOString()})`;
  }

  private finishDelivery(id: number, f: AttemptFinished, what: string): void {
    if (!this.pendingDelivery.delete(id)) return;
    const s = this.sent.get(id)!;
    const n = this.nodes.get(s.node);
    this.trace(s.node, `delivery #${id} ${what}`);
    if (!n?.up || n.incarnation !== s.incarnation) return;
    n.deliver({
      kind: 'app',
      run: () => {
        if (n.incarnation === s.incarnation) n.app.d.attemptDone(s.order, f, this.wall(n.id));
      },
    });
  }

  // -------------------------------------------------------------------------------------
  // Webhooks: the receiver

  private behavior(jobId: string): Behavior {
    return this.behaviors.get(jobId) ?? 'ok';
  }

  private rxReceive(id: number): void {
    const s = this.sent.get(id)!;
    const o = s.order;
    const jobId = o.jobId;
    const term = termOfToken(o.token);
    let status: number;
    let retryAfterMs: number | undefined;
    const seen = this.rxMaxTerm.get(jobId) ?? 0;
    if (term < seen) {
      status = 409;
      this.counts.fencingRejections++;
    } else {
      this.rxMaxTerm.set(jobId, term);
      const b = this.opts.calm ? 'ok' : this.behavior(jobId);
      const roll = this.opts.calm ? 1 : this.rand.float();
      if (b === 'down') status = 503;
      else if (b === 'bad') status = 400;
      else if (b === 'flaky' && roll < 0.5) status = roll < 0.35 ? 500 : 429;
      else if (roll < this.profile.rx5xxP) status = 502;
      else if (roll < this.profile.rx5xxP + this.profile.rx429P) status = 429;
      else status = 200;
      if (status === 429) retryAfterMs = this.rand.int(300);
    }
    if (status === 200 && o.job.target.completionTimeoutMs !== undefined) {
      status = 202;
      this.counts.accepted202++;
      this.completeLater(o);
    }
    const newest = this.rxNewestToken.get(o.fireId) ?? 0;
    if (o.token > newest) this.rxNewestToken.set(o.fireId, o.token);
    const r: Receipt = {
      deliveryId: id,
      fireId: o.fireId,
      jobId,
      token: o.token,
      attempt: o.attempt,
      atMs: this.now,
      from: s.node,
      status,
      sendEpoch: s.failureEpoch,
    };
    this.receipts.push(r);
    this.counts.receipts++;
    this.trace(RX, `recv #${id} ${o.fireId} a${o.attempt} t${term} from ${s.node} -> ${status}`);
    this.checkReceipt(r, o);
    this.onReceipt?.(r);
    const b = this.opts.calm ? 'ok' : this.behavior(jobId);
    const proc = b === 'slow' ? 50 + this.rand.float() * 500 : 0.5 + this.rand.float() * 10;
    const delays = this.whNet.plan(RX, s.node);
    if (delays.length === 0) {
      this.failureEpoch++;
      this.trace('net', `webhook answer #${id} lost`);
      return;
    }
    this.q.push(this.now + proc + delays[0]!, { kind: 'wh-answer', id, status, retryAfterMs });
  }

  /** Fire ids the receiver answered 202 (asynchronous completion). */
  private readonly acceptedAsync = new Set<string>();

  /** The newest token the receiver has seen per fire id (invariant i). */
  private readonly rxNewestToken = new Map<string, number>();

  /**
   * A receiver that answered 202 completes the run a while later through the cluster's leader
   * (RunService.CompleteRun), or never does (its deadline then passes); now and then it also
   * sends a completion with a token it saw earlier for that run, which must not be taken.
   */
  private completeLater(o: DeliveryOrder): void {
    const r = this.rand;
    if (r.chance(0.2)) return;
    const outcome = r.chance(0.75) ? 'success' : r.chance(0.5) ? 'retry' : 'fail';
    const earlier = [...this.sent.values()]
      .map((s) => s.order)
      .filter((x) => x.fireId === o.fireId && x.token < o.token);
    this.later(20 + r.float() * 1500, () => this.proposeCompletion(o.fireId, o.token, outcome));
    if (earlier.length > 0 && r.chance(0.5)) {
      const stale = earlier[r.int(earlier.length)]!;
      this.later(r.float() * 1500, () => this.proposeCompletion(o.fireId, stale.token, 'success'));
    }
  }

  private proposeCompletion(
    fireId: string,
    token: number,
    outcome: 'success' | 'retry' | 'fail',
  ): void {
    const n = this.leader();
    if (!n) return;
    const c = n.app.d.completionCommand(
      { fireId, token, outcome, output: `done by ${token}` },
      Math.floor(this.wall(n.id)),
    );
    const op: ClientOp = {
      opId: this.nextOpId++,
      clientId: -3,
      kind: 'write',
      key: '',
      data: encodeSchedulerCommand(c),
    };
    this.trace('rx', `complete ${fireId} t${token} ${outcome} via ${n.id}`);
    // As a client call: it reaches the node as an event of its own, not inside its Ready cycle.
    this.q.push(this.now + 0.5, { kind: 'op', node: n.id, op });
  }

  /** Invariants (a) and (b) at the receiver. */
  private checkReceipt(r: Receipt, o: DeliveryOrder): void {
    if (o.job.delivery === 'at_most_once') {
      const prior = this.receivedAmo.get(r.fireId);
      if (prior)
        this.fail(
          `at-most-once ${r.fireId} received twice: #${prior.deliveryId} (a${prior.attempt}) and #${r.deliveryId} (a${r.attempt})`,
        );
      this.receivedAmo.set(r.fireId, r);
    }
    if (r.status === 202) {
      // Taken to finish later: whether it is done is the completion's to say (invariant i).
      this.acceptedAsync.add(r.fireId);
      return;
    }
    if (r.status < 200 || r.status > 299) return;
    this.counts.accepted++;
    const priors = this.acceptedByFire.get(r.fireId) ?? [];
    for (const p of priors) {
      this.counts.duplicates++;
      // Compare in send order: a late request can arrive after its own retry.
      const [a, b] = p.deliveryId < r.deliveryId ? [p, r] : [r, p];
      if (b.token <= a.token)
        this.fail(
          `${r.fireId} accepted twice, the later send (#${b.deliveryId}) without a higher token (${b.token} <= ${a.token})`,
        );
      if (b.sendEpoch <= a.sendEpoch)
        this.fail(
          `${r.fireId} accepted twice (#${a.deliveryId}, #${b.deliveryId}) with no failure in between`,
        );
      this.trace(
        RX,
        `duplicate ${r.fireId} (#${a.deliveryId} token ${a.token}, #${b.deliveryId} token ${b.token})`,
      );
    }
    priors.push(r);
    this.acceptedByFire.set(r.fireId, priors);
  }

  // -------------------------------------------------------------------------------------
  // Client workload

  private newJobSpec(): { id: string; spec: JobSpec; behavior: Behavior } {
    const id = `j${this.nextJobNumber++}`;
    const { schedule, timezone } = this.newSchedule();
    const made = this.specWith(id, schedule, timezone);
    const r = this.rand;
    let spec = made.spec;
    // Some jobs wait for older ones (which may be paused, deleted or failing): never a cycle,
    // as the API's check would keep it.
    const older = [...this.model.keys()];
    if (older.length > 0 && r.chance(0.2)) {
      const ups = [older[r.int(older.length)]!];
      if (older.length > 1 && r.chance(0.3)) ups.push(older[r.int(older.length)]!);
      spec = {
        ...spec,
        dependsOn: { jobs: [...new Set(ups)], onUpstreamFailure: r.chance(0.7) ? 'skip' : 'run' },
      };
    }
    // Some receivers finish later: a 202, then a completion (or none) through the API.
    if (r.chance(0.15))
      spec = {
        ...spec,
        target: { ...spec.target, completionTimeoutMs: 300 + r.int(1200) },
      };
    return { ...made, spec };
  }

  /**
   * A job's new definition: another schedule (an interval anchored now), target and payload; the
   * tenant, delivery semantics and receiver behaviour stay.
   */
  private updatedSpec(jobId: string, old: JobSpec): JobSpec {
    const { schedule, timezone } = this.newSchedule();
    const anchorMs = schedule.startsWith('every ')
      ? Math.floor(this.wall(this.leader()?.id ?? 'n1'))
      : undefined;
    const version = this.rand.int(1_000_000);
    return {
      ...old,
      schedule,
      timezone,
      anchorMs,
      target: { url: `http://rx.sim/${this.behavior(jobId)}/${jobId}/v${version}`, headers: {} },
      payload: `{"v":${version}}`,
    };
  }

  private newSchedule(): { schedule: string; timezone: string } {
    const r = this.rand;
    let schedule: string;
    let timezone: string;
    const kind = r.float();
    if (kind < 0.45) {
      timezone = this.dstEpoch.zone;
      schedule = this.dstEpoch.crons[r.int(this.dstEpoch.crons.length)]!;
    } else if (kind < 0.65) {
      const [z, c] = OTHER_ZONES[r.int(OTHER_ZONES.length)]!;
      timezone = z;
      schedule = c;
    } else if (kind < 0.85) {
      timezone = 'UTC';
      schedule = `every ${1500 + r.int(4000)}ms`;
    } else {
      timezone = 'UTC';
      const at = this.t0 + this.now + 1000 + r.int(12_000);
      schedule = `at ${new Date(at).toISOString()}`;
    }
    return { schedule, timezone };
  }

  private specWith(
    id: string,
    schedule: string,
    timezone: string,
  ): { id: string; spec: JobSpec; behavior: Behavior } {
    const r = this.rand;
    const roll = r.float();
    const behavior: Behavior =
      roll < 0.7
        ? 'ok'
        : roll < 0.85
          ? 'flaky'
          : roll < 0.93
            ? 'slow'
            : roll < 0.97
              ? 'down'
              : 'bad';
    const misfire = (['fire_all', 'fire_once', 'skip'] as const)[r.int(3)]!;
    const overlap = (['allow', 'skip', 'buffer_one', 'buffer_all'] as const)[r.int(4)]!;
    const spec: JobSpec = {
      tenant: `t${r.int(3)}`,
      name: id,
      schedule,
      timezone,
      anchorMs: undefined,
      target: { url: `http://rx.sim/${behavior}/${id}`, headers: {} },
      payload: '{}',
      delivery: r.chance(0.5) ? 'at_least_once' : 'at_most_once',
      retry: {
        maxAttempts: 1 + r.int(4),
        initialBackoffMs: 50 + r.int(250),
        maxBackoffMs: 1000,
        multiplier: 2,
        maxAgeMs: 10_000,
      },
      attemptDeadlineMs: 150 + r.int(250),
      misfire: {
        policy: misfire,
        fireAllCap: 1 + r.int(3),
        catchUpWindowMs: 10_000 + r.int(50_000),
      },
      overlap: { policy: overlap, bufferCap: 2, ...maxConcurrencyFor(id, overlap) },
      priority: r.int(4),
      startAtMs: undefined,
      endAtMs: undefined,
      remainingFires: undefined,
    };
    return { id, spec, behavior };
  }

  /** Scenario DSL and workload: create a job (retried until acknowledged). */
  createJob(id: string, spec: JobSpec, behavior: Behavior = 'ok'): void {
    this.behaviors.set(id, behavior);
    this.model.set(id, { state: 'active', busy: true, spec });
    this.counts.jobs++;
    this.startTask({ jobId: id, kind: 'create', spec, requestId: `rq-${id}` });
  }

  /** Scenario DSL and workload: replace a job's definition (retried until acknowledged). */
  updateJob(jobId: string, spec: JobSpec): void {
    const m = this.model.get(jobId);
    if (m) m.busy = true;
    this.startTask({ jobId, kind: 'update', spec });
  }

  /** Scenario DSL and workload: pause, resume, delete or trigger a job. */
  jobOp(jobId: string, kind: 'pause' | 'resume' | 'delete' | 'trigger'): void {
    const m = this.model.get(jobId);
    if (m && kind !== 'trigger') m.busy = true;
    this.startTask({ jobId, kind });
  }

  private startTask(t: Omit<ClientTask, 'key' | 'tries' | 'done'>): void {
    const task: ClientTask = { ...t, key: this.nextTaskKey++, tries: 0, done: false };
    this.tasks.set(task.key, task);
    this.submit(task);
  }

  private submit(task: ClientTask): void {
    if (task.done) return;
    task.tries++;
    this.counts.clientOps++;
    const target = this.leader() ?? [...this.nodes.values()][this.rand.int(this.nodes.size)]!;
    const atMs = Math.floor(this.wall(target.id));
    let cmd: SchedulerCommand;
    switch (task.kind) {
      case 'create': {
        const spec = task.spec!;
        const sched = parseSchedule(spec.schedule, { timezone: spec.timezone, anchorMs: atMs });
        // An interval's first slot is its anchor (creation); others: the first after now.
        const first = nextFire(sched, atMs - 1);
        cmd = {
          op: 'create-job',
          atMs,
          jobId: task.jobId,
          spec,
          nextFireAtMs: first,
          requestId: task.requestId,
        };
        break;
      }
      case 'update': {
        const spec = task.spec!;
        const sched = parseSchedule(spec.schedule, {
          timezone: spec.timezone,
          anchorMs: spec.anchorMs ?? this.history.get(task.jobId)?.createdAtMs ?? atMs,
        });
        // The new definition owns its slots from the stamp on, one due at that ms included.
        cmd = {
          op: 'update-job',
          atMs,
          jobId: task.jobId,
          spec,
          nextFireAtMs: nextFire(sched, atMs - 1),
          expectedVersion: undefined,
        };
        break;
      }
      case 'resume': {
        const h = this.history.get(task.jobId);
        const spec = this.model.get(task.jobId)!.spec;
        const sched = parseSchedule(spec.schedule, {
          timezone: spec.timezone,
          anchorMs: spec.anchorMs ?? h?.createdAtMs ?? atMs,
        });
        cmd = { op: 'resume-job', atMs, jobId: task.jobId, nextFireAtMs: nextFire(sched, atMs) };
        break;
      }
      case 'pause':
        cmd = { op: 'pause-job', atMs, jobId: task.jobId };
        break;
      case 'delete':
        cmd = { op: 'delete-job', atMs, jobId: task.jobId };
        break;
      case 'trigger':
        cmd = { op: 'trigger-job', atMs, jobId: task.jobId, slotMs: atMs };
        break;
    }
    const opId = this.nextOpId++;
    this.clientOps.set(opId, task);
    this.trace('client', `${task.kind} ${task.jobId} try ${task.tries} -> ${target.id}`);
    const op: ClientOp = {
      opId,
      clientId: 1,
      kind: 'write',
      key: task.jobId,
      data: encodeSchedulerCommand(cmd),
    };
    this.q.push(this.now + 0.5, { kind: 'op', node: target.id, op });
    // A client gives up waiting after a while and tries again (the first may still commit).
    this.q.push(this.now + 600, { kind: 'client-retry', opKey: task.key });
  }

  private clientOutcome(task: ClientTask, op: ClientOp, outcome: OpOutcome): void {
    if (task.done) return;
    if (outcome.status !== 'ok') {
      this.trace('client', `${task.kind} ${task.jobId} ${outcome.status} ${outcome.reason}`);
      if (task.kind !== 'trigger')
        this.q.push(this.now + 100, { kind: 'client-retry', opKey: task.key });
      return;
    }
    const r = outcome.output as ApplyResult;
    task.done = true;
    this.counts.clientAcks++;
    this.trace(
      'client',
      `ack ${task.kind} ${task.jobId} at ${outcome.index} ${r.ok ? 'ok' : r.code}`,
    );
    const m = this.model.get(task.jobId);
    if ((task.kind === 'pause' || task.kind === 'delete') && r.ok && outcome.index !== undefined) {
      let acks = this.stopAcks.get(task.jobId);
      if (!acks) this.stopAcks.set(task.jobId, (acks = []));
      acks.push({ index: outcome.index, atMs: this.now, what: task.kind });
    }
    if (!m) return;
    m.busy = false;
    if (task.kind === 'update' && r.ok) {
      m.spec = task.spec!;
      this.counts.updates++;
    }
    if (task.kind === 'pause') m.state = 'paused';
    if (task.kind === 'resume') m.state = 'active';
    if (task.kind === 'delete') m.state = 'deleted';
    void op;
  }

  private clientRetry(key: number): void {
    const task = this.tasks.get(key);
    if (!task || task.done) return;
    if (task.kind === 'trigger') {
      task.done = true;
      return;
    }
    // One outstanding submission at a time per task: drop the stale ones.
    for (const [opId, t] of this.clientOps) if (t === task) this.clientOps.delete(opId);
    this.submit(task);
  }

  private clientStep(): void {
    const r = this.rand;
    const live = [...this.model.entries()].filter(([, m]) => m.state !== 'deleted' && !m.busy);
    const roll = this.now < 200 ? 0 : r.float();
    if ((roll < 0.4 || live.length === 0) && this.model.size < this.profile.maxJobs) {
      const { id, spec, behavior } = this.newJobSpec();
      this.trace(
        'client',
        `new job ${id} ${spec.schedule} ${spec.timezone} ${spec.delivery} ${behavior}`,
      );
      this.createJob(id, spec, behavior);
      return;
    }
    if (live.length === 0) return;
    const [jobId, m] = live[r.int(live.length)]!;
    // Paused jobs come back soon; active ones are paused now and then, so most slots fire.
    if (m.state === 'paused') {
      if (roll < 0.75) this.jobOp(jobId, 'resume');
      else if (roll > 0.9) this.updateJob(jobId, this.updatedSpec(jobId, m.spec));
    } else if (roll < 0.52) this.jobOp(jobId, 'pause');
    else if (roll < 0.65) this.jobOp(jobId, 'trigger');
    else if (roll < 0.69) this.jobOp(jobId, 'delete');
    else if (roll < 0.85) {
      const spec = this.updatedSpec(jobId, m.spec);
      this.trace('client', `update ${jobId} to ${spec.schedule} ${spec.timezone}`);
      this.updateJob(jobId, spec);
    }
  }

  // -------------------------------------------------------------------------------------
  // Faults

  /** kill -9: the node loses its memory (dispatcher included) and any unsynced write. */
  crashNode(id: NodeId, why = ''): void {
    const n = this.nodes.get(id);
    if (!n?.up) return;
    this.unfreezeQuietly(id);
    const what = n.crash(this.rand);
    this.counts.crashes++;
    this.failureEpoch++;
    for (const [opId, d] of this.dispatcherOps) if (d.node === id) this.dispatcherOps.delete(opId);
    this.trace('sim', `crash ${id} ${why}(${what})`);
  }

  restartNode(id: NodeId): void {
    const n = this.nodes.get(id);
    if (!n || n.up) return;
    n.restart();
    this.trace('sim', `restart ${id} (term ${n.raft.term}, commit ${n.raft.log.committed})`);
    this.startClocks(n);
  }

  /** SIGSTOP: the node runs nothing (its clock keeps going) until unfreeze. */
  freeze(id: NodeId, forMs: number): void {
    const n = this.nodes.get(id);
    if (!n?.up || this.frozen.has(id)) return;
    this.frozen.set(id, { since: this.now, stash: [] });
    this.counts.freezes++;
    this.failureEpoch++;
    this.trace('sim', `SIGSTOP ${id} for ${forMs.toFixed(0)} ms`);
    this.q.push(this.now + forMs, { kind: 'unfreeze', node: id });
  }

  private unfreezeQuietly(id: NodeId): SchedEvent[] {
    const f = this.frozen.get(id);
    if (!f) return [];
    this.frozen.delete(id);
    return f.stash;
  }

  private unfreeze(id: NodeId): void {
    if (!this.frozen.has(id)) return;
    const stash = this.unfreezeQuietly(id);
    const n = this.nodes.get(id);
    if (!n?.up) return;
    this.trace('sim', `SIGCONT ${id}`);
    // Work that queued up meanwhile runs now; the elapsed ticks are counted from the clock at
    // the next tick or dispatcher step, whichever runs first.
    for (const ev of stash)
      if (ev.kind !== 'tick' && ev.kind !== 'dstep') this.q.push(this.now, ev);
    this.startClocks(n, false);
  }

  isolate(id: NodeId): void {
    this.net.isolate(id, [...this.nodes.keys()]);
    this.counts.partitions++;
    this.failureEpoch++;
    this.trace('sim', `isolate ${id}`);
  }

  heal(): void {
    this.net.heal();
    this.trace('sim', 'heal partitions');
  }

  /** A deploy: the leader drains, then hands over to `to` (any voter when undefined). */
  gracefulTransfer(to?: NodeId): boolean {
    const l = this.leader();
    if (!l || l.app.drain || this.frozen.has(l.id)) return false;
    const targets = [...this.nodes.values()].filter((n) => n.id !== l.id && n.up);
    const target = to ?? targets[this.rand.int(Math.max(1, targets.length))]?.id;
    if (!target) return false;
    l.app.drain = { to: target, startedAt: this.now, transferred: false };
    l.app.d.beginDrain();
    this.trace('sim', `drain ${l.id} before transfer to ${target}`);
    return true;
  }

  /** Every node killed at once (a power cut); restarted by startAll(). */
  stopAll(): void {
    this.counts.fullStops++;
    for (const id of this.nodes.keys()) this.crashNode(id, 'full stop ');
  }

  startAll(): void {
    for (const id of this.nodes.keys()) this.restartNode(id);
  }

  private faultStep(): void {
    const p = this.profile;
    const r = this.rand;
    const ids = [...this.nodes.values()].filter((n) => n.up).map((n) => n.id);
    const lead = this.leader();
    if (r.chance(p.crashP) && ids.length > 0) {
      const victim = ids[r.int(ids.length)]!;
      this.crashNode(victim);
      this.q.push(this.now + 50 + r.float() * 1500, { kind: 'restart', node: victim });
    }
    if (lead?.up && r.chance(p.leaderCrashP)) {
      this.crashNode(lead.id, 'leader ');
      this.q.push(this.now + 20 + r.float() * 600, { kind: 'restart', node: lead.id });
    } else if (lead?.up && r.chance(p.isolateLeaderP)) {
      // The deposed leader keeps running, and can still reach the receiver.
      this.isolate(lead.id);
      this.q.push(this.now + 100 + r.float() * 800, { kind: 'heal' });
    } else if (lead?.up && r.chance(p.freezeP)) {
      this.freeze(r.chance(0.7) ? lead.id : ids[r.int(ids.length)]!, 50 + r.float() * 900);
    } else if (lead?.up && r.chance(p.gracefulP)) {
      this.gracefulTransfer();
    }
    if (r.chance(p.partitionP)) {
      const shapes = ['isolate-one', 'halves', 'one-way', 'bridge', 'random-links'] as const;
      const what = this.net.partition(shapes[r.int(shapes.length)]!, [...this.nodes.keys()]);
      this.counts.partitions++;
      this.failureEpoch++;
      this.trace('sim', `partition ${what}`);
      this.q.push(this.now + 100 + r.float() * 1000, { kind: 'heal' });
    }
    if (!this.rxDown && r.chance(p.rxOutageP)) {
      this.rxDown = true;
      this.failureEpoch++;
      this.trace('sim', 'receiver down (connections refused)');
      this.q.push(this.now + 100 + r.float() * 1000, { kind: 'rx-up' });
    }
  }

  // -------------------------------------------------------------------------------------
  // Main loop

  private nodeEvent(ev: SchedEvent & { node: NodeId }): SNode | undefined {
    const n = this.nodes.get(ev.node);
    if (!n?.up) return undefined;
    const f = this.frozen.get(ev.node);
    if (f) {
      f.stash.push(ev);
      return undefined;
    }
    return n;
  }

  private dispatch(ev: SchedEvent): void {
    switch (ev.kind) {
      case 'tick': {
        const n = this.nodeEvent(ev);
        if (!n || n.incarnation !== ev.incarnation) return;
        // Ticks are counted when the node steps them, not when they are queued: a node busy
        // with a write steps its inbox later, and a dispatcher step queued before these ticks
        // must count them itself (it reads the clock), or it would judge the lease on stale ticks.
        n.deliver({
          kind: 'app',
          run: () => {
            if (n.incarnation !== ev.incarnation) return;
            const owed = this.owedTicks(n);
            if (owed < 1) return;
            this.trace(n.id, `tick${owed > 1 ? ` x${owed}` : ''}`, owed > 1);
            this.countTicks(n, owed);
            n.node.tick(owed);
          },
        });
        this.q.push(this.now + TICK_MS / (this.clockRate.get(n.id) ?? 1), ev);
        return;
      }
      case 'dstep': {
        const n = this.nodeEvent(ev);
        if (!n || n.incarnation !== ev.incarnation) return;
        n.deliver({
          kind: 'app',
          run: () => {
            if (n.incarnation !== ev.incarnation) return;
            this.stepDispatcher(n);
            // Every 40th step (200 virtual ms): often enough to see a drift before a snapshot
            // or the end hides it, rare enough to keep a seed fast.
            if (++this.dispatcherSteps % AUDIT_EVERY_STEPS === 0)
              this.auditReplica(n, 'after a step');
          },
        });
        this.q.push(this.now + STEP_MS / (this.clockRate.get(n.id) ?? 1), ev);
        return;
      }
      case 'msg': {
        const n = this.nodeEvent(ev);
        if (!n) return;
        const chatter = ev.m.type === 'heartbeat' || ev.m.type === 'heartbeat-resp';
        this.trace(n.id, `recv ${describeMessage(ev.m)}`, !chatter);
        n.deliver({ kind: 'msg', m: ev.m });
        return;
      }
      case 'persisted': {
        const n = this.nodes.get(ev.node);
        if (!n) return;
        const f = this.frozen.get(ev.node);
        if (f) {
          f.stash.push(ev);
          return;
        }
        n.persisted(ev.incarnation);
        return;
      }
      case 'op': {
        const n = this.nodeEvent(ev);
        if (!n) return;
        n.deliver({ kind: 'client', op: ev.op });
        return;
      }
      case 'report-snap': {
        const n = this.nodeEvent(ev);
        if (n) n.deliver({ kind: 'report-snap', to: ev.to, ok: ev.ok });
        return;
      }
      case 'rx-recv':
        this.rxReceive(ev.id);
        return;
      case 'wh-answer': {
        if (!this.stashForSender(ev)) return;
        const s = this.sent.get(ev.id)!;
        const ok = ev.status >= 200 && ev.status <= 299;
        const retry = !ok && isRetryableStatus(ev.status);
        this.finishDelivery(
          ev.id,
          {
            outcome: ok ? 'success' : retry ? 'retry' : 'fail',
            statusCode: ev.status,
            durationMs: Math.max(1, Math.round(this.now - s.atMs)),
            retryAfterMs: ev.retryAfterMs,
            isProvablyUndelivered: false,
          },
          `answered ${ev.status}`,
        );
        return;
      }
      case 'wh-refused':
        if (!this.stashForSender(ev)) return;
        if (this.pendingDelivery.has(ev.id)) this.counts.refused++;
        this.finishDelivery(
          ev.id,
          {
            outcome: 'retry',
            durationMs: 1,
            error: 'ECONNREFUSED',
            isProvablyUndelivered: true,
          },
          'refused',
        );
        return;
      case 'wh-timeout':
        if (!this.stashForSender(ev)) return;
        if (this.pendingDelivery.has(ev.id)) {
          this.counts.timeouts++;
          this.failureEpoch++;
        }
        this.finishDelivery(
          ev.id,
          {
            outcome: 'retry',
            durationMs: Math.round(this.now - this.sent.get(ev.id)!.atMs),
            error: 'timeout',
            isProvablyUndelivered: false,
          },
          'timed out',
        );
        return;
      case 'fault':
        if (this.phase !== 'safety') return;
        this.faultStep();
        this.q.push(this.now + this.profile.faultEveryMs, { kind: 'fault' });
        return;
      case 'heal':
        if (this.phase === 'safety') this.heal();
        return;
      case 'restart':
        if (ev.node.startsWith('crash:')) {
          if (this.phase !== 'safety') return;
          const id = ev.node.slice('crash:'.length);
          this.crashNode(id, 'mid-protocol ');
          this.q.push(this.now + 30 + this.rand.float() * 500, { kind: 'restart', node: id });
          return;
        }
        if (this.fullStopUntil > this.now) return;
        this.restartNode(ev.node);
        return;
      case 'unfreeze':
        this.unfreeze(ev.node);
        return;
      case 'rx-up':
        this.rxDown = false;
        this.trace('sim', 'receiver up');
        return;
      case 'full-stop': {
        if (this.phase !== 'safety') return;
        const downMs = 5_000 + this.rand.int(60_000);
        this.fullStopUntil = this.now + downMs;
        this.trace('sim', `full-cluster stop for ${downMs} ms`);
        this.stopAll();
        this.q.push(this.now + downMs, { kind: 'full-start' });
        return;
      }
      case 'full-start':
        this.fullStopUntil = 0;
        this.trace('sim', 'full-cluster start');
        this.startAll();
        return;
      case 'client':
        if (this.phase !== 'safety') return;
        this.clientStep();
        if (this.now < 200) return;
        this.q.push(this.now + this.profile.clientEveryMs * (0.5 + this.rand.float()), {
          kind: 'client',
        });
        return;
      case 'client-retry':
        this.clientRetry(ev.opKey);
        return;
      case 'call':
        ev.fn();
        return;
    }
  }

  private fullStopUntil = 0;

  /** A webhook answer or timer for a frozen sender waits until it runs again. */
  private stashForSender(ev: SchedEvent & { id: number }): boolean {
    const s = this.sent.get(ev.id);
    if (!s) return false;
    const f = this.frozen.get(s.node);
    if (f && this.nodes.get(s.node)?.incarnation === s.incarnation) {
      f.stash.push(ev);
      return false;
    }
    return true;
  }

  runUntil(endMs: number): void {
    for (;;) {
      const at = this.q.peekTime();
      if (at === undefined || at > endMs) break;
      const ev = this.q.pop()!;
      this.now = ev.at;
      this.events++;
      this.dispatch(ev.event);
    }
    this.now = endMs;
  }

  get nowMs(): number {
    return this.now;
  }

  traceTailNow(): string[] {
    return this.traceLog.tail();
  }

  /** Creates the nodes and schedules faults and the workload (run() calls it). */
  start(): void {
    if (this.nodes.size > 0) return;
    const ids: NodeId[] = [];
    for (let i = 0; i < this.profile.voters; i++) ids.push(`n${i + 1}`);
    for (const id of ids) this.addNode(id, ids);
    this.trace(
      'sim',
      `seed ${this.opts.seed} epoch ${this.epochName} t0 ${this.t0} profile ${JSON.stringify(this.profile)}`,
    );
    if (this.opts.calm) return;
    if (this.opts.profile?.queueP === undefined)
      this.profile.queueP = this.rand.chance(0.6) ? this.rand.float() * 0.4 : 0;
    this.q.push(300, { kind: 'fault' });
    // A first batch of jobs, then a steady trickle of operations.
    const initial = 3 + this.rand.int(4);
    for (let i = 0; i < initial; i++) this.q.push(100 + i, { kind: 'client' });
    this.q.push(200, { kind: 'client' });
    const safetyMs = this.opts.safetyMs ?? 20_000;
    if (this.rand.chance(this.profile.fullStopP)) {
      this.q.push(2000 + this.rand.float() * (safetyMs - 4000), { kind: 'full-stop' });
    }
  }

  run(): SchedSimResult {
    let violation: string | undefined;
    try {
      this.start();
      const safetyEnd = this.opts.safetyMs ?? 20_000;
      this.runUntil(safetyEnd);
      // A full stop in progress ends with the fault phase.
      if (this.fullStopUntil > this.now) this.runUntil(this.fullStopUntil);
      this.liveness();
      this.checkFinal();
      this.checkProgress();
      this.checkAgreement();
    } catch (err) {
      if (!(err instanceof Error)) throw err;
      violation = `${err.name}: ${err.message}`;
      this.trace('sim', `VIOLATION ${violation}`);
    }
    return {
      seed: this.opts.seed,
      ok: violation === undefined,
      violation,
      traceHash: this.traceLog.digest(),
      traceTail: this.traceLog.tail(),
      counts: this.counts,
      events: this.events,
      endMs: this.now,
      epoch: this.epochName,
    };
  }

  /** Heals everything and lets the cluster catch up. */
  liveness(): void {
    this.phase = 'liveness';
    this.healedAt = this.now;
    this.net.heal();
    this.net.profile = CALM_NETWORK;
    this.whNet.profile = CALM_NETWORK;
    this.rxDown = false;
    for (const id of [...this.frozen.keys()]) this.unfreeze(id);
    for (const n of this.nodes.values()) if (!n.up) this.restartNode(n.id);
    this.trace('sim', 'liveness: healed, all nodes up');
    const start = this.now;
    const budget = this.opts.livenessMs ?? 6000;
    while (this.now < start + budget / 2 && !this.stableLeader()) this.runUntil(this.now + 50);
    if (!this.stableLeader())
      this.fail(`liveness: no stable leader ${budget / 2} ms after healing`);
    this.runUntil(start + budget);
  }

  private stableLeader(): SNode | undefined {
    const lead = this.leader();
    if (!lead || lead.raft.leadTransferee !== '') return undefined;
    for (const n of this.nodes.values())
      if (n.raft.term !== lead.raft.term || n.raft.lead !== lead.id) return undefined;
    return lead;
  }

  // -------------------------------------------------------------------------------------
  // Invariant (e): every due slot ended in a run

  /** All runs of every replica that is up, by fire id (the most advanced replica wins). */
  private finalRuns(): Map<string, Run> {
    const out = new Map<string, Run>();
    const replicas = [...this.nodes.values()]
      .filter((n) => n.up)
      .sort((a, b) => b.lastApplied - a.lastApplied);
    for (const n of replicas)
      for (const [id, run] of n.app.sm.runs) if (!out.has(id)) out.set(id, run);
    return out;
  }

  checkFinal(): void {
    const lead = this.stableLeader() ?? this.leader();
    if (!lead) this.fail('final: no leader');
    const endCheck = Math.min(...[...this.nodes.values()].map((n) => this.wall(n.id))) - 1500;
    const runs = this.finalRuns();
    for (const run of runs.values()) {
      this.counts.runs++;
      switch (run.status) {
        case 'SUCCEEDED':
          this.counts.succeeded++;
          if (!this.acceptedByFire.has(run.fireId) && !this.acceptedAsync.has(run.fireId))
            this.fail(`${run.fireId} SUCCEEDED but the receiver never accepted it`);
          break;
        case 'DEAD':
          this.counts.dead++;
          break;
        case 'UNKNOWN':
          this.counts.unknown++;
          break;
        case 'MISSED':
          this.counts.missed++;
          break;
        case 'SKIPPED':
          this.counts.skipped++;
          if (run.reason?.startsWith('UPSTREAM_FAILED') === true) this.counts.upstreamSkips++;
          break;
        case 'CANCELLED':
          this.counts.cancelled++;
          if (run.reason?.startsWith(SUPERSEDED_REASON_PREFIX)) this.counts.superseded++;
          break;
        default:
          break;
      }
      if (
        (run.status === 'MISSED' || run.status === 'SKIPPED' || run.status === 'CANCELLED') &&
        !run.reason
      )
        this.fail(`${run.fireId} is ${run.status} without a reason`);
    }
    for (const [jobId, h] of this.history) {
      const excused = (s: number): boolean => h.excused.some(([a, b]) => s >= a && s < b);
      const vs = h.versions;
      let guard = 0;
      vs.forEach((v, i) => {
        const sched = scheduleOf(v, h);
        const until = vs[i + 1]?.atMs ?? Infinity;
        for (
          let s = v.firstSlot;
          s !== undefined && s <= endCheck && s < until;
          s = nextFire(sched, s)
        ) {
          if (++guard > 100_000) this.fail(`${jobId}: runaway schedule`);
          if (excused(s)) continue;
          this.counts.expectedSlots++;
          const run = runs.get(`${jobId}:${s}`);
          if (!run)
            this.fail(
              `${jobId} v${v.version} (${v.spec.schedule} ${v.spec.timezone}) slot ${new Date(s).toISOString()} came due but has no run on any replica`,
            );
          const by = supersededBy(run);
          if (by !== undefined && by <= v.version)
            this.fail(
              `${run.fireId}: a slot of v${v.version} left CANCELLED (${run.reason}), never planned again`,
            );
        }
      });
      for (const run of runs.values()) {
        if (run.jobId !== jobId || run.manual) continue;
        // The definition that owns the slot: the last one stamped at or before it.
        let owner = 0;
        vs.forEach((v, i) => {
          if (v.atMs <= run.slotMs) owner = i;
        });
        if (isSlotOf(vs[owner]!, h, run.slotMs)) continue;
        const older = vs.slice(0, owner).some((v) => isSlotOf(v, h, run.slotMs));
        const recordedOrTried =
          supersededBy(run) !== undefined ||
          run.status === 'SKIPPED' ||
          run.status === 'MISSED' ||
          run.attempts.length > 0;
        if (!older || !recordedOrTried)
          this.fail(
            `${run.fireId} (${run.status}): ${new Date(run.slotMs).toISOString()} is not a slot of v${vs[owner]!.version} (${vs[owner]!.spec.schedule} in ${vs[owner]!.spec.timezone})${older ? ', and an older definition planned it but it was neither superseded nor attempted before the update' : ''}`,
          );
      }
    }
    void lead;
  }
  // -------------------------------------------------------------------------------------
  // Agreement: same applied index, same state; derived indexes = a full scan's

  private checkSnapshot(n: SNode, index: number, data: Uint8Array): void {
    const differs = this.snapshots.offer(index, n.id, data);
    if (differs) this.fail(differs);
    this.auditReplica(n, `snapshot at ${index}`);
  }

  private checkStateAt(n: SNode, index: number): void {
    if (!this.snapshots.has(index)) return;
    const differs = this.snapshots.offer(index, n.id, n.app.sm.snapshot());
    if (differs) this.fail(differs);
  }

  private auditReplica(n: SNode, when: string): void {
    this.counts.audits++;
    const wrong = [...n.app.sm.auditIndexes(), ...auditDispatcher(n.app.sm, n.app.d)];
    if (wrong.length > 0)
      this.fail(
        `${n.id} ${when}: derived state differs from a full scan: ${wrong.slice(0, 3).join('; ')}`,
      );
  }

  /** At the end: every replica's indexes, and one state per applied index. */
  checkAgreement(): void {
    const byApplied = new Map<number, SNode>();
    for (const n of this.nodes.values()) {
      if (!n.up) continue;
      this.auditReplica(n, 'at the end');
      const other = byApplied.get(n.lastApplied);
      if (!other) {
        byApplied.set(n.lastApplied, n);
        continue;
      }
      this.counts.agreementChecks++;
      const a = other.app.sm.snapshot();
      const b = n.app.sm.snapshot();
      if (!Buffer.from(a).equals(Buffer.from(b)))
        this.fail(
          `replicas disagree at the end: ${other.id} and ${n.id} applied ${n.lastApplied} and hold different state (${describeSnapshotDiff(a, b)})`,
        );
    }
    this.counts.agreementChecks += this.snapshots.compared;
  }

  // -------------------------------------------------------------------------------------
  // Progress: once healed, every run that came due long enough ago has finished

  /**
   * Every run of the most advanced replica that became ready to go (due, and no longer held
   * back by an earlier run of its job) at least PROGRESS_BOUND_MS before the end, counted from
   * the heal at the earliest, is finished: delivered, DEAD, or recorded with a reason. An
   * attempt in flight gets its deadline on top. A run left SCHEDULED or DISPATCHED past that is
   * work the cluster silently dropped (a new leader that never dispatches what its predecessor
   * planned, or never resolves an orphaned at-most-once send to UNKNOWN).
   */
  /** When a waiting run's pending upstreams all finished, or its wait gives up if sooner. */
  private upstreamsDoneAt(sm: SchedulerStateMachine, run: Run, job: Job): number {
    let at = 0;
    for (const u of run.upstream ?? []) {
      if (u.outcome !== undefined) continue;
      const a = answerUpstream(sm, u.job, run.slotMs);
      const up = a.fireId === undefined ? undefined : sm.runs.get(a.fireId);
      at = Math.max(at, a.outcome === 'pending' ? Infinity : (up?.finishedAtMs ?? run.slotMs));
    }
    return Math.min(at, run.slotMs + job.retry.maxAgeMs);
  }

  checkProgress(): void {
    const lead = this.stableLeader() ?? this.leader();
    if (!lead) this.fail('progress: no leader');
    const endWall = this.wall(lead.id);
    const healWall = this.t0 + this.healedAt + this.profile.skewMaxMs;
    const sm = lead.app.sm;
    for (const jobId of sm.jobs.keys()) {
      if (sm.jobs.pausedOf(jobId) !== false) continue;
      const job = sm.jobs.get(jobId)!;
      const runs = sm.runsOf(jobId).sort((a, b) => a.slotMs - b.slotMs);
      // An overlap policy holds a run back until the runs before it have finished.
      let heldUntil = 0;
      for (const run of runs) {
        const readyAt = Math.max(heldUntil, healWall, run.dueAtMs);
        const unanswered = run.attempts.find((a) => a.outcome === undefined);
        if (
          isTerminal(run.status) &&
          job.delivery === 'at_most_once' &&
          unanswered !== undefined &&
          run.status !== 'UNKNOWN' &&
          run.status !== 'CANCELLED'
        )
          this.fail(
            `progress: ${run.fireId} (at_most_once) ended ${run.status} with attempt ${unanswered.attempt} unanswered: an orphaned send must end UNKNOWN`,
          );
        if (!isTerminal(run.status)) {
          const last = run.attempts.at(-1);
          const inFlight = run.status === 'DISPATCHED' ? job.attemptDeadlineMs : 0;
          let since = Math.max(readyAt, last?.startedAtMs ?? 0);
          // A RUNNING run's receiver has until its deadline; a waiting run until its upstreams
          // finished (or, while one has not, its max age, when it gives up).
          if (run.status === 'RUNNING') since = Math.max(since, run.completeByMs ?? 0);
          if (run.upstream?.some((u) => u.outcome === undefined) === true)
            since = Math.max(since, this.upstreamsDoneAt(sm, run, job));
          if (since + inFlight + PROGRESS_BOUND_MS <= endWall)
            this.fail(
              `progress: ${run.fireId} (${job.delivery}) is still ${run.status} at the end, ${Math.round(endWall - since)} ms after it could go (bound ${PROGRESS_BOUND_MS} ms${inFlight ? ` + deadline ${inFlight} ms` : ''}; ${run.attempts.length} attempts)`,
            );
          this.counts.unfinishedInBound++;
          heldUntil = Infinity;
        } else if (job.overlap.policy !== 'allow') {
          heldUntil = Math.max(heldUntil, run.finishedAtMs ?? 0);
        }
      }
    }
  }
}

/**
 * A limit on runs in flight for two jobs in three with a limiting policy (2 or 3; the third has
 * none: 1). Taken from the job's number, not drawn, so that a seed's stream of draws, and with
 * it the faults it gives, stays what it was before the field existed.
 */
function maxConcurrencyFor(id: string, policy: OverlapPolicyName): { maxConcurrency?: number } {
  const n = Number(id.slice(1));
  if (policy === 'allow' || !Number.isSafeInteger(n) || n % 3 === 0) return {};
  return { maxConcurrency: 1 + (n % 3) };
}

function queueKey(n: SNode, o: DeliveryOrder): string {
  return `${n.id}/${n.incarnation}/${o.jobId}`;
}

function scheduleOf(v: JobVersion, h: JobHistory): ReturnType<typeof parseSchedule> {
  return parseSchedule(v.spec.schedule, {
    timezone: v.spec.timezone,
    anchorMs: v.spec.anchorMs ?? h.createdAtMs,
  });
}

function isSlotOf(v: JobVersion, h: JobHistory, slotMs: number): boolean {
  return nextFire(scheduleOf(v, h), slotMs - 1) === slotMs;
}

/** The version whose update superseded the run (CANCELLED before any attempt), if one did. */
function supersededBy(run: Run): number | undefined {
  if (run.status !== 'CANCELLED' || !run.reason?.startsWith(SUPERSEDED_REASON_PREFIX))
    return undefined;
  return Number(run.reason.slice(SUPERSEDED_REASON_PREFIX.length));
}

/** A short readable form of a command for the trace. */
export function describeCommand(c: SchedulerCommand): string {
  switch (c.op) {
    case 'fire-intents':
      return `intents t${c.term} ${c.intents.map((i) => `${i.jobId}@${i.slots.join(',')}${i.notFired.length ? `/nf${i.notFired.length}` : ''}`).join(' ')}`;
    case 'attempt-started':
      return `started ${c.fireId} a${c.attempt} t${c.term}`;
    case 'attempt-result':
      return `result ${c.fireId} a${c.attempt} ${c.outcome}${c.statusCode ? ` ${c.statusCode}` : ''}`;
    case 'mark-unknown':
      return `mark-unknown ${c.fireIds.join(',')}`;
    default:
      return `${c.op} ${'jobId' in c ? c.jobId : ''}`;
  }
}

export function runSchedulerSim(opts: SchedulerSimOptions): SchedSimResult {
  return new SchedulerSim(opts).run();
}
