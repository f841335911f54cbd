/**
 * A simulated disk for NodeStore (src/storage/backend.ts's StoreBackend), with the page cache
 * modelled: what a batch writes without sync sits in a volatile layer that a power loss throws
 * away.
 *
 * - A write completes only when the simulator says so (`schedule` hands the completion to the
 *   event queue), so a node awaiting its disk waits in virtual time.
 * - On completion the batch becomes visible to reads and joins the volatile layer; a synced
 *   batch then makes the whole volatile layer (every earlier batch and itself) durable, as one
 *   fsync of LevelDB's write-ahead log does.
 * - crash(): the process dies. The volatile layer survives (the page cache belongs to the OS);
 *   of the writes still in flight a random prefix reached the page cache, the rest is lost.
 * - powerLoss(): the machine dies. In-flight writes join the volatile layer, then a random
 *   prefix of the volatile batches survives (the torn tail of the write-ahead log) and
 *   everything after it is gone. A batch is never torn inside: LevelDB drops a partial log
 *   record at recovery, and NodeStore relies on that (backend.ts).
 * After either, the old handles are dead: their writes never complete. open() gives the
 * restarted process a new handle, and makes the volatile layer durable first, as LevelDB's
 * recovery does (backend.ts): a restarted node may act on what it reads.
 */
import { Buffer } from 'node:buffer';
import type { SeededRand } from '../../src/base/rand.js';
import type {
  BackendBatch,
  BackendIterator,
  BackendRange,
  BackendSnapshot,
  StoreBackend,
} from '../../src/storage/backend.js';

/** One put (value) or delete (undefined) of a batch; keys as latin1 strings (bytewise order). */
type Op = readonly [key: string, value: Uint8Array | undefined];

interface PendingWrite {
  readonly ops: readonly Op[];
  readonly sync: boolean;
  readonly resolve: () => void;
}

export interface SimDiskOptions {
  /** Runs `fn` once `delayMs` of virtual time have passed (the simulator's event queue). */
  readonly schedule: (delayMs: number, fn: () => void) => void;
  readonly rand: SeededRand;
  /** Virtual ms a write takes, synced or not. */
  readonly writeMs: (sync: boolean) => number;
  /** Called for every key whose durable value changes (value undefined: deleted). */
  readonly onDurable?: (key: Uint8Array, value: Uint8Array | undefined) => void;
}

export interface DiskCounts {
  writes: number;
  syncedWrites: number;
  crashes: number;
  powerLosses: number;
  /** Batches thrown away by power losses (unsynced or in flight). */
  batchesLost: number;
  /** In-flight writes a crash lost before they reached the page cache. */
  writesLostAtCrash: number;
}

function keyString(key: Uint8Array): string {
  return Buffer.from(key.buffer, key.byteOffset, key.byteLength).toString('latin1');
}

function keyBytes(key: string): Uint8Array {
  const b = Buffer.from(key, 'latin1');
  return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
}

function inRange(key: string, lo: string | undefined, hi: string | undefined): boolean {
  return (lo === undefined || key >= lo) && (hi === undefined || key < hi);
}

class Snap implements BackendSnapshot {
  /** Values, as of the snapshot, of the keys written since it was taken. */
  readonly before = new Map<string, Uint8Array | undefined>();

  constructor(private readonly disk: SimDisk) {}

  getSync(key: Uint8Array): Uint8Array | undefined {
    const k = keyString(key);
    return this.before.has(k) ? this.before.get(k) : this.disk.visibleGet(k);
  }

  close(): Promise<void> {
    this.disk.snapshots.delete(this);
    return Promise.resolve();
  }
}

export class SimDisk {
  private durable = new Map<string, Uint8Array>();
  /** durable + the volatile batches, as reads see it. */
  private visible = new Map<string, Uint8Array>();
  private volatile: (readonly Op[])[] = [];
  private pending: PendingWrite[] = [];
  /** Bumped by crash() and powerLoss(): handles of an older generation are dead. */
  private generation = 0;
  private completesAt = 0;
  private virtualNow = 0;
  readonly snapshots = new Set<Snap>();
  readonly counts: DiskCounts = {
    writes: 0,
    syncedWrites: 0,
    crashes: 0,
    powerLosses: 0,
    batchesLost: 0,
    writesLostAtCrash: 0,
  };

  constructor(
    readonly name: string,
    private readonly opts: SimDiskOptions,
  ) {}

  /** A handle for a (re)started process. */
  open(): StoreBackend {
    this.makeDurable(this.volatile);
    this.volatile = [];
    return new SimBackend(this, this.generation);
  }

  isLive(generation: number): boolean {
    return generation === this.generation;
  }

  visibleGet(key: string): Uint8Array | undefined {
    return this.visible.get(key);
  }

  /** Entries of the visible state in key order within a range. */
  visibleRange(range: BackendRange): [Uint8Array, Uint8Array][] {
    const lo = range.gte === undefined ? undefined : keyString(range.gte);
    const hi = range.lt === undefined ? undefined : keyString(range.lt);
    const keys = [...this.visible.keys()].filter((k) => inRange(k, lo, hi)).sort();
    return keys.map((k) => [keyBytes(k), this.visible.get(k)!]);
  }

  /** Unsynced batches (for the trace and tests). */
  volatileBatches(): number {
    return this.volatile.length;
  }

  /** Keeps the simulator's clock, so that writes complete in submission order. */
  setNow(nowMs: number): void {
    this.virtualNow = nowMs;
  }

  submit(generation: number, ops: readonly Op[], sync: boolean): Promise<void> {
    // A dead process's write never completes (nobody is left to see it).
    if (!this.isLive(generation)) return new Promise<void>(() => undefined);
    this.counts.writes++;
    return new Promise<void>((resolve) => {
      const w: PendingWrite = { ops, sync, resolve };
      this.pending.push(w);
      // One write at a time, in order, as LevelDB's writer queue does.
      const at = Math.max(this.completesAt, this.virtualNow + this.opts.writeMs(sync));
      this.completesAt = at;
      this.opts.schedule(at - this.virtualNow, () => this.complete(w, generation));
    });
  }

  private complete(w: PendingWrite, generation: number): void {
    if (!this.isLive(generation)) return;
    if (this.pending[0] !== w) throw new Error(`${this.name}: writes completed out of order`);
    this.pending.shift();
    this.applyVisible(w.ops);
    this.volatile.push(w.ops);
    if (w.sync) {
      this.counts.syncedWrites++;
      this.makeDurable(this.volatile);
      this.volatile = [];
    }
    w.resolve();
  }

  private applyVisible(ops: readonly Op[]): void {
    for (const [k, v] of ops) {
      for (const s of this.snapshots) if (!s.before.has(k)) s.before.set(k, this.visible.get(k));
      if (v === undefined) this.visible.delete(k);
      else this.visible.set(k, v);
    }
  }

  private makeDurable(batches: readonly (readonly Op[])[]): void {
    for (const ops of batches) {
      for (const [k, v] of ops) {
        if (v === undefined) this.durable.delete(k);
        else this.durable.set(k, v);
        this.opts.onDurable?.(keyBytes(k), v);
      }
    }
  }

  /** The process dies; the page cache (volatile layer) survives. */
  crash(): void {
    this.counts.crashes++;
    const reached = this.opts.rand.int(this.pending.length + 1);
    for (let i = 0; i < reached; i++) {
      const w = this.pending[i]!;
      this.applyVisible(w.ops);
      this.volatile.push(w.ops);
    }
    this.counts.writesLostAtCrash += this.pending.length - reached;
    this.endGeneration();
  }

  /**
   * The machine loses power: a random prefix of the unsynced batches (in-flight writes last)
   * survives, the rest is lost. Returns how many batches were lost.
   */
  powerLoss(): number {
    this.counts.powerLosses++;
    const batches = [...this.volatile, ...this.pending.map((w) => w.ops)];
    // Often all or nothing survives, otherwise a prefix of any length.
    const r = this.opts.rand.float();
    const kept = r < 0.4 ? 0 : r < 0.6 ? batches.length : this.opts.rand.int(batches.length + 1);
    this.makeDurable(batches.slice(0, kept));
    const lost = batches.length - kept;
    this.counts.batchesLost += lost;
    this.volatile = [];
    this.visible = new Map(this.durable);
    this.endGeneration();
    return lost;
  }

  private endGeneration(): void {
    this.pending = [];
    this.snapshots.clear();
    this.completesAt = this.virtualNow;
    this.generation++;
  }
}

class SimBatch implements BackendBatch {
  private readonly ops: Op[] = [];
  private written = false;

  constructor(
    private readonly disk: SimDisk,
    private readonly generation: number,
  ) {}

  put(key: Uint8Array, value: Uint8Array): void {
    // LevelDB copies what is put; NodeStore puts views of buffers it may reuse.
    this.ops.push([keyString(key), value.slice()]);
  }

  del(key: Uint8Array): void {
    this.ops.push([keyString(key), undefined]);
  }

  write(options: { sync: boolean }): Promise<void> {
    if (this.written) return Promise.reject(new Error('batch written twice'));
    this.written = true;
    return this.disk.submit(this.generation, this.ops, options.sync);
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

class SimIterator implements BackendIterator {
  private at = 0;

  constructor(private readonly entries: [Uint8Array, Uint8Array][]) {}

  nextv(size: number): Promise<[Uint8Array, Uint8Array][]> {
    const out = this.entries.slice(this.at, this.at + size);
    this.at += out.length;
    return Promise.resolve(out);
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

class SimBackend implements StoreBackend {
  readonly location: string;

  constructor(
    private readonly disk: SimDisk,
    private readonly generation: number,
  ) {
    this.location = `simdisk:${disk.name}`;
  }

  get(key: Uint8Array): Promise<Uint8Array | undefined> {
    return Promise.resolve(this.getSync(key));
  }

  getSync(key: Uint8Array): Uint8Array | undefined {
    return this.disk.visibleGet(keyString(key));
  }

  iterator(range: BackendRange): BackendIterator {
    return new SimIterator(this.disk.visibleRange(range));
  }

  batch(): BackendBatch {
    return new SimBatch(this.disk, this.generation);
  }

  snapshot(): BackendSnapshot {
    const s = new Snap(this.disk);
    if (this.disk.isLive(this.generation)) this.disk.snapshots.add(s);
    return s;
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
