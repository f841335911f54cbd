// The benchmarks' memory probe: DebugService Status with collect_garbage runs a full collection
// in a node started with --expose-gc and reports its RSS and V8 heap; without the flag, or
// without the request, no collection runs and gc_forced says so.
import t from 'tap';
import { ProcCluster } from '../helpers/cluster.js';

/** Starts the nodes with `node --expose-gc`; later starts get the environment's flags again. */
function startWithExposeGc(cluster: ProcCluster): void {
  const saved = process.env['TICKRAFT_NODE_ARGS'];
  process.env['TICKRAFT_NODE_ARGS'] = '--expose-gc';
  try {
    cluster.startAll();
  } finally {
    if (saved === undefined) delete process.env['TICKRAFT_NODE_ARGS'];
    else process.env['TICKRAFT_NODE_ARGS'] = saved;
  }
}

t.test('Status reports memory, after a forced GC when the node allows it', async (t) => {
  const cluster = await ProcCluster.create({ nodes: 1, groups: 1 });
  t.teardown(() => cluster.cleanup());
  startWithExposeGc(cluster);
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

// The growth benchmark's probes: snapshots taken on request with their size and cost, what a
// restart restored and how long its start-up steps took, and the GC pauses of a window.
t.test('TakeSnapshots, start-up timings and GC pauses of a window', async (t) => {
  const cluster = await ProcCluster.create({ nodes: 1, groups: 2 });
  t.teardown(() => cluster.cleanup());
  startWithExposeGc(cluster);
  await cluster.waitReady(60_000);
  const n1 = cluster.node('n1');
  const first = await n1.status();
  t.ok(first.startupStoreOpenMs > 0 && first.startupGroupsOpenMs >= 0, 'start-up steps timed');
  t.ok(
    first.startupStartedMs >= first.startupStoreOpenMs + first.startupGroupsOpenMs,
    `start() finished ${first.startupStartedMs.toFixed(0)} ms after the process started, after its steps`,
  );
  t.equal(first.snapshotsRestored, 0, 'a fresh node restored no snapshot');

  for (let i = 0; i < 200; i++) await n1.put(`k${i}`, 'v'.repeat(100));
  const taken = await n1.takeSnapshots();
  const dataGroups = new Set(taken.map((s) => s.groupId));
  t.ok(
    dataGroups.size >= 2,
    `a snapshot of each group that applied entries (${[...dataGroups].join(', ')})`,
  );
  t.ok(
    taken.every((s) => s.bytes > 0 && s.index > 0 && s.encodeMs >= 0 && s.writeMs >= 0),
    'each with its size, index and times',
  );
  const bytes = taken.reduce((n, s) => n + s.bytes, 0);
  t.ok(bytes > 200 * 100, `the keys are in the snapshots (${bytes} B)`);
  const after = await n1.status();
  t.equal(after.snapshotsTaken - first.snapshotsTaken, taken.length, 'counted as taken');
  t.equal(after.snapshotBytesTotal - first.snapshotBytesTotal, bytes, 'their bytes counted');

  const gcFrom = Date.now();
  await n1.memory(); // two full collections
  const window = await n1.gcSince(gcFrom);
  t.ok(
    window.gcPauses >= 2,
    `the forced collections are pauses of the window (${window.gcPauses})`,
  );
  t.ok(window.gcPauseMaxMs > 0 && window.gcPauseMaxMs >= window.gcPauseP99Ms, 'with durations');
  t.equal((await n1.gcSince(Date.now() + 60_000)).gcPauses, 0, 'a window in the future has none');

  await n1.kill9();
  n1.start();
  await cluster.waitReady(60_000);
  const restarted = await n1.status();
  t.equal(restarted.snapshotsRestored, taken.length, 'the restart restored each snapshot');
  t.equal(restarted.snapshotRestoreBytes, bytes, 'all their bytes');
  t.equal((await n1.get('k199')).value, 'v'.repeat(100), 'and the state is back');
});
