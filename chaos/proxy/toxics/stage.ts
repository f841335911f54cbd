/**
 * One toxic acting on one direction of one connection: a stage of that direction's pipeline.
 *
 * Bytes move as chunks (one socket read each, stamped with its arrival time). A stage takes
 * chunks and an end-of-input mark in order and hands what it lets through to `next`, which is
 * rewired when toxics are added or removed while the connection lives. Work that takes time
 * (latency, pacing, pauses between slices) is serial: while a stage waits, later chunks queue
 * behind the one it holds, so order is kept, as in Toxiproxy's channel-per-stub design.
 *
 * Lifecycle, after Toxiproxy's ToxicStub:
 * - toxicity is drawn when the stage starts and again at every restart (an update of its toxic,
 *   or a toxic appended behind it); a stage that loses the draw passes everything through;
 * - an interrupt (restart or removal) sends the chunk being held on at once, so nothing is lost;
 * - closing the output (a toxic deciding the stream is over) drops whatever is queued and ends
 *   `next`; the socket behind the last stage is then closed, which ends the whole connection.
 */

export interface Chunk {
  readonly data: Buffer;
  /** performance.now() when the bytes were read from the source socket. */
  readonly arrivalMs: number;
}

/** Where a stage sends chunks: the next stage, or the destination socket's writer. */
export interface Outlet {
  push(chunk: Chunk): void;
  end(): void;
}

export interface StageContext {
  /** A uniform float in [0, 1) (seeded by the server's --seed). */
  readonly random: () => number;
  /** Bytes a stage dropped, for the pipeline's back-pressure accounting. */
  release(byteCount: number): void;
}

/** Integer attributes of a toxic, every one of its kind present (missing keys are 0). */
export type Attributes = Readonly<Record<string, number>>;

const END = Symbol('end');
type Item = Chunk | typeof END;

export abstract class Stage implements Outlet {
  next: Outlet;
  /** False when this start's toxicity draw said "pass everything through". */
  protected isActive = true;
  private readonly queue: Item[] = [];
  private isInputEnded = false;
  private isOutputClosed = false;
  private isWaiting = false;
  private timer: NodeJS.Timeout | undefined;
  /** The chunk (or the rest of it) this stage is waiting to send; sent on at an interrupt. */
  private held: Chunk | undefined;

  constructor(
    protected readonly ctx: StageContext,
    next: Outlet,
  ) {
    this.next = next;
  }

  /** Applies the toxic's attributes, draws toxicity and starts taking input. */
  start(attributes: Attributes, toxicity: number): void {
    this.configure(attributes);
    this.isActive = this.ctx.random() < toxicity;
    if (this.isActive) this.handleStart();
    this.pump();
  }

  push(chunk: Chunk): void {
    if (this.isInputEnded || this.isOutputClosed) {
      this.ctx.release(chunk.data.length);
      return;
    }
    this.queue.push(chunk);
    this.pump();
  }

  end(): void {
    if (this.isInputEnded || this.isOutputClosed) return;
    this.isInputEnded = true;
    this.queue.push(END);
    this.pump();
  }

  /** New attributes or toxicity (or a toxic appended behind): interrupt, redraw, go on. */
  restart(attributes: Attributes, toxicity: number): void {
    this.interrupt();
    this.start(attributes, toxicity);
  }

  /**
   * The toxic was removed: what is held and queued goes on to `next` unchanged (the caller then
   * unlinks this stage). Toxics whose removal ends the stream (timeout) override this.
   */
  remove(): void {
    this.interrupt();
    this.flushQueue();
  }

  /** The connection is gone: stop timers. */
  dispose(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.isOutputClosed = true;
  }

  /** Applies attributes; called at every (re)start. */
  protected abstract configure(attributes: Attributes): void;

  /** After a winning toxicity draw, before input flows (timeout arms its idle timer here). */
  protected handleStart(): void {}
  /** One chunk, while active. Call emit(), drop(), wait() or closeOutput(). */
  protected abstract handleChunk(chunk: Chunk): void;

  /** End of input while active; by default the stream ends here too. */
  protected handleEnd(): void {
    this.closeOutput();
  }

  protected emit(chunk: Chunk): void {
    if (chunk.data.length > 0) this.next.push(chunk);
  }

  protected drop(chunk: Chunk): void {
    this.ctx.release(chunk.data.length);
  }

  /** Holds `chunk` (may be undefined) for `ms`, then runs `then`; later input queues meanwhile. */
  protected wait(ms: number, held: Chunk | undefined, then: () => void): void {
    this.isWaiting = true;
    this.held = held;
    this.timer = setTimeout(
      () => {
        this.timer = undefined;
        this.isWaiting = false;
        this.held = undefined;
        then();
        this.pump();
      },
      Math.max(0, ms),
    );
  }

  /** (Re)arms a timer that does not hold input back (timeout's idle timer). */
  protected arm(ms: number, then: () => void): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      then();
    }, ms);
  }

  /** The toxic ends the stream: queued input is dropped and `next` ends. */
  protected closeOutput(): void {
    if (this.isOutputClosed) return;
    this.isOutputClosed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.held) this.drop(this.held);
    this.held = undefined;
    for (const item of this.queue.splice(0)) if (item !== END) this.drop(item);
    this.next.end();
  }

  private interrupt(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.isWaiting = false;
    const held = this.held;
    this.held = undefined;
    if (held && !this.isOutputClosed) this.emit(held);
  }

  private flushQueue(): void {
    if (this.isOutputClosed) return;
    for (const item of this.queue.splice(0)) {
      if (item === END) this.next.end();
      else this.emit(item);
    }
  }

  private pump(): void {
    while (!this.isWaiting && !this.isOutputClosed && this.queue.length > 0) {
      const item = this.queue.shift()!;
      if (item === END) {
        if (this.isActive) this.handleEnd();
        else this.closeOutput();
      } else if (this.isActive) {
        this.handleChunk(item);
      } else {
        this.emit(item);
      }
    }
  }
}
