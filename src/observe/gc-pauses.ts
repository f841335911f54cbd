/**
 * The process's garbage-collection pauses, as V8 reports them to Node's performance timeline
 * (one `gc` entry per collection: a scavenge, or a mark-compact's final pause; the concurrent
 * marking threads' work is not a pause and is not in it). The last `capacity` pauses are kept
 * in a ring, so that a benchmark can ask for the pauses of a window ("since t") while the node
 * serves: the figure behind "GC pause p99 while firing".
 */
import { PerformanceObserver, performance } from 'node:perf_hooks';

export interface GcPauseSummary {
  /** Pauses that ended at or after the window's start and are still in the ring. */
  readonly count: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  readonly totalMs: number;
  /** The ring overflowed within the window: the summary covers only its newest pauses. */
  readonly truncated: boolean;
}

export class GcPauseRecorder {
  private readonly endsAtMs: Float64Array;
  private readonly durationsMs: Float64Array;
  private written = 0;
  private observer: PerformanceObserver | undefined;

  constructor(private readonly capacity = 65_536) {
    this.endsAtMs = new Float64Array(capacity);
    this.durationsMs = new Float64Array(capacity);
  }

  start(): void {
    if (this.observer) return;
    this.observer = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        const slot = this.written % this.capacity;
        this.endsAtMs[slot] = performance.timeOrigin + e.startTime + e.duration;
        this.durationsMs[slot] = e.duration;
        this.written++;
      }
    });
    this.observer.observe({ entryTypes: ['gc'] });
  }

  stop(): void {
    this.observer?.disconnect();
    this.observer = undefined;
  }

  /** The pauses that ended at or after `sinceMs` (wall clock, ms since the epoch). */
  summary(sinceMs: number): GcPauseSummary {
    const kept = Math.min(this.written, this.capacity);
    const window: number[] = [];
    for (let i = 0; i < kept; i++) {
      const slot = (this.written - 1 - i) % this.capacity;
      if (this.endsAtMs[slot]! < sinceMs) break;
      window.push(this.durationsMs[slot]!);
    }
    window.sort((a, b) => a - b);
    const at = (p: number): number =>
      window.length === 0 ? 0 : window[Math.min(window.length - 1, Math.floor(p * window.length))]!;
    return {
      count: window.length,
      p50Ms: at(0.5),
      p99Ms: at(0.99),
      maxMs: window.length === 0 ? 0 : window[window.length - 1]!,
      totalMs: window.reduce((s, d) => s + d, 0),
      truncated: window.length === kept && this.written > this.capacity,
    };
  }
}
