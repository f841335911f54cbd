/**
 * The replicated data of a data group: jobs and their runs (the words of docs/ARCHITECTURE.md,
 * Words). Plain objects so that a snapshot is the state itself, encoded once with msgpack.
 */

export type DeliverySemantics = 'at_least_once' | 'at_most_once';
export type MisfirePolicyName = 'fire_all' | 'fire_once' | 'skip';
export type OverlapPolicyName = 'allow' | 'skip' | 'buffer_one' | 'buffer_all';

export interface RetryPolicy {
  readonly maxAttempts: number;
  readonly initialBackoffMs: number;
  readonly maxBackoffMs: number;
  readonly multiplier: number;
  /** A run older than this (from its slot) is not retried again. */
  readonly maxAgeMs: number;
}

export interface MisfireSettings {
  readonly policy: MisfirePolicyName;
  /** fire_all: at most this many late slots fire; the rest are MISSED. */
  readonly fireAllCap: number;
  /** Slots later than this behind are MISSED whatever the policy. */
  readonly catchUpWindowMs: number;
}

export interface OverlapSettings {
  readonly policy: OverlapPolicyName;
  /** buffer_all: at most this many slots wait. */
  readonly bufferCap: number;
  /**
   * skip / buffer_one / buffer_all: at most this many runs of the job in flight, 1 to
   * MAX_CONCURRENCY_MAX (src/api/job-spec.ts). Absent when the client did not set it: then 1,
   * what these policies meant before the field existed (log entries and snapshots written
   * before it have no such key, and a definition that does not use it stays byte for byte what
   * it was). Never set with allow, which places no limit (maxConcurrencyOf).
   */
  readonly maxConcurrency?: number;
}

export interface WebhookTarget {
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  /**
   * Asynchronous completion: a 202 answer leaves the run RUNNING until the receiver completes
   * it (CompleteRun) or this long passes without a completion or heartbeat. Absent (the key
   * left out, so that targets without it are stored as before it existed): a 202 is a success.
   */
  readonly completionTimeoutMs?: number;
}

/** Bounds of WebhookTarget.completionTimeoutMs: a second to a week. */
export const COMPLETION_TIMEOUT_MS_MIN = 1000;
export const COMPLETION_TIMEOUT_MS_MAX = 7 * 24 * 3_600_000;

/**
 * Most runs of a job in flight at once under its overlap settings: no limit (infinity) for
 * allow, else the job's `maxConcurrency`, 1 when absent.
 */
export function maxConcurrencyOf(overlap: OverlapSettings): number {
  if (overlap.policy === 'allow') return Number.POSITIVE_INFINITY;
  return overlap.maxConcurrency ?? 1;
}

/**
 * The jobs a job's scheduled runs wait for (docs/workflows.md): each slot S of the job runs once,
 * for every upstream, the upstream's run of its latest slot at or before S has SUCCEEDED. If one
 * of those ends otherwise (or has no such run), the slot is SKIPPED (`skip`) or runs anyway
 * (`run`). Upstreams are job keys of the job's own tenant.
 */
export interface Dependencies {
  readonly jobs: readonly string[];
  readonly onUpstreamFailure: UpstreamFailurePolicy;
}

export type UpstreamFailurePolicy = 'skip' | 'run';

/** Most upstreams a job may list. */
export const UPSTREAMS_MAX = 16;

/** What a client defines; everything the state machine needs to decide, nothing derived. */
export interface JobSpec {
  readonly tenant: string;
  readonly name: string;
  /** Schedule text: cron, `every …` or `at …` (src/schedule). */
  readonly schedule: string;
  readonly timezone: string;
  /** Anchor of an `every` schedule, UTC ms. */
  readonly anchorMs: number | undefined;
  readonly target: WebhookTarget;
  /** JSON text, at most PAYLOAD_BYTES_MAX bytes. */
  readonly payload: string;
  readonly delivery: DeliverySemantics;
  readonly retry: RetryPolicy;
  readonly attemptDeadlineMs: number;
  readonly misfire: MisfireSettings;
  readonly overlap: OverlapSettings;
  /** 0 (first) to 3. */
  readonly priority: number;
  readonly startAtMs: number | undefined;
  readonly endAtMs: number | undefined;
  /** Fires left; undefined = unbounded. */
  readonly remainingFires: number | undefined;
  /** The jobs its scheduled runs wait for; undefined (or absent) = none. */
  readonly dependsOn?: Dependencies | undefined;
}

/**
 * A job as read from the state: a copy (src/scheduler/job-table.ts stores jobs by column), so
 * it never changes under its reader.
 */
export interface Job extends JobSpec {
  /** The job's key, `<tenant>/<job id>` (job-key.ts): what the replicated state names it by. */
  readonly id: string;
  /** Bumped by every change of the definition; optimistic concurrency for updates. */
  readonly version: number;
  readonly paused: boolean;
  readonly createdAtMs: number;
  readonly updatedAtMs: number;
  /** The next slot to fire (computed by the leader, carried in the log); undefined = none left. */
  readonly nextFireAtMs: number | undefined;
  /** Highest fencing token ever authorised for this job. */
  readonly lastToken: number;
  readonly remaining: number | undefined;
  /** One-off or ended jobs keep existing until this time, then are dropped. */
  readonly finishedAtMs: number | undefined;
}

/**
 * SCHEDULED → (at-most-once: DISPATCHED) → SUCCEEDED, or back to SCHEDULED for a retry, or DEAD
 * (retries exhausted, too old, or a non-retryable answer; DEAD runs form the DLQ). A receiver
 * that accepted the run to finish it later (202, WebhookTarget.completionTimeoutMs) leaves it
 * RUNNING until it completes it or its deadline passes. Slots that never fire end as MISSED or
 * SKIPPED with a reason; CANCELLED by a delete; UNKNOWN when an at-most-once attempt was sent but
 * its result was lost with the leader. What the API shows is derived from these (run-view.ts).
 */
export const RUN_STATUSES = [
  'SCHEDULED',
  'DISPATCHED',
  'RUNNING',
  'SUCCEEDED',
  'DEAD',
  'CANCELLED',
  'SKIPPED',
  'MISSED',
  'UNKNOWN',
] as const;

export type RunStatus = (typeof RUN_STATUSES)[number];

export type AttemptOutcome = 'success' | 'retry' | 'fail';

/**
 * What an attempt's record may say: its outcome, or `accepted` while the receiver that answered
 * 202 has not completed it yet (the run is RUNNING).
 */
export type AttemptRecordOutcome = AttemptOutcome | 'accepted';

export interface Attempt {
  readonly attempt: number;
  readonly token: number;
  readonly startedAtMs: number;
  outcome: AttemptRecordOutcome | undefined;
  statusCode: number | undefined;
  durationMs: number | undefined;
  error: string | undefined;
  /** A short excerpt of the response body. */
  responseExcerpt: string | undefined;
  /**
   * Where it ran: the node whose leader sent it, and the worker that held its lease (leased
   * runs). Absent in attempts recorded before these were kept, and in lost attempts.
   */
  node?: string;
  worker?: string;
  /**
   * The node keeping its full output beside the log when that is not `node`: the one that served
   * the CompleteRun that gave the output (RunService.GetRunOutput asks it).
   */
  outputNode?: string;
}

/**
 * An attempt a new leader recorded for an at-least-once run that was already due when it took
 * over: an earlier leader may have sent it (such a send reaches the log only with its result,
 * which was lost with that leader). Its outcome stays unknown and it has no token (0: every
 * real token is at least 2^24). It numbers the next send after it, so that a receiver never
 * sees one attempt number twice; it does not count against `retry.max_attempts`.
 */
export function isLostAttempt(a: Attempt): boolean {
  return a.token === 0;
}

/** Attempts known to have been made: every attempt but those of unknown fate (isLostAttempt). */
export function attemptsMade(run: Run): number {
  let n = 0;
  for (const a of run.attempts) if (!isLostAttempt(a)) n++;
  return n;
}

export interface Run {
  /**
   * `jobId:slotMs`, the idempotency key sent to the target. The job id is the job's key,
   * `<tenant>/<job id>` (job-key.ts), so a fire id is `<tenant>/<job id>:<slot ms>`.
   */
  readonly fireId: string;
  /** The job's key (job-key.ts). */
  readonly jobId: string;
  readonly slotMs: number;
  status: RunStatus;
  /** Why a run was not fired (MISSED, SKIPPED, CANCELLED, UNKNOWN) or died. */
  reason: string | undefined;
  /** When the next attempt may start (SCHEDULED): the slot, or a retry time. */
  dueAtMs: number;
  attempts: Attempt[];
  createdAtMs: number;
  finishedAtMs: number | undefined;
  /** Created by trigger-now or backfill rather than by the schedule. */
  manual: boolean;
  /**
   * RUNNING: when its receiver must have completed it (or sent a heartbeat) by; the leader
   * retries or fails the run after it. Absent otherwise.
   */
  completeByMs?: number;
  /**
   * A scheduled run of a job with dependencies: each upstream and, once known, the upstream
   * run that decided it. The run is not sent while one is still pending. Absent otherwise.
   */
  upstream?: UpstreamState[];
  /**
   * What a trigger or backfill asked to send instead of the job's own, for this run only
   * (RunOverrides); absent for scheduled runs and for manual runs that asked for nothing.
   */
  overrides?: RunOverrides;
}

/**
 * A manual run's changes to what its job sends: the payload instead of the job's, and headers
 * added to the job's (a name the job has already is replaced). Kept on the run, so that every
 * attempt of it, under any leader, sends the same.
 */
export interface RunOverrides {
  /** JSON text. */
  readonly payload?: string;
  readonly headers?: Readonly<Record<string, string>>;
}

/**
 * The job as a run of it sends: the job itself, or a copy with the run's overrides applied.
 * The copy has its own target object when headers change (delivery caches checks per target).
 */
export function jobForRun(job: Job, run: Pick<Run, 'overrides'>): Job {
  const o = run.overrides;
  if (o === undefined) return job;
  const headers = o.headers;
  return {
    ...job,
    payload: o.payload ?? job.payload,
    target:
      headers === undefined
        ? job.target
        : { ...job.target, headers: mergeHeaders(job.target.headers, headers) },
  };
}

/** The job's headers with `extra` added; a name in both (in any case) takes extra's value. */
export function mergeHeaders(
  base: Readonly<Record<string, string>>,
  extra: Readonly<Record<string, string>>,
): Record<string, string> {
  const replaced = new Set(Object.keys(extra).map((k) => k.toLowerCase()));
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(base)) if (!replaced.has(k.toLowerCase())) out[k] = v;
  for (const [k, v] of Object.entries(extra)) out[k] = v;
  return out;
}

/** What one upstream of a run came to (a run's `upstream`). */
export interface UpstreamState {
  /** The upstream job's key. */
  readonly job: string;
  /** Undefined while pending. */
  outcome: UpstreamOutcome | undefined;
  /** The upstream run that decided it (absent for `missing` and `timeout`). */
  fireId: string | undefined;
  /** That run's status (for the run's reason), when there is one. */
  status: RunStatus | undefined;
}

/**
 * succeeded: its run SUCCEEDED; failed: its run ended otherwise; missing: no run of that slot will
 * ever exist (the job was deleted or paused over it, or has no slot at or before); timeout: the
 * waiting run gave up (its retry.maxAgeMs passed).
 */
export type UpstreamOutcome = 'succeeded' | 'failed' | 'missing' | 'timeout';

/** Whether a run still waits for one of its upstreams. */
export function isWaitingForUpstream(run: Run): boolean {
  return run.upstream !== undefined && run.upstream.some((u) => u.outcome === undefined);
}

/** The fire id of a job's slot; `jobId` is the job's key, so the fire id carries its tenant. */
export function fireIdOf(jobId: string, slotMs: number): string {
  return `${jobId}:${slotMs}`;
}

/** Every status but those of a run still to be sent or in flight. */
export const TERMINAL_STATUSES: ReadonlySet<RunStatus> = new Set(
  RUN_STATUSES.filter((s) => s !== 'SCHEDULED' && s !== 'DISPATCHED' && s !== 'RUNNING'),
);

export function isTerminal(status: RunStatus): boolean {
  return TERMINAL_STATUSES.has(status);
}
