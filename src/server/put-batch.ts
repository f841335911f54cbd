/**
 * DebugService.PutBatch without the generic protobuf codec: the request (proto/debug.proto's
 * PutBatchRequest) is parsed by hand into the byte ranges of each put's key and value, and each
 * put's key-value command is copied straight from those bytes, hashing the key on the way. No
 * string and no intermediate object is made per put, which is most of what a leader does for an
 * entry of the replication benchmark besides Raft and storage.
 *
 * The result is the same as decoding the request with proto-loader and calling encodeKvPut and
 * hashShardKey on the strings: for ASCII keys and values the bytes are the strings; a put with
 * any other byte takes exactly that path (decode, then encode).
 */
import { hashShardKey } from '../placement/hash.js';
import { allocKvPut, encodeKvPut, kvPutKeyOffset } from './kv-state-machine.js';

/** A parsed PutBatchRequest: the request bytes and, per put, [keyStart, keyEnd, valueStart, valueEnd]. */
export interface PutBatchRequestRanges {
  readonly bytes: Buffer;
  readonly ranges: readonly number[];
}

/** Not a PutBatchRequest; grpc-js answers such a request with INTERNAL. */
export class PutBatchDecodeError extends Error {
  override readonly name = 'PutBatchDecodeError';
}

function broken(why: string): never {
  throw new PutBatchDecodeError(`PutBatchRequest does not decode: ${why}`);
}

const VARINT = 0;
const FIXED64 = 1;
const LEN = 2;
const FIXED32 = 5;

class Reader {
  pos = 0;
  constructor(readonly buf: Buffer) {}

  varint(end: number): number {
    let value = 0;
    let scale = 1;
    for (let k = 0; k < 10; k++) {
      if (this.pos >= end) broken('a varint runs past its message');
      const b = this.buf[this.pos++]!;
      value += (b & 0x7f) * scale;
      if (b < 0x80) return value;
      scale *= 0x80;
    }
    return broken('a varint is longer than 10 bytes');
  }

  /** Reads a length prefix; returns the end of the field's bytes. */
  length(end: number): number {
    const len = this.varint(end);
    if (len > end - this.pos) broken('a field runs past its message');
    return this.pos + len;
  }

  skip(wireType: number, end: number): void {
    if (wireType === VARINT) this.varint(end);
    else if (wireType === LEN) this.pos = this.length(end);
    else if (wireType === FIXED64) this.pos += 8;
    else if (wireType === FIXED32) this.pos += 4;
    else broken(`wire type ${wireType} is not supported`);
    if (this.pos > end) broken('a field runs past its message');
  }
}

/**
 * Parses a PutBatchRequest { repeated PutRequest puts = 1; } with PutRequest { string key = 1;
 * string value = 2; }: any valid encoding (fields in any order or repeated, unknown fields).
 */
export function parsePutBatchRequest(bytes: Buffer): PutBatchRequestRanges {
  const r = new Reader(bytes);
  const end = bytes.length;
  const ranges: number[] = [];
  while (r.pos < end) {
    const key = r.varint(end);
    if (key >>> 3 !== 1 || (key & 7) !== LEN) {
      if (key >>> 3 === 1) broken('puts is not a message');
      r.skip(key & 7, end);
      continue;
    }
    const putEnd = r.length(end);
    // Absent strings are empty: an empty range at the start of the put.
    let keyStart = r.pos;
    let keyEnd = r.pos;
    let valueStart = r.pos;
    let valueEnd = r.pos;
    while (r.pos < putEnd) {
      const k = r.varint(putEnd);
      const field = k >>> 3;
      if (field === 1 || field === 2) {
        if ((k & 7) !== LEN) broken(`${field === 1 ? 'key' : 'value'} is not a string`);
        const stop = r.length(putEnd);
        if (field === 1) {
          keyStart = r.pos;
          keyEnd = stop;
        } else {
          valueStart = r.pos;
          valueEnd = stop;
        }
        r.pos = stop;
      } else {
        r.skip(k & 7, putEnd);
      }
    }
    ranges.push(keyStart, keyEnd, valueStart, valueEnd);
  }
  return { bytes, ranges };
}

/** One put of a parsed batch: its key's shard hash and its key-value command. */
export interface PutCommand {
  hash: number;
  command: Uint8Array;
}

/**
 * The shard hash and command of put `i` of a parsed batch. `out` is filled and returned (the
 * caller reuses it across puts).
 */
export function putCommand(req: PutBatchRequestRanges, i: number, out: PutCommand): PutCommand {
  const { bytes, ranges } = req;
  const ks = ranges[4 * i]!;
  const ke = ranges[4 * i + 1]!;
  const vs = ranges[4 * i + 2]!;
  const ve = ranges[4 * i + 3]!;
  // One pass over the bytes: copy them into the command, hash the key (FNV-1a, which over
  // ASCII bytes is hashShardKey of the string), and note whether any byte is not ASCII.
  const command = allocKvPut(ke - ks, ve - vs);
  let at = kvPutKeyOffset(ke - ks);
  let h = 0x811c9dc5 | 0; // as an int32 from the start (Math.imul works on int32s anyway)
  let bits = 0;
  for (let j = ks; j < ke; j++) {
    const b = bytes[j]!;
    h = Math.imul(h ^ b, 0x01000193);
    bits |= b;
    command[at++] = b;
  }
  for (let j = vs; j < ve; j++) {
    const b = bytes[j]!;
    bits |= b;
    command[at++] = b;
  }
  if (bits < 0x80) {
    out.hash = h >>> 0;
    out.command = command;
  } else {
    const k = bytes.toString('utf8', ks, ke);
    out.hash = hashShardKey(k);
    out.command = encodeKvPut({ k, v: bytes.toString('utf8', vs, ve) });
  }
  return out;
}

export function putCount(req: PutBatchRequestRanges): number {
  return req.ranges.length / 4;
}
