/**
 * Check (a): no acknowledged job lost, no phantom job (docs/chaos-checker.md, a).
 *
 * - Lost: a create returned ok, no delete or bulk cancel that may have followed it was issued
 *   (one not known to have failed and not known to have finished before the create began), and
 *   the final read found no job. Also lost: a job whose creates all had unknown outcomes, that
 *   fired (so it existed), was never deleted, and is absent at the end.
 * - Phantom: a delivery for a job no create of which may have succeeded (every create failed
 *   definitely, or none was issued).
 * A job with no final read cannot be judged lost; it is counted as unread.
 */
import type { HistoryContext } from './context.js';
import type { ViolationLog } from './violations.js';

export interface JobsLostStats {
  readonly jobsAcknowledged: number;
  readonly jobsPresentAtEnd: number;
  /** Acknowledged, never deleted, and not read at the end. */
  readonly jobsUnread: number;
}

export function checkJobsLost(ctx: HistoryContext, log: ViolationLog): JobsLostStats {
  let acknowledged = 0;
  let present = 0;
  let unread = 0;
  for (const jobId of ctx.jobIds) {
    const actions = ctx.actionsOn(jobId);
    const creates = actions.filter((op) => op.f === 'create' && op.outcome !== 'fail');
    const okCreate = creates.find((op) => op.outcome === 'ok');
    const deliveries = ctx.deliveriesByJob.get(jobId) ?? [];
    const final = ctx.finals.get(jobId);
    if (final?.job) present++;
    if (creates.length === 0) {
      if (deliveries.length > 0) {
        const d = deliveries[0]!;
        log.add({
          kind: 'phantom-job',
          jobId,
          slotMs: d.slotMs,
          fireId: d.fireId,
          t: d.t,
          message: `${deliveries.length} deliveries for a job no create of which can have succeeded`,
        });
      }
      continue;
    }
    if (okCreate) acknowledged++;
    const firstCreateT = Math.min(...creates.map((op) => op.invokeT));
    const deleted = actions.some(
      (op) =>
        (op.f === 'delete' || op.f === 'bulk-cancel') &&
        op.outcome !== 'fail' &&
        op.completeT > firstCreateT,
    );
    if (deleted || (okCreate === undefined && deliveries.length === 0)) continue;
    if (final === undefined) {
      unread++;
      continue;
    }
    if (final.job !== null) continue;
    log.add({
      kind: 'job-lost',
      jobId,
      t: final.t,
      message: okCreate
        ? `created (op ${okCreate.opId} ok at ${okCreate.completeT.toFixed(0)} ms), never deleted, absent from the final read`
        : `create outcome unknown, but the job fired ${deliveries.length} times; never deleted, absent from the final read`,
    });
  }
  return { jobsAcknowledged: acknowledged, jobsPresentAtEnd: present, jobsUnread: unread };
}
