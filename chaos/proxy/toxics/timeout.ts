/**
 * timeout: a blackhole. Every byte of the stream is dropped. With `timeout` > 0 (ms) the stream
 * is closed once no data has arrived for that long (each dropped chunk restarts the timer, so a
 * steady trickle such as heartbeats keeps the connection open); with 0 it is never closed.
 *
 * Toxiproxy quirk kept: removing the toxic (or POST /reset) closes every connection it was on,
 * so a healed stream never resumes mid-frame; the endpoints reconnect.
 */
import { Stage, type Attributes, type Chunk } from './stage.js';

export class TimeoutStage extends Stage {
  private timeoutMs = 0;

  protected configure(a: Attributes): void {
    this.timeoutMs = a['timeout'] ?? 0;
  }

  protected override handleStart(): void {
    this.armIdleTimer();
  }

  protected handleChunk(chunk: Chunk): void {
    this.drop(chunk);
    this.armIdleTimer();
  }

  override remove(): void {
    this.closeOutput();
  }

  private armIdleTimer(): void {
    if (this.timeoutMs > 0) this.arm(this.timeoutMs, () => this.closeOutput());
  }
}
