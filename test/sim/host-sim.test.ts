// The production node runtime (MultiRaftHost over NodeStore) under the deterministic simulator,
// over simulated disks that lose unsynced writes at a power loss: a fixed list of seeds must keep
// the Ready contract and every invariant (host-sim.ts); a seed replays to the same trace hash;
// SimDisk keeps the durability rules the store relies on; and the checks are shown able to fail,
// by a store that drops the sync flag (a test seam wrapping the store, not a production flag).
import t from 'tap';
import type { HostStore } from '../../src/multiraft/host.js';
import { SeededRand } from '../../src/base/rand.js';
import { runHostSim } from './host-sim.js';
import { SimDisk } from './sim-disk.js';

const FIXED_SEEDS = Array.from({ length: 32 }, (_, i) => 1 + i);

t.test(
  `${FIXED_SEEDS.length} fixed seeds keep the Ready contract and every invariant`,
  async (t) => {
    const failures: string[] = [];
    const totals = {
      crashes: 0,
      powerLosses: 0,
      clusterPowerLosses: 0,
      partitions: 0,
      acked: 0,
      heartbeatsWhileHeld: 0,
      applySlices: 0,
    };
    for (const seed of FIXED_SEEDS) {
      const res = await runHostSim({ seed });
      totals.crashes += res.counts.crashes;
      totals.powerLosses += res.counts.powerLosses;
      totals.clusterPowerLosses += res.counts.clusterPowerLosses;
      totals.partitions += res.counts.partitions;
      totals.acked += res.counts.clientAcked;
      totals.heartbeatsWhileHeld += res.counts.heartbeatsWhileHeld;
      totals.applySlices += res.counts.applySlices;
      if (!res.ok)
        failures.push(`seed ${seed}: ${res.violation}\n  ${res.traceTail.slice(-15).join('\n  ')}`);
    }
    t.same(failures, [], 'no seed violates an invariant (replay: npm run sim -- --host --seed S)');
    t.ok(
      totals.crashes > 5 && totals.powerLosses > 20 && totals.clusterPowerLosses > 2,
      `faults were injected: ${JSON.stringify(totals)}`,
    );
    t.ok(totals.acked > 1000, `clients were acknowledged: ${totals.acked}`);
    t.ok(
      totals.heartbeatsWhileHeld > 0,
      `leaders sent heartbeats while a slow sync held their loop: ${totals.heartbeatsWhileHeld}`,
    );
    t.ok(totals.applySlices > 1000, `turns yielded between applies: ${totals.applySlices}`);
  },
);

t.test('the same seed gives a byte-identical trace', async (t) => {
  const a = await runHostSim({ seed: 7 });
  const b = await runHostSim({ seed: 7 });
  const c = await runHostSim({ seed: 8 });
  t.ok(a.ok && b.ok && c.ok, 'the seeds pass');
  t.equal(a.traceHash, b.traceHash, 'replay matches');
  t.equal(a.events, b.events);
  t.not(a.traceHash, c.traceHash, 'another seed differs');
});

t.test('SimDisk: sync, crash, reopen and power loss', async (t) => {
  const q: (() => void)[] = [];
  const disk = new SimDisk('d', {
    schedule: (_delay, fn) => q.push(fn),
    rand: new SeededRand(1),
    writeMs: () => 1,
  });
  const k = (s: string): Uint8Array => new TextEncoder().encode(s);
  let h = disk.open();
  const write = async (key: string, sync: boolean): Promise<void> => {
    const b = h.batch();
    b.put(k(key), k(`v-${key}`));
    const done = b.write({ sync });
    t.equal(h.getSync(k(key)), undefined, `${key} is not visible before the write ends`);
    q.shift()!();
    await done;
  };
  await write('a', false);
  await write('b', true);
  await write('c', false);
  t.equal(disk.volatileBatches(), 1, 'a sync made a and b durable; c is not');
  disk.crash();
  t.equal(disk.volatileBatches(), 1, 'a crash keeps the page cache');
  h = disk.open();
  t.ok(h.getSync(k('c')), 'the restarted process reads c');
  t.equal(disk.volatileBatches(), 0, 'and reopening made it durable, as LevelDB recovery does');
  // A random prefix of the volatile batches survives a power loss: some unsynced write is lost.
  let lost: string | undefined;
  for (let i = 0; i < 20 && lost === undefined; i++) {
    await write(`u${i}`, false);
    disk.powerLoss();
    h = disk.open();
    if (h.getSync(k(`u${i}`)) === undefined) lost = `u${i}`;
    t.ok(h.getSync(k('a')) && h.getSync(k('c')), 'durable data survives');
  }
  t.ok(lost !== undefined, `a power loss dropped the unsynced ${lost}`);
  const dead = h;
  disk.crash();
  const b = dead.batch();
  b.put(k('z'), k('z'));
  const never = b.write({ sync: true });
  t.equal(q.length, 0, "a crashed process's handle writes nothing");
  t.ok(never instanceof Promise, 'and its write never completes');
});

/** A store that commits without fsync: the runtime bug the simulator exists to catch. */
function ignoringSync(store: HostStore): HostStore {
  return {
    groupIds: () => store.groupIds(),
    group: (groupId) => store.group(groupId),
    createGroup: (groupId, bootstrap) => store.createGroup(groupId, bootstrap),
    commit: (updates) => store.commit(updates, { sync: false }),
    saveSnapshot: (groupId, snapshot) => store.saveSnapshot(groupId, snapshot),
    deleteGroup: (groupId) => store.deleteGroup(groupId),
  };
}

t.test('checker can fail: a commit without fsync breaks the Ready contract at once', async (t) => {
  const res = await runHostSim({ seed: 1, wrapStore: ignoringSync });
  t.notOk(res.ok, 'the run fails');
  t.match(res.violation ?? '', /while (its durable term|durable has)/, res.violation ?? '');
});

t.test(
  'checker can fail: without reading the disks, power losses expose a missing fsync',
  async (t) => {
    let caughtAt: number | undefined;
    let violation = '';
    for (const seed of FIXED_SEEDS) {
      const res = await runHostSim({ seed, wrapStore: ignoringSync, inspectDisks: false });
      if (!res.ok && res.counts.powerLosses > 0) {
        caughtAt = seed;
        violation = res.violation ?? '';
        break;
      }
    }
    t.ok(caughtAt !== undefined, `caught at seed ${caughtAt}: ${violation}`);
  },
);
