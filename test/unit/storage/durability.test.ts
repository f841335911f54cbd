// Durability across a real kill -9. Goal: once commit() resolves, the write survives the process
// dying at any moment, because the batch was written with sync and LevelDB replays it on open;
// and a write caught mid-flight is either wholly there or wholly absent (the store opens
// cleanly, with no gap). Method: spawn crash-writer.ts as a separate Node process that
// group-commits 4 groups in a loop and prints each acknowledged index after its commit promise
// resolves (and compacts now and then); SIGKILL it once it has acknowledged a random number of
// batches; reopen the store here and check every acknowledged index, its payload, and the hard
// state. Three rounds run on one database, each child resuming where the killed one stopped.
// Children are killed at teardown even when an assertion fails first.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import t, { type Test } from 'tap';
import { SeededRand } from '../../../src/base/rand.js';
import { NodeStore } from '../../../src/storage/node-store.js';
import { CRASH_ENTRY_BYTES, CRASH_GROUPS, payload, scratchDir } from './helpers.js';

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
const writer = fileURLToPath(new URL('./crash-writer.ts', import.meta.url));
const CHILD_DEADLINE_MS = 60_000;

interface Acks {
  lastAck: number;
  lastSnap: number;
  lines: number;
}

/** Runs the writer until it has acknowledged `batches` commits, then SIGKILLs it. */
function runAndKill(t: Test, dir: string, batches: number): Promise<Acks> {
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', writer, dir], {
    cwd: repoRoot,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  const acks: Acks = { lastAck: 0, lastSnap: 0, lines: 0 };
  let stderr = '';
  let pending = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new Error(`writer acknowledged only ${acks.lines} batches in time; stderr: ${stderr}`),
      );
    }, CHILD_DEADLINE_MS);
    child.stderr!.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      pending += chunk;
      const lines = pending.split('\n');
      pending = lines.pop()!;
      for (const line of lines) {
        const [what, n] = line.split(' ');
        if (what === 'ack') {
          acks.lastAck = Number(n);
          acks.lines++;
        } else if (what === 'snap') {
          acks.lastSnap = Number(n);
        }
      }
      // Kill the moment the target is reached: the writer is then mid-way through its next batch.
      if (acks.lines >= batches && child.signalCode === null) child.kill('SIGKILL');
    });
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (signal === 'SIGKILL') resolve(acks);
      else reject(new Error(`writer exited by itself (code ${code}); stderr: ${stderr}`));
    });
  });
}

t.test('every acknowledged commit survives kill -9', async (t) => {
  const dir = scratchDir(t);
  const rand = new SeededRand(20_261_129);
  let acknowledged = 0;
  for (let round = 1; round <= 3; round++) {
    const batches = 60 + rand.int(140);
    const acks = await runAndKill(t, dir, batches);
    t.ok(acks.lastAck >= acknowledged, `round ${round}: resumed from the previous round`);
    acknowledged = acks.lastAck;

    const store = await NodeStore.open(dir);
    try {
      for (const id of CRASH_GROUPS) {
        const g = store.group(id);
        if (g === undefined) {
          t.fail(`group ${id} missing`);
          continue;
        }
        t.ok(g.lastIndex() >= acknowledged, `round ${round} g${id}: last index covers the acks`);
        t.ok(g.hardState().commit >= acknowledged, `round ${round} g${id}: commit covers the acks`);
        t.ok(g.firstIndex() - 1 >= acks.lastSnap, `round ${round} g${id}: compaction survived`);
        // Every acknowledged entry that was not compacted away is there, intact.
        const es = g.entries(g.firstIndex(), acknowledged + 1, Infinity) ?? [];
        const bad = es.filter((e, k) => {
          const want = payload(g.firstIndex() + k, 1, CRASH_ENTRY_BYTES);
          return e.index !== g.firstIndex() + k || Buffer.compare(e.data, want) !== 0;
        });
        t.equal(es.length, acknowledged - g.firstIndex() + 1, `round ${round} g${id}: no gap`);
        t.same(bad, [], `round ${round} g${id}: payloads intact`);
        const snap = g.snapshot()!;
        t.equal(
          snap.data.byteLength,
          snap.meta.index === 0 ? 0 : (1 << 20) + 4096 + snap.meta.index,
        );
      }
    } finally {
      await store.close();
    }
  }
  t.ok(acknowledged > 0);
});
