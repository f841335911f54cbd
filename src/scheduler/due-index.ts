/**
 * Derived state kept on every replica (docs/ARCHITECTURE.md, The firing protocol), so that a new
 * leader starts at once:
 * - the planning wheel: each job with a next slot, due `lookAheadMs` before that slot;
 * - the dispatch wheel: each SCHEDULED run of a job that is not paused, due at its dueAtMs
 *   (its slot, or its retry time).
 * The dispatch wheel is a TimingWheel: far slots sit in its ordered index until the horizon
 * reaches them. The planning side holds only the jobs due within the horizon and finds the
 * others in the job table as the horizon reaches them (PlanningIndex).
 * The index follows the state machine through takeTouched(), so an apply costs O(touched).
 */
import type { JobTable } from './job-table.js';
import { isWaitingForUpstream } from './model.js';
import { PlanningIndex } from './planning-index.js';
import type { SchedulerStateMachine, Touched } from './state-machine.js';
import { TimingWheel } from './timing-wheel.js';

export interface DueIndexOptions {
  readonly lookAheadMs: number;
  /** Time the wheels start at (the runtime's clock when the replica is created). */
  readonly startMs: number;
  readonly tickMs?: number;
  /** PlanningIndexOptions.scanPhaseMs. */
  readonly scanPhaseMs?: number;
}

export class DueIndex {
  readonly planning: PlanningIndex;
  readonly dispatch: TimingWheel;

  /** `jobs` is the table of the state machine the index follows. */
  constructor(
    readonly options: DueIndexOptions,
    jobs: JobTable,
  ) {
    const wheel = { startMs: options.startMs, tickMs: options.tickMs ?? 10 };
    this.planning = new PlanningIndex(
      {
        ...wheel,
        lookAheadMs: options.lookAheadMs,
        ...(options.scanPhaseMs !== undefined && { scanPhaseMs: options.scanPhaseMs }),
      },
      jobs,
    );
    this.dispatch = new TimingWheel(wheel);
  }

  /**
   * When this replica's applied state next asks its leader to act: the earliest planning time
   * (a job's next slot minus the look-ahead) or SCHEDULED run's due time; undefined when
   * nothing is due ever. O(jobs + runs): for a quiet group, whose state does not change.
   */
  nextDueMs(jobs: JobTable): number | undefined {
    const slot = jobs.earliestNextFire();
    const planAt = slot === undefined ? undefined : slot - this.options.lookAheadMs;
    const runAt = this.dispatch.nextDueMs();
    if (planAt === undefined) return runAt;
    return runAt === undefined ? planAt : Math.min(planAt, runAt);
  }

  /** Brings both wheels up to date with what the state machine changed. */
  sync(sm: SchedulerStateMachine): void {
    const { created, jobs, runs, restored } = sm.takeTouched();
    if (restored) {
      this.planning.reload();
      this.syncRestoredRuns(sm);
      return;
    }
    this.syncCreated(created);
    this.syncJobs(sm, jobs);
    this.syncRuns(sm, runs);
  }

  /** Plans jobs just created (no index held an entry for them): no lookup per job. */
  syncCreated(created: Touched['created']): void {
    const { ids, nextMs } = created;
    for (let i = 0; i < ids.length; i++) this.planning.scheduleNew(ids[i]!, nextMs[i]!);
  }

  /**
   * Re-derives the planning entry of each job from applied state; the ids of jobs no longer in
   * the table go to `missing` (the caller's next question, answered by the same lookup).
   */
  syncJobs(sm: SchedulerStateMachine, jobIds: Iterable<string>, missing?: string[]): void {
    for (const id of jobIds) {
      const next = sm.jobs.nextFireOrMissing(id);
      if (typeof next === 'number') {
        this.planning.schedule(id, next);
      } else {
        this.planning.cancel(id);
        if (next === null) missing?.push(id);
      }
    }
  }

  /**
   * After a restore: the dispatch wheel holds exactly the runs due in the restored state. Only
   * live runs can be due; what the wheel held of the state before is taken out unless still due.
   */
  syncRestoredRuns(sm: SchedulerStateMachine): void {
    this.syncRuns(sm, new Set([...this.dispatch.keys(), ...sm.runs.liveIds()]));
  }

  /** Re-derives the dispatch entry of each run from applied state. */
  syncRuns(sm: SchedulerStateMachine, fireIds: Iterable<string>): void {
    for (const fireId of fireIds) {
      const run = sm.runs.get(fireId);
      // A run waiting for its upstreams is not due yet: it enters the wheel once they settle
      // (the settling entry touches it).
      if (
        run?.status === 'SCHEDULED' &&
        sm.jobs.pausedOf(run.jobId) === false &&
        !isWaitingForUpstream(run)
      )
        this.dispatch.schedule(fireId, run.dueAtMs);
      else this.dispatch.cancel(fireId);
    }
  }
}
