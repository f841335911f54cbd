/**
 * The byte layout of every key in a node's LevelDB; no other file builds or parses keys.
 *
 *   format          'F'
 *   group record    'G' group(u32 BE)
 *   hard state      'H' group(u32 BE)
 *   log record      'L' group(u32 BE) first index(u64 BE)
 *   snapshot meta   'M' group(u32 BE)
 *   snapshot chunk  'S' group(u32 BE) chunk(u32 BE)
 *
 * A log record (log-record.ts) holds consecutive entries from its first index on; a group's
 * records never overlap and leave no gap. Big-endian numbers make LevelDB's bytewise order the
 * numeric order, so a group's log is one contiguous key range sorted by index, and appends arrive
 * in key order (cheap compaction). Kind bytes are printable letters so that a raw dump of the database is readable.
 */
import { assertionFailed } from '../base/assert.js';

export type GroupKeyKind = 'group' | 'hard-state' | 'log' | 'snapshot-meta' | 'snapshot-chunk';
export type KeyKind = 'format' | GroupKeyKind;

const KIND_BYTE: Readonly<Record<KeyKind, number>> = {
  format: 0x46, // F
  group: 0x47, // G
  'hard-state': 0x48, // H
  log: 0x4c, // L
  'snapshot-meta': 0x4d, // M
  'snapshot-chunk': 0x53, // S
};

const KIND_OF_BYTE = new Map<number, KeyKind>(
  Object.entries(KIND_BYTE).map(([kind, byte]) => [byte, kind as KeyKind]),
);

export const GROUP_KIND_ORDER: readonly GroupKeyKind[] = [
  'group',
  'hard-state',
  'log',
  'snapshot-meta',
  'snapshot-chunk',
];

/** Group ids are u32: the key holds four bytes. */
export const GROUP_ID_MAX = 0xffff_ffff;
/** Snapshot data is stored in pieces of at most this many bytes (LevelDB dislikes huge values). */
export const SNAPSHOT_CHUNK_BYTES_MAX = 1 << 20;

const PREFIX_BYTES = 5;
const LOG_KEY_BYTES = PREFIX_BYTES + 8;
const CHUNK_KEY_BYTES = PREFIX_BYTES + 4;
const TWO_POW_32 = 0x1_0000_0000;

export type DecodedKey =
  | { readonly kind: 'format' }
  | { readonly kind: 'group' | 'hard-state' | 'snapshot-meta'; readonly groupId: number }
  | { readonly kind: 'snapshot-chunk'; readonly groupId: number; readonly chunk: number }
  | { readonly kind: 'log'; readonly groupId: number; readonly first: number };

/** A half-open key range [gte, lt), in the option names LevelDB iterators take. */
export interface KeyRange {
  readonly gte: Uint8Array;
  readonly lt: Uint8Array;
}

export function isGroupId(groupId: number): boolean {
  return Number.isInteger(groupId) && groupId >= 0 && groupId <= GROUP_ID_MAX;
}

function assertGroupId(groupId: number): void {
  if (!isGroupId(groupId)) assertionFailed(`group id ${groupId} is not a u32`);
}

function writeU32(out: Uint8Array, at: number, v: number): void {
  out[at] = v >>> 24;
  out[at + 1] = (v >>> 16) & 0xff;
  out[at + 2] = (v >>> 8) & 0xff;
  out[at + 3] = v & 0xff;
}

function readU32(key: Uint8Array, at: number): number {
  return ((key[at]! << 24) | (key[at + 1]! << 16) | (key[at + 2]! << 8) | key[at + 3]!) >>> 0;
}

function prefixed(kind: GroupKeyKind, groupId: number, bytes: number): Uint8Array {
  assertGroupId(groupId);
  const key = new Uint8Array(bytes);
  key[0] = KIND_BYTE[kind];
  writeU32(key, 1, groupId);
  return key;
}

export function formatKey(): Uint8Array {
  return Uint8Array.of(KIND_BYTE.format);
}

export function groupKey(groupId: number): Uint8Array {
  return prefixed('group', groupId, PREFIX_BYTES);
}

export function hardStateKey(groupId: number): Uint8Array {
  return prefixed('hard-state', groupId, PREFIX_BYTES);
}

export function snapshotMetaKey(groupId: number): Uint8Array {
  return prefixed('snapshot-meta', groupId, PREFIX_BYTES);
}

export function snapshotChunkKey(groupId: number, chunk: number): Uint8Array {
  if (!(Number.isInteger(chunk) && chunk >= 0 && chunk < TWO_POW_32))
    assertionFailed(`snapshot chunk ${chunk} is not a u32`);
  const key = prefixed('snapshot-chunk', groupId, CHUNK_KEY_BYTES);
  writeU32(key, PREFIX_BYTES, chunk);
  return key;
}

/** Bytes of every log record key. */
export const LOG_KEY_BYTES_TOTAL = LOG_KEY_BYTES;

/**
 * Writes the key of the log record of group `groupId` that starts at index `first` at `at` in
 * `out` (LOG_KEY_BYTES_TOTAL bytes), for callers that put many keys into one buffer; the bytes
 * are those of logKey().
 */
export function writeLogKey(out: Uint8Array, at: number, groupId: number, first: number): void {
  assertGroupId(groupId);
  // Index 0 is the empty log's snapshot point and never a stored entry.
  if (!Number.isSafeInteger(first) || first < 1) {
    assertionFailed(`log index ${first} is not storable`);
  }
  out[at] = KIND_BYTE.log;
  writeU32(out, at + 1, groupId);
  writeU32(out, at + PREFIX_BYTES, Math.floor(first / TWO_POW_32));
  writeU32(out, at + PREFIX_BYTES + 4, first >>> 0);
}

/** The key of the log record of a group that starts at index `first`. */
export function logKey(groupId: number, first: number): Uint8Array {
  const key = new Uint8Array(LOG_KEY_BYTES);
  writeLogKey(key, 0, groupId, first);
  return key;
}

/** Parses a key; undefined when it is not one this layout writes (wrong kind byte or length). */
export function decodeKey(key: Uint8Array): DecodedKey | undefined {
  const kind = KIND_OF_BYTE.get(key[0] ?? -1);
  if (kind === undefined) return undefined;
  if (kind === 'format') return key.byteLength === 1 ? { kind } : undefined;
  switch (kind) {
    case 'group':
    case 'hard-state':
    case 'snapshot-meta':
      if (key.byteLength !== PREFIX_BYTES) return undefined;
      return { kind, groupId: readU32(key, 1) };
    case 'snapshot-chunk':
      if (key.byteLength !== CHUNK_KEY_BYTES) return undefined;
      return { kind, groupId: readU32(key, 1), chunk: readU32(key, PREFIX_BYTES) };
    case 'log': {
      if (key.byteLength !== LOG_KEY_BYTES) return undefined;
      const first = readU32(key, PREFIX_BYTES) * TWO_POW_32 + readU32(key, PREFIX_BYTES + 4);
      // Past 2^53 the number would be rounded: such a key was never written by logKey().
      if (!Number.isSafeInteger(first) || first < 1) return undefined;
      return { kind, groupId: readU32(key, 1), first };
    }
  }
}

/** Every key of one kind for one group: the 5-byte prefix and the next prefix. */
export function groupKindRange(kind: GroupKeyKind, groupId: number): KeyRange {
  const gte = prefixed(kind, groupId, PREFIX_BYTES);
  // The next group's prefix; after the last group id, the next kind byte.
  const lt =
    groupId === GROUP_ID_MAX
      ? Uint8Array.of(KIND_BYTE[kind] + 1)
      : prefixed(kind, groupId + 1, PREFIX_BYTES);
  return { gte, lt };
}

/** All the ranges that together hold every key of a group (one per kind). */
export function groupRanges(groupId: number): KeyRange[] {
  return GROUP_KIND_ORDER.map((kind) => groupKindRange(kind, groupId));
}

/** Log records of a group whose first index is in [lo, hi). */
export function logRange(groupId: number, lo: number, hi: number): KeyRange {
  return { gte: logKey(groupId, lo), lt: logKey(groupId, hi) };
}

/** Stable text for error messages and logs: the decoded key, or hex when it does not decode. */
export function describeKey(key: Uint8Array): string {
  const k = decodeKey(key);
  if (k === undefined) return `0x${Buffer.from(key).toString('hex')}`;
  switch (k.kind) {
    case 'format':
      return 'format';
    case 'group':
    case 'hard-state':
    case 'snapshot-meta':
      return `${k.kind} g${k.groupId}`;
    case 'snapshot-chunk':
      return `snapshot-chunk g${k.groupId} #${k.chunk}`;
    case 'log':
      return `log g${k.groupId} from i${k.first}`;
  }
}
