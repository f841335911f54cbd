/**
 * `npx tsx bench/storage.ts`: figures for the node store, printed and never asserted.
 * (1) Group commit: 16 groups × N entries of 100 B plus a hard state per group, one synced
 * chained batch per commit(), against (2) the ceiling in the same run: a raw classic-level
 * chained batch of the same number of pre-built 13-byte keys and 100-byte values, also synced.
 * The gap is the store's own cost (keys, encoding, checks, mirrors); since store layout 2 the
 * store writes one log record per group and commit where the ceiling writes one key per entry, so
 * it can beat it. (3) Reopen: how fast open() loads and validates a store of that size. Each
 * case runs for a fixed time on a fresh database in os.tmpdir(), removed at the end. (4) Catch-up
 * reads, below.
 */
import { ClassicLevel } from 'classic-level';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import type { Entry } from '../src/raft/messages.js';
import { logKey } from '../src/storage/keys.js';
import { NodeStore } from '../src/storage/node-store.js';

const GROUPS = 16;
const ENTRY_BYTES = 100;
const CASE_MS = Number(process.env['BENCH_CASE_MS'] ?? 3000);
const PER_GROUP = [1, 4, 16, 64, 256];

interface Result {
  entriesPerSec: number;
  batchesPerSec: number;
  p50Ms: number;
  p99Ms: number;
  cpuUsPerEntry: number;
}

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
}

/**
 * Calls `write` for CASE_MS of measured time. `maintain` runs between writes off the clock (the
 * runtime's compaction is not part of a commit's latency).
 */
async function timed(
  write: () => Promise<number>,
  maintain?: () => Promise<void>,
): Promise<Result> {
  const lat: number[] = [];
  let entries = 0;
  let measuredMs = 0;
  let cpuUs = 0;
  while (measuredMs < CASE_MS) {
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    entries += await write();
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    cpuUs += cpu.user + cpu.system;
    measuredMs += ms;
    lat.push(ms);
    if (maintain) await maintain();
  }
  lat.sort((a, b) => a - b);
  return {
    entriesPerSec: entries / (measuredMs / 1000),
    batchesPerSec: lat.length / (measuredMs / 1000),
    p50Ms: quantile(lat, 0.5),
    p99Ms: quantile(lat, 0.99),
    cpuUsPerEntry: cpuUs / entries,
  };
}

async function groupCommit(dir: string, perGroup: number): Promise<Result> {
  const store = await NodeStore.open(dir);
  for (let g = 0; g < GROUPS; g++) await store.createGroup(g, undefined);
  const payload = new Uint8Array(ENTRY_BYTES).fill(7);
  let last = 0;
  const r = await timed(
    async () => {
      const lo = last + 1;
      last += perGroup;
      const entries: Entry[] = [];
      for (let i = lo; i <= last; i++) {
        entries.push({ index: i, term: 1, type: 'normal', data: payload });
      }
      const hardState = { term: 1, vote: 'n1', commit: lo - 1 };
      const stats = await store.commit(
        Array.from({ length: GROUPS }, (_, groupId) => ({ groupId, entries, hardState })),
      );
      return stats.entries;
    },
    async () => {
      // Compact now and then, as the runtime would, so the in-memory mirrors stay bounded.
      const g0 = store.group(0)!;
      const commit = g0.hardState().commit;
      if (commit - g0.firstIndex() < 8192) return;
      for (let g = 0; g < GROUPS; g++) {
        await store.saveSnapshot(g, {
          meta: { index: commit, term: 1, confState: g0.initialState().confState },
          data: new Uint8Array(64),
        });
      }
    },
  );
  await store.close();
  return r;
}

async function rawCeiling(dir: string, perGroup: number): Promise<Result> {
  const db = new ClassicLevel<Uint8Array, Uint8Array>(dir, {
    keyEncoding: 'view',
    valueEncoding: 'view',
  });
  await db.open();
  const value = new Uint8Array(ENTRY_BYTES).fill(7);
  let last = 0;
  const r = await timed(async () => {
    const lo = last + 1;
    last += perGroup;
    const batch = db.batch();
    for (let g = 0; g < GROUPS; g++) {
      for (let i = lo; i <= last; i++) batch.put(logKey(g, i), value);
    }
    await batch.write({ sync: true });
    return GROUPS * perGroup;
  });
  await db.close();
  return r;
}

async function reopenRate(dir: string): Promise<{ entries: number; ms: number }> {
  const start = performance.now();
  const store = await NodeStore.open(dir);
  const ms = performance.now() - start;
  let entries = 0;
  for (const id of store.groupIds()) {
    const g = store.group(id)!;
    entries += g.lastIndex() - g.firstIndex() + 1;
  }
  await store.close();
  return { entries, ms };
}

/**
 * (4) Catch-up reads: what a leader pays to send a lagging follower its missing entries, read as
 * Raft's appends do (entries(lo, last + 1, 1 MiB) from the first index to the last), from the
 * in-memory tail (a tail as large as the log) and from LevelDB (a tail of 0 bytes), on one group
 * of CATCH_UP_ENTRIES entries of CATCH_UP_ENTRY_BYTES (a registration's create-jobs entries are
 * about 3 KB).
 */
const CATCH_UP_ENTRIES = 20_000;
const CATCH_UP_ENTRY_BYTES = 3000;

async function catchUpReads(dir: string): Promise<{ memoryMs: number; diskMs: number }> {
  const store = await NodeStore.open(dir);
  await store.createGroup(1, undefined);
  const data = new Uint8Array(CATCH_UP_ENTRY_BYTES).fill(7);
  for (let lo = 1; lo <= CATCH_UP_ENTRIES; lo += 40) {
    const entries: Entry[] = [];
    for (let i = lo; i < lo + 40; i++) entries.push({ index: i, term: 1, type: 'normal', data });
    await store.commit([
      { groupId: 1, entries, hardState: { term: 1, vote: '', commit: lo + 39 } },
    ]);
  }
  await store.close();
  const readAll = async (logTailBytesMax: number): Promise<number> => {
    const s = await NodeStore.open(dir, { logTailBytesMax });
    const g = s.group(1)!;
    const start = performance.now();
    let bytes = 0;
    for (let lo = g.firstIndex(); lo <= g.lastIndex();) {
      const ents = g.entries(lo, g.lastIndex() + 1, 1024 * 1024)!;
      for (const e of ents) bytes += e.data.length;
      lo += ents.length;
    }
    const ms = performance.now() - start;
    if (bytes !== CATCH_UP_ENTRIES * CATCH_UP_ENTRY_BYTES) throw new Error(`read ${bytes} bytes`);
    await s.close();
    return ms;
  };
  return { memoryMs: await readAll(2 ** 40), diskMs: await readAll(0) };
}

const fmt = (n: number, digits = 0): string =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

const root = mkdtempSync(join(os.tmpdir(), 'tickraft-bench-storage-'));
try {
  const cpu = os.cpus()[0];
  console.log(
    `machine: ${os.cpus().length} × ${cpu?.model ?? 'unknown cpu'}, node ${process.version}; ` +
      `db in ${os.tmpdir()}; ${CASE_MS} ms per case`,
  );
  console.log(
    `${GROUPS} groups × N entries of ${ENTRY_BYTES} B per synced batch (+ a hard state per group)`,
  );
  console.log(
    '| N/group | entries/batch | store entries/s | batches/s | p50 ms | p99 ms | CPU µs/entry ' +
      '| raw entries/s | raw p50 ms | raw CPU µs/entry | store/raw |',
  );
  console.log('| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  let lastDir = '';
  for (const n of PER_GROUP) {
    lastDir = join(root, `store-${n}`);
    const s = await groupCommit(lastDir, n);
    const r = await rawCeiling(join(root, `raw-${n}`), n);
    console.log(
      `| ${n} | ${GROUPS * n} | ${fmt(s.entriesPerSec)} | ${fmt(s.batchesPerSec)} | ` +
        `${fmt(s.p50Ms, 3)} | ${fmt(s.p99Ms, 3)} | ${fmt(s.cpuUsPerEntry, 2)} | ` +
        `${fmt(r.entriesPerSec)} | ${fmt(r.p50Ms, 3)} | ${fmt(r.cpuUsPerEntry, 2)} | ` +
        `${fmt(s.entriesPerSec / r.entriesPerSec, 2)} |`,
    );
  }
  const open = await reopenRate(lastDir);
  console.log(
    `reopen of the last store: ${fmt(open.entries)} live entries in ${GROUPS} groups loaded and ` +
      `validated in ${fmt(open.ms, 1)} ms (${fmt(open.entries / (open.ms / 1000))} entries/s)`,
  );
  const c = await catchUpReads(join(root, 'catch-up'));
  const mb = (CATCH_UP_ENTRIES * CATCH_UP_ENTRY_BYTES) / 2 ** 20;
  console.log(
    `catch-up reads of ${fmt(CATCH_UP_ENTRIES)} entries (${fmt(mb, 1)} MiB) in 1 MiB appends: ` +
      `from memory ${fmt(c.memoryMs, 1)} ms, from LevelDB ${fmt(c.diskMs, 1)} ms ` +
      `(${fmt(mb / (c.diskMs / 1000))} MiB/s)`,
  );
} finally {
  rmSync(root, { recursive: true, force: true });
}
