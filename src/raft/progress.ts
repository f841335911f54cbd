/**
 * What a leader knows about one peer's log, and how it sends to it:
 * - probe: unsure where the logs diverge; one append per heartbeat interval until one matches;
 * - replicate: logs agree up to `match`; appends are pipelined optimistically up to the
 *   inflight bound, `next` advanced as they are sent;
 * - snapshot: a snapshot is on its way; nothing else is sent until it lands or fails.
 */
import { Inflights } from './inflights.js';

export type ProgressState = 'probe' | 'replicate' | 'snapshot';

export class Progress {
  match = 0;
  next: number;
  state: ProgressState = 'probe';
  /** Index of the snapshot being sent, in state 'snapshot'. */
  pendingSnapshot = 0;
  /** Heard from since the last check-quorum round. */
  recentActive = false;
  /**
   * Appends are paused: in probe state after each send until an answer or a heartbeat
   * response; in replicate state while the inflight window is full. A heartbeat response
   * clears it, so one more append goes out even into a full window: if earlier appends were
   * lost, that one is rejected and the leader falls back to probing instead of waiting forever.
   */
  msgAppFlowPaused = false;
  /** Highest heartbeat round this peer acknowledged in the current term. */
  ackedRound = 0;
  readonly inflights: Inflights;
  isLearner: boolean;

  constructor(next: number, maxInflightMsgs: number, maxInflightBytes: number, isLearner: boolean) {
    this.next = next;
    this.inflights = new Inflights(maxInflightMsgs, maxInflightBytes);
    this.isLearner = isLearner;
  }

  private resetState(state: ProgressState): void {
    this.msgAppFlowPaused = false;
    this.pendingSnapshot = 0;
    this.state = state;
    this.inflights.reset();
  }

  becomeProbe(): void {
    // After a snapshot, the follower has at least the snapshot index.
    if (this.state === 'snapshot') {
      const pending = this.pendingSnapshot;
      this.resetState('probe');
      this.next = Math.max(this.match + 1, pending + 1);
    } else {
      this.resetState('probe');
      this.next = this.match + 1;
    }
  }

  becomeReplicate(): void {
    this.resetState('replicate');
    this.next = this.match + 1;
  }

  becomeSnapshot(snapshotIndex: number): void {
    this.resetState('snapshot');
    this.pendingSnapshot = snapshotIndex;
  }

  /**
   * An acknowledgement up to `index`. Returns whether match moved. Invariant: match never goes
   * back, so duplicated or reordered acknowledgements are harmless.
   */
  maybeUpdate(index: number): boolean {
    let updated = false;
    if (this.match < index) {
      this.match = index;
      updated = true;
      this.msgAppFlowPaused = false;
    }
    this.next = Math.max(this.next, index + 1);
    return updated;
  }

  /**
   * A rejection of the append whose previous index was `rejected`; `hint` is where the logs may
   * match. Returns false for a stale rejection that must be ignored.
   */
  maybeDecrTo(rejected: number, hint: number): boolean {
    if (this.state === 'replicate') {
      // Rejections at or below match are stale: that append was already acknowledged.
      if (rejected <= this.match) return false;
      this.next = this.match + 1;
      return true;
    }
    // In probe state only the answer to the outstanding probe (next - 1) counts.
    if (this.next - 1 !== rejected) return false;
    this.next = Math.max(Math.min(rejected, hint + 1), this.match + 1, 1);
    this.msgAppFlowPaused = false;
    return true;
  }

  /** Whether sending more appends must wait. */
  isPaused(): boolean {
    switch (this.state) {
      case 'probe':
      case 'replicate':
        return this.msgAppFlowPaused;
      case 'snapshot':
        return true;
    }
  }
}
