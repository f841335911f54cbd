/**
 * Turns the monotonic clock into Raft ticks: the only place that reads time for Raft. It counts
 * ticks from a fixed origin rather than counting timer callbacks, because timers drift (a
 * 10 ms interval fires late, never early) and a stalled process must see all elapsed ticks.
 */
import type { Clock } from '../base/clock.js';

export class Ticker {
  private readonly originMs: number;
  private ticksDone = 0;

  constructor(
    private readonly clock: Clock,
    readonly tickMs: number,
  ) {
    this.originMs = clock.monotonicMs();
  }

  /** Ticks elapsed and not yet handed out by due(): how far the Raft state lags the clock. */
  pending(): number {
    return Math.max(0, this.elapsed() - this.ticksDone);
  }

  /** Ticks elapsed since the origin, handed out or not: where a received message falls. */
  elapsed(): number {
    return Math.floor((this.clock.monotonicMs() - this.originMs) / this.tickMs);
  }

  /** Ticks handed out by due() so far: the end of the span the last due() covered. */
  get done(): number {
    return this.ticksDone;
  }

  /** Ticks elapsed since the previous call (0 when none). */
  due(): number {
    const total = this.elapsed();
    const n = total - this.ticksDone;
    this.ticksDone = total;
    return n > 0 ? n : 0;
  }
}
