/**
 * The value stored under a log key (keys.ts): a run of consecutive entries of one group, written
 * by one commit. One record per group and commit instead of one per entry: a LevelDB put, a
 * memtable insert, a compaction input and a later delete cost about the same for 40 entries as
 * for one, and they were most of the store's CPU per entry.
 *
 * Version 3 (LOG_RECORD_VERSION):
 *
 *   version (1 byte) | first index (varint) | entry count (varint, >= 1)
 *   | count × [ term (varint) | type code (1 byte) | data length (varint) | data ]
 *
 * Varints as in varint.ts. The entries are first, first + 1, ...: the first index is stored in
 * the value as well as in the key, so a record found under the wrong key is detected, and the
 * count and lengths make a truncated or extended record detectable.
 *
 * Records of versions 1 and 2 (one entry each, records.ts decodeEntry) were written by builds
 * before store layout 2 and are read as records of one entry. A version this code does not know
 * is an error, never a guess.
 */
import { assertionFailed } from '../base/assert.js';
import { CODEC_VERSION, CodecError } from '../base/codec.js';
import type { Entry } from '../raft/messages.js';
import { ENTRY_RECORD_VERSION, decodeEntry, entryTypeCode, entryTypeOf } from './records.js';
import { malformed, readVarint, varintBytes, writeVarint, type Varint } from './varint.js';

export const LOG_RECORD_VERSION = 3;

/**
 * A commit cuts a group's entries into records of about this many bytes at most (a record holds
 * at least one entry, however large). A commit in steady state writes far less per group; this
 * bounds the records a catching-up follower writes, and what a truncation or a compaction inside
 * a record has to rewrite.
 */
export const LOG_RECORD_BYTES_TARGET = 256 * 1024;

/** Bytes one entry takes inside a record. */
export function entryBytesInRecord(e: Entry): number {
  const len = e.data.length; // byteLength of a Uint8Array; the getter V8 inlines
  return varintBytes(e.term) + 1 + varintBytes(len) + len;
}

/** Bytes of the record header for `count` entries from `first`. */
export function recordHeaderBytes(first: number, count: number): number {
  return 1 + varintBytes(first) + varintBytes(count);
}

/** Bytes of the record of entries[lo, hi) (encodeLogRecordInto writes exactly this many). */
export function logRecordBytes(entries: readonly Entry[], lo: number, hi: number): number {
  let n = recordHeaderBytes(entries[lo]!.index, hi - lo);
  for (let k = lo; k < hi; k++) n += entryBytesInRecord(entries[k]!);
  return n;
}

/**
 * Writes the record of entries[lo, hi) at `at`; returns the offset after it. The entries must be
 * consecutive (checked here, as the record does not store their indexes).
 */
export function encodeLogRecordInto(
  out: Uint8Array,
  at: number,
  entries: readonly Entry[],
  lo: number,
  hi: number,
): number {
  if (hi <= lo) assertionFailed(`a log record needs at least one entry (${lo}..${hi})`);
  const first = entries[lo]!.index;
  if (!Number.isSafeInteger(first) || first < 1) {
    assertionFailed(`entry index ${first} is not storable`);
  }
  out[at++] = LOG_RECORD_VERSION;
  at = writeVarint(out, at, first);
  at = writeVarint(out, at, hi - lo);
  for (let k = lo; k < hi; k++) {
    const e = entries[k]!;
    // (Messages are built only when a check fails: this runs once per entry.)
    if (e.index !== first + (k - lo)) {
      assertionFailed(`log record from ${first}: entry ${e.index} is not at ${first + (k - lo)}`);
    }
    if (!Number.isSafeInteger(e.term) || e.term < 0) {
      assertionFailed(`entry ${e.index}: term ${e.term} is not storable`);
    }
    at = writeVarint(out, at, e.term);
    out[at++] = entryTypeCode(e.type);
    const len = e.data.length;
    at = writeVarint(out, at, len);
    out.set(e.data, at);
    at += len;
  }
  return at;
}

/** The record of `entries` in a buffer of its own (tests, and rewriting a partial record). */
export function encodeLogRecord(entries: readonly Entry[]): Uint8Array {
  const out = new Uint8Array(logRecordBytes(entries, 0, entries.length));
  const end = encodeLogRecordInto(out, 0, entries, 0, entries.length);
  if (end !== out.byteLength) assertionFailed(`log record size ${end} != ${out.byteLength}`);
  return out;
}

/**
 * Decodes a log record: its entries in index order, at least one. The data of each entry is a
 * view into `bytes`. Throws CodecError for anything that is not exactly a record.
 */
export function decodeLogRecord(bytes: Uint8Array): Entry[] {
  const version = bytes[0];
  if (version === LOG_RECORD_VERSION) return decodeRun(bytes);
  if (version === ENTRY_RECORD_VERSION || version === CODEC_VERSION) return [decodeEntry(bytes)];
  if (version === undefined) throw malformed('log record', 'empty record');
  throw new CodecError(
    'CODEC_UNKNOWN_VERSION',
    `log record version ${version} is none of ${LOG_RECORD_VERSION}, ${ENTRY_RECORD_VERSION}, ${CODEC_VERSION}`,
  );
}

/** What the errors inside one entry of a record are about (see the catch in decodeRun). */
const ENTRY = 'entry';

function decodeRun(bytes: Uint8Array): Entry[] {
  const what = 'log record';
  const v: Varint = { value: 0, next: 1 };
  readVarint(bytes, v.next, what, 'first index', v);
  const first = v.value;
  if (first < 1) throw malformed(what, `bad first index ${first}`);
  readVarint(bytes, v.next, what, 'entry count', v);
  const count = v.value;
  if (count < 1) throw malformed(what, 'holds no entry');
  // Each entry takes at least 3 bytes: a count that cannot fit is damage, not a huge allocation.
  if (count > bytes.byteLength) throw malformed(what, `count ${count} exceeds the record`);
  // (Subtracting: first + count - 1 could round back below 2^53.)
  if (first > Number.MAX_SAFE_INTEGER - (count - 1)) {
    throw malformed(what, `entries ${first} + ${count} pass 2^53`);
  }
  const entries: Entry[] = new Array<Entry>(count);
  let k = 0;
  try {
    for (; k < count; k++) {
      readVarint(bytes, v.next, ENTRY, 'term', v);
      const term = v.value;
      const typeCode = bytes[v.next];
      if (typeCode === undefined) throw malformed(ENTRY, 'truncated in the type');
      if (typeCode > 1) throw malformed(ENTRY, `unknown type code ${typeCode}`);
      const type = entryTypeOf(typeCode);
      readVarint(bytes, v.next + 1, ENTRY, 'data length', v);
      const end = v.next + v.value;
      if (end > bytes.byteLength) throw malformed(ENTRY, `data of ${v.value} bytes is truncated`);
      const data = new Uint8Array(bytes.buffer, bytes.byteOffset + v.next, v.value);
      entries[k] = { term, index: first + k, type, data };
      v.next = end;
    }
  } catch (err) {
    // Name the entry that does not decode: "entry: why" becomes "entry 9: why". The index is
    // put in only on failure, so decoding builds no string per entry.
    if (!(err instanceof CodecError)) throw err;
    const why = err.message.slice(ENTRY.length + 2);
    throw malformed(`${what} from ${first}`, `entry ${first + k}: ${why}`);
  }
  if (v.next !== bytes.byteLength) {
    throw malformed(what, `${bytes.byteLength - v.next} bytes follow its ${count} entries`);
  }
  return entries;
}
