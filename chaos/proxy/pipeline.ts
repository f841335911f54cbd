/**
 * One direction of one proxied connection: bytes read from `source` pass through a chain of
 * toxic stages (in the order the toxics were created) and are written to `dest`.
 *
 * Back-pressure: bytes read but not yet handed to `dest` (held in stages) are counted; above
 * HIGH_WATER_BYTES, or while `dest` asks to drain, `source` is paused, so a slow toxic slows the
 * sender through TCP instead of buffering without bound.
 *
 * When the chain's output ends (end of input, or a toxic closing the stream), `dest` is closed
 * completely, as Toxiproxy closes the destination connection: the other direction then reads
 * EOF from it and closes `source` in turn, so the whole connection goes away.
 */
import type { Socket } from 'node:net';
import { toxicKind } from './toxics/kinds.js';
import type { Chunk, Outlet, Stage, StageContext } from './toxics/stage.js';
import type { ToxicSpec } from './toxic.js';

const HIGH_WATER_BYTES = 1024 * 1024;

export interface PipelineOptions {
  readonly source: Socket;
  readonly dest: Socket;
  readonly toxics: readonly ToxicSpec[];
  readonly random: () => number;
  /** Close `dest` with a TCP RST instead of a FIN (a reset_peer toxic was present at accept). */
  isResetOnClose(): boolean;
}

export class Pipeline implements Outlet {
  private readonly stages: { spec: ToxicSpec; stage: Stage }[] = [];
  private readonly ctx: StageContext;
  private heldBytes = 0;
  private isDestDraining = false;
  private isSourcePaused = false;
  private isEnded = false;

  constructor(private readonly options: PipelineOptions) {
    this.ctx = { random: options.random, release: (n) => this.release(n) };
    for (const spec of options.toxics) this.appendStage(spec, false);
    const { source, dest } = options;
    source.on('data', (data: Buffer) => {
      this.heldBytes += data.length;
      this.entry().push({ data, arrivalMs: performance.now() });
      this.updateFlow();
    });
    // End of input, a read error or a close by the other direction: the chain sees EOF once.
    const inputEnded = (): void => {
      if (this.isEnded) return;
      this.isEnded = true;
      this.entry().end();
    };
    source.on('end', inputEnded);
    source.on('close', inputEnded);
    dest.on('drain', () => {
      this.isDestDraining = false;
      this.updateFlow();
    });
  }

  /** The destination side of the chain: writes to `dest`. */
  push(chunk: Chunk): void {
    const { dest } = this.options;
    this.release(chunk.data.length);
    if (dest.destroyed || dest.writableEnded) return;
    if (!dest.write(chunk.data)) this.isDestDraining = true;
    this.updateFlow();
  }

  /** The chain's output ended: close `dest` (after what was written, or at once with RST). */
  end(): void {
    const { dest } = this.options;
    if (dest.destroyed) return;
    if (this.options.isResetOnClose()) dest.resetAndDestroy();
    else if (!dest.writableEnded) dest.end(() => dest.destroy());
  }

  addToxic(spec: ToxicSpec): void {
    this.appendStage(spec, true);
  }

  updateToxic(spec: ToxicSpec): void {
    const entry = this.stages.find((s) => s.spec.name === spec.name);
    if (entry === undefined) return;
    entry.spec = spec;
    entry.stage.restart(spec.attributes, spec.toxicity);
  }

  removeToxic(name: string): void {
    const i = this.stages.findIndex((s) => s.spec.name === name);
    if (i < 0) return;
    const { stage } = this.stages[i]!;
    const prev = this.stages[i - 1]?.stage;
    // Unlink first, so what the removed stage flushes lands ahead of anything newer.
    if (prev) prev.next = stage.next;
    this.stages.splice(i, 1);
    stage.remove();
  }

  dispose(): void {
    for (const { stage } of this.stages) stage.dispose();
  }

  private entry(): Outlet {
    return this.stages[0]?.stage ?? this;
  }

  private appendStage(spec: ToxicSpec, isLive: boolean): void {
    const kind = toxicKind(spec.type);
    if (kind === undefined) return;
    const stage = kind.createStage(this.ctx, this);
    const last = this.stages.at(-1);
    if (last) last.stage.next = stage;
    this.stages.push({ spec, stage });
    stage.start(spec.attributes, spec.toxicity);
    // Toxiproxy interrupts and reruns the previous tail when it appends behind it, which
    // sends on what it held and redraws its toxicity.
    if (isLive && last) last.stage.restart(last.spec.attributes, last.spec.toxicity);
  }

  private release(byteCount: number): void {
    this.heldBytes -= byteCount;
    this.updateFlow();
  }

  private updateFlow(): void {
    const { source } = this.options;
    const shouldPause = this.isDestDraining || this.heldBytes > HIGH_WATER_BYTES;
    if (shouldPause && !this.isSourcePaused) {
      this.isSourcePaused = true;
      source.pause();
    } else if (!shouldPause && this.isSourcePaused) {
      this.isSourcePaused = false;
      if (!source.destroyed) source.resume();
    }
  }
}
