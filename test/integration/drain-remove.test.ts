// Real processes: shrinking a 4-node cluster while every-second jobs of both delivery modes
// fire in every group. (1) `tickctl cluster remove-node n2` is refused while n2 holds replicas;
// `tickctl cluster drain-node n2` moves every replica and leadership off it (learner, catch-up,
// joint consensus), then `remove-node n2` removes it, also from the meta group's configuration.
// (2) n3 is killed with kill -9 for good; `remove-node n3` is refused, `remove-node n3 --force`
// re-creates its replicas on the survivors and removes it. After each, every group has its 3
// replicas on live nodes, no move is in flight and no configuration is joint; no slot was
// skipped and no at-most-once fire id arrived twice. Each prints moves made and the largest fire
// delay.
import t from 'tap';
import { ApiClient } from '../../src/api/client.js';
import { eventually, sleep, type ProcNode, TEST_ADMIN_TOKEN } from '../helpers/cluster.js';
import {
  checkFires,
  checkLayout,
  jobsInEveryGroup,
  keepLogs,
  tickctl,
  type Obj,
} from '../helpers/membership-kit.js';
import { SchedulerCluster } from '../helpers/scheduler-cluster.js';

async function metaVoters(n: ProcNode): Promise<string[]> {
  const st = await n.status(1000);
  return [...(st.groups.find((g) => g.groupId === 0)?.voters ?? [])].sort();
}

t.test('drain a node, then remove it, while jobs fire', async (t) => {
  const sc = await SchedulerCluster.start(t, { groups: 4, nodes: 4 });
  keepLogs(t, sc, t.name.split(' ')[0] ?? 'test');
  const n1 = sc.cluster.node('n1');
  const endpoint = `${n1.host}:${n1.apiPort}`;
  const client = new ApiClient(endpoint, 10_000, {}, { token: TEST_ADMIN_TOKEN });
  t.teardown(() => client.close());
  const jobs = await jobsInEveryGroup(sc, 'drain');
  await sleep(2000);

  const early = await tickctl(['cluster', 'remove-node', 'n2', '--endpoint', endpoint]);
  t.equal(early.code, 4, 'remove-node of a node holding replicas exits 4');
  t.match(early.err, /n2 still holds replicas of group\(s\) .*; drain it first/);

  const dry = await tickctl(['cluster', 'drain-node', 'n2', '--dry-run', '--endpoint', endpoint]);
  t.equal(dry.code, 0, `dry run: ${dry.err}`);
  t.match(dry.out, /WAVE\s+GROUP\s+FROM\s+TO/);
  const planned = dry.out.split('\n').filter((l) => /^\d+\s+\d+\s+n2\s+n\d/.test(l));
  t.equal(planned.length, 3, 'the plan moves n2’s 3 replicas away');
  const st0 = await client.call<Obj>('AdminService', 'ClusterStatus', {});
  t.equal(
    (st0['nodes'] as Obj[]).find((n) => n['id'] === 'n2')?.['state'],
    'active',
    'a dry run does not mark the node draining',
  );

  const drain = await tickctl([
    'cluster',
    'drain-node',
    'n2',
    '--endpoint',
    endpoint,
    '--max-concurrent-moves',
    '2',
    '--timeout-ms',
    '30000',
  ]);
  t.comment(drain.out);
  t.equal(drain.code, 0, `drain-node exits 0: ${drain.err}`);
  t.match(drain.out, /drained n2: \d+ move\(s\)/);
  const moves = drain.out.split('\n').filter((l) => l.startsWith('move ')).length;
  t.equal(moves, 3, 'three replicas moved off n2');

  const n2 = sc.cluster.node('n2');
  const live = sc.cluster.nodes.filter((n) => n.id !== 'n2');
  const perNode = await checkLayout(t, client, live);
  t.same(
    [...perNode.entries()].sort(),
    [
      ['n1', 4],
      ['n3', 4],
      ['n4', 4],
    ],
    'the other nodes hold 4 of the 12 data replicas each',
  );
  await eventually(async () => {
    const st = await n2.status(1000);
    const data = st.groups.filter((g) => g.groupId !== 0);
    if (data.length > 0) throw new Error(`n2 still hosts ${data.map((g) => g.groupId).join(',')}`);
  }, 30_000);
  t.pass('n2 deleted the replicas it gave away and leads nothing');
  const st1 = await client.call<Obj>('AdminService', 'ClusterStatus', {});
  t.equal(
    (st1['nodes'] as Obj[]).find((n) => n['id'] === 'n2')?.['state'],
    'draining',
    'n2 is draining',
  );
  t.notOk(
    (st1['groups'] as Obj[]).some((g) => g['leader'] === 'n2'),
    'n2 leads no group (the meta group included)',
  );

  const rm = await tickctl(['cluster', 'remove-node', 'n2', '--endpoint', endpoint]);
  t.equal(rm.code, 0, `remove-node exits 0: ${rm.err}`);
  t.match(rm.out, /removed n2/);
  await eventually(async () => {
    const voters = await metaVoters(n1);
    if (voters.includes('n2')) throw new Error(`meta voters ${voters.join(',')}`);
  }, 30_000);
  t.same(await metaVoters(n1), ['n1', 'n3', 'n4'], 'n2 left the meta group’s configuration');
  const again = await tickctl(['cluster', 'remove-node', 'n2', '--endpoint', endpoint]);
  t.equal(again.code, 0, 'removing it again is a no-op');
  await n2.term();

  await sleep(3000);
  const figures = await checkFires(t, sc, jobs, Date.now() - 2000);
  t.comment(
    `drain + remove: moves made: ${moves}; largest fire delay: ${figures.maxDelayMs} ms; ` +
      `duplicates: ${figures.duplicates}; skipped slots: ${figures.skipped} of ${figures.slots}`,
  );
});

t.test('kill -9 a node for good, then remove it with --force, while jobs fire', async (t) => {
  const sc = await SchedulerCluster.start(t, { groups: 4, nodes: 4 });
  keepLogs(t, sc, t.name.split(' ')[0] ?? 'test');
  const n1 = sc.cluster.node('n1');
  const endpoint = `${n1.host}:${n1.apiPort}`;
  const client = new ApiClient(endpoint, 10_000, {}, { token: TEST_ADMIN_TOKEN });
  t.teardown(() => client.close());
  // Slots that come due while n3's groups elect a new leader are late, not lost.
  const jobs = await jobsInEveryGroup(sc, 'dead', { misfire: { policy: 'fire_all' } });
  await sleep(2000);

  const n3 = sc.cluster.node('n3');
  await n3.kill9();
  t.pass('n3 killed with kill -9');
  await eventually(async () => {
    const cs = await client.call<Obj>('AdminService', 'ClusterStatus', {});
    for (const g of cs['groups'] as Obj[])
      if (g['leader'] === '' || g['leader'] === 'n3')
        throw new Error(`group ${String(g['groupId'])} has no live leader`);
  }, 30_000);

  const plain = await tickctl(['cluster', 'remove-node', 'n3', '--endpoint', endpoint]);
  t.equal(plain.code, 4, 'remove-node without --force exits 4');
  t.match(plain.err, /n3 still holds replicas/);
  const alive = await tickctl(['cluster', 'remove-node', 'n2', '--force', '--endpoint', endpoint]);
  t.equal(alive.code, 4, '--force of a node that still answers exits 4');
  t.match(alive.err, /node n2 still answers/);

  const rm = await tickctl([
    'cluster',
    'remove-node',
    'n3',
    '--force',
    '--endpoint',
    endpoint,
    '--max-concurrent-moves',
    '2',
    '--timeout-ms',
    '30000',
  ]);
  t.comment(rm.out);
  t.equal(rm.code, 0, `remove-node --force exits 0: ${rm.err}`);
  t.match(rm.out, /removed n3: \d+ replica\(s\) re-created on other nodes/);
  const moves = rm.out.split('\n').filter((l) => l.startsWith('move ')).length;
  t.equal(moves, 3, 'n3’s three replicas re-created elsewhere');

  const live = sc.cluster.nodes.filter((n) => n.id !== 'n3');
  const perNode = await checkLayout(t, client, live);
  t.same(
    [...perNode.entries()].sort(),
    [
      ['n1', 4],
      ['n2', 4],
      ['n4', 4],
    ],
    'the survivors hold 4 of the 12 data replicas each',
  );
  const cs = await client.call<Obj>('AdminService', 'ClusterStatus', {});
  t.equal(
    (cs['nodes'] as Obj[]).find((n) => n['id'] === 'n3')?.['state'],
    'removed',
    'n3 is removed',
  );
  await eventually(async () => {
    const voters = await metaVoters(n1);
    if (voters.includes('n3')) throw new Error(`meta voters ${voters.join(',')}`);
  }, 30_000);
  t.same(await metaVoters(n1), ['n1', 'n2', 'n4'], 'n3 left the meta group’s configuration');

  await sleep(3000);
  const figures = await checkFires(t, sc, jobs, Date.now() - 2000);
  t.comment(
    `kill -9 + remove --force: moves made: ${moves}; largest fire delay: ${figures.maxDelayMs} ms; ` +
      `duplicates: ${figures.duplicates}; skipped slots: ${figures.skipped} of ${figures.slots}; ` +
      `at-most-once slots lost with the killed sender (UNKNOWN): ${figures.unknown}`,
  );
});
