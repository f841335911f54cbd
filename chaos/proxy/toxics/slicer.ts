/**
 * slicer: cuts each chunk into pieces of about `average_size` bytes (± `size_variation`), sent
 * `delay` microseconds apart, as a slow network or small TCP segments would deliver them.
 *
 * Unlike Toxiproxy, a `size_variation` of 0 is allowed (Toxiproxy's goroutine panics on it) and
 * cuts are kept strictly inside the piece, so a variation at or above the average cannot recurse
 * forever.
 */
import { Stage, type Attributes, type Chunk } from './stage.js';

export class SlicerStage extends Stage {
  private averageBytes = 0;
  private variationBytes = 0;
  private delayMs = 0;

  protected configure(a: Attributes): void {
    this.averageBytes = a['average_size'] ?? 0;
    this.variationBytes = a['size_variation'] ?? 0;
    this.delayMs = (a['delay'] ?? 0) / 1000;
  }

  protected handleChunk(chunk: Chunk): void {
    const cuts = this.cutPoints(0, chunk.data.length);
    this.sendFrom(chunk, cuts, 0);
  }

  /** Piece i is data[cuts[i], cuts[i + 1]). */
  private sendFrom(chunk: Chunk, cuts: number[], i: number): void {
    for (; i + 1 < cuts.length; i++) {
      this.emit({ data: chunk.data.subarray(cuts[i], cuts[i + 1]), arrivalMs: chunk.arrivalMs });
      if (this.delayMs <= 0) continue;
      const next = i + 1;
      const rest =
        next + 1 < cuts.length
          ? { data: chunk.data.subarray(cuts[next]), arrivalMs: chunk.arrivalMs }
          : undefined;
      this.wait(this.delayMs, rest, () => this.sendFrom(chunk, cuts, next));
      return;
    }
  }

  /** Offsets [start, …, end], split around the middle until pieces fit average + variation. */
  private cutPoints(start: number, end: number): number[] {
    const size = end - start;
    if (size - this.averageBytes <= this.variationBytes || size < 2) return [start, end];
    const v = this.variationBytes;
    const offset = v > 0 ? Math.floor(this.ctx.random() * 2 * v) - v : 0;
    const mid = Math.min(end - 1, Math.max(start + 1, start + Math.floor(size / 2) + offset));
    return [...this.cutPoints(start, mid), ...this.cutPoints(mid, end).slice(1)];
  }
}
