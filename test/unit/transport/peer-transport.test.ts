// PeerTransport over real gRPC on 127.0.0.1: several transports in this one process, each on
// port 0, closed in t.teardown. Goal: the properties the Multi-Raft runtime relies on — a turn's
// sends leave as one frame and arrive in order, heartbeats of many groups travel coalesced,
// messages for groups the receiver does not host are answered, a down peer is reported and the
// stream comes back when the peer restarts on the same port, queues stay bounded for a dead
// peer, and a malformed frame closes the stream without reaching Raft. Method: record every
// callback, poll with a deadline (no fixed sleeps), and check the per-peer counters.
import t from 'tap';
import { message } from '../../../src/raft/messages.js';
import { encodeBatchFrame, RaftTransportClient } from '../../../src/transport/wire.js';
import type { GroupMessage } from '../../../src/transport/peer-transport.js';
import { deadAddress, eventually, startMesh, startNode } from './harness.js';

const app = (from: string, to: string, groupId: number, index: number): GroupMessage => ({
  groupId,
  message: message({
    type: 'app',
    from,
    to,
    term: 3,
    index,
    logTerm: 3,
    commit: index,
    entries: [{ term: 3, index: index + 1, type: 'normal', data: new Uint8Array([index & 0xff]) }],
  }),
});

const heartbeat = (from: string, to: string, groupId: number): GroupMessage => ({
  groupId,
  message: message({ type: 'heartbeat', from, to, term: 7, commit: groupId, context: 11 }),
});

t.test('sends of one event-loop turn arrive as one frame, in order', async (t) => {
  const [a, b] = await startMesh(t, ['a', 'b']);
  if (a === undefined || b === undefined) throw new Error('mesh');
  const sent: GroupMessage[] = [];
  for (let i = 0; i < 500; i++) {
    const gm = i % 3 === 0 ? heartbeat('a', 'b', i) : app('a', 'b', i % 17, i);
    sent.push(gm);
    a.transport.send('b', [gm]);
  }
  await eventually('frame at b', () => b.received.length > 0);
  // Give a second frame, if one were (wrongly) sent, the time to arrive.
  await new Promise((resolve) => setTimeout(resolve, 50));
  t.equal(b.received.length, 1, 'onMessages called once');
  t.equal(b.received[0]?.from, 'a');
  t.strictSame(b.received[0]?.msgs, sent, 'every message, in send order');
  t.equal(a.transport.peerCounters('b').sentFrameCount, 1, 'one frame written');
  t.equal(b.transport.peerCounters('a').receivedMessageCount, 500);

  // Later turns keep the order across frames.
  for (let turn = 0; turn < 5; turn++) {
    a.transport.send('b', [app('a', 'b', 1, 1000 + turn)]);
    await new Promise((resolve) => setImmediate(resolve));
  }
  await eventually('later frames', () => b.received.length === 6);
  const indexes = b.received.slice(1).map((r) => r.msgs.map((gm) => gm.message.index));
  t.strictSame(indexes, [[1000], [1001], [1002], [1003], [1004]]);
});

t.test('heartbeats of 1,000 groups travel coalesced in one frame', async (t) => {
  const [a, b] = await startMesh(t, ['a', 'b']);
  if (a === undefined || b === undefined) throw new Error('mesh');
  const beats = Array.from({ length: 1000 }, (_, g) => heartbeat('a', 'b', g));
  for (const hb of beats) a.transport.send('b', [hb]);
  await eventually('frame at b', () => b.received.length > 0);
  t.equal(b.received.length, 1, 'one onMessages call');
  t.strictSame(b.received[0]?.msgs, beats);
  const bytes = b.transport.peerCounters('a').receivedBytes;
  t.ok(bytes < 20 * 1000, `compact: ${bytes} bytes for 1,000 heartbeats`);

  // Responses go back on b's own stream to a, coalesced the same way.
  const resps = beats.map(({ groupId, message: m }) => ({
    groupId,
    message: message({ type: 'heartbeat-resp', from: 'b', to: 'a', term: m.term, context: 11 }),
  }));
  b.transport.send('a', resps);
  await eventually('responses at a', () => a.received.length > 0);
  t.equal(a.received.length, 1);
  t.strictSame(a.received[0]?.msgs, resps);
});

t.test('a frame larger than maxFrameBytes is split, order kept', async (t) => {
  const [a, b] = await startMesh(t, ['a', 'b'], { maxFrameBytes: 64 * 1024 });
  if (a === undefined || b === undefined) throw new Error('mesh');
  const big = (i: number): GroupMessage => ({
    groupId: 1,
    message: message({
      type: 'app',
      from: 'a',
      to: 'b',
      term: 1,
      index: i,
      entries: [{ term: 1, index: i + 1, type: 'normal', data: new Uint8Array(10_000) }],
    }),
  });
  const sent = Array.from({ length: 40 }, (_, i) => big(i));
  a.transport.send('b', sent);
  await eventually('all messages', () => b.received.flatMap((r) => r.msgs).length === 40);
  t.ok(b.received.length >= 7, `split into ${b.received.length} frames`);
  t.strictSame(
    b.received.flatMap((r) => r.msgs.map((gm) => gm.message.index)),
    sent.map((gm) => gm.message.index),
  );
});

t.test('a message for a group the receiver does not host is answered', async (t) => {
  const [a, b] = await startMesh(t, ['a', 'b']);
  if (a === undefined || b === undefined) throw new Error('mesh');
  b.foreignGroups.add(42);
  a.transport.send('b', [app('a', 'b', 1, 1), app('a', 'b', 42, 2), heartbeat('a', 'b', 42)]);
  await eventually('notice at a', () => a.notHosted.length > 0);
  t.strictSame(a.notHosted, [{ from: 'b', groupId: 42 }], 'one notice per group per frame');
  t.equal(b.received.length, 1);
  t.strictSame(
    b.received[0]?.msgs.map((gm) => gm.groupId),
    [1],
    'hosted groups are still delivered, the others are not',
  );
  t.equal(a.transport.peerCounters('b').notHostedReceivedCount, 1);
});

t.test(
  'peer down: onUnreachable fires; peer restarted on the same port: messages flow; its stream ending is reported',
  async (t) => {
    const [a, b] = await startMesh(t, ['a', 'b']);
    if (a === undefined || b === undefined) throw new Error('mesh');
    a.transport.send('b', [app('a', 'b', 5, 1)]);
    await eventually('first delivery', () => b.received.length === 1);

    await b.transport.close();
    // Raft keeps sending (heartbeats every tick); the transport reports the groups it drops.
    const ticker = setInterval(() => a.transport.send('b', [heartbeat('a', 'b', 5)]), 10);
    t.teardown(() => clearInterval(ticker));
    await eventually('unreachable report', () => a.unreachable.length > 0);
    t.strictSame(a.unreachable[0], { to: 'b', groupIds: [5] });
    t.ok(a.transport.peerCounters('b').droppedMessageCount > 0, 'drops counted');

    // Reports are throttled: at most one per 100 ms per peer (plus one of slack for timing).
    const before = a.unreachable.length;
    const startMs = performance.now();
    await new Promise((resolve) => setTimeout(resolve, 350));
    const elapsedMs = performance.now() - startMs;
    t.ok(a.unreachable.length - before <= elapsedMs / 100 + 1, 'throttled');

    const b2 = await startNode(t, 'b', { port: b.port, peers: new Map([['a', a.address]]) });
    await eventually('delivery after restart', () => b2.received.length > 0, 15_000);
    clearInterval(ticker);
    t.equal(b2.received[0]?.from, 'a');
    t.ok(a.transport.peerCounters('b').reconnectCount > 0, 'reconnects counted');
    t.equal(a.transport.peerState('b'), 'ready');

    // The restarted b's own stream to a, then b stops: a hears that stream end (the followers
    // there of groups b leads wake and elect at once).
    b2.transport.send('a', [heartbeat('b', 'a', 5)]);
    await eventually('a receives from b', () => a.received.length > 0);
    t.strictSame(a.peerStreamsEnded, [], 'no stream from b has ended yet');
    await b2.transport.close();
    await eventually('a hears the stream from b end', () => a.peerStreamsEnded.length > 0);
    t.strictSame(a.peerStreamsEnded, ['b']);
    t.strictSame(b.peerStreamsEnded, [], 'b closing its own server reported no stream as ended');
  },
);

t.test(
  "a restarted peer's own stream makes the transport reconnect to it at once, not after its backoff",
  async (t) => {
    // A 20 s backoff: without the peer's stream to wake it, a would not try again in this test.
    const limits = { reconnectBackoffMinMs: 20_000, reconnectBackoffMaxMs: 20_000 };
    const a = await startNode(t, 'a', { limits });
    const b = await startNode(t, 'b', { peers: new Map([['a', a.address]]) });
    a.transport.setPeer('b', b.address);
    a.transport.send('b', [app('a', 'b', 5, 1)]);
    await eventually('first delivery', () => b.received.length === 1);

    await b.transport.close();
    a.transport.send('b', [heartbeat('a', 'b', 5)]);
    await eventually('a in backoff', () => a.transport.peerState('b') === 'backoff');
    const reconnectsBefore = a.transport.peerCounters('b').reconnectCount;

    const b2 = await startNode(t, 'b', { port: b.port, peers: new Map([['a', a.address]]) });
    b2.transport.send('a', [heartbeat('b', 'a', 5)]);
    await eventually('a reconnected to b', () => a.transport.peerState('b') === 'ready', 5000);
    t.equal(a.transport.peerCounters('b').reconnectCount, reconnectsBefore + 1, 'one reconnect');
    a.transport.send('b', [app('a', 'b', 5, 2)]);
    await eventually('delivery to the restarted b', () => b2.received.length > 0, 5000);
    t.equal(b2.received[0]?.msgs[0]?.message.index, 2);
  },
);

t.test('the queue for a dead peer stays bounded; the excess is dropped and counted', async (t) => {
  const maxQueuedBytesPerPeer = 64 * 1024;
  const a = await startNode(t, 'a', { limits: { maxQueuedBytesPerPeer } });
  a.transport.setPeer('dead', await deadAddress(t));
  const entry = new Uint8Array(1000);
  const bigApp = (i: number): GroupMessage => ({
    groupId: i % 10,
    message: message({
      type: 'app',
      from: 'a',
      to: 'dead',
      term: 1,
      index: i,
      entries: [{ term: 1, index: i + 1, type: 'normal', data: entry }],
    }),
  });
  let maxQueued = 0;
  let sent = 0;
  // 20 turns of 2 MB each: 40 MB offered, 600 times the bound.
  for (let turn = 0; turn < 20; turn++) {
    for (let i = 0; i < 2000; i++) a.transport.send('dead', [bigApp(sent++)]);
    maxQueued = Math.max(maxQueued, a.transport.queuedBytes('dead'));
    await new Promise((resolve) => setImmediate(resolve));
  }
  const c = a.transport.peerCounters('dead');
  t.ok(maxQueued <= maxQueuedBytesPerPeer, `queued at most ${maxQueued} bytes`);
  t.ok(
    c.droppedMessageCount >= sent - maxQueuedBytesPerPeer / 1000,
    `${c.droppedMessageCount} dropped`,
  );
  t.equal(c.sentMessageCount, 0, 'nothing reached a dead peer');
  await eventually('unreachable report', () => a.unreachable.length > 0);
  t.strictSame(a.unreachable[0]?.groupIds, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
});

t.test('messages to an unknown peer are dropped and reported', async (t) => {
  const a = await startNode(t, 'a');
  a.transport.send('nobody', [app('a', 'nobody', 3, 1)]);
  t.equal(a.unreachable.length, 0, 'never called back inside send()');
  await eventually('unreachable report', () => a.unreachable.length > 0);
  t.strictSame(a.unreachable, [{ to: 'nobody', groupIds: [3] }]);
  t.equal(a.transport.peerCounters('nobody').droppedMessageCount, 1);
});

t.test('a malformed or misaddressed frame ends the stream and never reaches Raft', async (t) => {
  const b = await startNode(t, 'b');
  const client = new RaftTransportClient(b.address, {});
  t.teardown(() => client.close());
  const expectStatus = (frames: Buffer[]): Promise<number> =>
    new Promise((resolve) => {
      const call = client.openStream();
      call.on('error', () => undefined);
      call.on('status', (s: { code: number }) => resolve(s.code));
      for (const f of frames) call.write(f);
    });
  const good = (to: string, from = 'x'): Buffer =>
    encodeBatchFrame({ from, to, messages: [app(from, to, 1, 1)] });

  t.equal(await expectStatus([Buffer.from([0x1a, 0x7f, 0x08])]), 3, 'INVALID_ARGUMENT');
  t.equal(await expectStatus([good('someone-else')]), 9, 'FAILED_PRECONDITION');
  t.equal(await expectStatus([good('b', 'x'), good('b', 'y')]), 3, 'sender changed');
  t.equal(b.transport.malformedUnknownSenderCount, 2);
  t.equal(b.transport.peerCounters('x').malformedFrameCount, 1);
  t.equal(b.received.length, 1, 'only the one valid frame was delivered');
});

t.test('close() is bounded and idempotent, and nothing calls back afterwards', async (t) => {
  const [a, b] = await startMesh(t, ['a', 'b']);
  if (a === undefined || b === undefined) throw new Error('mesh');
  a.transport.send('b', [app('a', 'b', 1, 1)]);
  await eventually('delivery', () => b.received.length === 1);
  const startMs = performance.now();
  await Promise.all([a.transport.close(), a.transport.close(), b.transport.close()]);
  t.ok(performance.now() - startMs < 3000, 'closed within the bound');
  a.transport.send('b', [app('a', 'b', 1, 2)]);
  await new Promise((resolve) => setTimeout(resolve, 150));
  t.equal(a.unreachable.length, 0, 'no callback after close');
  t.equal(a.transport.peerCounters('b').droppedMessageCount, 1);
});
