/**
 * Check (b): every slot a job owed ended in a run, and every slot that did not fire was recorded
 * for a reason its own policies allow. Never silent.
 *
 * A slot is accounted for by a delivery the sink received, or by a run record in any read of the
 * job's runs (list-runs during the run, the final read). A slot with neither is a violation only
 * if some read should have shown it: one made after the slot was due (plus L, or after the end of
 * the fault window around it) and reaching back that far (runs beyond the cluster's retention are
 * dropped, oldest first; DEAD runs stay until replayed, so they do not mark the reach). Otherwise it is counted as unobserved: the driver should read runs
 * often enough to keep that count near zero.
 *
 * Records that say a slot did not fire are checked against the job's policies:
 * - MISSED: only inside a fault window, with the reason of a misfire policy the job had
 *   (skip_policy ↔ skip, coalesced ↔ fire_once, fire_all_cap ↔ fire_all; outside_catch_up_window
 *   under any policy);
 * - SKIPPED `paused`: only when an order consistent with the history had the job paused around
 *   the slot; `run_in_flight` only under overlap skip; `buffer_full` only under buffer_one/all;
 * - CANCELLED: only if a delete (or bulk cancel) was issued, or, with the reason
 *   `superseded by update to version N`, an update (the new definition owns the slot's time);
 * - UNKNOWN: only for an at-most-once job.
 */
import { formatInstant } from '../../src/schedule/civil.js';
import type { EpochMs, JobDefinition, RunRead } from '../history/format.js';
import type { HistoryContext, RunsReadAt } from './context.js';
import { overlaps } from './context.js';
import type { JobSegment } from './job-timeline.js';
import { owedSlots, type OwedSlots } from './schedule-slots.js';
import type { ViolationLog } from './violations.js';

export interface SlotStats {
  readonly jobsChecked: number;
  /** Jobs whose slots could not be computed, with the reason. */
  readonly jobsUncheckable: readonly { readonly jobId: string; readonly reason: string }[];
  readonly slotsOwed: number;
  readonly slotsDelivered: number;
  /** Owed slots shown only by a run record, by status. */
  readonly slotsRecordedOnly: Readonly<Record<string, number>>;
  readonly slotsUnobserved: number;
  readonly runRecordsChecked: number;
}

const TERMINAL = new Set(['SUCCEEDED', 'DEAD', 'CANCELLED', 'SKIPPED', 'MISSED', 'UNKNOWN']);

const MISSED_REASON_POLICY: Readonly<Record<string, string>> = {
  skip_policy: 'skip',
  coalesced: 'fire_once',
  fire_all_cap: 'fire_all',
};

/** Whether a read made at `read.t` would show a run of slot `slotMs` if one existed. */
function readCovers(ctx: HistoryContext, r: RunsReadAt, slotMs: EpochMs): boolean {
  const sT = ctx.tOf(slotMs);
  const window = ctx.degradedAt(sT);
  const matureT = Math.max(sT + ctx.tolerances.lagBoundMs, window?.to ?? -Infinity);
  if (r.t < matureT) return false;
  if (r.read.complete && r.read.runs.length < ctx.tolerances.runsRetainedMax) return true;
  // The oldest run the history bound could have dropped marks how far back the read reaches.
  // DEAD runs stay in the dead-letter queue past that bound, so an old one says nothing.
  let oldest = Infinity;
  for (const run of r.read.runs)
    if (TERMINAL.has(run.status) && run.status !== 'DEAD') oldest = Math.min(oldest, run.slotMs);
  return oldest <= slotMs;
}

export function checkSlots(
  ctx: HistoryContext,
  owedByJob: ReadonlyMap<string, OwedSlots>,
  log: ViolationLog,
): SlotStats {
  let slotsOwed = 0;
  let slotsDelivered = 0;
  let slotsUnobserved = 0;
  let runRecordsChecked = 0;
  const recordedOnly: Record<string, number> = {};
  const uncheckable: { jobId: string; reason: string }[] = [];
  let jobsChecked = 0;
  for (const jobId of ctx.jobIds) {
    const owed = owedByJob.get(jobId) ?? owedSlots(ctx, jobId);
    if (owed.uncheckable !== undefined) uncheckable.push({ jobId, reason: owed.uncheckable });
    if (owed.slots.length > 0) jobsChecked++;
    const delivered = new Set((ctx.deliveriesByJob.get(jobId) ?? []).map((d) => d.slotMs));
    const records = ctx.runRecordsOf(jobId);
    const reads = ctx.runsReadsOf(jobId);
    for (const slotMs of owed.slots) {
      slotsOwed++;
      if (delivered.has(slotMs)) {
        slotsDelivered++;
        continue;
      }
      const seen = records.get(slotMs);
      if (seen && seen.length > 0) {
        const status = seen[seen.length - 1]!.status;
        recordedOnly[status] = (recordedOnly[status] ?? 0) + 1;
        continue;
      }
      if (reads.some((r) => readCovers(ctx, r, slotMs))) {
        log.add({
          kind: 'slot-without-run',
          jobId,
          slotMs,
          fireId: ctx.fireIdOf(jobId, slotMs),
          t: ctx.tOf(slotMs),
          message: `slot ${formatInstant(slotMs)} was owed, never delivered and absent from every later read of the job's runs`,
        });
      } else {
        slotsUnobserved++;
      }
    }
    runRecordsChecked += checkRecordReasons(ctx, jobId, owed.segments, records, log);
  }
  return {
    jobsChecked,
    jobsUncheckable: uncheckable,
    slotsOwed,
    slotsDelivered,
    slotsRecordedOnly: recordedOnly,
    slotsUnobserved,
    runRecordsChecked,
  };
}

function checkRecordReasons(
  ctx: HistoryContext,
  jobId: string,
  segments: readonly JobSegment[],
  records: ReadonlyMap<EpochMs, readonly RunRead[]>,
  log: ViolationLog,
): number {
  const defs = ctx.candidateDefinitions(jobId);
  const deleteIssued = ctx
    .actionsOn(jobId)
    .some((op) => (op.f === 'delete' || op.f === 'bulk-cancel') && op.outcome !== 'fail');
  const updateIssued = ctx
    .actionsOn(jobId)
    .some((op) => op.f === 'update' && op.outcome !== 'fail');
  let checked = 0;
  for (const [slotMs, runs] of records) {
    const reported = new Set<string>();
    for (const run of runs) {
      checked++;
      const why = whyNotAllowed(ctx, run, defs, segments, deleteIssued, updateIssued);
      const key = `${run.status}/${run.reason ?? ''}`;
      if (why === undefined || reported.has(key)) continue;
      reported.add(key);
      log.add({
        kind: 'slot-skipped-beyond-policy',
        jobId,
        slotMs,
        fireId: ctx.fireIdOf(jobId, slotMs),
        t: ctx.tOf(slotMs),
        message: `run ${run.status} (${run.reason ?? 'no reason'}): ${why}`,
      });
    }
  }
  return checked;
}

/** Undefined when the record is allowed; otherwise why not. */
function whyNotAllowed(
  ctx: HistoryContext,
  run: RunRead,
  defs: readonly JobDefinition[],
  segments: readonly JobSegment[],
  deleteIssued: boolean,
  updateIssued: boolean,
): string | undefined {
  const sT = ctx.tOf(run.slotMs);
  const { lookAheadMs, inFlightSlackMs } = ctx.tolerances;
  switch (run.status) {
    case 'MISSED': {
      const reason = run.reason ?? '';
      const policy = MISSED_REASON_POLICY[reason];
      const policies = defs.map((d) => d.misfire?.policy ?? 'fire_once');
      if (
        reason !== 'outside_catch_up_window' &&
        (policy === undefined || !policies.includes(policy as never))
      )
        return `the job's misfire policy (${[...new Set(policies)].join(' or ')}) never gives this reason`;
      if (ctx.degradedAt(sT) === undefined) return 'the slot was due outside every fault window';
      return undefined;
    }
    case 'SKIPPED': {
      const overlap = defs.map((d) => d.overlap?.policy ?? 'allow');
      if (run.reason === 'paused') {
        const window = {
          from: sT - lookAheadMs - inFlightSlackMs,
          to: Math.max(sT, ctx.degradedAt(sT)?.to ?? -Infinity) + inFlightSlackMs,
        };
        return segments.some((s) => s.maybePaused && overlaps(s, window))
          ? undefined
          : 'the job was certainly not paused around the slot';
      }
      if (run.reason === 'run_in_flight')
        return overlap.includes('skip')
          ? undefined
          : `overlap policy ${overlap.join('/')} never skips a slot for a run in flight`;
      if (run.reason === 'buffer_full')
        return overlap.includes('buffer_one') || overlap.includes('buffer_all')
          ? undefined
          : `overlap policy ${overlap.join('/')} has no buffer`;
      return 'no policy gives this reason';
    }
    case 'CANCELLED':
      if (run.reason?.startsWith('superseded by update to version '))
        return updateIssued ? undefined : 'no update of the job was issued';
      return deleteIssued ? undefined : 'no delete or bulk cancel of the job was issued';
    case 'UNKNOWN':
      return defs.some((d) => d.delivery === 'at_most_once')
        ? undefined
        : 'only an at-most-once run may end UNKNOWN';
    case 'SCHEDULED':
    case 'DISPATCHED':
    case 'RUNNING':
    case 'FAILED':
    case 'SUCCEEDED':
    case 'DEAD':
      return undefined;
  }
}
