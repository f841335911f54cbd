/**
 * The status a run shows to users (API, tickctl, WatchRuns), derived from its replicated status
 * and from whether its group's leader has an attempt of it in flight: an at-least-once send
 * reaches the log only with its result, so applied state alone cannot say RUNNING for it.
 *
 * SCHEDULED → RUNNING (sent, leased, or accepted by its receiver to complete later) → SUCCEEDED;
 * or FAILED (the attempt failed; tried again at its due time) → RUNNING → …; or DEAD (out of
 * attempts, too old, or a failure not to retry). MISSED, SKIPPED, CANCELLED and UNKNOWN as the
 * replicated statuses say (model.ts).
 */
import { isLostAttempt, type Run } from './model.js';

export const RUN_VIEW_STATUSES = [
  'SCHEDULED',
  'RUNNING',
  'FAILED',
  'SUCCEEDED',
  'DEAD',
  'CANCELLED',
  'SKIPPED',
  'MISSED',
  'UNKNOWN',
] as const;

export type RunViewStatus = (typeof RUN_VIEW_STATUSES)[number];

/** What `run` shows; `inFlight`: its group's leader has an attempt of it in flight now. */
export function viewStatus(run: Run, inFlight: boolean): RunViewStatus {
  switch (run.status) {
    case 'DISPATCHED':
    case 'RUNNING':
      return 'RUNNING';
    case 'SCHEDULED': {
      if (inFlight) return 'RUNNING';
      const last = run.attempts[run.attempts.length - 1];
      // A lost attempt (an earlier leader may have sent it) says nothing of a failure.
      if (last !== undefined && !isLostAttempt(last) && last.outcome === 'retry') return 'FAILED';
      return 'SCHEDULED';
    }
    default:
      return run.status;
  }
}
