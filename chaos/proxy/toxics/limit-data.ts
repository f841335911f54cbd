/**
 * limit_data: lets at most `bytes` bytes through on this connection's stream, then closes it.
 * The count survives updates of the toxic (it belongs to the connection, not to the attributes).
 */
import { Stage, type Attributes, type Chunk } from './stage.js';

export class LimitDataStage extends Stage {
  private limitBytes = 0;
  private sentBytes = 0;

  protected configure(a: Attributes): void {
    this.limitBytes = a['bytes'] ?? 0;
  }

  protected handleChunk(chunk: Chunk): void {
    const remaining = Math.max(0, this.limitBytes - this.sentBytes);
    const passed = chunk.data.length <= remaining ? chunk.data : chunk.data.subarray(0, remaining);
    if (passed.length < chunk.data.length) this.ctx.release(chunk.data.length - passed.length);
    this.emit({ data: passed, arrivalMs: chunk.arrivalMs });
    this.sentBytes += passed.length;
    if (this.sentBytes >= this.limitBytes) this.closeOutput();
  }
}
