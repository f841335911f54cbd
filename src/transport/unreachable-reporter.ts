/**
 * Collects the groups whose messages to a peer were dropped and reports them at most once per
 * peer per interval. Raft only needs to learn "this follower is unreachable" once per round to
 * fall back to probing; a report per dropped message would cost more than the messages did.
 *
 * Reports always run from a timer, never inside the call that noted the drop: the runtime calls
 * send() while it owns a Ready, and RawNode refuses reportUnreachable() until it has advanced.
 */
import { SystemClock } from '../base/clock.js';
import type { NodeId } from '../raft/messages.js';

export type UnreachableReport = (to: NodeId, groupIds: number[]) => void;

export class UnreachableReporter {
  private readonly pending = new Map<NodeId, Set<number>>();
  private readonly lastReportMs = new Map<NodeId, number>();
  private readonly timers = new Map<NodeId, NodeJS.Timeout>();
  private closed = false;

  constructor(
    private readonly intervalMs: number,
    private readonly report: UnreachableReport | undefined,
  ) {}

  note(to: NodeId, groupIds: Iterable<number>): void {
    if (this.closed || this.report === undefined) return;
    let set = this.pending.get(to);
    if (set === undefined) {
      set = new Set();
      this.pending.set(to, set);
    }
    for (const g of groupIds) set.add(g);
    if (set.size === 0 || this.timers.has(to)) return;
    const last = this.lastReportMs.get(to);
    const now = SystemClock.monotonicMs();
    const delayMs = last === undefined ? 0 : Math.max(0, last + this.intervalMs - now);
    const timer = setTimeout(() => this.flush(to), delayMs);
    timer.unref();
    this.timers.set(to, timer);
  }

  close(): void {
    this.closed = true;
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    this.pending.clear();
  }

  private flush(to: NodeId): void {
    this.timers.delete(to);
    const set = this.pending.get(to);
    this.pending.delete(to);
    if (this.closed || set === undefined || set.size === 0 || this.report === undefined) return;
    this.lastReportMs.set(to, SystemClock.monotonicMs());
    this.report(
      to,
      [...set].sort((a, b) => a - b),
    );
  }
}
