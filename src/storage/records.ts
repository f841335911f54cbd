/**
 * Values stored under the keys of keys.ts, encoded with base/codec.ts. Decoders treat the bytes
 * as untrusted: anything that is not exactly the expected shape throws a CodecError, which the
 * loader turns into STORAGE_CORRUPT naming the group and key.
 *
 * Log entries are the hot path and the bulk of the data, so they have compact binary records of
 * their own rather than msgpack: runs of entries (log-record.ts) since layout 2; before it, one
 * entry per record (ENTRY_RECORD_VERSION here, or a msgpack 4-tuple behind CODEC_VERSION), still
 * read as runs of one.
 */
import { assertNever, assertionFailed } from '../base/assert.js';
import { CODEC_VERSION, CodecError, decode, encode } from '../base/codec.js';
import { malformed, readVarint, varintBytes, writeVarint, type Varint } from './varint.js';
import type {
  ConfState,
  Entry,
  EntryType,
  HardState,
  NodeId,
  SnapshotMeta,
} from '../raft/messages.js';

/** What the store file itself says about its layout; written once, at creation. */
export interface FormatRecord {
  readonly store: 'tickraft-node-store';
  readonly layout: number;
}

/**
 * The layout this build writes. 2: log records hold runs of entries (log-record.ts). A store of
 * layout 1 (one entry per record) is still read, since such a record is a run of one, and its
 * format record is moved to 2 at open, before anything of the new layout is written: a build
 * that reads only layout 1 then refuses the store instead of finding records it cannot decode.
 */
export const STORE_LAYOUT = 2;

/** Older layouts this build reads (and upgrades at open). */
export const STORE_LAYOUTS_READ: readonly number[] = [1, STORE_LAYOUT];

/** How a group replica was created: with the initial members (bootstrap) or empty. */
export interface GroupBootstrap {
  readonly voters: readonly NodeId[];
  readonly learners: readonly NodeId[];
}

export interface GroupRecord {
  /** undefined: an empty replica that a leader fills by snapshot or appends. */
  readonly bootstrap: GroupBootstrap | undefined;
}

/** Snapshot metadata plus how its data was cut into chunks. */
export interface SnapshotMetaRecord {
  readonly meta: SnapshotMeta;
  readonly chunkCount: number;
  readonly dataBytes: number;
}

function isIndex(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

function isNodeIds(v: unknown): v is NodeId[] {
  return Array.isArray(v) && v.every((x) => typeof x === 'string');
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array);
}

const ENTRY_TYPE_CODE = { normal: 0, 'conf-change': 1 } as const;

export function entryTypeCode(type: EntryType): number {
  switch (type) {
    case 'normal':
      return ENTRY_TYPE_CODE.normal;
    case 'conf-change':
      return ENTRY_TYPE_CODE['conf-change'];
    default:
      return assertNever(type, 'entry type');
  }
}

/**
 * The first byte of a binary log entry record. The record is
 *
 *   version (1 byte) | term (varint) | index (varint) | type code (1 byte) | data length (varint)
 *   | data
 *
 * with unsigned LEB128 varints in their shortest form, each below 2^53. The length makes a
 * truncated or extended record detectable. Version 1 (CODEC_VERSION) is the older msgpack
 * 4-tuple [term, index, type code, data].
 */
export const ENTRY_RECORD_VERSION = 2;

/** Bytes of the binary record of `e` (encodeEntryInto writes exactly this many). */
export function entryRecordBytes(e: Entry): number {
  const len = e.data.length; // byteLength of a Uint8Array; the getter V8 inlines
  return 2 + varintBytes(e.term) + varintBytes(e.index) + varintBytes(len) + len;
}

/**
 * Writes the binary record of `e` at `at` (entryRecordBytes(e) bytes must be free there);
 * returns the offset after it. Lets a caller put many records into one buffer.
 */
export function encodeEntryInto(out: Uint8Array, at: number, e: Entry): number {
  if (!Number.isSafeInteger(e.term) || e.term < 0) {
    assertionFailed(`entry term ${e.term} is not storable`);
  }
  if (!Number.isSafeInteger(e.index) || e.index < 1) {
    assertionFailed(`entry index ${e.index} is not storable`);
  }
  out[at++] = ENTRY_RECORD_VERSION;
  at = writeVarint(out, at, e.term);
  at = writeVarint(out, at, e.index);
  out[at++] = entryTypeCode(e.type);
  const len = e.data.length;
  at = writeVarint(out, at, len);
  out.set(e.data, at);
  return at + len;
}

export function encodeEntry(e: Entry): Uint8Array {
  const out = new Uint8Array(entryRecordBytes(e));
  const end = encodeEntryInto(out, 0, e);
  if (end !== out.byteLength)
    assertionFailed(`entry ${e.index}: record size ${end} != ${out.byteLength}`);
  return out;
}

export function entryTypeOf(typeCode: unknown): EntryType {
  if (typeCode === ENTRY_TYPE_CODE.normal) return 'normal';
  if (typeCode === ENTRY_TYPE_CODE['conf-change']) return 'conf-change';
  throw malformed('log entry', `unknown type code ${String(typeCode)}`);
}

function decodeBinaryEntry(bytes: Uint8Array): Entry {
  const v: Varint = { value: 0, next: 1 };
  readVarint(bytes, v.next, 'log entry', 'term', v);
  const term = v.value;
  readVarint(bytes, v.next, 'log entry', 'index', v);
  const index = v.value;
  if (index < 1) throw malformed('log entry', `bad index ${index}`);
  const typeCode = bytes[v.next];
  if (typeCode === undefined) throw malformed('log entry', 'truncated in the type');
  const type = entryTypeOf(typeCode);
  readVarint(bytes, v.next + 1, 'log entry', 'data length', v);
  const end = v.next + v.value;
  if (end !== bytes.byteLength) {
    throw malformed(
      'log entry',
      `data of ${v.value} bytes ${end > bytes.byteLength ? 'is truncated' : 'is followed by more bytes'}`,
    );
  }
  const data = new Uint8Array(bytes.buffer, bytes.byteOffset + v.next, v.value);
  return { term, index, type, data };
}

/** The older record: msgpack [term, index, type code, data] behind CODEC_VERSION. */
function decodeTupleEntry(bytes: Uint8Array): Entry {
  const v = decode(bytes);
  if (!Array.isArray(v) || v.length !== 4) throw malformed('log entry', 'not a 4-tuple');
  const [term, index, typeCode, data] = v as unknown[];
  if (!isIndex(term)) throw malformed('log entry', `bad term ${String(term)}`);
  if (!isIndex(index) || index < 1) throw malformed('log entry', `bad index ${String(index)}`);
  if (!(data instanceof Uint8Array)) throw malformed('log entry', 'data is not bytes');
  return { term, index, type: entryTypeOf(typeCode), data };
}

/** The data of the result is a view into `bytes`. */
export function decodeEntry(bytes: Uint8Array): Entry {
  const version = bytes[0];
  if (version === ENTRY_RECORD_VERSION) return decodeBinaryEntry(bytes);
  if (version === CODEC_VERSION) return decodeTupleEntry(bytes);
  if (version === undefined) throw malformed('log entry', 'empty record');
  throw new CodecError(
    'CODEC_UNKNOWN_VERSION',
    `log entry record version ${version} is neither ${ENTRY_RECORD_VERSION} nor ${CODEC_VERSION}`,
  );
}

export function sameEntry(a: Entry, b: Entry): boolean {
  if (a.term !== b.term || a.index !== b.index || a.type !== b.type) return false;
  // Buffer.compare takes any Uint8Array: one native call instead of a loop over the bytes.
  return Buffer.compare(a.data, b.data) === 0;
}

export function encodeHardState(hs: HardState): Uint8Array {
  return encode({ term: hs.term, vote: hs.vote, commit: hs.commit });
}

export function decodeHardState(bytes: Uint8Array): HardState {
  const v = decode(bytes);
  if (!isObject(v)) throw malformed('hard state', 'not a map');
  const { term, vote, commit } = v;
  if (!isIndex(term) || typeof vote !== 'string' || !isIndex(commit)) {
    throw malformed('hard state', 'fields term, vote, commit have the wrong types');
  }
  return { term, vote, commit };
}

export function sameHardState(a: HardState, b: HardState): boolean {
  return a.term === b.term && a.vote === b.vote && a.commit === b.commit;
}

function toConfStateValue(cs: ConfState): Record<string, unknown> {
  return {
    voters: cs.voters,
    votersOutgoing: cs.votersOutgoing,
    learners: cs.learners,
    learnersNext: cs.learnersNext,
    autoLeave: cs.autoLeave,
  };
}

function fromConfStateValue(v: unknown): ConfState {
  if (!isObject(v)) throw malformed('snapshot meta', 'confState is not a map');
  const { voters, votersOutgoing, learners, learnersNext, autoLeave } = v;
  if (
    !isNodeIds(voters) ||
    !isNodeIds(votersOutgoing) ||
    !isNodeIds(learners) ||
    !isNodeIds(learnersNext) ||
    typeof autoLeave !== 'boolean'
  ) {
    throw malformed('snapshot meta', 'confState fields have the wrong types');
  }
  return { voters, votersOutgoing, learners, learnersNext, autoLeave };
}

export function encodeSnapshotMeta(r: SnapshotMetaRecord): Uint8Array {
  return encode({
    index: r.meta.index,
    term: r.meta.term,
    confState: toConfStateValue(r.meta.confState),
    chunkCount: r.chunkCount,
    dataBytes: r.dataBytes,
  });
}

export function decodeSnapshotMeta(bytes: Uint8Array): SnapshotMetaRecord {
  const v = decode(bytes);
  if (!isObject(v)) throw malformed('snapshot meta', 'not a map');
  const { index, term, confState, chunkCount, dataBytes } = v;
  if (!isIndex(index) || !isIndex(term) || !isIndex(chunkCount) || !isIndex(dataBytes)) {
    throw malformed('snapshot meta', 'fields index, term, chunkCount, dataBytes must be integers');
  }
  return { meta: { index, term, confState: fromConfStateValue(confState) }, chunkCount, dataBytes };
}

export function sameNodeIds(a: readonly NodeId[], b: readonly NodeId[]): boolean {
  return a.length === b.length && a.every((id, i) => id === b[i]);
}

export function sameConfState(a: ConfState, b: ConfState): boolean {
  return (
    sameNodeIds(a.voters, b.voters) &&
    sameNodeIds(a.votersOutgoing, b.votersOutgoing) &&
    sameNodeIds(a.learners, b.learners) &&
    sameNodeIds(a.learnersNext, b.learnersNext) &&
    a.autoLeave === b.autoLeave
  );
}

export function sameSnapshotMeta(a: SnapshotMetaRecord, b: SnapshotMetaRecord): boolean {
  return (
    a.meta.index === b.meta.index &&
    a.meta.term === b.meta.term &&
    sameConfState(a.meta.confState, b.meta.confState) &&
    a.chunkCount === b.chunkCount &&
    a.dataBytes === b.dataBytes
  );
}

export function encodeGroupRecord(r: GroupRecord): Uint8Array {
  const b = r.bootstrap;
  return encode({ bootstrap: b === undefined ? null : { voters: b.voters, learners: b.learners } });
}

export function decodeGroupRecord(bytes: Uint8Array): GroupRecord {
  const v = decode(bytes);
  if (!isObject(v)) throw malformed('group record', 'not a map');
  const b = v['bootstrap'];
  if (b === null) return { bootstrap: undefined };
  if (!isObject(b) || !isNodeIds(b['voters']) || !isNodeIds(b['learners'])) {
    throw malformed('group record', 'bootstrap is neither null nor {voters, learners}');
  }
  return { bootstrap: { voters: b['voters'], learners: b['learners'] } };
}

export function sameGroupRecord(a: GroupRecord, b: GroupRecord): boolean {
  if (a.bootstrap === undefined || b.bootstrap === undefined) {
    return a.bootstrap === b.bootstrap;
  }
  return (
    sameNodeIds(a.bootstrap.voters, b.bootstrap.voters) &&
    sameNodeIds(a.bootstrap.learners, b.bootstrap.learners)
  );
}

export function encodeFormat(r: FormatRecord): Uint8Array {
  return encode({ store: r.store, layout: r.layout });
}

export function decodeFormat(bytes: Uint8Array): FormatRecord {
  const v = decode(bytes);
  if (!isObject(v) || v['store'] !== 'tickraft-node-store' || !isIndex(v['layout'])) {
    throw malformed('format record', 'not a tickraft node store header');
  }
  return { store: 'tickraft-node-store', layout: v['layout'] };
}

/**
 * Encodes a small record and decodes it straight back (a pair assertion): a codec change that
 * loses a field fails here, at the write, not at the next restart.
 */
export function encodeChecked<T>(
  what: string,
  value: T,
  enc: (v: T) => Uint8Array,
  dec: (b: Uint8Array) => T,
  same: (a: T, b: T) => boolean,
): Uint8Array {
  const bytes = enc(value);
  if (!same(dec(bytes), value)) assertionFailed(`${what} does not decode to what was encoded`);
  return bytes;
}
