/**
 * Operating errors a proposal or read can end with. Callers branch on `code`; `details` carries
 * what a client needs to act (the leader to retry against).
 */
import { TickraftError } from '../base/errors.js';
import type { NodeId } from './messages.js';

/** This replica is not the leader; retry at `leaderHint` (empty when unknown). */
export class NotLeaderError extends TickraftError {
  override readonly name = 'NotLeaderError';
  readonly leaderHint: NodeId;

  constructor(groupId: number, leaderHint: NodeId, reason = 'not the leader') {
    super(
      'RAFT_NOT_LEADER',
      `group ${groupId}: ${reason}${leaderHint ? `; leader is ${leaderHint}` : ''}`,
      {
        details: { groupId, leaderHint },
      },
    );
    this.leaderHint = leaderHint;
  }
}

/** Refused before it was appended: nothing happened, and it is safe to retry. */
export class ProposalDroppedError extends TickraftError {
  override readonly name = 'ProposalDroppedError';

  constructor(groupId: number, reason: string, detail?: string) {
    super(
      'RAFT_PROPOSAL_DROPPED',
      `group ${groupId}: proposal refused (${reason})${detail ? `: ${detail}` : ''}`,
      {
        details: { groupId, reason },
      },
    );
  }
}

/**
 * Appended, but leadership was lost (or the caller gave up) before it was known to commit: it
 * may or may not take effect. Retry only with an idempotent request.
 */
export class ProposalUnknownError extends TickraftError {
  override readonly name = 'ProposalUnknownError';

  constructor(groupId: number, reason: string) {
    super('RAFT_PROPOSAL_UNKNOWN', `group ${groupId}: outcome unknown (${reason})`, {
      details: { groupId, reason },
    });
  }
}

/** A ReadIndex request failed; no read was served. */
export class ReadFailedError extends TickraftError {
  override readonly name = 'ReadFailedError';

  constructor(groupId: number, reason: string, leaderHint: NodeId) {
    super('RAFT_READ_FAILED', `group ${groupId}: read failed (${reason})`, {
      details: { groupId, reason, leaderHint },
    });
  }
}
