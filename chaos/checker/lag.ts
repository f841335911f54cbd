/**
 * Checks (h) and (i): how late slots fire, and how long after each fault they fire on time again.
 *
 * Lag is receipt − slot of the first attempt of each slot, split by whether the slot fell inside
 * a fault window [start − δ, end + R]. Outside every window the steady-state bound holds: an owed
 * slot's first attempt arrives within [slot − earlyTolerance, slot + L], else `slot-off-time`.
 * Jobs with a buffer_* overlap policy are exempt from the bound (buffering delays by design), and
 * so are slots the job did not certainly owe (around pauses, uncertain updates); both are still
 * measured.
 *
 * Recovery after a fault that ended at E: among the owed slots due from E until the next fault
 * starts (or the horizon), the first on-time slot after the last late one (a slot with neither a
 * delivery nor a run record counts as late); recovery = that slot − E, 0 when none was late, and
 * null when the stretch ended still late.
 */
import type { EpochMs } from '../history/format.js';
import type { Fault, HistoryContext } from './context.js';
import type { OwedSlots } from './schedule-slots.js';
import type { ViolationLog } from './violations.js';

export interface LagSummary {
  readonly count: number;
  readonly p50Ms: number | null;
  readonly p99Ms: number | null;
  readonly maxMs: number | null;
}

export interface FaultRecovery {
  readonly faultId: string;
  readonly kind: Fault['kind'];
  readonly startT: number;
  readonly endT: number;
  /** Owed slots between the fault's end and the next fault (or the horizon). */
  readonly slots: number;
  readonly lateSlots: number;
  /** null: still late when the stretch ended, or the fault never ended. */
  readonly recoveryMs: number | null;
}

export interface LagStats {
  readonly insideFaults: LagSummary;
  readonly outsideFaults: LagSummary;
  readonly recovery: readonly FaultRecovery[];
}

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted: readonly number[], p: number): number | null {
  if (sorted.length === 0) return null;
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[rank - 1]!;
}

function summarize(lags: number[]): LagSummary {
  lags.sort((a, b) => a - b);
  return {
    count: lags.length,
    p50Ms: percentile(lags, 50),
    p99Ms: percentile(lags, 99),
    maxMs: lags.length > 0 ? lags[lags.length - 1]! : null,
  };
}

/** The receipt time of the first attempt of each slot, per job. */
function firstAttempts(ctx: HistoryContext): Map<string, Map<EpochMs, number>> {
  const out = new Map<string, Map<EpochMs, number>>();
  for (const [jobId, deliveries] of ctx.deliveriesByJob) {
    const bySlot = new Map<EpochMs, number>();
    for (const d of deliveries) if (!bySlot.has(d.slotMs)) bySlot.set(d.slotMs, d.t);
    out.set(jobId, bySlot);
  }
  return out;
}

function isBuffered(ctx: HistoryContext, jobId: string): boolean {
  return ctx
    .candidateDefinitions(jobId)
    .some((d) => d.overlap?.policy === 'buffer_one' || d.overlap?.policy === 'buffer_all');
}

export function checkLag(
  ctx: HistoryContext,
  owed: ReadonlyMap<string, OwedSlots>,
  log: ViolationLog,
): LagStats {
  const { lagBoundMs: bound, earlyToleranceMs: early } = ctx.tolerances;
  const firsts = firstAttempts(ctx);
  const inside: number[] = [];
  const outside: number[] = [];
  for (const [jobId, bySlot] of firsts) {
    const owedSet = new Set(owed.get(jobId)?.slots ?? []);
    const exempt = isBuffered(ctx, jobId);
    for (const [slotMs, receiptT] of bySlot) {
      const sT = ctx.tOf(slotMs);
      const lag = receiptT - sT;
      const inWindow = ctx.degradedAt(sT) !== undefined;
      (inWindow ? inside : outside).push(lag);
      if (inWindow || exempt || !owedSet.has(slotMs)) continue;
      if (lag > bound || lag < -early)
        log.add({
          kind: 'slot-off-time',
          jobId,
          slotMs,
          fireId: ctx.fireIdOf(jobId, slotMs),
          t: receiptT,
          message: `first attempt ${lag.toFixed(0)} ms ${lag < 0 ? 'early' : 'late'}, outside every fault window (bound ${lag < 0 ? `-${early}` : bound} ms)`,
        });
    }
  }
  return {
    insideFaults: summarize(inside),
    outsideFaults: summarize(outside),
    recovery: ctx.faults.map((f) => recoveryAfter(ctx, f, owed, firsts)),
  };
}

function recoveryAfter(
  ctx: HistoryContext,
  fault: Fault,
  owed: ReadonlyMap<string, OwedSlots>,
  firsts: ReadonlyMap<string, ReadonlyMap<EpochMs, number>>,
): FaultRecovery {
  const base = { faultId: fault.faultId, kind: fault.kind, startT: fault.startT, endT: fault.endT };
  if (!Number.isFinite(fault.endT)) return { ...base, slots: 0, lateSlots: 0, recoveryMs: null };
  const nextStart = ctx.faults.reduce(
    (m, f) => (f.startT > fault.endT ? Math.min(m, f.startT) : m),
    ctx.horizonT,
  );
  const { lagBoundMs: bound } = ctx.tolerances;
  const span: { sT: number; late: boolean }[] = [];
  for (const [jobId, o] of owed) {
    if (isBuffered(ctx, jobId)) continue;
    const bySlot = firsts.get(jobId);
    const records = ctx.runRecordsOf(jobId);
    for (const slotMs of o.slots) {
      const sT = ctx.tOf(slotMs);
      if (sT < fault.endT || sT >= nextStart) continue;
      const receiptT = bySlot?.get(slotMs);
      if (receiptT === undefined) {
        // A slot recorded as not fired (by a policy check (b) judges) says nothing of timeliness.
        if (!records.has(slotMs)) span.push({ sT, late: true });
        continue;
      }
      span.push({ sT, late: receiptT - sT > bound });
    }
  }
  span.sort((a, b) => a.sT - b.sT);
  let lastLate = -1;
  span.forEach((s, i) => {
    if (s.late) lastLate = i;
  });
  const lateSlots = span.filter((s) => s.late).length;
  let recoveryMs: number | null = 0;
  if (lastLate === span.length - 1 && lastLate >= 0) recoveryMs = null;
  else if (lastLate >= 0) recoveryMs = Math.max(0, span[lastLate + 1]!.sT - fault.endT);
  return { ...base, slots: span.length, lateSlots, recoveryMs };
}
