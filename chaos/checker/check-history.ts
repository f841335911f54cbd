/**
 * The offline checker's entry point: every invariant of docs/chaos-checker.md over one history.
 * Pure: records in, report out; no clock, network or disk (chaos/check.ts reads the files).
 * The verdict is `violations` if any check found one, else `unknown` if a linearizability search
 * hit its step cap (not proven either way), else `ok`.
 */
import type { CheckOptions } from '../checkers/linearizability.js';
import type { HistoryRecord, NemesisKind } from '../history/format.js';
import { checkAfterStop, type AfterStopStats } from './after-stop.js';
import { HistoryContext, type CheckTolerances } from './context.js';
import { checkDuplicates, DUPLICATE_EXCUSING_FAULTS, type DuplicateStats } from './duplicates.js';
import { checkFencing, type FencingStats } from './fencing.js';
import { checkJobRegister, type RegisterStats } from './job-register.js';
import { checkJobsLost, type JobsLostStats } from './jobs-lost.js';
import { checkLag, type LagStats } from './lag.js';
import { owedSlots, type OwedSlots } from './schedule-slots.js';
import { checkSlots, type SlotStats } from './slots.js';
import { ViolationLog, type ViolationKind, type ViolationSummary } from './violations.js';

export interface CheckHistoryOptions {
  /** Examples kept per violation kind. @default 5 */
  readonly examplesMax?: number;
  /** Overrides of the tolerances (the meta record gives L, R, δ; these have defaults). */
  readonly endGraceMs?: number;
  readonly earlyToleranceMs?: number;
  /** Passed to the linearizability search; the default step cap keeps it deterministic. */
  readonly linearizability?: CheckOptions;
  /** Fault kinds that may excuse an at-least-once duplicate. */
  readonly duplicateExcusingFaults?: ReadonlySet<NemesisKind>;
}

export type Verdict = 'ok' | 'violations' | 'unknown';

export interface CheckReport {
  /** True only when the verdict is `ok`. */
  readonly ok: boolean;
  readonly verdict: Verdict;
  readonly seed: string;
  readonly counts: {
    readonly records: number;
    readonly operations: number;
    readonly deliveries: number;
    readonly jobs: number;
    readonly faults: number;
    readonly finalReads: number;
  };
  readonly tolerances: CheckTolerances;
  readonly violationCount: number;
  readonly violations: Record<ViolationKind, ViolationSummary>;
  readonly jobs: JobsLostStats;
  readonly slots: SlotStats;
  readonly duplicates: DuplicateStats;
  readonly afterStop: AfterStopStats;
  readonly register: RegisterStats;
  readonly fencing: FencingStats;
  readonly lag: LagStats;
}

/**
 * Checks a whole history (records from every file of the run, in any order).
 * @throws ValidationError CHAOS_INVALID_HISTORY when the history is malformed.
 */
export function checkHistory(
  records: readonly HistoryRecord[],
  options: CheckHistoryOptions = {},
): CheckReport {
  const tolerances: Partial<CheckTolerances> = {
    ...(options.endGraceMs !== undefined && { endGraceMs: options.endGraceMs }),
    ...(options.earlyToleranceMs !== undefined && { earlyToleranceMs: options.earlyToleranceMs }),
  };
  const ctx = new HistoryContext(records, tolerances);
  const log = new ViolationLog(options.examplesMax ?? 5);
  const owed = new Map<string, OwedSlots>(ctx.jobIds.map((id) => [id, owedSlots(ctx, id)]));

  const jobs = checkJobsLost(ctx, log);
  const slots = checkSlots(ctx, owed, log);
  const duplicates = checkDuplicates(
    ctx,
    log,
    options.duplicateExcusingFaults ?? DUPLICATE_EXCUSING_FAULTS,
  );
  const afterStop = checkAfterStop(ctx, log);
  const register = checkJobRegister(ctx, log, options.linearizability);
  const fencing = checkFencing(ctx, log);
  const lag = checkLag(ctx, owed, log);

  const verdict: Verdict =
    log.total > 0 ? 'violations' : register.unknownJobs.length > 0 ? 'unknown' : 'ok';
  return {
    ok: verdict === 'ok',
    verdict,
    seed: ctx.meta.seed,
    counts: {
      records: records.length,
      operations: ctx.ops.length,
      deliveries: ctx.deliveries.length,
      jobs: ctx.jobIds.length,
      faults: ctx.faults.length,
      finalReads: ctx.finals.size,
    },
    tolerances: ctx.tolerances,
    violationCount: log.total,
    violations: log.summary(),
    jobs,
    slots,
    duplicates,
    afterStop,
    register,
    fencing,
    lag,
  };
}
