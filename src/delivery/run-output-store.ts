/**
 * Run output kept beside the log (docs/API.md, "Run output"): the full text of each attempt's
 * output, up to a bound per attempt, in the memory of the node that received it (a webhook's
 * response body on the node that sent it, a worker's streamed stdout and stderr or its
 * completion's output on the node holding its lease, a CompleteRun's output on the node that
 * served the call). The replicated attempt record keeps only a short excerpt (512 bytes of a
 * webhook answer, 1,024 characters of any other output), so runs cost the log and snapshots no
 * more than before, and a big output is never copied to every replica.
 *
 * What that trades: the full output lives on one node. A node that stops, restarts or is killed
 * loses the outputs it held (readers then get the replicated excerpt), and so does a store that
 * is full: the attempts written to longest ago are evicted first.
 *
 * A pure data structure (no clock, no I/O): entries per (fire id, attempt) holding UTF-8 bytes,
 * cut only at character boundaries, whether the output was cut at the bound and whether the
 * attempt has ended. Offsets are byte offsets into that UTF-8 text.
 */
import { wholeUtf8Length } from './webhook.js';
import { assert } from '../base/assert.js';

/** Bytes of one attempt's output kept (`--run-output-max-bytes`). */
export const RUN_OUTPUT_MAX_BYTES_DEFAULT = 64 * 1024;
/** Bytes of output one node keeps in all (`--run-output-store-bytes`). */
export const RUN_OUTPUT_STORE_BYTES_DEFAULT = 64 * 1024 * 1024;
/** The largest bound per attempt a node accepts: a read answers at most READ_BYTES_MAX at once. */
export const RUN_OUTPUT_MAX_BYTES_LIMIT = 16 * 1024 * 1024;
/** Characters of a worker's or a completion's output kept in the replicated attempt record. */
export const RUN_OUTPUT_EXCERPT_CHARS = 1024;
/** Bytes one read answers at most, well inside gRPC's 4 MiB message. */
export const RUN_OUTPUT_READ_BYTES_MAX = 1024 * 1024;
/**
 * What an entry costs the store beside its text (the map entry, its key, the object): counted so
 * that many empty outputs are bounded too.
 */
export const RUN_OUTPUT_ENTRY_OVERHEAD_BYTES = 128;

export interface RunOutputStoreOptions {
  /** Bytes kept per attempt; 0 turns capture off (nothing is kept). */
  readonly maxBytes: number;
  /** Bytes kept in all, entries' overhead included; at least maxBytes plus one entry's. */
  readonly storeBytes: number;
}

/** Part of one attempt's output, from a byte offset. */
export interface RunOutputRead {
  /** The text from `offset` to `nextOffset`. */
  readonly text: string;
  /** Where `text` starts: the offset asked for, moved back to its character's start, at most the end. */
  readonly offset: number;
  /** Where the next read continues: the end of `text`. */
  readonly nextOffset: number;
  /** Bytes held for the attempt now. */
  readonly totalBytes: number;
  /** The attempt ended: nothing more will be added. */
  readonly complete: boolean;
  /** The output was longer than the bound: what is held is its start. */
  readonly truncated: boolean;
}

export interface RunOutputStoreStats {
  /** Attempts whose output was dropped to make room. */
  evicted: number;
}

interface Entry {
  chunks: Buffer[];
  bytes: number;
  truncated: boolean;
  complete: boolean;
  /** When it was last written to (writeSeq): its current place in `order`. */
  seq: number;
}

export class RunOutputStore {
  /** In order of the last write: the first entry is the one written to longest ago. */
  private readonly entries = new Map<string, Entry>();
  /**
   * Every write as key and seq, oldest first from `head`: what eviction walks. A record whose seq
   * is no longer its entry's (written to again since, or evicted) is skipped. Walking the map
   * itself would pass over every entry deleted since V8 last rehashed it, on every eviction.
   */
  private order: (string | number)[] = [];
  private head = 0;
  private writeSeq = 0;
  private used = 0;
  readonly maxBytes: number;
  readonly storeBytes: number;
  readonly stats: RunOutputStoreStats = { evicted: 0 };

  constructor(options: RunOutputStoreOptions) {
    assert(
      Number.isSafeInteger(options.maxBytes) && options.maxBytes >= 0,
      'maxBytes is a whole number',
    );
    assert(
      options.maxBytes === 0 ||
        options.storeBytes >= options.maxBytes + RUN_OUTPUT_ENTRY_OVERHEAD_BYTES,
      'the store holds at least one whole output',
    );
    this.maxBytes = options.maxBytes;
    this.storeBytes = options.storeBytes;
  }

  /** Whether outputs are kept at all. */
  get enabled(): boolean {
    return this.maxBytes > 0;
  }

  /** Bytes held, entries' overhead included. */
  get bytes(): number {
    return this.used;
  }

  /** Attempts held. */
  get size(): number {
    return this.entries.size;
  }

  has(fireId: string, attempt: number): boolean {
    return this.entries.has(keyOf(fireId, attempt));
  }

  /**
   * Starts an attempt's output that arrives in parts (a worker streaming while it runs): empty,
   * not complete. An entry already held for the attempt is replaced.
   */
  open(fireId: string, attempt: number): void {
    if (!this.enabled) return;
    this.replace(keyOf(fireId, attempt), {
      chunks: [],
      bytes: 0,
      truncated: false,
      complete: false,
      seq: 0,
    });
  }

  /**
   * Adds text to an opened attempt's output, up to the bound (the rest is dropped and the output
   * marked truncated). False, and nothing kept, when the attempt is not open here: never opened,
   * evicted since (a part kept after a gap would misplace every later offset), or complete.
   */
  append(fireId: string, attempt: number, text: string): boolean {
    const key = keyOf(fireId, attempt);
    const entry = this.entries.get(key);
    if (entry === undefined || entry.complete) return false;
    if (text !== '') {
      const room = this.maxBytes - entry.bytes;
      const bytes = Buffer.from(text, 'utf8');
      const kept =
        bytes.length <= room ? bytes : Buffer.from(bytes.subarray(0, utf8CutLength(bytes, room)));
      if (kept.length < bytes.length) entry.truncated = true;
      if (kept.length > 0) {
        entry.chunks.push(kept);
        entry.bytes += kept.length;
        this.used += kept.length;
      }
    }
    // Written to now: the last to be evicted.
    this.entries.delete(key);
    this.entries.set(key, entry);
    this.noteWrite(key, entry);
    this.evictFor(key);
    return true;
  }

  /** The attempt ended: its output is complete (a no-op when it is not held). */
  finish(fireId: string, attempt: number): void {
    const entry = this.entries.get(keyOf(fireId, attempt));
    if (entry !== undefined) entry.complete = true;
  }

  /**
   * An attempt's whole output at once (a webhook's answer, a completion's output): kept up to
   * the bound, complete. `truncated`: the caller already cut it (it read only the bound).
   */
  put(fireId: string, attempt: number, text: string, truncated = false): void {
    if (!this.enabled) return;
    const bytes = Buffer.from(text, 'utf8');
    const cut = utf8CutLength(bytes, this.maxBytes);
    const kept = cut === bytes.length ? bytes : Buffer.from(bytes.subarray(0, cut));
    this.replace(keyOf(fireId, attempt), {
      chunks: kept.length > 0 ? [kept] : [],
      bytes: kept.length,
      truncated: truncated || cut < bytes.length,
      complete: true,
      seq: 0,
    });
  }

  /**
   * The attempt's output from byte `offset`, at most `maxBytes` of it (whole characters; at
   * least one character when any is left), or undefined when it is not held here.
   */
  read(
    fireId: string,
    attempt: number,
    offset: number,
    maxBytes = RUN_OUTPUT_READ_BYTES_MAX,
  ): RunOutputRead | undefined {
    const entry = this.entries.get(keyOf(fireId, attempt));
    if (entry === undefined) return undefined;
    if (entry.chunks.length > 1) entry.chunks = [Buffer.concat(entry.chunks, entry.bytes)];
    const all = entry.chunks[0] ?? Buffer.alloc(0);
    let from = Math.min(Math.max(0, Math.floor(offset)), all.length);
    // An offset inside a character reads from that character's start.
    while (from > 0 && from < all.length && isContinuation(all[from]!)) from--;
    let to = Math.min(all.length, from + Math.max(1, maxBytes));
    if (to < all.length) {
      to = from + utf8CutLength(all.subarray(from), to - from);
      // A bound smaller than the character at `from`: that character still goes out whole.
      if (to === from) {
        to = from + 1;
        while (to < all.length && isContinuation(all[to]!)) to++;
      }
    }
    return {
      text: all.toString('utf8', from, to),
      offset: from,
      nextOffset: to,
      totalBytes: all.length,
      complete: entry.complete,
      truncated: entry.truncated,
    };
  }

  private replace(key: string, entry: Entry): void {
    const old = this.entries.get(key);
    if (old !== undefined) {
      this.entries.delete(key);
      this.used -= old.bytes + RUN_OUTPUT_ENTRY_OVERHEAD_BYTES;
    }
    this.entries.set(key, entry);
    this.used += entry.bytes + RUN_OUTPUT_ENTRY_OVERHEAD_BYTES;
    this.noteWrite(key, entry);
    this.evictFor(key);
  }

  private noteWrite(key: string, entry: Entry): void {
    entry.seq = ++this.writeSeq;
    this.order.push(key, entry.seq);
    // Many writes to few entries (a worker streaming): rebuilt from the map, which is in order.
    if (this.order.length - this.head > 4 * this.entries.size + 4096) {
      const order: (string | number)[] = [];
      for (const [k, e] of this.entries) order.push(k, e.seq);
      this.order = order;
      this.head = 0;
    }
  }

  /** Drops the entries written to longest ago until the store is within its bound. */
  private evictFor(keep: string): void {
    while (this.used > this.storeBytes && this.head < this.order.length) {
      const key = this.order[this.head] as string;
      const entry = this.entries.get(key);
      if (entry !== undefined && entry.seq === this.order[this.head + 1]) {
        // The entry just written is the newest; alone it always fits (see the constructor).
        if (key === keep) return;
        this.entries.delete(key);
        this.used -= entry.bytes + RUN_OUTPUT_ENTRY_OVERHEAD_BYTES;
        this.stats.evicted++;
      }
      this.head += 2;
    }
    if (this.head > 65_536 && this.head * 2 > this.order.length) {
      this.order = this.order.slice(this.head);
      this.head = 0;
    }
  }
}

function keyOf(fireId: string, attempt: number): string {
  return `${attempt} ${fireId}`;
}

function isContinuation(byte: number): boolean {
  return (byte & 0xc0) === 0x80;
}

/**
 * The length of the longest prefix of `bytes` of at most `limit` bytes that does not cut a
 * UTF-8 sequence: the cut moves back to the start of the character it would split.
 */
export function utf8CutLength(bytes: Uint8Array, limit: number): number {
  if (limit >= bytes.length) return bytes.length;
  // The cut prefix without a trailing, incomplete character: webhook.ts's excerpt rule.
  return wholeUtf8Length(bytes.subarray(0, Math.max(0, limit)));
}

/**
 * The start of `text` kept in a replicated attempt record: at most `chars` UTF-16 units, never
 * half of a surrogate pair.
 */
export function outputExcerpt(text: string, chars = RUN_OUTPUT_EXCERPT_CHARS): string {
  if (text.length <= chars) return text;
  const last = text.charCodeAt(chars - 1);
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? chars - 1 : chars);
}
