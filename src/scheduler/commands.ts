/**
 * The log entries of a data group. Every value a follower needs is inside the command: the
 * leader computes next fire times, retry times and reads the clock; apply never does.
 * `atMs` is the leader's wall clock when it proposed, used for bookkeeping times only.
 */
import { decode, encode } from '../base/codec.js';
import type {
  AttemptOutcome,
  AttemptRecordOutcome,
  JobSpec,
  RunOverrides,
  RunStatus,
  UpstreamOutcome,
} from './model.js';

/** What the leader learnt of one upstream of a waiting run (an upstream-settled entry). */
export interface UpstreamSettlement {
  readonly job: string;
  readonly outcome: UpstreamOutcome;
  /** The upstream run that decided it, when there is one. */
  readonly fireId?: string;
  readonly status?: RunStatus;
}

/** A slot the leader decided not to fire, with why (misfire, overlap, pause, end). */
export interface SlotNotFired {
  readonly slotMs: number;
  readonly status: 'MISSED' | 'SKIPPED';
  readonly reason: string;
}

export interface FireIntent {
  readonly jobId: string;
  /** The job's next slot the leader planned from; a stale intent is ignored on apply. */
  readonly expectedNextFireAtMs: number;
  /** Slots to fire now (usually one; several when a misfire policy fires late slots). */
  readonly slots: readonly number[];
  readonly notFired: readonly SlotNotFired[];
  /** The job's next slot after these, computed by the leader; undefined = none left. */
  readonly nextFireAtMs: number | undefined;
  /**
   * Set on an intent that settles a job's overdue slots just before a change of the job (update,
   * pause, resume) in the same batch: the job's version it was planned from. It applies to the
   * slots not yet recorded even if the leader's own intent got to some of them first.
   */
  readonly settlesVersion?: number;
  /**
   * The job's version the leader planned this intent from. An update in between (its next slot
   * may even be the same instant) makes the intent a no-op: its slots and the following slot
   * were computed from the old definition. Absent in entries written before it existed.
   */
  readonly version?: number;
}

/** A run the leader did not send, with why (a miss-runs entry). */
export interface MissedRun {
  readonly fireId: string;
  readonly reason: string;
  /**
   * What the run becomes: SKIPPED for a job that had its maxConcurrency runs in flight. Absent
   * for MISSED, as in every entry written before SKIPPED could be given here.
   */
  readonly status?: 'SKIPPED';
}

export interface AttemptResultCommand {
  readonly op: 'attempt-result';
  readonly atMs: number;
  readonly fireId: string;
  readonly attempt: number;
  readonly token: number;
  /** `accepted`: the receiver answered 202 and completes the run later (RUNNING). */
  readonly outcome: AttemptRecordOutcome;
  readonly statusCode: number | undefined;
  readonly durationMs: number;
  readonly error: string | undefined;
  readonly responseExcerpt: string | undefined;
  /** outcome 'retry': when the next attempt may start (leader computed, with jitter). */
  readonly retryAtMs: number | undefined;
  /** outcome 'accepted': when the receiver must complete it by (leader computed). */
  readonly completeByMs?: number;
  /** The node that sent it, and the worker that held its lease; absent in older entries. */
  readonly node?: string;
  readonly worker?: string;
}

/**
 * The end of a RUNNING run's attempt: its receiver completed it (RunService.CompleteRun), or its
 * completion deadline passed (proposed by the leader, `ifCompleteByMs` set: a heartbeat that
 * moved the deadline since wins). Applies only to the run's current attempt, named by its
 * fencing token; anything else (a stale token, a run no longer RUNNING) is refused.
 */
export interface CompleteRunCommand {
  readonly op: 'complete-run';
  readonly atMs: number;
  readonly fireId: string;
  readonly token: number;
  readonly outcome: AttemptOutcome;
  readonly error: string | undefined;
  /** The output's excerpt (its first 1,024 characters) for the attempt record. */
  readonly output: string | undefined;
  /** outcome 'retry': when the next attempt may start (leader computed). */
  readonly retryAtMs: number | undefined;
  readonly ifCompleteByMs?: number;
  /**
   * The node that keeps the output in full beside the log (the one that served the call); absent
   * when nothing was kept there, and in entries written before it was recorded.
   */
  readonly outputNode?: string;
}

/** What a bulk command does to each of a tenant's jobs (AdminService BulkPause / Resume / Cancel). */
export type TenantJobsAction = 'pause' | 'resume' | 'delete' | 'purge-dead';

/** Which of a tenant's DEAD runs a `purge-dead` tenant-jobs entry drops. */
export interface DeadRunFilter {
  /** Only this job's (its key, tenant/job); undefined: every job of the tenant. */
  readonly jobId?: string | undefined;
  /** Only runs that died before this instant; undefined: whenever they died. */
  readonly diedBeforeMs?: number | undefined;
}

/** A paused job to resume and its next slot from the resume time, computed by the leader. */
export interface JobResume {
  readonly jobId: string;
  readonly nextFireAtMs: number | undefined;
}

/**
 * One entry for all of a tenant's jobs in this group, so a bulk change is one proposal per group
 * and applies atomically there. `pause` and `delete` name only the tenant: apply acts on every job
 * of the tenant it holds at that point of the log. `resume` lists the jobs with the next slot the
 * leader computed (followers never compute schedules); a tenant job paused but not listed (paused
 * after the leader read its state) stays paused and is counted in the result, so the proposer
 * can propose again.
 */
export interface TenantJobsCommand {
  readonly op: 'tenant-jobs';
  readonly atMs: number;
  readonly tenant: string;
  readonly action: TenantJobsAction;
  /** `resume` only; empty otherwise. */
  readonly resumes: readonly JobResume[];
  /** `purge-dead` only. */
  readonly deadRuns?: DeadRunFilter | undefined;
}

/** A job's definition without what bulk-registered jobs usually differ in: name, schedule, anchor. */
export type SpecPart = Omit<JobSpec, 'name' | 'schedule' | 'anchorMs'>;

/**
 * Many creates of one group in one entry (bulk registration), stored by column: each distinct
 * definition once in `specs`, then one element per job in each of the other arrays. Apply is all
 * or nothing: if any job exists already, nothing of the entry is created.
 */
export interface CreateJobsCommand {
  readonly op: 'create-jobs';
  readonly atMs: number;
  readonly specs: readonly SpecPart[];
  readonly jobIds: readonly string[];
  /** Index into `specs`. */
  readonly specOf: readonly number[];
  readonly schedules: readonly string[];
  /** '' for no name. */
  readonly names: readonly string[];
  readonly anchorsMs: readonly (number | null)[];
  readonly nextFireAtMs: readonly (number | null)[];
  /** '' for no request id. */
  readonly requestIds: readonly string[];
}

export type SchedulerCommand =
  | CreateJobsCommand
  | {
      readonly op: 'create-job';
      readonly atMs: number;
      readonly jobId: string;
      readonly spec: JobSpec;
      readonly nextFireAtMs: number | undefined;
      /** Client request id: a retried create returns the first result. */
      readonly requestId: string | undefined;
    }
  | {
      readonly op: 'update-job';
      readonly atMs: number;
      readonly jobId: string;
      readonly spec: JobSpec;
      readonly nextFireAtMs: number | undefined;
      readonly expectedVersion: number | undefined;
    }
  | { readonly op: 'delete-job'; readonly atMs: number; readonly jobId: string }
  | { readonly op: 'pause-job'; readonly atMs: number; readonly jobId: string }
  | {
      readonly op: 'resume-job';
      readonly atMs: number;
      readonly jobId: string;
      /** Recomputed from the resume time: slots passed while paused are not fired. */
      readonly nextFireAtMs: number | undefined;
    }
  | {
      readonly op: 'trigger-job';
      readonly atMs: number;
      readonly jobId: string;
      readonly slotMs: number;
      /** What this run sends instead of the job's own; absent: the job's. */
      readonly overrides?: RunOverrides;
    }
  | {
      readonly op: 'backfill-job';
      readonly atMs: number;
      readonly jobId: string;
      readonly slots: readonly number[];
      /** What each of these runs sends instead of the job's own; absent: the job's. */
      readonly overrides?: RunOverrides;
    }
  | {
      readonly op: 'fire-intents';
      readonly atMs: number;
      /** The proposing leader's term. */
      readonly term: number;
      readonly intents: readonly FireIntent[];
    }
  | {
      readonly op: 'attempt-started';
      readonly atMs: number;
      readonly term: number;
      readonly fireId: string;
      readonly attempt: number;
    }
  | AttemptResultCommand
  | CompleteRunCommand
  | {
      /**
       * A RUNNING run's receiver is still at work (RunService.Heartbeat): its deadline moves to
       * `completeByMs` (leader computed). Only for the current attempt's token.
       */
      readonly op: 'heartbeat-run';
      readonly atMs: number;
      readonly fireId: string;
      readonly token: number;
      readonly completeByMs: number;
    }
  | {
      /** Many results in one entry: a spike's results cost one log entry per step, not each. */
      readonly op: 'attempt-results';
      readonly atMs: number;
      readonly results: readonly AttemptResultCommand[];
    }
  | {
      /**
       * At-least-once runs that were due before this leader took over: an earlier leader may
       * have sent them. Each gets an attempt of unknown fate numbered `attempt` (isLostAttempt),
       * recorded only if the run still waits for exactly that attempt, so applying it twice, or
       * after the run moved on, changes nothing.
       */
      readonly op: 'lost-attempts';
      readonly atMs: number;
      readonly term: number;
      readonly runs: readonly { readonly fireId: string; readonly attempt: number }[];
    }
  | {
      /** At-most-once runs whose attempt started under an earlier leader: outcome unknowable. */
      readonly op: 'mark-unknown';
      readonly atMs: number;
      readonly fireIds: readonly string[];
    }
  | {
      /**
       * Runs planned that the leader, when their turn came, did not send: their slot passed
       * while no leader could deliver them and the job's misfire policy says they do not fire
       * (MISSED: skip, coalesced, outside the window), or their job already had its overlap
       * policy's maxConcurrency runs in flight (SKIPPED: run_in_flight).
       */
      readonly op: 'miss-runs';
      readonly atMs: number;
      readonly runs: readonly MissedRun[];
    }
  | TenantJobsCommand
  | {
      /**
       * Runs waiting for their upstreams, and what the leader found of some of them (read from
       * the upstreams' groups' committed state, or a wait given up). Applies to each upstream
       * still pending on a run still waiting and never attempted; the rest changed meanwhile.
       */
      readonly op: 'upstream-settled';
      readonly atMs: number;
      readonly runs: readonly {
        readonly fireId: string;
        readonly upstream: readonly UpstreamSettlement[];
      }[];
    }
  | { readonly op: 'replay-run'; readonly atMs: number; readonly fireId: string }
  | {
      /**
       * Finished runs the leader's retention sweep drops (GroupDispatcher: the tenant's history
       * and DLQ retention); a listed run that is not finished (replayed meanwhile) stays.
       */
      readonly op: 'purge-runs';
      readonly atMs: number;
      readonly fireIds: readonly string[];
    };

export type SchedulerCommandOp = SchedulerCommand['op'];

export type CreateJobCommand = Extract<SchedulerCommand, { op: 'create-job' }>;

/** The key of a definition's shared part: every field, so that equal keys mean equal parts. */
export function specPartKey(s: SpecPart): string {
  // JSON quotes every free-text field, so no field can imitate another's boundary.
  return JSON.stringify([
    s.tenant,
    s.timezone,
    s.target.url,
    Object.entries(s.target.headers),
    s.target.completionTimeoutMs ?? null,
    s.payload,
    s.delivery,
    s.retry.maxAttempts,
    s.retry.initialBackoffMs,
    s.retry.maxBackoffMs,
    s.retry.multiplier,
    s.retry.maxAgeMs,
    s.attemptDeadlineMs,
    s.misfire.policy,
    s.misfire.fireAllCap,
    s.misfire.catchUpWindowMs,
    s.overlap.policy,
    s.overlap.bufferCap,
    s.overlap.maxConcurrency ?? null,
    s.priority,
    s.startAtMs ?? null,
    s.endAtMs ?? null,
    s.remainingFires ?? null,
    s.dependsOn?.onUpstreamFailure ?? null,
    s.dependsOn?.jobs ?? null,
  ]);
}

function specPartOf(s: SpecPart): SpecPart {
  return {
    tenant: s.tenant,
    timezone: s.timezone,
    target: s.target,
    payload: s.payload,
    delivery: s.delivery,
    retry: s.retry,
    attemptDeadlineMs: s.attemptDeadlineMs,
    misfire: s.misfire,
    overlap: s.overlap,
    priority: s.priority,
    startAtMs: s.startAtMs,
    endAtMs: s.endAtMs,
    remainingFires: s.remainingFires,
    dependsOn: s.dependsOn,
  };
}

/**
 * Bytes a create-jobs entry may hold, at most: well under Raft's 1 MiB entry bound, so that the
 * msgpack overhead this estimate leaves out never pushes an entry over it.
 */
export const CREATE_JOBS_ENTRY_BYTES_MAX = 512 * 1024;

/** Equal parts, told from shared objects and equal fields (false may still be equal). */
function samePart(a: SpecPart, b: SpecPart): boolean {
  return (
    a.target === b.target &&
    a.retry === b.retry &&
    a.misfire === b.misfire &&
    a.overlap === b.overlap &&
    a.tenant === b.tenant &&
    a.timezone === b.timezone &&
    a.payload === b.payload &&
    a.delivery === b.delivery &&
    a.attemptDeadlineMs === b.attemptDeadlineMs &&
    a.priority === b.priority &&
    a.startAtMs === b.startAtMs &&
    a.endAtMs === b.endAtMs &&
    a.remainingFires === b.remainingFires &&
    a.dependsOn === b.dependsOn
  );
}

/** A generous estimate of what one more definition adds to a create-jobs entry. */
function specPartBytes(s: SpecPart): number {
  let n =
    400 + s.tenant.length + s.timezone.length + 3 * s.target.url.length + 3 * s.payload.length;
  for (const [k, v] of Object.entries(s.target.headers)) n += 3 * (k.length + v.length) + 8;
  return n;
}

/** Columns of a create-jobs entry being filled. */
type Columns = {
  -readonly [
    K in keyof Omit<CreateJobsCommand, 'op' | 'atMs'>
  ]: CreateJobsCommand[K] extends readonly (infer T)[] ? T[] : never;
};

function emptyColumns(): Columns {
  return {
    specs: [],
    jobIds: [],
    specOf: [],
    schedules: [],
    names: [],
    anchorsMs: [],
    nextFireAtMs: [],
    requestIds: [],
  };
}

/**
 * Creates as create-jobs entries: one for all when they fit, else cut by size (a batch of
 * definitions with large payloads). Creates proposed at different times go to different entries
 * (an entry has one `atMs`). Pure: the leader calls it with the creates it checked.
 */
export function packCreates(creates: readonly CreateJobCommand[]): CreateJobsCommand[] {
  const out: CreateJobsCommand[] = [];
  let atMs = creates[0]?.atMs ?? 0;
  let cols = emptyColumns();
  let keys = new Map<string, number>();
  let bytes = 0;
  const flush = (): void => {
    if (cols.jobIds.length > 0) out.push({ op: 'create-jobs', atMs, ...cols });
    cols = emptyColumns();
    keys = new Map();
    bytes = 0;
  };
  let lastSpec: JobSpec | undefined;
  let lastKey = '';
  for (const c of creates) {
    // Jobs checked together share their policy objects (JobSpecCompiler): most have the part
    // of the job before them, found without building its key.
    const key =
      lastSpec !== undefined && samePart(lastSpec, c.spec) ? lastKey : specPartKey(c.spec);
    lastSpec = c.spec;
    lastKey = key;
    const jobBytes =
      64 +
      3 * (c.jobId.length + c.spec.schedule.length + c.spec.name.length) +
      3 * (c.requestId?.length ?? 0);
    const more = jobBytes + (keys.has(key) ? 0 : specPartBytes(c.spec));
    if (c.atMs !== atMs || bytes + more > CREATE_JOBS_ENTRY_BYTES_MAX) flush();
    atMs = c.atMs;
    let at = keys.get(key);
    if (at === undefined) {
      at = cols.specs.length;
      keys.set(key, at);
      cols.specs.push(specPartOf(c.spec));
      bytes += specPartBytes(c.spec);
    }
    bytes += jobBytes;
    cols.jobIds.push(c.jobId);
    cols.specOf.push(at);
    cols.schedules.push(c.spec.schedule);
    cols.names.push(c.spec.name);
    cols.anchorsMs.push(c.spec.anchorMs ?? null);
    cols.nextFireAtMs.push(c.nextFireAtMs ?? null);
    cols.requestIds.push(c.requestId ?? '');
  }
  flush();
  return out;
}

/** The i-th job of a create-jobs entry, as a single create. */
export function createAt(c: CreateJobsCommand, i: number): CreateJobCommand {
  const part = c.specs[c.specOf[i]!]!;
  const requestId = c.requestIds[i]!;
  return {
    op: 'create-job',
    atMs: c.atMs,
    jobId: c.jobIds[i]!,
    spec: {
      ...part,
      name: c.names[i]!,
      schedule: c.schedules[i]!,
      anchorMs: c.anchorsMs[i] ?? undefined,
    },
    nextFireAtMs: c.nextFireAtMs[i] ?? undefined,
    requestId: requestId === '' ? undefined : requestId,
  };
}

export function encodeSchedulerCommand(c: SchedulerCommand): Uint8Array {
  return encode(c);
}

export function decodeSchedulerCommand(data: Uint8Array): SchedulerCommand {
  // The log only ever holds what this module encoded; a shape error is a divergence bug and
  // surfaces as an assertion in the state machine.
  return decode(data) as SchedulerCommand;
}
