// A follower held by its own loop (a long turn, a collection) must not take the stall for its
// leader's silence: the heartbeats that arrived during the stall say the leader was there, and
// only the ticks after the last of them count towards a campaign. A real host on a real LevelDB
// store, one group of three voters whose other two are played by the test; the clock is ours.
import t, { type Test } from 'tap';
import type { GroupMessage, HostOptions, MultiRaftHost } from '../../../src/multiraft/host.js';
import { compileRaftOptions } from '../../../src/raft/config.js';
import { message } from '../../../src/raft/messages.js';
import { manualHost, type ManualClock } from './host-harness.js';

const TICK_MS = 50;
/** Election timeout 10 ticks: a follower campaigns after 10 to 19 silent ticks. */
const RAFT = compileRaftOptions({ electionTimeoutTicks: 10, heartbeatTicks: 1 });

/** n1's host, a follower of n2 in term 2 of group 1 (voters n1, n2, n3); what it sends. */
async function followerOfN2(
  t: Test,
  extra: Pick<HostOptions, 'yieldToLoop'> = {},
): Promise<{ host: MultiRaftHost; clock: ManualClock; sent: GroupMessage[] }> {
  const { host, clock } = await manualHost(t, RAFT, TICK_MS, 11, extra);
  const sent: GroupMessage[] = [];
  host.transport = { send: (_to, msgs) => sent.push(...msgs) };
  await host.createGroup(1, { voters: ['n1', 'n2', 'n3'] });
  host.start();
  t.teardown(() => host.stop());
  heartbeatFromN2(host);
  await host.idle();
  const raft = host.groups.get(1)!.node.raft;
  t.equal(raft.lead, 'n2', 'n1 follows n2');
  t.equal(raft.role, 'follower');
  sent.length = 0;
  return { host, clock, sent };
}

function heartbeatFromN2(host: MultiRaftHost): void {
  host.deliver('n2', [
    { groupId: 1, message: message({ type: 'heartbeat', from: 'n2', to: 'n1', term: 2 }) },
  ]);
}

const campaigned = (sent: readonly GroupMessage[]): boolean =>
  sent.some((m) => m.message.type === 'pre-vote' || m.message.type === 'vote');

t.test('a heartbeat that arrived late in a stall: only the ticks after it count', async (t) => {
  const { host, clock, sent } = await followerOfN2(t);
  // 15 ticks pass with no turn (the loop is held), the heartbeat arrives, 8 more pass.
  clock.ms += 15 * TICK_MS;
  heartbeatFromN2(host);
  clock.ms += 8 * TICK_MS;
  await host.idle();
  const raft = host.groups.get(1)!.node.raft;
  t.equal(raft.role, 'follower', 'no campaign: 8 ticks since its leader was heard');
  t.equal(raft.term, 2);
  t.equal(raft.lead, 'n2');
  t.notOk(campaigned(sent), 'no pre-vote sent');
});

t.test('a heartbeat read just after a stall: no tick of the stall counts', async (t) => {
  const { host, clock, sent } = await followerOfN2(t);
  clock.ms += 25 * TICK_MS;
  heartbeatFromN2(host);
  await host.idle();
  t.equal(host.groups.get(1)!.node.raft.role, 'follower', 'still a follower of n2');
  t.notOk(campaigned(sent), 'no pre-vote sent');
});

t.test('the control: a stall past the timeout with nothing heard starts a campaign', async (t) => {
  const { host, clock, sent } = await followerOfN2(t);
  clock.ms += 25 * TICK_MS;
  host.wake();
  await host.idle();
  t.equal(host.groups.get(1)!.node.raft.role, 'pre-candidate', 'n2 was silent: n1 campaigns');
  t.ok(campaigned(sent), 'pre-votes sent');
});

t.test('after a stall the turn yields once, so what arrived meanwhile is read first', async (t) => {
  // The yield stands in for the event loop: the transport reads the heartbeat n2 sent during
  // the stall from its socket then.
  const late: { host?: MultiRaftHost } = {};
  let inSocket = false;
  const setup = await followerOfN2(t, {
    yieldToLoop: () =>
      new Promise<void>((resolve) =>
        setImmediate(() => {
          if (inSocket && late.host) heartbeatFromN2(late.host);
          inSocket = false;
          resolve();
        }),
      ),
  });
  const host = setup.host;
  late.host = host;
  const yieldsBefore = host.stats.stallYields;
  setup.clock.ms += 25 * TICK_MS;
  inSocket = true;
  host.wake();
  await host.idle();
  t.equal(host.stats.stallYields - yieldsBefore, 1, 'one yield before the stall was counted');
  t.equal(host.groups.get(1)!.node.raft.role, 'follower', 'the heartbeat was read in time');
  t.notOk(campaigned(setup.sent), 'no pre-vote sent');
});
