/**
 * The log entries of a data group. Every value a follower needs is inside the command: the
 * leader computes next fire times, retry times and reads the clock; apply never does.
 * `atMs` is the leader's wall clock when it proposed, used for bookkeeping times only.
 */
import { decode, encode } from '../base/codec.js';
import type { AttemptOutcome, JobSpec } from './model.js';

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
}

export interface AttemptResultCommand {
  readonly op: 'attempt-result';
  readonly atMs: number;
  readonly fireId: string;
  readonly attempt: number;
  readonly token: number;
  readonly outcome: AttemptOutcome;
  readonly statusCode: number | undefined;
  readonly durationMs: number;
  readonly error: string | undefined;
  readonly responseExcerpt: string | undefined;
  /** outcome 'retry': when the next attempt may start (leader computed, with jitter). */
  readonly retryAtMs: number | undefined;
}

/** What a bulk command does to each of a tenant's jobs (AdminService BulkPause / Resume / Cancel). */
export type TenantJobsAction = 'pause' | 'resume' | 'delete';

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
}

export type SchedulerCommand =
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
    }
  | {
      readonly op: 'backfill-job';
      readonly atMs: number;
      readonly jobId: string;
      readonly slots: readonly number[];
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
  | {
      /** Many results in one entry: a spike's results cost one log entry per step, not each. */
      readonly op: 'attempt-results';
      readonly atMs: number;
      readonly results: readonly AttemptResultCommand[];
    }
  | {
      /** At-most-once runs whose attempt started under an earlier leader: outcome unknowable. */
      readonly op: 'mark-unknown';
      readonly atMs: number;
      readonly fireIds: readonly string[];
    }
  | {
      /**
       * Runs planned before an outage whose slot passed while no leader could deliver them:
       * the job's misfire policy says they do not fire (skip, coalesced, outside the window).
       */
      readonly op: 'miss-runs';
      readonly atMs: number;
      readonly runs: readonly { readonly fireId: string; readonly reason: string }[];
    }
  | TenantJobsCommand
  | { readonly op: 'replay-run'; readonly atMs: number; readonly fireId: string }
  | { readonly op: 'purge-dead'; readonly atMs: number; readonly fireIds: readonly string[] };

export type SchedulerCommandOp = SchedulerCommand['op'];

export function encodeSchedulerCommand(c: SchedulerCommand): Uint8Array {
  return encode(c);
}

export function decodeSchedulerCommand(data: Uint8Array): SchedulerCommand {
  // The log only ever holds what this module encoded; a shape error is a divergence bug and
  // surfaces as an assertion in the state machine.
  return decode(data) as SchedulerCommand;
}
