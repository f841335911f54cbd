/** noop: passes everything through (registered but undocumented in Toxiproxy; kept for parity). */
import { Stage, type Attributes, type Chunk } from './stage.js';

export class NoopStage extends Stage {
  protected configure(_a: Attributes): void {}

  protected handleChunk(chunk: Chunk): void {
    this.emit(chunk);
  }
}
