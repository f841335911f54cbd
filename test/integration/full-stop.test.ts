// Real processes: the whole cluster stopped at once, as Ctrl-C on `npm start` (every node gets
// SIGINT from the terminal and SIGTERM from the supervisor), `docker compose down` or an
// orchestrator does it. Each node used to hand its leaderships to peers that were stopping too,
// which handed them on again: hundreds of leader changes per node and dozens of terms in a few
// seconds. Now a stopping node tells its peers, is never chosen as a hand-over target, and a node
// whose every peer is stopping just stops. The test counts, from each node's log, the leader
// changes it saw after the signals and the terms they reached, times the whole stop, and then
// restarts the cluster to check that every acknowledged write is still there.
import t from 'tap';
import { ProcCluster, eventually, sleep, type ProcNode } from '../helpers/cluster.js';

const GROUPS = 8;
const KEYS = 64;
/** The stop takes ≤ 5 s on an idle machine; this bound leaves room for a loaded CI. */
const STOP_BOUND_MS = 8000;

interface LeaderChange {
  group: number;
  leader: string;
  term: number;
}

/** The "leader changed" lines a node logged in `text` (pino JSON, one object a line). */
function leaderChanges(text: string): LeaderChange[] {
  const out: LeaderChange[] = [];
  for (const line of text.split('\n')) {
    if (!line.includes('"msg":"leader changed"')) continue;
    const o = JSON.parse(line) as { group: number; leader: string; term: number };
    out.push({ group: o.group, leader: o.leader, term: o.term });
  }
  return out;
}

function count(text: string, needle: string): number {
  return text.split(needle).length - 1;
}

/** Every data group led by one node, the same picture twice 500 ms apart (balancing is over). */
async function settledLeaders(cluster: ProcCluster): Promise<Map<number, string>> {
  let last = '';
  return eventually(async () => {
    const leaders = await cluster.leaders();
    const now = JSON.stringify([...leaders].sort((a, b) => a[0] - b[0]));
    const same = now === last;
    last = now;
    if (leaders.size !== GROUPS + 1 || !same) {
      await sleep(500);
      throw new Error(`leadership still moving: ${now}`);
    }
    return leaders;
  }, 60_000);
}

t.test('stopping every node at once: no leader storm, a fast stop, nothing lost', async (t) => {
  const cluster = await ProcCluster.create({ nodes: 3, groups: GROUPS });
  t.teardown(() => cluster.cleanup());
  cluster.startAll();
  await cluster.waitReady(60_000);
  for (let i = 0; i < KEYS; i++) await cluster.put(`k${i}`, `v${i}`, 10_000);
  const leadersBefore = await settledLeaders(cluster);
  const termsBefore = new Map<number, number>();
  for (const n of cluster.nodes)
    for (const g of (await n.status()).groups)
      termsBefore.set(g.groupId, Math.max(termsBefore.get(g.groupId) ?? 0, g.term));
  t.comment(`leaders before: ${JSON.stringify([...leadersBefore])}`);

  // What each node logged before the signals is not counted.
  const offsets = new Map(cluster.nodes.map((n) => [n.id, n.stdout.length]));
  const exits = cluster.nodes.map((n) => n.exit!);
  const t0 = performance.now();
  // Ctrl-C on `npm start`: the terminal's SIGINT reaches every node, then the supervisor's
  // SIGTERM follows.
  for (const n of cluster.nodes) n.proc!.kill('SIGINT');
  for (const n of cluster.nodes) n.proc!.kill('SIGTERM');
  const results = await Promise.all(exits);
  const stopMs = Math.round(performance.now() - t0);

  let changesTotal = 0;
  let worstPerGroup = 0;
  let termGrowth = 0;
  for (const [i, n] of cluster.nodes.entries()) {
    const log = n.stdout.slice(offsets.get(n.id));
    t.same(results[i], { code: 0, signal: null }, `${n.id} exits 0`);
    t.equal(
      count(log, '"msg":"stopping: handing leaderships over"'),
      1,
      `${n.id} runs one shutdown for SIGINT and SIGTERM`,
    );
    const changes = leaderChanges(log);
    changesTotal += changes.length;
    const perGroup = new Map<number, number>();
    for (const c of changes) {
      perGroup.set(c.group, (perGroup.get(c.group) ?? 0) + 1);
      termGrowth = Math.max(termGrowth, c.term - (termsBefore.get(c.group) ?? 0));
    }
    const worst = Math.max(0, ...perGroup.values());
    worstPerGroup = Math.max(worstPerGroup, worst);
    t.ok(
      worst <= 1,
      `${n.id} saw at most one leader change per group while stopping (saw ${changes.length} in all, ${worst} at most in one group)`,
    );
  }
  t.comment(
    `full stop: ${stopMs} ms, ${changesTotal} leader changes logged by all nodes, ` +
      `at most ${worstPerGroup} in one group on one node, terms grew by at most ${termGrowth}`,
  );
  t.ok(termGrowth <= 1, `terms grew by at most one while stopping (grew by ${termGrowth})`);
  t.ok(stopMs <= STOP_BOUND_MS, `the whole cluster stopped in ${stopMs} ms`);

  // A restart afterwards finds every acknowledged write.
  cluster.startAll();
  await cluster.waitReady(60_000);
  let found = 0;
  for (let i = 0; i < KEYS; i++) {
    const key = `k${i}`;
    const got = await eventually(async () => {
      const node: ProcNode = cluster.nodes[i % cluster.nodes.length]!;
      return node.get(key);
    }, 10_000);
    if (got.found && got.value === `v${i}`) found++;
  }
  t.equal(found, KEYS, 'every key written before the stop is there after the restart');
});
