// Idle data groups quiesce in real processes (the meta group never does), wake on a write, and
// a node killed while its groups are quiet still loses its leaderships to live nodes: the
// followers notice the missing beacons and elect. Measured with a faster tick to keep it short.
import t from 'tap';
import { eventually, ProcCluster } from '../helpers/cluster.js';

t.test('idle groups quiesce, wake on writes, and fail over when their leader dies', async (t) => {
  const cluster = await ProcCluster.create({
    groups: 8,
    extraArgs: ['--tick-ms', '20', '--quiesce-ticks', '10'],
  });
  t.teardown(() => cluster.cleanup());
  cluster.startAll();
  await cluster.waitReady(60_000);
  const n1 = cluster.node('n1');
  const quiet = await eventually(async () => {
    const st = await n1.status();
    const data = st.groups.filter((g) => g.groupId !== 0);
    const notQuiet = data.filter((g) => !g.quiesced).map((g) => g.groupId);
    if (notQuiet.length > 0) throw new Error(`groups still awake: ${notQuiet.join(',')}`);
    return st;
  }, 20_000);
  t.ok(quiet.groups.find((g) => g.groupId === 0)?.quiesced === false, 'the meta group stays awake');
  t.pass('every data group quiesced while idle');

  await cluster.put('wake-me', 'up');
  t.pass('a write to a quiet group commits');

  const leaders = await cluster.leaders();
  const victimId = [...leaders.entries()].find(([g, id]) => g !== 0 && id !== 'n1')?.[1] ?? 'n2';
  const victimGroups = [...leaders.entries()]
    .filter(([g, id]) => g !== 0 && id === victimId)
    .map(([g]) => g);
  await eventually(async () => {
    const st = await cluster.node(victimId).status();
    if (st.groups.some((g) => victimGroups.includes(g.groupId) && !g.quiesced))
      throw new Error('awake');
  }, 20_000);
  const killedAt = Date.now();
  await cluster.node(victimId).kill9();
  await eventually(async () => {
    const now = await cluster.leaders();
    const orphaned = victimGroups.filter((g) => !now.has(g) || now.get(g) === victimId);
    if (orphaned.length > 0) throw new Error(`no new leader yet for ${orphaned.join(',')}`);
  }, 30_000);
  const tookMs = Date.now() - killedAt;
  t.pass(
    `groups ${victimGroups.join(',')} of killed ${victimId} have new leaders after ${tookMs} ms`,
  );
  await cluster.put('after-failover', 'ok');
  t.pass('writes continue');
});
