// Real processes: a 3-node cluster with every-second jobs (both delivery modes, in every group)
// firing to a webhook sink; a 4th and a 5th node join with `tickraft serve --join`; a second
// node with the same id, and one with an address in use, are refused (by the joining process and
// by `tickctl cluster add-node`); then `tickctl cluster rebalance` moves replicas onto the new
// nodes (add learner, catch up, joint consensus, old replica deleted) and spreads leaders.
// Checked as the user would: the 12 data replicas end spread 2–3 per node, every group has its 3
// replicas, nodes that gave a replica away deleted it, no slot of any job was skipped, no
// at-most-once fire id arrived twice. It prints the moves made and the largest fire delay seen.
import t from 'tap';
import { ApiCallError, ApiClient } from '../../src/api/client.js';
import { retryUnavailable } from '../helpers/api-retry.js';
import { eventually, sleep, TEST_ADMIN_TOKEN } from '../helpers/cluster.js';
import {
  checkFires,
  checkLayout,
  jobsInEveryGroup,
  joiner,
  keepLogs,
  tickctl,
  waitJoined,
  type Obj,
} from '../helpers/membership-kit.js';
import { SchedulerCluster, TENANT } from '../helpers/scheduler-cluster.js';

t.test('grow 3 → 5 nodes and rebalance while jobs fire', async (t) => {
  const sc = await SchedulerCluster.start(t, { groups: 4 });
  keepLogs(t, sc, 'grow');
  const n1 = sc.cluster.node('n1');
  const endpoint = `${n1.host}:${n1.apiPort}`;
  const client = new ApiClient(endpoint, 10_000, {}, { token: TEST_ADMIN_TOKEN });
  t.teardown(() => client.close());
  const jobs = await jobsInEveryGroup(sc, 'grow');
  const startedAt = Date.now();
  await sleep(2000);

  const n4 = await joiner(sc, 'n4', n1);
  await waitJoined(client, n4);
  t.pass('n4 joined: listed, reachable, its meta replica caught up');

  // The same id again (other ports), and a new id on n4's peer address: both refused.
  const dupId = await joiner(sc, 'n4', sc.cluster.node('n2'));
  const dupExit = await dupId.exit!;
  t.equal(dupExit.code, 1, 'a second n4 exits 1');
  t.match(dupId.stderr, /META_MEMBER_EXISTS: node id n4 is already a member/);
  sc.cluster.nodes.splice(sc.cluster.nodes.indexOf(dupId), 1);
  dupId.close();
  const dupAddr = await tickctl([
    'cluster',
    'add-node',
    '--endpoint',
    endpoint,
    '--id',
    'n9',
    '--peer-address',
    `${n4.host}:${n4.peerPort}`,
  ]);
  t.equal(dupAddr.code, 4, 'tickctl add-node with an address in use exits 4 (conflict)');
  t.match(dupAddr.err, /address .* is already used by member n4/);
  const refused = await client
    .call('AdminService', 'AddNode', {
      nodeId: 'n1',
      peerAddress: '127.0.0.1:1',
    })
    .catch((err: unknown) => err);
  t.match(refused, { code: 'META_MEMBER_EXISTS' }, 'AddNode of a used id: ALREADY_EXISTS');
  t.ok(refused instanceof ApiCallError);

  const n5 = await joiner(sc, 'n5', sc.cluster.node('n3'));
  await waitJoined(client, n5);
  t.pass('n5 joined');

  const dry = await tickctl(['cluster', 'rebalance', '--dry-run', '--endpoint', endpoint]);
  t.equal(dry.code, 0, `dry run: ${dry.err}`);
  t.match(dry.out, /WAVE\s+GROUP\s+FROM\s+TO/);
  t.comment(dry.out);
  const before = await client.call<Obj>('AdminService', 'ClusterStatus', {});
  t.equal((before['moves'] as Obj[]).length, 0, 'a dry run starts nothing');

  const reb = await tickctl([
    'cluster',
    'rebalance',
    '--endpoint',
    endpoint,
    '--max-concurrent-moves',
    '2',
    '--timeout-ms',
    '30000',
  ]);
  t.equal(reb.code, 0, `rebalance exits 0: ${reb.err}`);
  t.comment(reb.out);
  const moves = reb.out.split('\n').filter((l) => l.startsWith('move ')).length;
  t.ok(moves >= 4, `moves made: ${moves}`);
  t.match(reb.out, /balanced: \d+ move/);

  // Every group has its 3 replicas and every node hosts exactly its own: the ones given away
  // were deleted.
  const perNode = await checkLayout(t, client, sc.cluster.nodes);
  const counts = [...perNode.values()];
  t.equal(perNode.size, 5, 'every node holds replicas');
  t.equal(
    counts.reduce((a, b) => a + b, 0),
    12,
    '12 data replicas in all',
  );
  t.ok(Math.max(...counts) - Math.min(...counts) <= 1, `spread: ${JSON.stringify([...perNode])}`);
  const after = await client.call<Obj>('AdminService', 'ClusterStatus', {});
  const leaders = new Map<string, number>();
  for (const g of after['groups'] as Obj[]) {
    if (g['groupId'] === 0) continue;
    leaders.set(String(g['leader']), (leaders.get(String(g['leader'])) ?? 0) + 1);
  }
  t.comment(`leaders per node: ${JSON.stringify([...leaders.entries()].sort())}`);
  await eventually(async () => {
    for (const n of sc.cluster.nodes.filter((x) => x.running)) {
      const st = await n.status(1000);
      const data = st.groups.filter((g) => g.groupId !== 0).length;
      if (data !== perNode.get(n.id)) throw new Error(`${n.id} hosts ${data} data groups`);
    }
  }, 30_000);

  // Every job reads back through every node, also the nodes that hold no replica of its group.
  for (const n of sc.cluster.nodes) {
    const c = new ApiClient(`${n.host}:${n.apiPort}`, 10_000, {}, { token: TEST_ADMIN_TOKEN });
    try {
      for (const j of jobs) {
        // The rebalance's last leader transfers may still be settling: a careful client retries
        // UNAVAILABLE (not the leader) after its hint.
        const got = await retryUnavailable(() =>
          c.call<Obj>('JobService', 'GetJob', { tenant: TENANT, jobId: j.id }),
        );
        t.equal(got['id'], j.id, `${j.id} read through ${n.id}`);
      }
    } finally {
      c.close();
    }
  }

  // Keep firing a little, then check every slot of every job.
  await sleep(3000);
  const figures = await checkFires(t, sc, jobs, Date.now() - 2000);
  t.comment(
    `grow 3 → 5 + rebalance: moves made: ${moves}; largest fire delay: ${figures.maxDelayMs} ms; ` +
      `duplicates: ${figures.duplicates}; skipped slots: ${figures.skipped} of ${figures.slots}; ` +
      `jobs firing for ${Math.round((Date.now() - startedAt) / 1000)} s`,
  );
});
