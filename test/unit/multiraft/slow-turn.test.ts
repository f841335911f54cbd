// A turn that holds the loop is reported with where its time went (the figure an operator lines
// up with a leader change), and a turn whose applies run long yields the loop between them. A
// real host on a real LevelDB store; only the clock is ours, so that a "slow" apply is exactly as
// slow as the test says.
import t, { type Test } from 'tap';
import type { HostOptions, MultiRaftHost, SlowTurn } from '../../../src/multiraft/host.js';
import { compileRaftOptions } from '../../../src/raft/config.js';
import { manualHost, type ManualClock } from './host-harness.js';

/**
 * A started host of single-voter groups on a fresh LevelDB store, every group led: the clock is
 * moved a tick at a time until each voter's election timer ran out (no turn is slow meanwhile).
 */
async function ledHost(
  t: Test,
  groups: readonly number[],
  extra: Pick<HostOptions, 'slowTurnMs' | 'applySliceMs' | 'yieldToLoop'>,
): Promise<{ host: MultiRaftHost; clock: ManualClock }> {
  const { host, clock } = await manualHost(t, compileRaftOptions({}), 50, 7, extra);
  for (const g of groups) await host.createGroup(g, { voters: ['n1'] });
  host.start();
  t.teardown(() => host.stop());
  const led = (): boolean => groups.every((g) => host.groups.get(g)?.isLeader === true);
  for (let i = 0; i < 200 && !led(); i++) {
    clock.ms += 50;
    host.wake();
    await host.idle();
    await new Promise((resolve) => setImmediate(resolve));
  }
  t.ok(led(), 'every single-voter group leads');
  return { host, clock };
}

t.test(
  'a turn at or above slowTurnMs is reported with its apply time; a quick one is not',
  async (t) => {
    const reports: SlowTurn[] = [];
    const { host } = await ledHost(t, [1], { slowTurnMs: 250 });
    host.onSlowTurn = (turn) => reports.push(turn);
    await host.propose(1, Uint8Array.of(0));
    await host.idle();
    t.same(reports, [], 'no report for quick turns');

    await host.propose(1, Uint8Array.of(30));
    await host.idle();
    t.equal(reports.length, 1, 'one report for the slow apply');
    const r = reports[0]!;
    t.equal(r.applyMs, 300, 'the apply time is the command’s');
    t.equal(r.totalMs, 300, 'the turn took exactly as long');
    t.equal(
      r.persistMs + r.sendMs + r.stepMs + r.snapshotMs + r.afterTurnMs,
      0,
      'nothing else moved the clock',
    );
    t.equal(r.entriesApplied, 1);
    t.same(
      r.longestApply,
      { ms: 300, groupId: 1, entries: 1, bytes: 1 },
      'the longest single apply: its group, entries and bytes',
    );
    t.equal(r.groupsReady, 1);
    t.equal(r.snapshotGroup, undefined, 'no snapshot in that turn');

    await host.propose(1, Uint8Array.of(24));
    await host.idle();
    t.equal(reports.length, 1, 'a 240 ms turn stays below 250 ms: not reported');
  },
);

t.test('a turn yields the loop once a slice of applySliceMs has run', async (t) => {
  let yields = 0;
  const reports: SlowTurn[] = [];
  const { host } = await ledHost(t, [1, 2], {
    slowTurnMs: 200,
    applySliceMs: 100,
    yieldToLoop: () => {
      yields++;
      return new Promise<void>((resolve) => setImmediate(resolve));
    },
  });
  host.onSlowTurn = (turn) => reports.push(turn);
  const before = yields;
  await Promise.all([host.propose(1, Uint8Array.of(4)), host.propose(2, Uint8Array.of(4))]);
  await host.idle();
  t.equal(yields - before, 0, 'two 40 ms applies in one turn: no slice reached 100 ms');
  await Promise.all([host.propose(1, Uint8Array.of(12)), host.propose(2, Uint8Array.of(12))]);
  await host.idle();
  t.equal(yields - before, 2, 'two 120 ms applies: a yield after each');
  t.equal(host.stats.applySlices, yields, 'counted');
  t.equal(reports.length, 1, 'the 240 ms turn is reported');
  t.equal(reports[0]?.slices, 2, 'with the times it yielded the loop');
});
