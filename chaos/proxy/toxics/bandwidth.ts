/**
 * bandwidth: paces the stream to `rate` KB/s (1 KB = 1000 bytes, so `rate` bytes per ms).
 * Chunks larger than 100 ms worth of bytes leave in 100 ms slices. The pacing debt carries from
 * chunk to chunk, so the long-run rate holds even though timers are coarse.
 *
 * Toxiproxy quirk kept: `rate` 0 does not mean unlimited; nothing passes until the toxic is
 * removed or updated.
 */
import { Stage, type Attributes, type Chunk } from './stage.js';

const SLICE_MS = 100;
/** setTimeout's largest delay; a rate-0 hold re-arms itself with it. */
const FOREVER_MS = 2 ** 31 - 1;

export class BandwidthStage extends Stage {
  private rateBytesPerMs = 0;
  private debtMs = 0;

  protected configure(a: Attributes): void {
    this.rateBytesPerMs = a['rate'] ?? 0;
  }

  protected handleChunk(chunk: Chunk): void {
    if (this.rateBytesPerMs <= 0) {
      this.wait(FOREVER_MS, chunk, () => this.handleChunk(chunk));
      return;
    }
    this.debtMs += chunk.data.length / this.rateBytesPerMs;
    this.sendPaced(chunk);
  }

  private sendPaced(chunk: Chunk): void {
    const sliceBytes = this.rateBytesPerMs * SLICE_MS;
    if (chunk.data.length > sliceBytes) {
      this.wait(SLICE_MS, chunk, () => {
        this.emit({ data: chunk.data.subarray(0, sliceBytes), arrivalMs: chunk.arrivalMs });
        this.debtMs -= SLICE_MS;
        this.sendPaced({ data: chunk.data.subarray(sliceBytes), arrivalMs: chunk.arrivalMs });
      });
      return;
    }
    const startMs = performance.now();
    this.wait(this.debtMs, chunk, () => {
      // Timers fire late; what was overslept is credited to the next chunk.
      this.debtMs -= performance.now() - startMs;
      this.emit(chunk);
    });
  }
}
