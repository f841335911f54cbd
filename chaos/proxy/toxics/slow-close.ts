/** slow_close: data passes untouched; the end of the stream is held back `delay` ms. */
import { Stage, type Attributes, type Chunk } from './stage.js';

export class SlowCloseStage extends Stage {
  private delayMs = 0;

  protected configure(a: Attributes): void {
    this.delayMs = a['delay'] ?? 0;
  }

  protected handleChunk(chunk: Chunk): void {
    this.emit(chunk);
  }

  protected override handleEnd(): void {
    this.wait(this.delayMs, undefined, () => this.closeOutput());
  }
}
