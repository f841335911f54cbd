// Real processes: crashes in the middle of group splits, every-second jobs of both delivery
// modes firing to a sink throughout, no test hook in the product. A 3-node cluster, 2 groups.
// 1. Group 1's leader (not the meta leader) is frozen with SIGSTOP and a split of group 1 begun:
//    the meta leader's driver cannot reach the frozen leader, so the split stays between
//    begin-split and finish-split; the meta leader is then killed with kill -9 (the meta group
//    and group 1 are left without a quorum) and restarted. The split must finish under whichever
//    node leads the meta group next, on the two live replicas; then the frozen node resumes and
//    catches up (it applies the split entry and creates the child itself).
// 2. A split of group 2 is begun and a replica of group 2 (neither its leader nor the meta
//    leader) is killed with kill -9 right after it applied the split entry (the child group just
//    appeared on it), then restarted on its data.
// Checked as the user would: ranges and epochs in ClusterStatus, every group with its replicas
// and agreeing configurations, every job answering from its new owner, no slot skipped, no
// at-most-once fire id twice, each job's fencing tokens after the splits above those before;
// ListJobs, asked all along through a node that stays up, never answers without a job (a
// failed call is allowed, a short list is not). Prints where each crash fell and the largest fire delay.
import t from 'tap';
import { ApiClient } from '../../src/api/client.js';
import { hashShardKey } from '../../src/placement/hash.js';
import { jobKeyOf } from '../../src/scheduler/job-key.js';
import { retryUnavailable } from '../helpers/api-retry.js';
import { eventually, sleep, TEST_ADMIN_TOKEN } from '../helpers/cluster.js';
import {
  checkFires,
  checkLayout,
  jobsAcrossSplit,
  keepLogs,
  type FiringJob,
  type Obj,
} from '../helpers/membership-kit.js';
import { SchedulerCluster, TENANT } from '../helpers/scheduler-cluster.js';

const HALF = 2 ** 31;
const QUARTER = 2 ** 30;

function groupsOf(cs: Obj): Obj[] {
  return (cs['groups'] as Obj[]).filter((g) => g['groupId'] !== 0);
}

/** Asks ListJobs every 150 ms until stopped; counts answers that lack a job. */
function watchListJobs(client: ApiClient, want: () => readonly string[]) {
  const seen = { answers: 0, failed: 0, short: 0, firstShort: '', errors: new Set<string>() };
  let stop = false;
  const loop = (async () => {
    while (!stop) {
      const expected = [...want()];
      try {
        const r = await client.call<Obj>(
          'JobService',
          'ListJobs',
          { tenant: TENANT, pageSize: 1000 },
          5000,
        );
        const ids = new Set((r['jobs'] as Obj[]).map((j) => String(j['id'])));
        seen.answers++;
        const missing = expected.filter((id) => !ids.has(id));
        if (missing.length > 0) {
          seen.short++;
          if (seen.firstShort === '') seen.firstShort = missing.join(',');
        }
      } catch (err) {
        seen.failed++;
        seen.errors.add(String(err).slice(0, 160));
      }
      await sleep(150);
    }
  })();
  return {
    seen,
    stop: async () => {
      stop = true;
      await loop;
    },
  };
}

async function splitInFlight(client: ApiClient): Promise<Obj[]> {
  const cs = await client.call<Obj>('AdminService', 'ClusterStatus', {});
  return cs['splits'] as Obj[];
}

async function waitSplitDone(client: ApiClient, child: number): Promise<Obj> {
  return eventually(
    async () => {
      const cs = await client.call<Obj>('AdminService', 'ClusterStatus', {}, 3000);
      const c = groupsOf(cs).find((g) => g['groupId'] === child);
      if (!c || (cs['splits'] as Obj[]).length > 0) throw new Error('split not finished yet');
      return cs;
    },
    60_000,
    200,
  );
}

t.test('crashes in the middle of group splits', async (t) => {
  // Step 1 needs the split still in flight a moment after the group's leader froze: until the
  // group elects another leader nothing can commit it. Election timeouts of 1.5-3 s (75 ticks of
  // 20 ms) leave that moment to the test even on a loaded machine; with the default 0.2-0.4 s a
  // full npm test once saw the split done before it looked.
  const sc = await SchedulerCluster.start(t, {
    groups: 2,
    nodes: 3,
    extraArgs: ['--election-ticks', '75'],
  });
  keepLogs(t, sc, 'split-crash');
  const spec = { schedule: '* * * * * *', misfire: { policy: 'fire_all' } };
  const jobs1 = jobsAcrossSplit(sc, 1, QUARTER, 'one', 8);
  const jobs2 = jobsAcrossSplit(sc, 2, HALF + QUARTER, 'two', 8);
  const jobs: FiringJob[] = [...jobs1, ...jobs2];
  for (const j of jobs) await sc.createJob(j.id, { ...spec, delivery: j.mode });
  await sleep(2000);
  const crashes: string[] = [];

  // --- 1. A group's leader frozen, the meta leader killed, while its split is in flight. The
  // group split first is one whose leader is not the meta leader (start-up balancing spreads
  // the leaders; a transfer by hand would be undone by it).
  const { metaLeader, parentLeader, first } = await eventually(async () => {
    const { node: metaLeader } = await sc.leaderOf(0);
    for (const g of [1, 2]) {
      const { node } = await sc.leaderOf(g);
      if (node !== metaLeader) return { metaLeader, parentLeader: node, first: g };
    }
    throw new Error('the meta leader leads every data group');
  }, 30_000);
  const second = first === 1 ? 2 : 1;
  const stayUp = sc.cluster.nodes.find((n) => n !== metaLeader && n !== parentLeader)!;
  const client = new ApiClient(
    `${stayUp.host}:${stayUp.apiPort}`,
    10_000,
    {},
    { token: TEST_ADMIN_TOKEN },
  );
  t.teardown(() => client.close());
  const lists = watchListJobs(client, () => jobs.map((j) => j.id));
  const cs0 = await client.call<Obj>('AdminService', 'ClusterStatus', {});
  const epochBefore = new Map(groupsOf(cs0).map((g) => [g['groupId'], Number(g['epoch'])]));

  parentLeader.pause();
  const splitAt = Date.now();
  const begun = await client.call<Obj>('AdminService', 'SplitGroup', { groupId: first });
  const child1 = Number(begun['childGroupId']);
  t.equal(child1, 3, `the split of group ${first} creates group 3`);
  // The group has not elected a new leader yet (an election timeout has not passed): the driver
  // waits on the frozen one. Once the meta leader is killed, nothing can finish the split until
  // it is back (the meta group and the group have one live replica each).
  t.equal((await splitInFlight(client)).length, 1, 'the split is in flight at the kill');
  await metaLeader.kill9();
  crashes.push(
    `group ${first}'s leader ${parentLeader.id} frozen, meta leader ${metaLeader.id} killed between begin-split and finish-split`,
  );
  await sleep(1000);
  metaLeader.start();
  await waitSplitDone(client, child1);
  t.pass(`the split of group ${first} finished with ${parentLeader.id} still frozen`);
  parentLeader.resume();
  await eventually(async () => {
    const st = await parentLeader.status(1000);
    if (!st.groups.some((g) => g.groupId === child1))
      throw new Error(`${parentLeader.id} has no group ${child1} yet`);
  }, 60_000);
  t.pass(`${parentLeader.id} resumed and holds group ${child1}`);

  // --- 2. A replica of group 2 killed right after it applied the split entry.
  const { node: leader2 } = await sc.leaderOf(second);
  const { node: meta2 } = await sc.leaderOf(0);
  const victim = sc.cluster.nodes.find((n) => n !== leader2 && n !== meta2) ?? stayUp;
  const via2 = sc.cluster.nodes.find((n) => n !== victim)!;
  const client2 = new ApiClient(
    `${via2.host}:${via2.apiPort}`,
    10_000,
    {},
    { token: TEST_ADMIN_TOKEN },
  );
  t.teardown(() => client2.close());
  const begun2 = await client2.call<Obj>('AdminService', 'SplitGroup', { groupId: second });
  const child2 = Number(begun2['childGroupId']);
  t.equal(child2, 4, `the split of group ${second} creates group 4`);
  await eventually(
    async () => {
      const st = await victim.status(500);
      if (!st.groups.some((g) => g.groupId === child2)) throw new Error('not applied yet');
    },
    60_000,
    10,
  );
  await victim.kill9();
  crashes.push(
    `replica ${victim.id} of group ${second} killed right after it applied the split entry`,
  );
  await sleep(1000);
  victim.start();
  await sc.cluster.waitReady(60_000);
  const cs = await waitSplitDone(client2, child2);
  const doneAt = Date.now();
  await lists.stop();

  // Ranges and epochs.
  const range = (id: number): number[] => {
    const g = groupsOf(cs).find((x) => x['groupId'] === id);
    return [Number(g?.['rangeStart']), Number(g?.['rangeEnd'])];
  };
  const childOf = (g: number): number => (g === first ? child1 : child2);
  t.same(
    [range(1), range(childOf(1)), range(2), range(childOf(2))],
    [
      [0, QUARTER],
      [QUARTER, HALF],
      [HALF, HALF + QUARTER],
      [HALF + QUARTER, 2 ** 32],
    ],
    'each group owns half of its old range, the child the upper half',
  );
  for (const [parent, child] of [
    [first, child1],
    [second, child2],
  ] as const) {
    const old = epochBefore.get(parent)!;
    const epochOf = (id: number): number =>
      Number(groupsOf(cs).find((x) => x['groupId'] === id)?.['epoch']);
    t.ok(epochOf(parent) > old && epochOf(child) > old, `epochs of ${parent} and ${child} bumped`);
  }
  await checkLayout(t, client, sc.cluster.nodes);

  // Both halves serve: every job answers from the group that owns it now.
  const ownerOf = (id: string): number => {
    const h = hashShardKey(jobKeyOf(TENANT, id));
    if (h < QUARTER) return 1;
    if (h < HALF) return childOf(1);
    return h < HALF + QUARTER ? 2 : childOf(2);
  };
  for (const j of jobs) {
    // A group's leadership may still be settling (start-up balancing after the restart): a
    // client waits out UNAVAILABLE as its hint says.
    const r = await retryUnavailable(() =>
      client.call<Obj>('JobService', 'GetJob', { tenant: TENANT, jobId: j.id }),
    );
    t.equal(r['groupId'], ownerOf(j.id), `${j.id} answers from group ${ownerOf(j.id)}`);
  }
  const listed = await client.call<Obj>('JobService', 'ListJobs', { tenant: TENANT });
  t.equal((listed['jobs'] as Obj[]).length, jobs.length, 'ListJobs lists every job');

  await sleep(4000);
  const figures = await checkFires(t, sc, jobs, Date.now() - 2000);
  // Fencing tokens rise across the splits: every token a job's fires carried after both splits
  // finished is above every token it carried before the first began (a child leads in a later
  // term than its parent had at the split; a frozen leader's late send carries a lower one).
  for (const j of jobs) {
    const fires = sc.sink.of(j.id);
    const before = fires.filter((x) => x.atMs < splitAt).map((x) => x.token);
    const after = fires.filter((x) => x.atMs > doneAt).map((x) => x.token);
    t.ok(
      before.length > 0 && after.length > 0 && Math.min(...after) > Math.max(...before),
      `${j.id}: fencing tokens after the splits (${Math.min(...after)}) above those before (${Math.max(...before)})`,
    );
  }
  const { seen } = lists;
  t.equal(
    seen.short,
    0,
    `ListJobs never left a job out (first short answer lacked: ${seen.firstShort})`,
  );
  t.ok(seen.answers > 0, 'ListJobs answered during the splits');
  t.comment(
    `split crashes: ${crashes.join('; ')}; moves made: 2 splits; largest fire delay: ` +
      `${figures.maxDelayMs} ms; duplicates: ${figures.duplicates}; skipped slots: ` +
      `${figures.skipped} of ${figures.slots}; at-most-once UNKNOWN: ${figures.unknown}; ` +
      `ListJobs answers ${seen.answers}, failed ${seen.failed}, short ${seen.short}`,
  );
  for (const e of seen.errors) t.comment(`ListJobs failed: ${e}`);
});
