/**
 * Check (g): fencing. Per job, in receipt order, every attempt the sink accepted must carry a
 * token the sink's rule accepts over every token accepted before it:
 * - rule `token`: higher than the highest accepted token;
 * - rule `term`: of a leader term (token / 2^24, docs/ARCHITECTURE.md, Words) not older than the
 *   highest accepted term, and never a token already accepted (each attempt has its own token).
 * An accepted attempt that breaks the rule is a stale delivery that reached the application.
 * Refusals are counted; a refusal the rule did not call for (a fresh token refused) is counted
 * apart: it points at the sink, not the cluster.
 */
import { termOfToken } from '../../src/scheduler/dispatcher.js';
import type { DeliveryRecord } from '../history/format.js';
import type { HistoryContext } from './context.js';
import type { ViolationLog } from './violations.js';

export interface FencingStats {
  readonly accepted: number;
  readonly refusedStale: number;
  readonly refusedFresh: number;
}

interface JobFence {
  maxToken: number;
  maxTerm: number;
  readonly tokens: Set<number>;
}

/** Why the rule refuses `d` given what was accepted before it; undefined if it accepts. */
function staleness(rule: 'token' | 'term', fence: JobFence, d: DeliveryRecord): string | undefined {
  if (rule === 'token')
    return d.token > fence.maxToken
      ? undefined
      : `token ${d.token} ≤ ${fence.maxToken}, the highest accepted`;
  if (fence.tokens.has(d.token)) return `token ${d.token} was already accepted`;
  const term = termOfToken(d.token);
  return term >= fence.maxTerm ? undefined : `term ${term} < ${fence.maxTerm}, the newest accepted`;
}

export function checkFencing(ctx: HistoryContext, log: ViolationLog): FencingStats {
  const rule = ctx.meta.sinkFencing;
  let accepted = 0;
  let refusedStale = 0;
  let refusedFresh = 0;
  for (const [jobId, deliveries] of ctx.deliveriesByJob) {
    const fence: JobFence = { maxToken: -Infinity, maxTerm: -Infinity, tokens: new Set() };
    for (const d of deliveries) {
      const why = staleness(rule, fence, d);
      if (d.answer === 'stale') {
        if (why === undefined) refusedFresh++;
        else refusedStale++;
        continue;
      }
      accepted++;
      if (why !== undefined)
        log.add({
          kind: 'fencing-stale-accepted',
          jobId,
          slotMs: d.slotMs,
          fireId: d.fireId,
          t: d.t,
          message: `attempt ${d.attempt} accepted (${d.answer}) with a stale token: ${why}`,
        });
      fence.maxToken = Math.max(fence.maxToken, d.token);
      fence.maxTerm = Math.max(fence.maxTerm, termOfToken(d.token));
      fence.tokens.add(d.token);
    }
  }
  return { accepted, refusedStale, refusedFresh };
}
