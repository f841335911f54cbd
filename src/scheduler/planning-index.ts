/**
 * The planning side of the due index: each job with a next slot is due `lookAheadMs` before
 * that slot. Only the jobs due within the timing wheel's horizon (about 41 s) are held, in the
 * wheel; the rest stay where they already are, in the job table's next-slot column, and a scan
 * of that column moves the ones coming into the horizon into the wheel, every half horizon.
 * A job costs no entry here until its slot is near: at a million far-off jobs (yearly crons,
 * one-offs next month) that is what keeps the derived index from costing as much memory as the
 * jobs themselves. A scan reads one number per job, every ~20 s.
 *
 * The invariant: every job due before `scannedToMs` is in the wheel (or was handed out by
 * advance() and not yet re-derived); every job due from `scannedToMs` on is found by a later
 * scan. Pure: time is what advance() is given.
 */
import type { JobTable } from './job-table.js';
import { TimingWheel } from './timing-wheel.js';

export interface PlanningIndexOptions {
  readonly lookAheadMs: number;
  readonly startMs: number;
  readonly tickMs?: number;
  readonly bucketCount?: number;
  /**
   * How much shorter the first scan's window is (0 up to half the horizon): groups of one node
   * given different phases scan at different times rather than all in the same step. @default 0
   */
  readonly scanPhaseMs?: number;
}

export class PlanningIndex {
  private readonly wheel: TimingWheel;
  private readonly lookAheadMs: number;
  private readonly spanMs: number;
  /** Jobs due before this are in the wheel; from it on, in the column until a scan. */
  private scannedToMs: number;
  /** Taken off the first scan's window only (see scanPhaseMs). */
  private phaseMs: number;

  constructor(
    options: PlanningIndexOptions,
    private readonly jobs: JobTable,
  ) {
    this.wheel = new TimingWheel({
      startMs: options.startMs,
      ...(options.tickMs !== undefined && { tickMs: options.tickMs }),
      ...(options.bucketCount !== undefined && { bucketCount: options.bucketCount }),
    });
    this.lookAheadMs = options.lookAheadMs;
    this.spanMs = this.wheel.tickMs * this.wheel.bucketCount;
    this.scannedToMs = Math.floor(options.startMs / this.wheel.tickMs) * this.wheel.tickMs;
    const phase = options.scanPhaseMs ?? 0;
    this.phaseMs = Math.max(
      0,
      Math.min(this.spanMs / 2, Math.floor(phase / this.wheel.tickMs) * this.wheel.tickMs),
    );
  }

  /** Jobs with a next slot (those the leader took out to plan included). */
  get size(): number {
    return this.jobs.withNextFireCount;
  }

  /** Jobs in the wheel: due within its horizon. */
  get wheelSize(): number {
    return this.wheel.size;
  }

  /** Whether the job waits here to be planned (false once advance() handed it out). */
  has(id: string): boolean {
    return this.dueAt(id) !== undefined;
  }

  /** When the job is due for planning, while it waits here. */
  dueAt(id: string): number | undefined {
    const inWheel = this.wheel.dueAt(id);
    if (inWheel !== undefined) return inWheel;
    const next = this.jobs.nextFireOrMissing(id);
    if (typeof next !== 'number') return undefined;
    const due = next - this.lookAheadMs;
    return due >= this.scannedToMs ? due : undefined;
  }

  /** schedule() for a job the index holds no entry for (just created): no lookup when far. */
  scheduleNew(id: string, nextFireAtMs: number): void {
    const due = nextFireAtMs - this.lookAheadMs;
    if (due < this.scannedToMs) this.wheel.schedule(id, due);
  }

  /** The job's next slot is `nextFireAtMs` (from applied state). */
  schedule(id: string, nextFireAtMs: number): void {
    const due = nextFireAtMs - this.lookAheadMs;
    if (due < this.scannedToMs) this.wheel.schedule(id, due);
    // Due later: a scan brings it into the wheel; an earlier entry of the job is out of date.
    else this.wheel.cancel(id);
  }

  /**
   * Holds exactly the jobs of the table due before the scanned horizon, whatever it held before
   * (a restore replaced the table): one pass over the next-slot column, with no lookup of a job
   * by its id, where schedule() for every job costs two.
   */
  reload(): void {
    this.wheel.clear();
    this.scanIntoWheel(-Infinity, this.scannedToMs);
  }

  /** Puts in the wheel every job of the table due for planning in [fromMs, toMs). */
  private scanIntoWheel(fromMs: number, toMs: number): void {
    const look = this.lookAheadMs;
    this.jobs.scanNextFire(fromMs + look, toMs + look, (id, next) =>
      this.wheel.schedule(id, next - look),
    );
  }

  /** The job has no next slot any more, or is gone. */
  cancel(id: string): void {
    this.wheel.cancel(id);
  }

  /** Every job due at or before `nowMs`, in (due, id) order, handed out once each. */
  advance(nowMs: number): { key: string; dueMs: number }[] {
    if (nowMs + this.spanMs / 2 >= this.scannedToMs) {
      const toMs = Math.max(
        this.scannedToMs,
        Math.floor(nowMs / this.wheel.tickMs) * this.wheel.tickMs + this.spanMs - this.phaseMs,
      );
      this.phaseMs = 0;
      this.scanIntoWheel(this.scannedToMs, toMs);
      this.scannedToMs = toMs;
    }
    return this.wheel.advance(nowMs);
  }
}
