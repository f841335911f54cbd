// Real processes: a 3-node cluster with every-second jobs (both delivery modes, in every group)
// firing to a webhook sink; a 4th node joins with `tickraft serve --join`; a second node with
// the same id, and one with an address in use, are refused (by the joining process and by
// `tickctl cluster add-node`); then `tickctl cluster rebalance` moves replicas onto the new node
// (add learner, catch up, joint consensus, old replica deleted) and spreads leaders. Checked as
// the user would: every node ends with 3 of the 12 data replicas, nodes that gave a replica
// away deleted it, no slot of any job was skipped, no at-most-once fire id arrived twice. It
// prints the moves made and the largest fire delay seen.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { ApiCallError, ApiClient } from '../../src/api/client.js';
import { eventually, freePort, ProcNode, sleep } from '../helpers/cluster.js';
import { iso, SchedulerCluster } from '../helpers/scheduler-cluster.js';

const TICKCTL = fileURLToPath(new URL('../../bin/tickctl', import.meta.url));
type Obj = Record<string, unknown>;

function tickctl(args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [TICKCTL, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('exit', (code) => resolve({ code, out, err }));
  });
}

async function joiner(
  sc: SchedulerCluster,
  id: string,
  via: ProcNode,
  ports?: { api: number; peer: number },
): Promise<ProcNode> {
  const host = via.host;
  const api = ports?.api ?? (await freePort(host));
  let peer = ports?.peer ?? (await freePort(host));
  while (peer === api) peer = await freePort(host);
  const dataDir = join(sc.cluster.root, `${id}-${api}`);
  const args = (): string[] => [
    '--id',
    id,
    '--data-dir',
    dataDir,
    '--listen',
    `${host}:${api}`,
    '--peer-listen',
    `${host}:${peer}`,
    '--join',
    `${host}:${via.apiPort}`,
    '--tick-ms',
    '20',
  ];
  const node = new ProcNode(id, api, peer, dataDir, args, host);
  sc.cluster.nodes.push(node);
  node.start();
  return node;
}

t.test('grow 3 → 4 nodes and rebalance while jobs fire', async (t) => {
  const sc = await SchedulerCluster.start(t, { groups: 4 });
  const n1 = sc.cluster.node('n1');
  const endpoint = `${n1.host}:${n1.apiPort}`;
  const client = new ApiClient(endpoint, 10_000);
  t.teardown(() => client.close());
  // Two jobs per group, one of each delivery mode.
  const jobs: { id: string; mode: string }[] = [];
  for (let g = 1; g <= 4; g++) {
    let found = 0;
    for (let i = 0; found < 2; i++) {
      const id = `grow-${g}-${i}`;
      if (sc.groupOf(id) !== g) continue;
      jobs.push({ id, mode: found === 0 ? 'at_least_once' : 'at_most_once' });
      found++;
    }
  }
  for (const j of jobs) await sc.createJob(j.id, { schedule: '* * * * * *', delivery: j.mode });
  const startedAt = Date.now();
  await sleep(2000);

  const n4 = await joiner(sc, 'n4', n1);
  await eventually(async () => {
    const st = await n4.status(1000);
    if (!st.metaInitialized) throw new Error('n4: meta not caught up');
    const cs = await client.call<Obj>('AdminService', 'ClusterStatus', {});
    const node = (cs['nodes'] as Obj[]).find((n) => n['id'] === 'n4');
    if (node?.['reachable'] !== true) throw new Error('n4 not in ClusterStatus yet');
  }, 60_000);
  t.pass('n4 joined: listed, reachable, its meta replica caught up');

  // The same id again (other ports), and a new id on n4's peer address: both refused.
  const dupId = await joiner(sc, 'n4', sc.cluster.node('n2'));
  const dupExit = await dupId.exit!;
  t.equal(dupExit.code, 1, 'a second n4 exits 1');
  t.match(dupId.stderr, /META_MEMBER_EXISTS: node id n4 is already a member/);
  const dupAddr = await tickctl([
    'cluster',
    'add-node',
    '--endpoint',
    endpoint,
    '--id',
    'n5',
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
  const moves = reb.out.split('\n').filter((l) => l.startsWith('move '));
  t.ok(moves.length >= 3, `moves made: ${moves.length}`);
  t.match(reb.out, /balanced: \d+ move/);

  const after = await client.call<Obj>('AdminService', 'ClusterStatus', {});
  const perNode = new Map<string, number>();
  const leaders = new Map<string, number>();
  for (const g of after['groups'] as Obj[]) {
    if (g['groupId'] === 0) continue;
    for (const r of g['replicas'] as Obj[])
      perNode.set(String(r['nodeId']), (perNode.get(String(r['nodeId'])) ?? 0) + 1);
    leaders.set(String(g['leader']), (leaders.get(String(g['leader'])) ?? 0) + 1);
    t.ok(Number(g['epoch']) >= 1, `group ${String(g['groupId'])} epoch ${String(g['epoch'])}`);
  }
  t.same(
    [...perNode.entries()].sort(),
    [
      ['n1', 3],
      ['n2', 3],
      ['n3', 3],
      ['n4', 3],
    ],
    'every node holds 3 of the 12 data replicas',
  );
  t.comment(`leaders per node: ${JSON.stringify([...leaders.entries()].sort())}`);
  // Each node hosts exactly its replicas: the ones given away were deleted.
  await eventually(async () => {
    for (const n of sc.cluster.nodes.filter((x) => x.running)) {
      const st = await n.status(1000);
      const data = st.groups.filter((g) => g.groupId !== 0).length;
      if (data !== 3) throw new Error(`${n.id} hosts ${data} data groups`);
    }
  }, 30_000);
  t.pass('nodes that gave a replica away deleted it');

  // Keep firing a little, then check every slot of every job.
  await sleep(3000);
  const endAt = Date.now() - 2000;
  let maxDelay = 0;
  for (const j of jobs) {
    const got = sc.sink.of(j.id);
    const firstSlot = Math.min(...got.map((r) => r.slotMs));
    const slots = new Set(got.map((r) => r.slotMs));
    const missing: string[] = [];
    for (let s = firstSlot; s <= endAt; s += 1000) if (!slots.has(s)) missing.push(iso(s));
    t.same(missing, [], `${j.id} (${j.mode}): no slot skipped`);
    if (j.mode === 'at_most_once') {
      const ids = got.map((r) => r.fireId);
      t.equal(new Set(ids).size, ids.length, `${j.id}: no at-most-once fire id twice`);
    }
    const firstOf = new Map<string, number>();
    for (const r of got) if (!firstOf.has(r.fireId)) firstOf.set(r.fireId, r.atMs - r.slotMs);
    for (const d of firstOf.values()) maxDelay = Math.max(maxDelay, d);
  }
  t.comment(
    `moves made: ${moves.length}; largest fire delay: ${maxDelay} ms; ` +
      `jobs firing for ${Math.round((Date.now() - startedAt) / 1000)} s`,
  );
});
