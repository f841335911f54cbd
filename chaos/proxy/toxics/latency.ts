/**
 * latency: each chunk leaves `latency` ± `jitter` ms after it arrived (attributes in ms). The
 * delay counts from the chunk's arrival, not from when the previous one left, so a steady stream
 * keeps its throughput; chunks never overtake each other.
 */
import { Stage, type Attributes, type Chunk } from './stage.js';

export class LatencyStage extends Stage {
  private latencyMs = 0;
  private jitterMs = 0;

  protected configure(a: Attributes): void {
    this.latencyMs = a['latency'] ?? 0;
    this.jitterMs = a['jitter'] ?? 0;
  }

  protected handleChunk(chunk: Chunk): void {
    let delayMs = this.latencyMs;
    if (this.jitterMs > 0)
      delayMs += Math.floor(this.ctx.random() * 2 * this.jitterMs) - this.jitterMs;
    const sleepMs = delayMs - (performance.now() - chunk.arrivalMs);
    if (sleepMs <= 0) {
      this.emit(chunk);
      return;
    }
    // A later latency toxic in the chain counts from when this one let the chunk go.
    const delayed = { data: chunk.data, arrivalMs: chunk.arrivalMs + sleepMs };
    this.wait(sleepMs, chunk, () => this.emit(delayed));
  }
}
