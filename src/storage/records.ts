/**
 * Values stored under the keys of keys.ts, encoded with base/codec.ts. Decoders treat the bytes
 * as untrusted: anything that is not exactly the expected shape throws a CodecError, which the
 * loader turns into STORAGE_CORRUPT naming the group and key.
 *
 * Log entries are a 4-tuple rather than a map: they are the hot path and the bulk of the data.
 * The index is stored in the value as well as in the key, so a record found under the wrong key
 * is detected when read back.
 */
import { assert, assertNever } from '../base/assert.js';
import { CodecError, decode, encode } from '../base/codec.js';
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

export const STORE_LAYOUT = 1;

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

function malformed(what: string, why: string): CodecError {
  return new CodecError('CODEC_MALFORMED', `${what}: ${why}`);
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

function entryTypeCode(type: EntryType): number {
  switch (type) {
    case 'normal':
      return ENTRY_TYPE_CODE.normal;
    case 'conf-change':
      return ENTRY_TYPE_CODE['conf-change'];
    default:
      return assertNever(type, 'entry type');
  }
}

export function encodeEntry(e: Entry): Uint8Array {
  return encode([e.term, e.index, entryTypeCode(e.type), e.data]);
}

/** The data of the result is a view into `bytes`. */
export function decodeEntry(bytes: Uint8Array): Entry {
  const v = decode(bytes);
  if (!Array.isArray(v) || v.length !== 4) throw malformed('log entry', 'not a 4-tuple');
  const [term, index, typeCode, data] = v as unknown[];
  if (!isIndex(term)) throw malformed('log entry', `bad term ${String(term)}`);
  if (!isIndex(index) || index < 1) throw malformed('log entry', `bad index ${String(index)}`);
  if (!(data instanceof Uint8Array)) throw malformed('log entry', 'data is not bytes');
  let type: EntryType;
  if (typeCode === ENTRY_TYPE_CODE.normal) type = 'normal';
  else if (typeCode === ENTRY_TYPE_CODE['conf-change']) type = 'conf-change';
  else throw malformed('log entry', `unknown type code ${String(typeCode)}`);
  return { term, index, type, data };
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
  assert(same(dec(bytes), value), `${what} does not decode to what was encoded`);
  return bytes;
}
