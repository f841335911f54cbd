/**
 * The chaos history: everything a run did and saw, one JSON record per line (docs/chaos-checker.md).
 *
 * Writers: the workload driver (run metadata, client operations, final reads), the nemesis runner
 * (fault start and end), and the webhook sink (one record per delivery it received). Reader: the
 * offline checker (chaos/checker), which trusts nothing the nodes say about time.
 *
 * Time. Every `t` is milliseconds since the run start on ONE monotonic time base, the driver's.
 * A process other than the driver (the sink, the nemesis runner when it is a separate process)
 * computes it as `performance.timeOrigin + performance.now() − meta.startedAtEpochMs`; all of
 * them run unskewed on one machine, so the error is well under a millisecond. Node processes are
 * never asked for a time: their clocks are skewed on purpose. Slots and other instants that the
 * cluster itself defines (`slotMs`, `nextFireAtMs`, `startAtMs`…) are UTC epoch ms; the one
 * conversion is `epochMs = t + meta.startedAtEpochMs`.
 *
 * Operations follow Jepsen: an `invoke` record, then exactly one completion with the same `opId`:
 * `ok` (it happened), `fail` (it definitely had no effect) or `info` (unknown: it may take effect
 * at any time after its invocation, or never). A process performs one operation at a time, and a
 * process id is retired after an `info`: the driver continues that client thread under a new id.
 * An invocation with no completion (the driver died) counts as `info`.
 *
 * Pure types and constants only: no I/O here (chaos/history/jsonl.ts writes and reads files).
 */

/** Written in `meta.formatVersion`; a reader refuses versions it does not know. */
export const HISTORY_FORMAT_VERSION = 1;

/** Milliseconds since the run start, on the driver's monotonic time base. */
export type DriverMs = number;

/** UTC milliseconds since the epoch, as the cluster defines slots and instants. */
export type EpochMs = number;

export type DeliverySemantics = 'at_least_once' | 'at_most_once';
export type MisfirePolicyName = 'fire_all' | 'fire_once' | 'skip';
export type OverlapPolicyName = 'allow' | 'skip' | 'buffer_one' | 'buffer_all';

/**
 * A job definition as the driver sent it (create, update) or as the cluster returned it (inside
 * a JobRead). Absent optional fields mean the server default (docs/API.md): timezone UTC,
 * delivery at_least_once, misfire fire_once, overlap allow.
 */
export interface JobDefinition {
  readonly tenant: string;
  /** The driver makes it unique per write, so that a read names the write it saw. */
  readonly name?: string;
  /** Cron, `every <duration>` or `at <instant>` (docs/schedules.md). */
  readonly schedule: string;
  readonly timezone?: string;
  /**
   * Anchor of an `every` schedule. The driver should send one: without it the server anchors at
   * its own creation time, which the checker then learns only from the create's answer.
   */
  readonly anchorMs?: EpochMs;
  readonly delivery?: DeliverySemantics;
  readonly misfire?: {
    readonly policy: MisfirePolicyName;
    readonly fireAllCap?: number;
    readonly catchUpWindowMs?: number;
  };
  readonly overlap?: { readonly policy: OverlapPolicyName; readonly bufferCap?: number };
  readonly startAtMs?: EpochMs;
  readonly endAtMs?: EpochMs;
  /** The job ends after this many fires. */
  readonly remainingFires?: number;
  /** Retry attempts allowed per run (server default 5). */
  readonly retryMaxAttempts?: number;
}

/** A job as the cluster returned it (GetJob, and the answers of create/update/pause/resume). */
export interface JobRead {
  readonly jobId: string;
  /** Bumped by every change of the definition (not by pause or resume); 1 after the create. */
  readonly version: number;
  readonly paused: boolean;
  /** With every default filled in by the server. */
  readonly definition: JobDefinition;
  /** The next slot the cluster will consider; absent when the job has no slot left. */
  readonly nextFireAtMs?: EpochMs;
  /**
   * When the cluster stamped the current definition: the leader's clock when it proposed the
   * create or update. The definition owes slots after this instant, so a leader whose clock ran
   * ahead owes none of the slots it already saw as past (docs/chaos-checker.md).
   */
  readonly updatedAtMs?: EpochMs;
}

/**
 * A run's status as the API showed it (src/scheduler/run-view.ts); DISPATCHED only in histories
 * written before the API showed RUNNING and FAILED.
 */
export type RunStatus =
  | 'SCHEDULED'
  | 'DISPATCHED'
  | 'RUNNING'
  | 'FAILED'
  | 'SUCCEEDED'
  | 'DEAD'
  | 'CANCELLED'
  | 'SKIPPED'
  | 'MISSED'
  | 'UNKNOWN';

/** One run as a list-runs read or the final read returned it. */
export interface RunRead {
  readonly slotMs: EpochMs;
  readonly status: RunStatus;
  /** Why it did not fire (MISSED, SKIPPED, CANCELLED, UNKNOWN) or died; absent otherwise. */
  readonly reason?: string;
  /** Attempts the cluster recorded for the run. */
  readonly attempts?: number;
  /** Created by trigger-now or backfill rather than by the schedule. */
  readonly manual?: boolean;
}

/** The runs one list-runs read returned. */
export interface RunsRead {
  readonly runs: readonly RunRead[];
  /**
   * True when the driver paged to the end (the cluster had no further run of the job). A
   * complete read of fewer runs than `meta.runsRetainedMax` shows every run the job ever had.
   */
  readonly complete: boolean;
}

export type OpFunction =
  | 'create'
  | 'update'
  | 'delete'
  | 'pause'
  | 'resume'
  | 'get'
  | 'list-runs'
  | 'bulk-pause'
  | 'bulk-resume'
  | 'bulk-cancel';

/** The functions that name one job (`jobId` required); the bulk ones name a tenant instead. */
export const JOB_FUNCTIONS: ReadonlySet<OpFunction> = new Set([
  'create',
  'update',
  'delete',
  'pause',
  'resume',
  'get',
  'list-runs',
]);

export const BULK_FUNCTIONS: ReadonlySet<OpFunction> = new Set([
  'bulk-pause',
  'bulk-resume',
  'bulk-cancel',
]);

/** Written by the driver when it sends a request. */
export interface InvokeRecord {
  readonly type: 'invoke';
  readonly t: DriverMs;
  /** The logical client thread; one operation at a time; retired after an `info`. */
  readonly process: number;
  /** Unique in the run; the completion carries the same id. */
  readonly opId: number;
  readonly f: OpFunction;
  /** Required for the single-job functions. */
  readonly jobId?: string;
  /** Required for the bulk functions. */
  readonly tenant?: string;
  /** The create's idempotency key (a retried create with it returns the first job). */
  readonly requestId?: string;
  /** The definition sent: create and update only. */
  readonly definition?: JobDefinition;
  /** update only: the optimistic-concurrency version sent. */
  readonly expectedVersion?: number;
}

/**
 * What a completion carries in `value`, by function, for `ok`:
 * - create, update, pause, resume: the JobRead the server answered (optional but valuable: it
 *   carries the anchor and first slot the server chose);
 * - get: the JobRead, or null when the server said JOB_NOT_FOUND (an absent job is an answer);
 * - list-runs: a RunsRead;
 * - delete, bulk-*: nothing.
 */
export type OpValue = JobRead | RunsRead | null;

/** Written by the driver when the answer arrives (or the request is given up: `info`). */
export interface CompletionRecord {
  readonly type: 'ok' | 'fail' | 'info';
  readonly t: DriverMs;
  readonly process: number;
  readonly opId: number;
  readonly f: OpFunction;
  readonly jobId?: string;
  readonly tenant?: string;
  readonly value?: OpValue;
  /**
   * The error, for `fail` and `info`. `fail` only for errors that guarantee no effect:
   * INVALID_ARGUMENT, JOB_NOT_FOUND, JOB_ALREADY_EXISTS, JOB_VERSION_CONFLICT, and UNAVAILABLE
   * answered before anything was proposed. Time-outs, resets and lost leaders are `info`.
   */
  readonly error?: { readonly code: string; readonly message?: string };
}

/**
 * The sink's answer: `2xx` at once; `5xx` at once; `slow` held for `heldMs` and then answered
 * `status` (the sender may have given up first, so its outcome is unknown to the cluster);
 * `stale` refused at once (409) because the fencing token was stale.
 */
export type SinkAnswer = '2xx' | '5xx' | 'slow' | 'stale';

/** Written by the webhook sink for every request it received, refused ones included. */
export interface DeliveryRecord {
  readonly type: 'delivery';
  /** Receipt time (when the request's body was complete). */
  readonly t: DriverMs;
  /** The idempotency key header; should be `${tenant}/${jobId}:${slotMs}`. */
  readonly fireId: string;
  readonly jobId: string;
  readonly slotMs: EpochMs;
  /** The attempt number header, from 1. */
  readonly attempt: number;
  readonly token: number;
  readonly answer: SinkAnswer;
  /** The HTTP status the sink sent (for `slow`, after the hold); 0 if it never answered. */
  readonly status: number;
  /** How long the sink held the request before answering (`slow`). */
  readonly heldMs?: number;
  /** The sending node, when a header names it (diagnostics only). */
  readonly node?: string;
  readonly signatureOk?: boolean;
}

/** Every kind of nemesis record; the codec accepts exactly these. */
export const NEMESIS_KINDS = [
  'kill',
  'pause',
  'partition',
  'latency',
  'bandwidth',
  'clock-bump',
  'clock-strobe',
  'clock-drift',
  'leader-transfer',
  'replica-move',
  'node-drain',
  'rebalance',
] as const;

export type NemesisKind = (typeof NEMESIS_KINDS)[number];

export type PartitionShape = 'halves' | 'isolate-one' | 'majorities-ring' | 'bridge' | 'one-way';

/** Written by the nemesis runner when a fault begins (`start`) and when it is healed (`end`). */
export interface NemesisRecord {
  readonly type: 'nemesis';
  readonly t: DriverMs;
  readonly phase: 'start' | 'end';
  /** Pairs the start with its end; unique in the run. A start with no end lasts to the end. */
  readonly faultId: string;
  readonly kind: NemesisKind;
  /** Node names (or `a->b` links) the fault applies to. */
  readonly targets: readonly string[];
  readonly shape?: PartitionShape;
  /** Whatever else defines the fault: latency and jitter, clock offset or rate, signal… */
  readonly spec?: Readonly<Record<string, unknown>>;
}

/**
 * Written by the driver after the final heal and the recovery wait, once per job it ever
 * invoked anything on: a linearizable read of the job and its runs.
 */
export interface FinalReadRecord {
  readonly type: 'final';
  /** When the read was invoked. */
  readonly t: DriverMs;
  /** When its answer arrived. */
  readonly tDone: DriverMs;
  readonly jobId: string;
  /** null: the cluster said JOB_NOT_FOUND. */
  readonly job: JobRead | null;
  readonly runs: RunsRead;
}

/** Written once, first, by the driver. */
export interface MetaRecord {
  readonly type: 'meta';
  readonly formatVersion: number;
  readonly t: DriverMs;
  readonly seed: string;
  /** UTC epoch ms at driver time 0: the one offset between the two time bases. */
  readonly startedAtEpochMs: EpochMs;
  /** The nemesis families of the run, as given on the command line. */
  readonly nemeses: readonly string[];
  /** The planned length of the workload phase. */
  readonly durationMs: number;
  readonly nodeCount: number;
  /** L: the steady-state bound on fire lag (receipt − slot) outside fault windows. */
  readonly lagBoundMs: number;
  /** R: how long after a fault heals the cluster may still be degraded. */
  readonly recoveryAllowanceMs: number;
  /** δ: in-flight slack, how long a delivery already sent may still arrive. */
  readonly inFlightSlackMs: number;
  /** The nodes' --look-ahead-ms (default 3000): how far ahead runs are planned. */
  readonly lookAheadMs?: number;
  /** The nodes' --misfire-threshold-ms (default 5000). */
  readonly misfireThresholdMs?: number;
  /** How many finished runs the cluster keeps per job (runsPerJobMax, default 100). */
  readonly runsRetainedMax?: number;
  /** The bound on any clock fault's offset (clock nemesis); bounds a drift's offset. */
  readonly clockOffsetMaxMs?: number;
  /**
   * The rule the sink fenced with: `token` refuses a token not higher than the highest it
   * accepted for the job; `term` refuses a token of an older leader term (token / 2^24) than the
   * highest seen, which lets two runs of one term arrive in either order.
   */
  readonly sinkFencing: 'token' | 'term';
}

export type OpRecord = InvokeRecord | CompletionRecord;

export type HistoryRecord =
  MetaRecord | InvokeRecord | CompletionRecord | DeliveryRecord | NemesisRecord | FinalReadRecord;

export type RecordType = HistoryRecord['type'];
