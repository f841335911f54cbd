/**
 * The fencing rule `term` of the chaos run's receivers (the sink and the worker;
 * docs/ARCHITECTURE.md, Words), per job: a token of an older leader term than the newest accepted
 * is stale, and so is a token already accepted (every attempt has its own token). Two runs of one
 * term may arrive in either order, which a plain "higher token" rule would refuse though nothing is
 * wrong.
 */
import { termOfToken } from '../src/scheduler/dispatcher.js';

export class TermFence {
  private readonly jobs = new Map<string, { maxTerm: number; readonly tokens: Set<number> }>();

  /** Whether `token` may act for `jobId`; an admitted token is remembered. */
  admit(jobId: string, token: number): boolean {
    let fence = this.jobs.get(jobId);
    if (fence === undefined) {
      fence = { maxTerm: 0, tokens: new Set() };
      this.jobs.set(jobId, fence);
    }
    const term = termOfToken(token);
    if (!Number.isSafeInteger(token) || term < fence.maxTerm || fence.tokens.has(token)) {
      return false;
    }
    fence.maxTerm = term;
    fence.tokens.add(token);
    return true;
  }
}
