/**
 * A test-only key-value state machine for data groups, used by the real-process tests and the
 * replication benchmark until the scheduler state machine takes the data groups over. Reads go
 * through ReadIndex on the node.
 *
 * A put command is binary: KV_PUT_TAG, the key's UTF-8 length as a varint, the key, then the
 * value, both UTF-8. Commands written by earlier builds (a msgpack map `{ k, v }`, which never
 * starts with that tag byte) are still applied.
 */
import { pack, unpack } from 'msgpackr';
import type { GroupStateMachine } from '../multiraft/group-replica.js';
import type { Entry } from '../raft/messages.js';

export interface KvPut {
  readonly k: string;
  readonly v: string;
}

/**
 * First byte of a binary put command: 'K'. A msgpack map starts with 0x80-0x8f, 0xde or 0xdf,
 * and a scheduler command (src/base/codec.ts) with its version byte 0x01, so a data group tells
 * the three apart by the first byte.
 */
export const KV_PUT_TAG = 0x4b;

function varintBytes(v: number): number {
  let n = 1;
  for (; v >= 0x80; v = Math.floor(v / 0x80)) n++;
  return n;
}

/**
 * Allocates a put command for a key and value of these UTF-8 sizes with its header written; the
 * key goes at kvPutKeyOffset(keyBytes), the value right after it.
 */
export function allocKvPut(keyBytes: number, valueBytes: number): Buffer {
  const out = Buffer.allocUnsafe(kvPutKeyOffset(keyBytes) + keyBytes + valueBytes);
  out[0] = KV_PUT_TAG;
  let at = 1;
  let v = keyBytes;
  while (v >= 0x80) {
    out[at++] = (v % 0x80) | 0x80;
    v = Math.floor(v / 0x80);
  }
  out[at] = v;
  return out;
}

/** Where the key starts in a put command of a key of this many bytes. */
export function kvPutKeyOffset(keyBytes: number): number {
  return 1 + varintBytes(keyBytes);
}

export function encodeKvPut(put: KvPut): Uint8Array {
  const keyBytes = Buffer.byteLength(put.k, 'utf8');
  const out = allocKvPut(keyBytes, Buffer.byteLength(put.v, 'utf8'));
  const at = kvPutKeyOffset(keyBytes);
  out.write(put.k, at, 'utf8');
  out.write(put.v, at + keyBytes, 'utf8');
  return out;
}

/**
 * Node's UTF-8 decoder behind Buffer#toString, which reads any Uint8Array: entries arrive as
 * plain Uint8Arrays, and wrapping each in a Buffer first would be one more object per apply.
 */
const utf8Slice = (Buffer.prototype as unknown as { utf8Slice?: unknown }).utf8Slice;

function utf8(bytes: Uint8Array, start: number, end: number): string {
  if (typeof utf8Slice === 'function') return utf8Slice.call(bytes, start, end) as string;
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8', start, end);
}

export function decodeKvPut(data: Uint8Array): KvPut {
  if (data[0] !== KV_PUT_TAG) return unpack(data) as KvPut;
  const bytes = data;
  let keyBytes = 0;
  let scale = 1;
  let at = 1;
  for (;;) {
    const b = bytes[at++];
    if (b === undefined || at > 9) throw new Error('kv put: truncated key length');
    keyBytes += (b & 0x7f) * scale;
    if (b < 0x80) break;
    scale *= 0x80;
  }
  if (at + keyBytes > bytes.length) throw new Error('kv put: key runs past the command');
  return { k: utf8(bytes, at, at + keyBytes), v: utf8(bytes, at + keyBytes, bytes.length) };
}

export class KvStateMachine implements GroupStateMachine {
  readonly data = new Map<string, string>();
  applied = 0;

  apply(entry: Entry): true {
    const put = decodeKvPut(entry.data);
    this.data.set(put.k, put.v);
    this.applied++;
    return true;
  }

  get(key: string): string | undefined {
    return this.data.get(key);
  }

  /** Drops every key `keep` rejects (a range split). */
  keepOnly(keep: (key: string) => boolean): void {
    for (const k of [...this.data.keys()]) if (!keep(k)) this.data.delete(k);
  }

  snapshot(): Uint8Array {
    return pack([...this.data.entries()]);
  }

  restore(data: Uint8Array): void {
    this.data.clear();
    for (const [k, v] of unpack(data) as [string, string][]) this.data.set(k, v);
  }
}
