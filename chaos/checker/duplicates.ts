/**
 * Checks (c) and (d): more than one attempt of one slot reaching the sink.
 *
 * The sink's answer decides what the cluster could know. `5xx` and `stale` (409) are definite
 * failures: the sender saw them, so a retry is an ordinary attempt. `slow` was held, and the
 * sender may have given up first, so it is not definite either way. `2xx` is a definite success.
 *
 * (c) At-most-once: an attempt is a violation unless every earlier attempt of the slot was a
 *     definite failure (docs/chaos-checker.md, c). One violation per slot delivered twice.
 * (d) At-least-once: an attempt after one answered `2xx` is a duplicate. It is allowed only with
 *     the same fire id, a token higher than every earlier attempt of the slot, and a fault window
 *     [start − δ, end + R] overlapping [receipt of the 2xx − δ, receipt of the duplicate]. A
 *     graceful leader transfer drains first, so it excuses nothing. Allowed ones are counted.
 */
import type { DeliveryRecord, NemesisKind } from '../history/format.js';
import type { HistoryContext } from './context.js';
import { overlaps } from './context.js';
import type { ViolationLog } from './violations.js';

export interface DuplicateStats {
  readonly atMostOnceSlots: number;
  readonly atLeastOnceSlots: number;
  /** Attempts after a definite failure (ordinary retries). */
  readonly retries: number;
  readonly atLeastOnceDuplicatesAllowed: number;
}

/**
 * Faults that may cause an at-least-once duplicate. A graceful leader transfer does not, and
 * neither do replica moves, drains and rebalances: a leaving leader hands over the same way
 * (draining its deliveries first).
 */
export const DUPLICATE_EXCUSING_FAULTS: ReadonlySet<NemesisKind> = new Set([
  'kill',
  'pause',
  'partition',
  'latency',
  'bandwidth',
  'clock-bump',
  'clock-strobe',
  'clock-drift',
]);

function isDefiniteFailure(d: DeliveryRecord): boolean {
  return d.answer === '5xx' || d.answer === 'stale';
}

export function semanticsOf(ctx: HistoryContext, jobId: string): 'at_most_once' | 'at_least_once' {
  const defs = ctx.candidateDefinitions(jobId);
  // A job whose semantics changed by update is held to the weaker promise.
  return defs.length > 0 && defs.every((d) => d.delivery === 'at_most_once')
    ? 'at_most_once'
    : 'at_least_once';
}

export function checkDuplicates(
  ctx: HistoryContext,
  log: ViolationLog,
  excusing: ReadonlySet<NemesisKind> = DUPLICATE_EXCUSING_FAULTS,
): DuplicateStats {
  const stats = {
    atMostOnceSlots: 0,
    atLeastOnceSlots: 0,
    retries: 0,
    atLeastOnceDuplicatesAllowed: 0,
  };
  const { inFlightSlackMs: delta, recoveryAllowanceMs: allowance } = ctx.tolerances;
  const windows = ctx.faults
    .filter((f) => excusing.has(f.kind))
    .map((f) => ({ from: f.startT - delta, to: f.endT + allowance }));
  for (const [jobId, deliveries] of ctx.deliveriesByJob) {
    const semantics = semanticsOf(ctx, jobId);
    const bySlot = new Map<number, DeliveryRecord[]>();
    for (const d of deliveries) {
      const list = bySlot.get(d.slotMs);
      if (list) list.push(d);
      else bySlot.set(d.slotMs, [d]);
    }
    for (const [slotMs, attempts] of bySlot) {
      if (semantics === 'at_most_once') {
        stats.atMostOnceSlots++;
        const second = attempts.findIndex(
          (_a, i) => i > 0 && !attempts.slice(0, i).every(isDefiniteFailure),
        );
        stats.retries += (second === -1 ? attempts.length : second) - 1;
        if (second !== -1) {
          const a = attempts[second]!;
          log.add({
            kind: 'at-most-once-duplicate',
            jobId,
            slotMs,
            fireId: a.fireId,
            t: a.t,
            message: `attempt ${a.attempt} (token ${a.token}) reached the sink after ${attempts
              .slice(0, second)
              .map((p) => `attempt ${p.attempt} answered ${p.answer}`)
              .join(', ')}`,
          });
        }
        continue;
      }
      stats.atLeastOnceSlots++;
      let success: DeliveryRecord | undefined;
      let maxToken = -Infinity;
      for (const a of attempts) {
        if (success === undefined) {
          if (a !== attempts[0]) stats.retries++;
        } else {
          const why = whyDuplicateNotAllowed(a, success, maxToken, windows, delta);
          if (why === undefined) stats.atLeastOnceDuplicatesAllowed++;
          else
            log.add({
              kind: 'at-least-once-duplicate',
              jobId,
              slotMs,
              fireId: a.fireId,
              t: a.t,
              message: `attempt ${a.attempt} (token ${a.token}) after attempt ${success.attempt} was answered 2xx: ${why}`,
            });
        }
        if (success === undefined && a.answer === '2xx') success = a;
        maxToken = Math.max(maxToken, a.token);
      }
    }
  }
  return stats;
}

function whyDuplicateNotAllowed(
  a: DeliveryRecord,
  success: DeliveryRecord,
  maxToken: number,
  windows: readonly { from: number; to: number }[],
  delta: number,
): string | undefined {
  if (a.fireId !== success.fireId) return `fire id ${a.fireId} differs from ${success.fireId}`;
  // An older leader's attempt that was already on its way when the leader was deposed (a pause,
  // a partition) may arrive after the new leader's success, with its lower token: that is what
  // fencing is for (docs/ARCHITECTURE.md, The failure table), so it is allowed when the sink
  // refused it, inside a fault window.
  if (!(a.token > maxToken) && a.answer !== 'stale')
    return `token not higher than ${maxToken}, the highest before it`;
  const span = { from: success.t - delta, to: a.t };
  if (!windows.some((w) => overlaps(w, span))) return 'no fault overlaps the time between them';
  return undefined;
}
