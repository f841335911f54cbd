// Real processes: a node drained for a deploy comes back. On a 4-node cluster,
// `tickctl cluster drain-node n4` moves its replicas away; `tickctl cluster undrain-node n4`
// makes it active again, and `tickctl cluster rebalance` gives it replicas back, so every node
// holds 3 of the 12 data replicas again. Undraining an active node changes nothing; an unknown
// node is refused naming it.
import { TEST_ADMIN_TOKEN } from '../helpers/cluster.js';
import t from 'tap';
import { ApiClient } from '../../src/api/client.js';
import { checkLayout, keepLogs, tickctl, type Obj } from '../helpers/membership-kit.js';
import { SchedulerCluster } from '../helpers/scheduler-cluster.js';

t.test('drain a node, undrain it, rebalance: it holds replicas again', async (t) => {
  const sc = await SchedulerCluster.start(t, { groups: 4, nodes: 4 });
  keepLogs(t, sc, 'undrain');
  const n1 = sc.cluster.node('n1');
  const endpoint = `${n1.host}:${n1.apiPort}`;
  const client = new ApiClient(endpoint, 10_000, {}, { token: TEST_ADMIN_TOKEN });
  t.teardown(() => client.close());
  const stateOf = async (id: string): Promise<unknown> => {
    const st = await client.call<Obj>('AdminService', 'ClusterStatus', {});
    return (st['nodes'] as Obj[]).find((n) => n['id'] === id)?.['state'];
  };

  const active = await tickctl(['cluster', 'undrain-node', 'n4', '--endpoint', endpoint]);
  t.equal(active.code, 0, `undrain of an active node exits 0: ${active.err}`);
  t.match(active.out, /n4 was already active/);

  const unknown = await tickctl(['cluster', 'undrain-node', 'n9', '--endpoint', endpoint]);
  t.equal(unknown.code, 3, 'undrain of an unknown node exits 3 (not found)');
  t.match(unknown.err, /no member n9/);

  const args = ['--endpoint', endpoint, '--max-concurrent-moves', '2', '--timeout-ms', '30000'];
  const drain = await tickctl(['cluster', 'drain-node', 'n4', ...args]);
  t.equal(drain.code, 0, `drain-node exits 0: ${drain.err}`);
  const live = sc.cluster.nodes.filter((n) => n.id !== 'n4');
  const drained = await checkLayout(t, client, live);
  t.notOk(drained.has('n4'), 'n4 holds no replica once drained');
  t.equal(await stateOf('n4'), 'draining');

  const balancedWhileDraining = await tickctl(['cluster', 'rebalance', ...args]);
  t.equal(balancedWhileDraining.code, 0, `rebalance exits 0: ${balancedWhileDraining.err}`);
  t.match(balancedWhileDraining.out, /balanced: 0 move\(s\)/, 'a draining node gets nothing');

  const undrain = await tickctl(['cluster', 'undrain-node', 'n4', '--endpoint', endpoint]);
  t.equal(undrain.code, 0, `undrain-node exits 0: ${undrain.err}`);
  t.match(undrain.out, /n4 is active again/);
  t.equal(await stateOf('n4'), 'active');

  const rebalance = await tickctl(['cluster', 'rebalance', ...args]);
  t.comment(rebalance.out);
  t.equal(rebalance.code, 0, `rebalance exits 0: ${rebalance.err}`);
  const perNode = await checkLayout(t, client, sc.cluster.nodes);
  t.same(
    [...perNode.entries()].sort(),
    [
      ['n1', 3],
      ['n2', 3],
      ['n3', 3],
      ['n4', 3],
    ],
    'every node holds 3 of the 12 data replicas again',
  );
});
