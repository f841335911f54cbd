/**
 * The data group's replicated state machine: jobs, runs, fire intents, attempts and the DLQ.
 *
 * Deterministic by construction: apply() reads only the entry (the leader computed every time,
 * slot and retry decision and put it there) and the state. User-level conflicts (unknown job,
 * version mismatch, stale intent, a run not in the state the command expects) are results, not
 * exceptions, and every replica computes the same result. A throw inside apply means the
 * replicas could diverge, so it is an assertion.
 */
import { assert, assertionFailed, assertNever } from '../base/assert.js';
import { decode, encode } from '../base/codec.js';
import type { Entry } from '../raft/messages.js';
import {
  decodeSchedulerCommand,
  type AttemptResultCommand,
  type CompleteRunCommand,
  type CreateJobsCommand,
  type UpstreamSettlement,
  type FireIntent,
  type SchedulerCommand,
  type TenantJobsCommand,
} from './commands.js';
import { nextToken } from './fencing.js';
import {
  attemptsMade,
  fireIdOf,
  type AttemptOutcome,
  type AttemptRecordOutcome,
  isTerminal,
  RUN_STATUSES,
  type Attempt,
  type Job,
  type JobSpec,
  type Run,
  type RunOverrides,
  type RunStatus,
} from './model.js';
import {
  JobTable,
  type JobColumns,
  type JobFiring,
  type JobRowState,
  type JobTableImage,
} from './job-table.js';
import { Retained } from './retained.js';
import { RunTable, type HistoryImage } from './run-table.js';
import { assertTransition } from './run-lifecycle.js';

export type SchedulerErrorCode =
  | 'JOB_NOT_FOUND'
  | 'JOB_ALREADY_EXISTS'
  | 'JOB_VERSION_CONFLICT'
  | 'RUN_NOT_FOUND'
  | 'RUN_WRONG_STATE'
  /** A completion or heartbeat named an attempt that is not the run's current one. */
  | 'FENCING_TOKEN_STALE'
  | 'INTENT_STALE'
  /** The job's shard hash is outside the range this group owns (it was split away). */
  | 'ROUTE_STALE';

export type ApplyResult =
  | {
      readonly ok: true;
      readonly jobId?: string;
      readonly duplicate?: boolean;
      readonly token?: number;
      readonly status?: RunStatus;
      readonly version?: number;
      /** tenant-jobs: the tenant's jobs in this group, and how many this entry changed. */
      readonly jobCount?: number;
      readonly changedCount?: number;
      /** tenant-jobs resume: the tenant's jobs still paused because the entry did not list them. */
      readonly unlistedCount?: number;
      /** create-jobs: jobs created, and jobs whose request id was seen before (not created). */
      readonly createdCount?: number;
      readonly duplicateCount?: number;
    }
  | { readonly ok: false; readonly code: SchedulerErrorCode; readonly reason: string };

/** What changed since the last takeTouched(), for the derived indexes. */
export interface Touched {
  /** Jobs created with a next slot (ids[i] due at nextMs[i]), not in any index before. */
  readonly created: { readonly ids: readonly string[]; readonly nextMs: readonly number[] };
  /** Jobs whose entries may have changed: re-derive them from applied state, after `created`. */
  readonly jobs: readonly string[];
  readonly runs: readonly string[];
  /**
   * The state was replaced by a snapshot since the last call: every derived index must be built
   * again from the whole state (`created`, `jobs` and `runs` do not list what the snapshot held;
   * listing millions of ids would cost a restart more than the rebuild itself).
   */
  readonly restored: boolean;
}

export interface SchedulerLimits {
  /**
   * Finished runs kept per job, DEAD ones aside (those are kept until replayed, purged, or
   * beyond deadRunsPerJobMax). A tenant's retention may keep fewer: its leader's sweep proposes
   * purge-runs (GroupDispatcher).
   */
  readonly runsPerJobMax: number;
  /**
   * DEAD runs kept per job at most, whatever the tenant's retention: the oldest beyond it leave
   * the DLQ, so that a job that always fails cannot grow the state even with no sweep.
   */
  readonly deadRunsPerJobMax: number;
  /** Terminal runs older than this (by finish time) are dropped. */
  readonly runRetentionMs: number;
  /** Finished jobs (one-off done, end reached) are kept this long. */
  readonly finishedJobRetentionMs: number;
  /** Create request ids remembered for idempotent retries, and for how long. */
  readonly requestIdsMax: number;
  readonly requestIdRetentionMs: number;
}

export const DEFAULT_SCHEDULER_LIMITS: SchedulerLimits = Object.freeze({
  runsPerJobMax: 100,
  deadRunsPerJobMax: 1000,
  runRetentionMs: 7 * 24 * 3600_000,
  finishedJobRetentionMs: 24 * 3600_000,
  requestIdsMax: 100_000,
  requestIdRetentionMs: 24 * 3600_000,
});

const fail = (code: SchedulerErrorCode, reason: string): ApplyResult => ({
  ok: false,
  code,
  reason,
});

export class SchedulerStateMachine {
  readonly jobs = new JobTable();
  /** Every run kept: live ones as objects, finished ones packed, by job in creation order. */
  readonly runs = new RunTable();
  /** The DLQ: DEAD runs by fire id, in the order they died. */
  readonly dead = new Set<string>();
  /** requestId → [jobId, atMs]; insertion order is age order. */
  private readonly requestIds = new Map<string, [string, number]>();
  /** Finished jobs in finish order, for retention. */
  private readonly finished = new Map<string, number>();
  appliedCommands = 0;
  /** Makes what the state keeps compact (shared values interned, other strings flat). */
  private readonly keep = new Retained();

  constructor(readonly limits: SchedulerLimits = DEFAULT_SCHEDULER_LIMITS) {}

  apply(entry: Entry): ApplyResult {
    return this.applyCommand(decodeSchedulerCommand(entry.data));
  }

  /**
   * Which job ids this group owns; undefined = all. Set by the data group once a split cut its
   * range (deterministic: derived from the committed split entry). A user command for a job
   * outside it is refused with ROUTE_STALE, so a caller routing by an old map retries.
   */
  owns: ((jobId: string) => boolean) | undefined;

  applyCommand(c: SchedulerCommand): ApplyResult {
    this.appliedCommands++;
    if (this.recentTaken) {
      this.runs.forgetRecent();
      this.recentTaken = false;
    }
    const stale = this.staleRoute(c);
    if (stale) return stale;
    this.noteTouched(c);
    const result = this.dispatch(c);
    this.packSettled(c.atMs);
    this.expire(c.atMs);
    return result;
  }

  /** Jobs and runs whose derived indexes (planning and dispatch wheels) may need an update. */
  private readonly touchedJobs = new Set<string>();
  /** takeTouched() ran since the last command: the runs it named have been read. */
  private recentTaken = false;
  /** restore() ran since the last takeTouched(). */
  private restoredSinceTake = false;
  private readonly touchedRuns = new Set<string>();
  /**
   * Jobs a create-jobs entry added with a next slot, and those slots: the planning index had no
   * entry for them, so it needs no lookup to learn that (a bulk registration adds thousands per
   * loop turn, most of them due far beyond the wheel). A later command of the same batch that
   * changes one of them touches it as well, and touched jobs are re-derived after these.
   */
  private createdIds: string[] = [];
  private createdNextMs: number[] = [];

  /**
   * A job whose derived entries may change. The wheels keep the id they are given: a flat copy,
   * so that a long id decoded from an entry (a slice of the entry's whole text) does not keep
   * that text alive. Creates touch their jobs with the id the job table stores, which the wheels
   * then share.
   */
  private touchJob(jobId: string): void {
    this.touchedJobs.add(this.keep.flat(jobId));
  }

  private noteTouched(c: SchedulerCommand): void {
    const wholeJob = (jobId: string): void => {
      this.touchJob(jobId);
      for (const id of this.runs.idsOf(jobId)) this.touchedRuns.add(id);
    };
    const run = (fireId: string): void => {
      this.touchedRuns.add(fireId);
      const r = this.runs.get(fireId);
      if (r) this.touchedJobs.add(r.jobId);
    };
    switch (c.op) {
      case 'create-jobs':
      case 'create-job':
        break;
      case 'update-job':
      case 'delete-job':
      case 'pause-job':
      case 'resume-job':
        wholeJob(c.jobId);
        break;
      case 'trigger-job':
        this.touchJob(c.jobId);
        this.touchedRuns.add(fireIdOf(c.jobId, c.slotMs));
        break;
      case 'backfill-job':
        this.touchJob(c.jobId);
        for (const slot of c.slots) this.touchedRuns.add(fireIdOf(c.jobId, slot));
        break;
      case 'fire-intents':
        for (const i of c.intents) {
          this.touchJob(i.jobId);
          for (const slot of i.slots) this.touchedRuns.add(fireIdOf(i.jobId, slot));
        }
        break;
      case 'attempt-started':
      case 'attempt-result':
      case 'complete-run':
      case 'heartbeat-run':
      case 'replay-run':
        run(c.fireId);
        break;
      case 'attempt-results':
        for (const r of c.results) run(r.fireId);
        break;
      case 'miss-runs':
      case 'lost-attempts':
      case 'upstream-settled':
        for (const r of c.runs) run(r.fireId);
        break;
      case 'mark-unknown':
      case 'purge-runs':
        for (const id of c.fireIds) run(id);
        break;
      case 'tenant-jobs':
        for (const job of this.jobsOfTenant(c.tenant)) wholeJob(job.id);
        // A purge also reaches the DEAD runs of the tenant's deleted jobs.
        if (c.action === 'purge-dead')
          for (const id of this.dead)
            if (this.runs.get(id)?.jobId.startsWith(`${c.tenant}/`)) run(id);
        break;
      default:
        assertNever(c, 'scheduler command');
    }
  }

  private staleRoute(c: SchedulerCommand): ApplyResult | undefined {
    const owns = this.owns;
    if (owns === undefined) return undefined;
    let jobId: string;
    switch (c.op) {
      case 'create-job':
      case 'update-job':
      case 'delete-job':
      case 'pause-job':
      case 'resume-job':
      case 'trigger-job':
      case 'backfill-job':
        jobId = c.jobId;
        break;
      case 'replay-run':
        jobId = c.fireId.slice(0, Math.max(0, c.fireId.lastIndexOf(':')));
        break;
      case 'create-jobs': {
        // All or nothing, as the entry itself: one job split away sends the whole batch back.
        const away = c.jobIds.find((id) => !owns(id));
        if (away === undefined) return undefined;
        jobId = away;
        break;
      }
      default:
        // The leader's own commands name jobs it holds; one for a job split away is a no-op.
        return undefined;
    }
    if (owns(jobId)) return undefined;
    return fail('ROUTE_STALE', `job ${jobId} is no longer in this group (its range was split)`);
  }

  /**
   * Drops every job (with its runs, DLQ entries, request ids and retention entries) that
   * `keep` rejects; used by a range split on both sides. The dropped ids count as touched, so
   * the dispatcher's indexes forget them at the next afterApply.
   */
  keepOnly(keep: (jobId: string) => boolean): number {
    let dropped = 0;
    for (const id of [...this.jobs.keys()]) {
      if (keep(id)) continue;
      this.jobs.delete(id);
      this.touchedJobs.add(id);
      dropped++;
    }
    for (const jobId of [...this.runs.jobs()]) {
      if (keep(jobId)) continue;
      for (const fireId of this.runs.dropWhere(jobId, () => true)) {
        this.dead.delete(fireId);
        this.touchedRuns.add(fireId);
      }
      this.touchedJobs.add(jobId);
    }
    for (const [rid, [jobId]] of [...this.requestIds])
      if (!keep(jobId)) this.requestIds.delete(rid);
    for (const jobId of [...this.finished.keys()]) if (!keep(jobId)) this.finished.delete(jobId);
    return dropped;
  }

  /** The ids touched since the last call (a restore says so instead: Touched.restored). */
  takeTouched(): Touched {
    const out: Touched = {
      created: { ids: this.createdIds, nextMs: this.createdNextMs },
      jobs: [...this.touchedJobs],
      runs: [...this.touchedRuns],
      restored: this.restoredSinceTake,
    };
    this.restoredSinceTake = false;
    // The caller reads the runs it was handed next: the ones packed meanwhile stay objects
    // until the next command applies.
    this.recentTaken = true;
    this.touchedJobs.clear();
    this.touchedRuns.clear();
    if (this.createdIds.length > 0) {
      this.createdIds = [];
      this.createdNextMs = [];
    }
    return out;
  }

  private dispatch(c: SchedulerCommand): ApplyResult {
    switch (c.op) {
      case 'create-jobs':
        return this.createJobs(c);
      case 'create-job':
        return this.createJob(c);
      case 'update-job':
        return this.updateJob(c);
      case 'delete-job':
        return this.deleteJob(c.jobId, c.atMs);
      case 'pause-job':
        return this.pauseJob(c.jobId, c.atMs);
      case 'resume-job':
        return this.withJob(c.jobId, (job) => {
          this.resumeJob(job.id, c.nextFireAtMs, c.atMs);
          return { ok: true, jobId: job.id };
        });
      case 'trigger-job':
        return this.withJob(c.jobId, (job) => {
          this.addRun(job.id, c.slotMs, 'SCHEDULED', undefined, c.atMs, true, c.overrides);
          return { ok: true, jobId: job.id };
        });
      case 'backfill-job':
        return this.withJob(c.jobId, (job) => {
          for (const slot of c.slots)
            this.addRun(job.id, slot, 'SCHEDULED', undefined, c.atMs, true, c.overrides);
          return { ok: true, jobId: job.id };
        });
      case 'fire-intents':
        for (const intent of c.intents) this.applyIntent(intent, c.atMs);
        return { ok: true };
      case 'attempt-started':
        return this.attemptStarted(c.fireId, c.attempt, c.term, c.atMs);
      case 'attempt-result':
        return this.attemptResult(c);
      case 'attempt-results':
        for (const r of c.results) this.attemptResult(r);
        return { ok: true };
      case 'complete-run':
        return this.completeRun(c);
      case 'heartbeat-run':
        return this.withCurrentAttempt(c.fireId, c.token, (run) => {
          run.completeByMs = c.completeByMs;
          return { ok: true, status: run.status };
        });
      case 'mark-unknown':
        for (const id of c.fireIds) {
          const run = this.runs.open(id);
          if (run?.status === 'DISPATCHED') {
            this.finish(run, 'UNKNOWN', 'at-most-once attempt lost with its leader', c.atMs);
          }
        }
        return { ok: true };
      case 'lost-attempts':
        for (const { fireId, attempt } of c.runs) {
          const run = this.runs.open(fireId);
          if (run?.status !== 'SCHEDULED' || run.attempts.length + 1 !== attempt) continue;
          const lost = newAttempt(attempt, 0, run.dueAtMs);
          lost.error = LOST_ATTEMPT_ERROR;
          appendAttempt(run, lost);
        }
        return { ok: true };
      case 'miss-runs':
        for (const { fireId, reason, status } of c.runs) {
          const run = this.runs.open(fireId);
          // Only a run nobody has attempted yet (one an earlier leader may have sent is not
          // known to be attempted); anything else moved on meanwhile.
          if (run?.status === 'SCHEDULED' && attemptsMade(run) === 0)
            this.finish(
              run,
              status === 'SKIPPED' ? 'SKIPPED' : 'MISSED',
              this.keep.shared(reason),
              c.atMs,
            );
        }
        return { ok: true };
      case 'upstream-settled':
        for (const r of c.runs) this.upstreamSettled(r.fireId, r.upstream, c.atMs);
        return { ok: true };
      case 'replay-run':
        return this.replayRun(c.fireId, c.atMs);
      case 'tenant-jobs':
        return this.tenantJobs(c);
      case 'purge-runs':
        this.dropRuns(
          c.fireIds.filter((id) => {
            const run = this.runs.get(id);
            return run !== undefined && isTerminal(run.status);
          }),
        );
        return { ok: true };
      default:
        return assertNever(c, 'scheduler command');
    }
  }

  // -------------------------------------------------------------------------------------
  // Jobs

  private createJob(c: Extract<SchedulerCommand, { op: 'create-job' }>): ApplyResult {
    if (c.requestId !== undefined) {
      const seen = this.requestIds.get(c.requestId);
      if (seen) return { ok: true, jobId: seen[0], duplicate: true };
    }
    if (this.jobs.has(c.jobId)) return fail('JOB_ALREADY_EXISTS', `job ${c.jobId} already exists`);
    const id = this.keep.flat(c.jobId);
    this.touchedJobs.add(id);
    this.putJob(id, c.spec, {
      version: 1,
      paused: false,
      createdAtMs: c.atMs,
      updatedAtMs: c.atMs,
      nextFireAtMs: c.nextFireAtMs,
      lastToken: 0,
      remaining: c.spec.remainingFires,
      finishedAtMs: undefined,
    });
    if (c.requestId !== undefined) this.rememberRequest(this.keep.flat(c.requestId), id, c.atMs);
    if (c.nextFireAtMs === undefined) this.markFinished(id, c.atMs);
    return { ok: true, jobId: id, version: 1 };
  }

  /**
   * All or nothing: a job that exists, or an id twice in the entry, fails the entry and changes
   * nothing (the rows added before it are taken out again); a job whose request id was seen
   * before is a duplicate, not created. The definitions are interned once per entry, not once
   * per job.
   */
  private createJobs(c: CreateJobsCommand): ApplyResult {
    const n = c.jobIds.length;
    assert(
      c.specOf.length === n &&
        c.schedules.length === n &&
        c.names.length === n &&
        c.anchorsMs.length === n &&
        c.nextFireAtMs.length === n &&
        c.requestIds.length === n,
      'create-jobs: columns of different lengths',
    );
    const duplicate = this.duplicateRequests(c);
    const partIds = c.specs.map((part) => this.keep.partId(part));
    const added: string[] = [];
    for (let i = 0; i < n; i++) {
      if (duplicate?.[i] === 1) continue;
      const id = this.keep.flat(c.jobIds[i]!);
      const at = c.specOf[i]!;
      const part = c.specs[at];
      if (part === undefined)
        assertionFailed(`create-jobs: job ${id} names definition ${at}, not in the entry`);
      const name = c.names[i]!;
      const isNew = this.jobs.addNew(
        id,
        this.keep.specOf(part, partIds[at], c.schedules[i]!),
        name.length === 0 ? '' : this.keep.flat(name),
        c.anchorsMs[i] ?? undefined,
        c.atMs,
        c.nextFireAtMs[i] ?? undefined,
        part.remainingFires,
      );
      if (!isNew) {
        for (const done of added) this.jobs.delete(done);
        return fail('JOB_ALREADY_EXISTS', `job ${id} already exists`);
      }
      added.push(id);
    }
    let k = 0;
    for (let i = 0; i < n; i++) {
      if (duplicate?.[i] === 1) continue;
      const id = added[k++]!;
      const requestId = c.requestIds[i]!;
      if (requestId !== '') this.rememberRequest(this.keep.flat(requestId), id, c.atMs);
      const next = c.nextFireAtMs[i] ?? undefined;
      if (next === undefined) {
        this.touchedJobs.add(id);
        this.markFinished(id, c.atMs);
      } else {
        this.createdIds.push(id);
        this.createdNextMs.push(next);
      }
    }
    return { ok: true, createdCount: added.length, duplicateCount: n - added.length };
  }

  /**
   * The jobs of a create-jobs entry whose request id was seen before (or earlier in the entry),
   * marked 1; undefined when none is.
   */
  private duplicateRequests(c: CreateJobsCommand): Uint8Array | undefined {
    let duplicate: Uint8Array | undefined;
    let requests: Set<string> | undefined;
    for (let i = 0; i < c.requestIds.length; i++) {
      const requestId = c.requestIds[i]!;
      if (requestId === '') continue;
      requests ??= new Set();
      if (this.requestIds.has(requestId) || requests.has(requestId)) {
        duplicate ??= new Uint8Array(c.requestIds.length);
        duplicate[i] = 1;
      } else requests.add(requestId);
    }
    return duplicate;
  }

  private putJob(id: string, spec: JobSpec, st: JobRowState): void {
    const name = spec.name.length === 0 ? '' : this.keep.flat(spec.name);
    this.jobs.put(id, this.keep.spec(spec), name, spec.anchorMs, st);
  }

  private updateJob(c: Extract<SchedulerCommand, { op: 'update-job' }>): ApplyResult {
    return this.withJob(c.jobId, (job) => {
      if (c.expectedVersion !== undefined && c.expectedVersion !== job.version) {
        return fail(
          'JOB_VERSION_CONFLICT',
          `job ${job.id} is at version ${job.version}, not ${c.expectedVersion}`,
        );
      }
      const version = job.version + 1;
      this.putJob(job.id, c.spec, {
        version,
        paused: job.paused,
        createdAtMs: job.createdAtMs,
        updatedAtMs: c.atMs,
        nextFireAtMs: c.nextFireAtMs,
        lastToken: job.lastToken,
        remaining: c.spec.remainingFires,
        finishedAtMs: undefined,
      });
      this.finished.delete(job.id);
      if (c.nextFireAtMs === undefined) this.markFinished(job.id, c.atMs);
      this.supersede(job.id, version, c.atMs);
      return { ok: true, jobId: job.id, version };
    });
  }

  /**
   * The new definition owns every slot from the update's stamp on (docs/schedules.md): runs the
   * old one planned for those slots and nobody has attempted yet are CANCELLED, with the reason
   * saying which version superseded them. The new definition plans its own slots from the
   * update's next slot; one that both definitions have gets its run back (addRun), so it fires
   * once, with the new definition. Runs already attempted keep going to their outcome (an
   * at-most-once start committed before the update, an attempt in flight, a retry), and so do
   * manual runs (trigger, backfill) and slots before the stamp, which the old definition owed.
   */
  private supersede(jobId: string, version: number, atMs: number): void {
    const reason = this.keep.shared(supersededReason(version));
    for (const run of this.runs.liveOf(jobId)) {
      // A run only an earlier leader may have sent (isLostAttempt) is superseded like one never
      // attempted: as before such attempts were recorded.
      if (run.status !== 'SCHEDULED' || attemptsMade(run) > 0 || run.manual) continue;
      if (run.slotMs < atMs) continue;
      this.finish(run, 'CANCELLED', reason, atMs);
    }
  }

  private deleteJob(jobId: string, atMs: number): ApplyResult {
    return this.withJob(jobId, (job) => {
      // A committed delete wins over every run not yet attempted.
      for (const run of this.runs.liveOf(job.id))
        if (run.status === 'SCHEDULED') this.finish(run, 'CANCELLED', 'job deleted', atMs);
      this.jobs.delete(job.id);
      this.finished.delete(job.id);
      return { ok: true, jobId: job.id };
    });
  }

  private pauseJob(jobId: string, atMs: number): ApplyResult {
    return this.withJob(jobId, (job) => {
      this.jobs.setPaused(job.id, true, atMs);
      // A committed pause wins: no delivery starts after it, retries included.
      for (const run of this.runs.liveOf(job.id))
        if (run.status === 'SCHEDULED') this.finish(run, 'SKIPPED', 'paused', atMs);
      return { ok: true, jobId: job.id };
    });
  }

  private resumeJob(jobId: string, nextFireAtMs: number | undefined, atMs: number): void {
    this.jobs.setPaused(jobId, false, atMs);
    this.jobs.setNextFire(jobId, nextFireAtMs);
  }

  /**
   * A tenant's jobs in this group, in the state's (replicated, hence identical) order. A scan of
   * the group's jobs: O(jobs in the group), the same bound as taking a snapshot of it.
   */
  jobsOfTenant(tenant: string): Job[] {
    return this.jobs.idsOfTenant(tenant).map((id) => this.jobs.get(id)!);
  }

  /**
   * Bulk pause, resume or delete of one tenant's jobs, with the single-job rules: a pause or
   * delete wins over every run not yet attempted (SKIPPED / CANCELLED); runs already attempted
   * finish as they would. Repeating it changes nothing more (an already paused job is not touched
   * again), so a retried bulk call is harmless.
   */
  private tenantJobs(c: TenantJobsCommand): ApplyResult {
    const jobs = this.jobsOfTenant(c.tenant);
    let changedCount = 0;
    let unlistedCount = 0;
    switch (c.action) {
      case 'pause':
        for (const job of jobs) {
          if (job.paused) continue;
          this.pauseJob(job.id, c.atMs);
          changedCount++;
        }
        break;
      case 'delete':
        for (const job of jobs) this.deleteJob(job.id, c.atMs);
        changedCount = jobs.length;
        break;
      case 'resume': {
        const listed = new Map<string, number | undefined>();
        for (const r of c.resumes) listed.set(r.jobId, r.nextFireAtMs);
        for (const job of jobs) {
          if (!job.paused) continue;
          if (!listed.has(job.id)) {
            unlistedCount++;
            continue;
          }
          this.resumeJob(job.id, listed.get(job.id), c.atMs);
          changedCount++;
        }
        break;
      }
      case 'purge-dead': {
        const f = c.deadRuns ?? {};
        const prefix = `${c.tenant}/`;
        const purged: string[] = [];
        for (const id of this.dead) {
          const run = this.runs.get(id);
          if (run === undefined || !run.jobId.startsWith(prefix)) continue;
          if (f.jobId !== undefined && run.jobId !== f.jobId) continue;
          if (f.diedBeforeMs !== undefined && !((run.finishedAtMs ?? 0) < f.diedBeforeMs)) continue;
          purged.push(id);
        }
        this.dropRuns(purged);
        changedCount = purged.length;
        break;
      }
      default:
        return assertNever(c.action, 'tenant-jobs action');
    }
    return { ok: true, jobCount: jobs.length, changedCount, unlistedCount };
  }

  private withJob(jobId: string, f: (job: Job) => ApplyResult): ApplyResult {
    const job = this.jobs.get(jobId);
    if (!job) return fail('JOB_NOT_FOUND', `job ${jobId} does not exist`);
    return f(job);
  }

  private markFinished(jobId: string, atMs: number): void {
    this.jobs.setFinishedAt(jobId, atMs);
    this.finished.delete(jobId);
    this.finished.set(jobId, atMs);
  }

  // -------------------------------------------------------------------------------------
  // Intents and runs

  /**
   * An intent applies only to the job state it was planned from: `expectedNextFireAtMs` must
   * still be the job's next slot. A second intent for the same slot (a new leader re-planning)
   * is therefore a no-op, and so is one for a job changed or deleted meanwhile.
   */
  private applyIntent(intent: FireIntent, atMs: number): boolean {
    const job = this.jobs.firingOf(intent.jobId);
    if (!job) return false;
    if (intent.settlesVersion !== undefined) return this.applySettle(job, intent, atMs);
    if (job.nextFireAtMs !== intent.expectedNextFireAtMs) return false;
    if (intent.version !== undefined && intent.version !== job.version) return false;
    for (const slot of intent.slots) {
      // Paused between planning and commit: the pause wins and the slot is recorded.
      if (job.paused) this.addRun(job.id, slot, 'SKIPPED', 'paused', atMs, false);
      else this.addRun(job.id, slot, 'SCHEDULED', undefined, atMs, false);
    }
    for (const nf of intent.notFired)
      this.addRun(job.id, nf.slotMs, nf.status, this.keep.shared(nf.reason), atMs, false);
    const remaining =
      job.remaining === undefined ? undefined : Math.max(0, job.remaining - intent.slots.length);
    this.jobs.setRemaining(job.id, remaining);
    const next = remaining === 0 ? undefined : intent.nextFireAtMs;
    this.jobs.setNextFire(job.id, next);
    if (next === undefined) this.markFinished(job.id, atMs);
    return true;
  }

  /**
   * A settle intent (intent-planner.ts planOverdue): planned from this version of the job, it
   * records the overdue slots the job has not reached yet; the leader's own intent may have
   * recorded the first of them meanwhile, and runs are unique per slot anyway.
   */
  private applySettle(job: JobFiring, intent: FireIntent, atMs: number): boolean {
    const from = job.nextFireAtMs;
    if (job.version !== intent.settlesVersion || from === undefined) return false;
    if (from < intent.expectedNextFireAtMs) return false;
    let fired = 0;
    for (const slot of intent.slots) {
      if (slot < from) continue;
      if (job.paused) this.addRun(job.id, slot, 'SKIPPED', 'paused', atMs, false);
      else this.addRun(job.id, slot, 'SCHEDULED', undefined, atMs, false);
      fired++;
    }
    for (const nf of intent.notFired) {
      if (nf.slotMs >= from)
        this.addRun(job.id, nf.slotMs, nf.status, this.keep.shared(nf.reason), atMs, false);
    }
    const next = intent.nextFireAtMs;
    if (next !== undefined && next <= from) return fired > 0;
    const remaining = job.remaining === undefined ? undefined : Math.max(0, job.remaining - fired);
    this.jobs.setRemaining(job.id, remaining);
    const settled = remaining === 0 ? undefined : next;
    this.jobs.setNextFire(job.id, settled);
    if (settled === undefined) this.markFinished(job.id, atMs);
    return true;
  }

  /**
   * Creates the run of (job, slot) unless it exists: runs are unique per slot. The one
   * exception is a run an update superseded before anyone attempted it: the new definition
   * owns that slot too, so the run is planned afresh under the same fire id (the receiver never
   * saw it).
   */
  private addRun(
    jobId: string,
    slotMs: number,
    status: RunStatus,
    reason: string | undefined,
    atMs: number,
    manual: boolean,
    overrides?: RunOverrides,
  ): Run | undefined {
    const fireId = fireIdOf(jobId, slotMs);
    const prior = this.runs.find(jobId, slotMs);
    if (prior !== undefined && !(manual === prior.manual && isSupersededUnattempted(prior)))
      return undefined;
    const run: Run = {
      fireId,
      jobId,
      slotMs,
      status,
      reason,
      dueAtMs: slotMs,
      attempts: [],
      createdAtMs: atMs,
      finishedAtMs: isTerminal(status) ? atMs : undefined,
      manual,
    };
    // Only when given: scheduled runs (most of the state) carry no such key.
    if (overrides !== undefined) run.overrides = overrides;
    // A scheduled slot of a job with dependencies waits for them; a manual run does not.
    const deps = manual || status !== 'SCHEDULED' ? undefined : this.jobs.specOf(jobId)?.dependsOn;
    if (deps !== undefined)
      run.upstream = deps.jobs.map((job) => ({
        job,
        outcome: undefined,
        fireId: undefined,
        status: undefined,
      }));
    // A superseded run planned again keeps its place in the history.
    if (prior !== undefined) this.runs.replace(run);
    else this.runs.add(run);
    return run;
  }

  private finish(run: Run, status: RunStatus, reason: string | undefined, atMs: number): void {
    assertTransition(run.status, status);
    if (run.completeByMs !== undefined) delete run.completeByMs;
    run.status = status;
    run.reason = reason;
    run.finishedAtMs = atMs;
    if (status === 'DEAD') this.dead.add(run.fireId);
    this.runs.noteSettled(run.fireId);
  }

  private attemptStarted(fireId: string, attempt: number, term: number, atMs: number): ApplyResult {
    const run = this.runs.open(fireId);
    if (!run) return fail('RUN_NOT_FOUND', `run ${fireId} does not exist`);
    const job = this.jobs.get(run.jobId);
    if (!job) return fail('JOB_NOT_FOUND', `job ${run.jobId} does not exist`);
    if (run.status !== 'SCHEDULED' || job.paused) {
      return fail(
        'RUN_WRONG_STATE',
        `run ${fireId} is ${run.status}${job.paused ? ' (job paused)' : ''}`,
      );
    }
    if (attempt !== run.attempts.length + 1) {
      return fail(
        'RUN_WRONG_STATE',
        `run ${fireId} is at attempt ${run.attempts.length}, not ${attempt - 1}`,
      );
    }
    const token = nextToken(job.lastToken, term);
    this.jobs.setLastToken(job.id, token);
    assertTransition(run.status, 'DISPATCHED');
    run.status = 'DISPATCHED';
    appendAttempt(run, newAttempt(attempt, token, atMs));
    return { ok: true, token, status: run.status };
  }

  private attemptResult(c: AttemptResultCommand): ApplyResult {
    const run = this.runs.open(c.fireId);
    if (!run) return fail('RUN_NOT_FOUND', `run ${c.fireId} does not exist`);
    // Single fields, not a copy of the job: a spike applies thousands of results per entry.
    this.jobs.raiseLastToken(run.jobId, c.token);
    // At-least-once attempts start without a log entry: the result records the attempt.
    let attempt = run.attempts.find((a) => a.attempt === c.attempt);
    // A result proposed again after an unknown outcome: the first one counted.
    if (attempt?.outcome !== undefined && attempt.token === c.token) {
      return { ok: true, duplicate: true, status: run.status };
    }
    if (!attempt) {
      const node = c.node === undefined ? undefined : this.keep.shared(c.node);
      attempt = newAttempt(c.attempt, c.token, c.atMs - c.durationMs, node);
      appendAttempt(run, attempt);
    }
    // The program's own string: a decoded one is a copy per attempt, kept with the history.
    attempt.outcome = RECORD_OUTCOMES[c.outcome];
    attempt.statusCode = c.statusCode;
    attempt.durationMs = c.durationMs;
    attempt.error = this.keep.optional(c.error);
    attempt.responseExcerpt = this.keep.optional(c.responseExcerpt);
    if (c.node !== undefined) attempt.node = this.keep.shared(c.node);
    if (c.worker !== undefined) attempt.worker = this.keep.shared(c.worker);
    if (run.status !== 'SCHEDULED' && run.status !== 'DISPATCHED') {
      // A result for a run already ended (paused or deleted while the attempt was in flight):
      // the attempt is history, the run keeps its final status.
      return { ok: true, status: run.status };
    }
    if (c.outcome === 'accepted') {
      assert(c.completeByMs !== undefined, 'an accepted attempt result without its deadline');
      assertTransition(run.status, 'RUNNING');
      run.status = 'RUNNING';
      run.completeByMs = c.completeByMs;
      return { ok: true, status: run.status };
    }
    this.settle(run, c.outcome, c.retryAtMs, c.statusCode ?? c.error, c.atMs);
    return { ok: true, status: run.status };
  }

  /**
   * Where an attempt's outcome takes its run: SUCCEEDED; SCHEDULED again at `retryAtMs` while
   * the retry policy allows (DEAD when it does not; SKIPPED when the job is paused); DEAD for a
   * failure. `why` names a failure in the run's reason.
   */
  private settle(
    run: Run,
    outcome: AttemptOutcome,
    retryAtMs: number | undefined,
    why: number | string | undefined,
    atMs: number,
  ): void {
    const spec = this.jobs.specOf(run.jobId);
    switch (outcome) {
      case 'success':
        this.finish(run, 'SUCCEEDED', undefined, atMs);
        break;
      case 'retry': {
        const maxAttempts = spec?.retry.maxAttempts ?? 1;
        const maxAgeMs = spec?.retry.maxAgeMs ?? 0;
        // Attempts of unknown fate under a lost leader do not use up the retries.
        const made = attemptsMade(run);
        if (!spec) this.finish(run, 'DEAD', 'job deleted', atMs);
        else if (made >= maxAttempts)
          this.finish(run, 'DEAD', `retries exhausted after ${made} attempts`, atMs);
        else if (retryAtMs === undefined || retryAtMs - run.slotMs > maxAgeMs)
          this.finish(run, 'DEAD', 'retry would pass the max age', atMs);
        else if (this.jobs.pausedOf(run.jobId) === true)
          this.finish(run, 'SKIPPED', 'paused', atMs);
        else {
          assertTransition(run.status, 'SCHEDULED');
          run.status = 'SCHEDULED';
          run.dueAtMs = retryAtMs;
          delete run.completeByMs;
        }
        break;
      }
      case 'fail':
        this.finish(run, 'DEAD', `non-retryable: ${why ?? 'error'}`, atMs);
        break;
      default:
        assertNever(outcome, 'attempt outcome');
    }
  }

  /**
   * `then` on a RUNNING run whose current attempt has fencing token `token`; refused (changing
   * nothing) for a run that does not exist, is not RUNNING, or has moved to another attempt.
   */
  private withCurrentAttempt(
    fireId: string,
    token: number,
    then: (run: Run, attempt: Attempt) => ApplyResult,
  ): ApplyResult {
    const run = this.runs.open(fireId);
    if (!run) return fail('RUN_NOT_FOUND', `run ${fireId} does not exist`);
    const last = run.attempts[run.attempts.length - 1];
    if (last !== undefined && last.token !== token && run.attempts.some((a) => a.token === token))
      return fail(
        'FENCING_TOKEN_STALE',
        `fencing token ${token} is of attempt ${run.attempts.find((a) => a.token === token)!.attempt}; the run is at attempt ${last.attempt} (token ${last.token})`,
      );
    if (run.status !== 'RUNNING' || last === undefined)
      return fail('RUN_WRONG_STATE', `run ${fireId} is ${run.status}, not RUNNING`);
    if (last.token !== token)
      return fail(
        'FENCING_TOKEN_STALE',
        `fencing token ${token} is not the current attempt's (attempt ${last.attempt}, token ${last.token})`,
      );
    return then(run, last);
  }

  private completeRun(c: CompleteRunCommand): ApplyResult {
    return this.withCurrentAttempt(c.fireId, c.token, (run, attempt) => {
      // A deadline the leader saw pass, which a heartbeat has moved since: not expired.
      if (c.ifCompleteByMs !== undefined && c.ifCompleteByMs !== run.completeByMs)
        return fail('RUN_WRONG_STATE', `run ${c.fireId}'s deadline moved`);
      attempt.outcome = c.outcome;
      attempt.durationMs = Math.max(0, c.atMs - attempt.startedAtMs);
      attempt.error = this.keep.optional(c.error);
      if (c.output !== undefined) attempt.responseExcerpt = c.output;
      if (c.outputNode !== undefined) attempt.outputNode = this.keep.shared(c.outputNode);
      this.settle(run, c.outcome, c.retryAtMs, c.error, c.atMs);
      return { ok: true, status: run.status };
    });
  }

  /**
   * Records what became of some upstreams of a waiting run. Once none is pending, the run goes
   * (every upstream succeeded, or the job runs anyway on failure) or is SKIPPED with
   * UPSTREAM_FAILED naming the first upstream that did not succeed.
   */
  private upstreamSettled(
    fireId: string,
    settled: readonly UpstreamSettlement[],
    atMs: number,
  ): void {
    const run = this.runs.open(fireId);
    if (run?.status !== 'SCHEDULED' || run.upstream === undefined || attemptsMade(run) > 0) return;
    for (const s of settled) {
      const state = run.upstream.find((u) => u.job === s.job && u.outcome === undefined);
      if (state === undefined) continue;
      state.outcome = s.outcome;
      state.fireId = s.fireId === undefined ? undefined : this.keep.flat(s.fireId);
      state.status = s.status;
    }
    if (run.upstream.some((u) => u.outcome === undefined)) return;
    const failed = run.upstream.find((u) => u.outcome !== 'succeeded');
    if (failed === undefined) return;
    const policy = this.jobs.specOf(run.jobId)?.dependsOn?.onUpstreamFailure ?? 'skip';
    if (policy === 'run') return;
    const why =
      failed.outcome === 'failed'
        ? `its run ${failed.fireId ?? ''} is ${failed.status ?? 'not SUCCEEDED'}`
        : failed.outcome === 'missing'
          ? 'it has no run of its latest slot at or before this one'
          : 'the wait passed the max age';
    this.finish(run, 'SKIPPED', `${UPSTREAM_FAILED_REASON}: job ${failed.job}: ${why}`, atMs);
  }

  private replayRun(fireId: string, atMs: number): ApplyResult {
    const run = this.runs.open(fireId);
    if (!run) return fail('RUN_NOT_FOUND', `run ${fireId} does not exist`);
    if (run.status !== 'DEAD')
      return fail('RUN_WRONG_STATE', `run ${fireId} is ${run.status}, not DEAD`);
    if (!this.jobs.has(run.jobId)) return fail('JOB_NOT_FOUND', `job ${run.jobId} does not exist`);
    assertTransition(run.status, 'SCHEDULED');
    this.dead.delete(fireId);
    run.status = 'SCHEDULED';
    run.reason = undefined;
    run.dueAtMs = atMs;
    run.finishedAtMs = undefined;
    return { ok: true, status: run.status };
  }

  // -------------------------------------------------------------------------------------
  // Retention (deterministic: driven by the entries' atMs)

  /**
   * Packs the runs the command finished (run-table.ts) and applies each touched job's retention:
   * at the end of the command, so that what a run's history keeps does not depend on the order
   * of the runs within one entry.
   */
  private packSettled(atMs: number): void {
    for (const jobId of this.runs.packSettled())
      for (const id of this.runs.trim(jobId, atMs, this.limits)) this.dead.delete(id);
  }

  /** Drops these runs (and their DLQ entries). */
  private dropRuns(fireIds: readonly string[]): void {
    for (const id of fireIds) if (this.runs.delete(id)) this.dead.delete(id);
  }

  private rememberRequest(requestId: string, jobId: string, atMs: number): void {
    this.requestIds.set(requestId, [jobId, atMs]);
    while (this.requestIds.size > this.limits.requestIdsMax) {
      const oldest = this.requestIds.keys().next().value as string;
      this.requestIds.delete(oldest);
    }
  }

  private expire(atMs: number): void {
    for (const [id, [, at]] of this.requestIds) {
      if (at + this.limits.requestIdRetentionMs > atMs) break;
      this.requestIds.delete(id);
    }
    for (const [jobId, at] of this.finished) {
      if (at + this.limits.finishedJobRetentionMs > atMs) break;
      this.finished.delete(jobId);
      const job = this.jobs.get(jobId);
      // Only a job with nothing in flight goes; otherwise it waits for a later apply. Its DEAD
      // runs stay in the DLQ.
      if (!job || this.runs.hasLive(jobId)) continue;
      this.jobs.delete(jobId);
      this.runs.dropWhere(jobId, (status) => status !== 'DEAD');
    }
  }

  // -------------------------------------------------------------------------------------
  // Reads

  /** The jobs (deleted ones too, while DEAD runs remain) with runs kept, in no promised order. */
  jobsWithRuns(): IterableIterator<string> {
    return this.runs.jobs();
  }

  /** A job's runs in creation order (finished ones as copies). */
  runsOf(jobId: string): Run[] {
    return this.runs.runsOf(jobId);
  }

  /**
   * Where an index kept beside the runs and jobs disagrees with the one a full scan of them
   * rebuilds (empty when none does): the run table's histories, the dead-letter set, the job
   * table's own. Replicas keep these incrementally, so a drift shows only here (the simulator
   * checks it).
   */
  auditIndexes(): string[] {
    const out = [...this.jobs.audit(), ...this.runs.audit()];
    const dead = new Set<string>();
    for (const run of this.runs.values()) if (run.status === 'DEAD') dead.add(run.fireId);
    for (const id of this.dead) if (!dead.has(id)) out.push(`dead: ${id} listed but not DEAD`);
    for (const id of dead) if (!this.dead.has(id)) out.push(`dead: ${id} is DEAD but not listed`);
    return out;
  }

  // -------------------------------------------------------------------------------------
  // Snapshots

  /**
   * Version 5: the job table as it is held (JobTable.image(): number columns as raw chunks, the
   * ids as UTF-8 bytes), the live runs as objects and each job's history with its finished runs
   * as records (RunTable.historyImage()). Versions 4 (the same with the ids as one string),
   * 3 (that job table, one object per run and the fire ids by job), 2 (jobs by column,
   * JobTable.columns()) and 1 (one object per job) are still read. A node of an earlier version
   * refuses a version 5 snapshot (an assertion naming the version) rather than misread it.
   */
  snapshot(): Uint8Array {
    return encode({
      v: 5,
      jobs: this.jobs.image(),
      runs: this.runs.liveImage(),
      histories: this.runs.historyImage(),
      dead: [...this.dead],
      requestIds: [...this.requestIds.entries()],
      finished: [...this.finished.entries()],
      appliedCommands: this.appliedCommands,
    });
  }

  restore(data: Uint8Array): void {
    const s = decode(data) as {
      v: number;
      jobs: Job[] | JobColumns | JobTableImage;
      runs: Run[];
      /** Versions 1 to 3. */
      runsByJob?: [string, string[]][];
      /** Versions 4 and 5. */
      histories?: HistoryImage[];
      dead: string[];
      requestIds: [string, [string, number]][];
      finished: [string, number][];
      appliedCommands: number;
    };
    if (!(s.v === 1 || s.v === 2 || s.v === 3 || s.v === 4 || s.v === 5))
      assertionFailed(`unknown scheduler snapshot version ${s.v}`);
    this.jobs.clear();
    this.runs.clear();
    this.dead.clear();
    this.requestIds.clear();
    this.finished.clear();
    if (s.v === 1) for (const j of s.jobs as Job[]) this.putJob(this.keep.flat(j.id), j, j);
    else if (s.v >= 3) {
      const img = s.jobs as JobTableImage;
      const specs = img.specs.map((spec) =>
        this.keep.spec({ ...spec, name: '', anchorMs: undefined }),
      );
      this.jobs.loadImage(
        img,
        (k) => specs[k]!,
        (id) => this.keep.flat(id),
      );
    } else {
      const cols = s.jobs as JobColumns;
      const specs = cols.specs.map((spec) =>
        this.keep.spec({ ...spec, name: '', anchorMs: undefined }),
      );
      this.jobs.putColumns(
        cols,
        (k) => specs[k]!,
        (id) => this.keep.flat(id),
      );
    }
    const ownJobId = (id: string): string => this.jobs.ownId(id) ?? this.keep.flat(id);
    if (s.histories !== undefined)
      this.runs.load(
        s.histories,
        s.runs.map((decoded) => this.retainedRun(decoded)),
        ownJobId,
      );
    else this.restoreRunObjects(s.runs, s.runsByJob ?? []);
    this.touchedJobs.clear();
    this.touchedRuns.clear();
    this.createdIds = [];
    this.createdNextMs = [];
    this.restoredSinceTake = true;
    for (const id of s.dead) this.dead.add(this.keep.flat(id));
    for (const [k, v] of s.requestIds) this.requestIds.set(k, v);
    for (const [k, v] of s.finished) this.finished.set(k, v);
    this.appliedCommands = s.appliedCommands;
  }

  /** Runs as snapshots before version 4 hold them: objects, and their fire ids by job. */
  private restoreRunObjects(runs: Run[], runsByJob: [string, string[]][]): void {
    const byId = new Map<string, Run>();
    for (const run of runs) byId.set(run.fireId, run);
    for (const [, ids] of runsByJob)
      for (const id of ids) {
        const run = byId.get(id);
        if (run === undefined) continue;
        byId.delete(id);
        this.runs.restoreRun(this.retainedRun(run));
      }
    // A run no list named (none should be): after its job's listed ones.
    for (const run of byId.values()) this.runs.restoreRun(this.retainedRun(run));
  }

  /**
   * A run decoded from a snapshot, made to hold what an applied run holds: its job's id as the
   * job table's own copy, the program's status and outcome strings, shared reasons and node
   * names, and flat copies of the rest rather than slices that would keep the snapshot's text
   * alive. Values change in place, keys do not: the next snapshot is the same bytes.
   */
  private retainedRun(decoded: Run): Run {
    const keep = this.keep;
    const r = decoded as Mutable<Run>;
    r.fireId = keep.flat(r.fireId);
    r.jobId = this.jobs.ownId(r.jobId) ?? keep.flat(r.jobId);
    r.status = OWN_STATUSES.get(r.status) ?? r.status;
    if (r.reason !== undefined) r.reason = keep.shared(r.reason);
    for (const attempt of r.attempts) {
      const a = attempt as Mutable<Attempt>;
      if (a.outcome !== undefined) a.outcome = RECORD_OUTCOMES[a.outcome];
      if (a.error !== undefined) a.error = keep.shared(a.error);
      if (a.responseExcerpt !== undefined) a.responseExcerpt = keep.flat(a.responseExcerpt);
      if (a.node !== undefined) a.node = keep.shared(a.node);
      if (a.worker !== undefined) a.worker = keep.shared(a.worker);
      if (a.outputNode !== undefined) a.outputNode = keep.shared(a.outputNode);
    }
    return r;
  }
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

const OWN_STATUSES: ReadonlyMap<string, RunStatus> = new Map(RUN_STATUSES.map((s) => [s, s]));

/** The reason of a run an update to `version` cancelled before it was attempted. */
export function supersededReason(version: number): string {
  return `${SUPERSEDED_REASON_PREFIX}${version}`;
}

export const SUPERSEDED_REASON_PREFIX = 'superseded by update to version ';

function isSupersededUnattempted(run: Run): boolean {
  return (
    run.status === 'CANCELLED' &&
    attemptsMade(run) === 0 &&
    run.reason !== undefined &&
    run.reason.startsWith(SUPERSEDED_REASON_PREFIX)
  );
}

/** The reason of a run SKIPPED because an upstream did not succeed (it names which, and why). */
export const UPSTREAM_FAILED_REASON = 'UPSTREAM_FAILED';

/** The error of a lost attempt (isLostAttempt): what its history says. */
export const LOST_ATTEMPT_ERROR =
  'LEADER_LOST: an earlier leader may have sent this attempt; its result was lost with it';

const RECORD_OUTCOMES: Readonly<Record<AttemptRecordOutcome, AttemptRecordOutcome>> = {
  success: 'success',
  retry: 'retry',
  fail: 'fail',
  accepted: 'accepted',
};

/**
 * A run's attempts as an array of exactly their number: V8 grows an array pushed to from empty
 * to 17 slots, 136 bytes that a finished run would hold for as long as its history is kept.
 */
function appendAttempt(run: Run, attempt: Attempt): void {
  run.attempts = run.attempts.concat([attempt]);
}

/**
 * `node`, when known at creation (an at-least-once attempt, recorded with its result), is in the
 * literal: a property added later would cost the attempt an out-of-object property array.
 */
function newAttempt(attempt: number, token: number, startedAtMs: number, node?: string): Attempt {
  if (node === undefined)
    return {
      attempt,
      token,
      startedAtMs,
      outcome: undefined,
      statusCode: undefined,
      durationMs: undefined,
      error: undefined,
      responseExcerpt: undefined,
    };
  return {
    attempt,
    token,
    startedAtMs,
    outcome: undefined,
    statusCode: undefined,
    durationMs: undefined,
    error: undefined,
    responseExcerpt: undefined,
    node,
  };
}
