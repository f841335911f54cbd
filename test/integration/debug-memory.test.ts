// The benchmarks' memory probe: DebugService Status with collect_garbage runs a full collection
// in a node started with --expose-gc and reports its RSS and V8 heap; without the flag, or
// without the request, no collection runs and gc_forced says so.
import t from 'tap';
import { ProcCluster } from '../helpers/cluster.js';

t.test('Status reports memory, after a forced GC when the node allows it', async (t) => {
  const cluster = await ProcCluster.create({ nodes: 1, groups: 1 });
  t.teardown(() => cluster.cleanup());
  const saved = process.env['TICKRAFT_NODE_ARGS'];
  process.env['TICKRAFT_NODE_ARGS'] = '--expose-gc';
  try {
    cluster.startAll();
  } finally {
    if (saved === undefined) delete process.env['TICKRAFT_NODE_ARGS'];
    else process.env['TICKRAFT_NODE_ARGS'] = saved;
  }
  await cluster.waitReady(60_000);
  const n1 = cluster.node('n1');
  const plain = await n1.status();
  t.equal(plain.gcForced, false, 'no collection unless asked');
  const m = await n1.memory();
  t.equal(m.gcForced, true, 'collected when asked (--expose-gc)');
  t.ok(m.heapUsedBytes > 1e6, `heap used reported (${m.heapUsedBytes} B)`);
  t.ok(m.rssBytes > m.heapUsedBytes, `RSS reported above the heap (${m.rssBytes} B)`);
  t.ok(
    m.heapTotalBytes >= m.heapUsedBytes && m.heapTotalBytes < m.rssBytes,
    `V8's heap pages reported, between the heap in use and RSS (${m.heapTotalBytes} B)`,
  );
  t.ok(m.arrayBuffersBytes > 0, `array buffers reported (${m.arrayBuffersBytes} B)`);

  await n1.kill9();
  n1.start(); // TICKRAFT_NODE_ARGS restored: no --expose-gc this time
  await cluster.waitReady(60_000);
  const again = await cluster.node('n1').memory();
  t.equal(again.gcForced, false, 'a node without --expose-gc says no collection ran');
  t.ok(again.rssBytes > 0);
});
