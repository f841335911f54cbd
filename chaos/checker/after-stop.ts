/**
 * Check (e): no delivery starts after an acknowledged cancel or pause (docs/chaos-checker.md, e).
 *
 * A delete (or bulk cancel) or a pause (or bulk pause) that returned ok at driver time `ack`
 * forbids every attempt of the job received after ack + δ, unless something may have restarted
 * the job before the receipt: a resume (for a pause) or a create (either), not known to have
 * failed, invoked before the receipt and not known to have finished before the stop was invoked
 * (so it may have taken effect after the stop). Refused (stale-token) attempts count too: they
 * were sent.
 */
import type { DeliveryRecord } from '../history/format.js';
import type { HistoryContext, Op } from './context.js';
import type { ViolationLog } from './violations.js';

export interface AfterStopStats {
  readonly acknowledgedPauses: number;
  readonly acknowledgedCancels: number;
}

const STOPS = {
  pause: new Set(['pause', 'bulk-pause']),
  cancel: new Set(['delete', 'bulk-cancel']),
};
const RESTARTS = {
  pause: new Set(['resume', 'bulk-resume', 'create']),
  cancel: new Set(['create']),
};

export function checkAfterStop(ctx: HistoryContext, log: ViolationLog): AfterStopStats {
  let pauses = 0;
  let cancels = 0;
  const delta = ctx.tolerances.inFlightSlackMs;
  for (const jobId of ctx.jobIds) {
    const actions = ctx.actionsOn(jobId);
    const deliveries = ctx.deliveriesByJob.get(jobId) ?? [];
    for (const kind of ['pause', 'cancel'] as const) {
      const stops = actions.filter((op) => STOPS[kind].has(op.f) && op.outcome === 'ok');
      const restarts = actions.filter((op) => RESTARTS[kind].has(op.f) && op.outcome !== 'fail');
      if (kind === 'pause') pauses += stops.length;
      else cancels += stops.length;
      for (const d of deliveries) {
        const stop = stops.find(
          (s) => s.completeT + delta < d.t && !restartedBefore(s, restarts, d),
        );
        if (stop === undefined) continue;
        log.add({
          kind: kind === 'pause' ? 'delivery-after-pause' : 'delivery-after-cancel',
          jobId,
          slotMs: d.slotMs,
          fireId: d.fireId,
          t: d.t,
          message: `attempt ${d.attempt} received at ${d.t.toFixed(0)} ms, ${(d.t - stop.completeT).toFixed(0)} ms after the ${stop.f} (op ${stop.opId}) was acknowledged`,
        });
      }
    }
  }
  return { acknowledgedPauses: pauses, acknowledgedCancels: cancels };
}

function restartedBefore(stop: Op, restarts: readonly Op[], d: DeliveryRecord): boolean {
  return restarts.some((r) => r.invokeT < d.t && r.completeT > stop.invokeT);
}
