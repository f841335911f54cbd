/**
 * Notices when the event loop was held: a timer due every `everyMs` that runs `thresholdMs` or
 * more late means nothing ran on the loop for that long (a collection, a long synchronous
 * handler, a turn of the Raft loop). A follower on a held node hears no heartbeat and a held
 * leader sends none, so an operator who sees a leader change wants to know whether this node
 * was held just before; the report says for how long and when it ended.
 */
export interface LoopStall {
  /** How long past its due time the timer ran (ms). */
  readonly lateMs: number;
  /** When the stall ended (ms since the epoch). */
  readonly endedAtMs: number;
}

export class LoopStallWatch {
  private timer: NodeJS.Timeout | undefined;
  private dueAtMs = 0;
  /** Stalls noticed since start (for tests and metrics). */
  stalls = 0;

  constructor(
    private readonly everyMs: number,
    private readonly thresholdMs: number,
    private readonly onStall: (stall: LoopStall) => void,
  ) {
    if (!(everyMs > 0)) throw new RangeError(`everyMs must be positive, got ${everyMs}`);
    if (!(thresholdMs > 0))
      throw new RangeError(`thresholdMs must be positive, got ${thresholdMs}`);
  }

  start(): void {
    if (this.timer !== undefined) return;
    this.dueAtMs = performance.now() + this.everyMs;
    this.timer = setInterval(() => this.check(), this.everyMs);
    // Watching must not keep a stopping process alive.
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  private check(): void {
    const now = performance.now();
    const lateMs = now - this.dueAtMs;
    this.dueAtMs = now + this.everyMs;
    if (lateMs < this.thresholdMs) return;
    this.stalls++;
    this.onStall({ lateMs: Math.round(lateMs), endedAtMs: Date.now() });
  }
}
