/**
 * Shared pieces of the storage tests: entries with recognisable payloads, stores and raw LevelDB
 * handles that are closed at teardown (tap runs teardowns last-registered first, so they close
 * before the temp dir registered earlier is removed), and a plain rendering of a group's state
 * for comparisons.
 */
import { ClassicLevel } from 'classic-level';
import type { Entry, HardState } from '../../../src/raft/messages.js';
import type { GroupLog } from '../../../src/storage/group-log.js';
import { NodeStore, type NodeStoreOptions } from '../../../src/storage/node-store.js';
import { tempDir, type Teardown } from '../../helpers/temp-dir.js';

/** The groups and entry size crash-writer.ts writes; durability.test.ts checks them. */
export const CRASH_GROUPS: readonly number[] = [1, 2, 3, 4];
export const CRASH_ENTRY_BYTES = 100;

export type RawDb = ClassicLevel<Uint8Array, Uint8Array>;

/** A payload derived from (index, term), so a stale or misplaced entry is recognisable. */
export function payload(index: number, term: number, size = 8): Uint8Array {
  const out = new Uint8Array(size);
  for (let i = 0; i < size; i++) out[i] = (index * 31 + term * 7 + i) & 0xff;
  return out;
}

export function ent(index: number, term: number, size = 8): Entry {
  return { index, term, type: 'normal', data: payload(index, term, size) };
}

/** Entries lo..hi (inclusive), all in one term. */
export function ents(lo: number, hi: number, term: number, size = 8): Entry[] {
  const out: Entry[] = [];
  for (let i = lo; i <= hi; i++) out.push(ent(i, term, size));
  return out;
}

export function hs(term: number, commit: number, vote = ''): HardState {
  return { term, vote, commit };
}

export function scratchDir(t: Teardown): string {
  return tempDir(t, 'storage');
}

export async function openStore(
  t: Teardown,
  dir: string,
  options: NodeStoreOptions = {},
): Promise<NodeStore> {
  const store = await NodeStore.open(dir, options);
  t.teardown(() => store.close());
  return store;
}

export async function openRaw(t: Teardown, dir: string): Promise<RawDb> {
  const db = new ClassicLevel<Uint8Array, Uint8Array>(dir, {
    keyEncoding: 'view',
    valueEncoding: 'view',
  });
  await db.open();
  t.teardown(() => db.close());
  return db;
}

export async function allKeys(db: RawDb): Promise<Uint8Array[]> {
  return db.keys().all();
}

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');

/** Everything a group's storage answers, as plain data that t.same() can compare. */
export function dumpGroup(log: GroupLog) {
  const first = log.firstIndex();
  const last = log.lastIndex();
  const snap = log.snapshot();
  const entries = last >= first ? (log.entries(first, last + 1, Infinity) ?? []) : [];
  return {
    firstIndex: first,
    lastIndex: last,
    terms: [first - 1, ...entries.map((e) => e.index)].map((i) => log.term(i)),
    entries: entries.map((e) => ({
      index: e.index,
      term: e.term,
      type: e.type,
      data: hex(e.data),
    })),
    hardState: log.initialState().hardState,
    confState: log.initialState().confState,
    snapshot: snap && { meta: snap.meta, bytes: snap.data.byteLength, data: hashBytes(snap.data) },
  };
}

/** A cheap fingerprint of large snapshot data (FNV-1a), so failures do not print megabytes. */
export function hashBytes(b: Uint8Array): string {
  let h = 0x811c9dc5;
  for (const x of b) h = Math.imul(h ^ x, 0x01000193) >>> 0;
  return `${b.byteLength}:${h.toString(16)}`;
}
