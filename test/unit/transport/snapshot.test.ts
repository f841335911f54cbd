// Snapshots travel on their own SendSnapshot call, chunked, so a large install never stalls the
// heartbeat stream. Goal: a several-MiB snapshot arrives whole and byte-exact as one 'snap'
// message and the sender hears onSnapshotStatus(…, true); a dead peer, a group the receiver does
// not host, and a snapshot above the receiver's bound all end in onSnapshotStatus(…, false).
// Method: real gRPC on 127.0.0.1 with maxFrameBytes set well below the snapshot size, so the
// transfer can only succeed in chunks (the server refuses any message above twice its frame
// bound); seeded random snapshot data compared deep-equal on arrival.
import t from 'tap';
import { SeededRand } from '../../../src/base/rand.js';
import { message } from '../../../src/raft/messages.js';
import type { GroupMessage } from '../../../src/transport/peer-transport.js';
import {
  deadAddress,
  eventually,
  randConfState,
  randSnapshot,
  startMesh,
  startNode,
} from './harness.js';

const MiB = 1024 * 1024;

function snap(from: string, to: string, groupId: number, bytes: number, seed = 1): GroupMessage {
  const r = new SeededRand(seed);
  return {
    groupId,
    message: message({
      type: 'snap',
      from,
      to,
      term: 9,
      snapshot: {
        ...randSnapshot(r, bytes),
        meta: { index: 1234, term: 8, confState: randConfState(r) },
      },
    }),
  };
}

t.test('a 5 MiB snapshot arrives chunked and byte-exact; the sender hears ok', async (t) => {
  const [a, b] = await startMesh(t, ['a', 'b'], {
    maxFrameBytes: 1 * MiB,
    snapshotChunkBytes: 256 * 1024,
  });
  if (a === undefined || b === undefined) throw new Error('mesh');
  const gm = snap('a', 'b', 77, 5 * MiB);
  // A heartbeat sent in the same turn is not held back by the snapshot.
  const hb = { groupId: 1, message: message({ type: 'heartbeat', from: 'a', to: 'b', term: 9 }) };
  a.transport.send('b', [gm, hb]);
  t.equal(a.snapshotStatus.length, 0, 'never called back inside send()');
  await eventually('snapshot status', () => a.snapshotStatus.length > 0, 30_000);
  t.strictSame(a.snapshotStatus, [{ groupId: 77, to: 'b', ok: true }]);
  const snaps = b.received.filter((r) => r.msgs[0]?.message.type === 'snap');
  t.equal(snaps.length, 1, 'delivered once');
  t.equal(snaps[0]?.from, 'a');
  // Bytes compared as a block: tap's element-wise deep compare of 5 MiB takes seconds.
  const got = snaps[0]?.msgs[0];
  const gotData = got?.message.snapshot?.data ?? new Uint8Array(0);
  const sentData = gm.message.snapshot?.data ?? new Uint8Array(1);
  t.ok(Buffer.from(gotData).equals(Buffer.from(sentData)), 'every byte preserved');
  const withoutData = (m: GroupMessage | undefined) =>
    m === undefined || m.message.snapshot === undefined
      ? m
      : { ...m, message: { ...m.message, snapshot: { ...m.message.snapshot, data: null } } };
  t.strictSame(withoutData(got), withoutData(gm), 'every other field preserved');
  t.equal(b.transport.peerCounters('a').snapshotReceivedBytes, 5 * MiB);
  t.equal(b.transport.peerCounters('a').snapshotChunkReceivedCount, 20, 'in 256 KiB chunks');
  t.equal(a.transport.peerCounters('b').snapshotSentCount, 1);
  t.ok(
    b.received.some((r) => r.msgs[0]?.message.type === 'heartbeat'),
    'heartbeat delivered on the stream',
  );
});

t.test('a snapshot to a dead peer reports false', async (t) => {
  const a = await startNode(t, 'a');
  a.transport.setPeer('dead', await deadAddress(t));
  a.transport.send('dead', [snap('a', 'dead', 3, 100_000)]);
  await eventually('snapshot status', () => a.snapshotStatus.length > 0);
  t.strictSame(a.snapshotStatus, [{ groupId: 3, to: 'dead', ok: false }]);
  t.equal(a.transport.peerCounters('dead').snapshotFailedCount, 1);
});

t.test('a snapshot to an unknown peer reports false, later', async (t) => {
  const a = await startNode(t, 'a');
  a.transport.send('nobody', [snap('a', 'nobody', 4, 10)]);
  t.equal(a.snapshotStatus.length, 0);
  await eventually('snapshot status', () => a.snapshotStatus.length > 0);
  t.strictSame(a.snapshotStatus, [{ groupId: 4, to: 'nobody', ok: false }]);
});

t.test('a snapshot for a group the receiver does not host is refused at the header', async (t) => {
  const [a, b] = await startMesh(t, ['a', 'b']);
  if (a === undefined || b === undefined) throw new Error('mesh');
  b.foreignGroups.add(5);
  a.transport.send('b', [snap('a', 'b', 5, 2 * MiB)]);
  await eventually('snapshot status', () => a.snapshotStatus.length > 0);
  t.strictSame(a.snapshotStatus, [{ groupId: 5, to: 'b', ok: false }]);
  t.strictSame(a.notHosted, [{ from: 'b', groupId: 5 }]);
  t.equal(b.received.length, 0, 'nothing delivered');
});

t.test('a snapshot above the receiver bound is refused', async (t) => {
  const [a, b] = await startMesh(t, ['a', 'b'], { maxSnapshotBytes: MiB });
  if (a === undefined || b === undefined) throw new Error('mesh');
  a.transport.send('b', [snap('a', 'b', 6, MiB + 1)]);
  await eventually('snapshot status', () => a.snapshotStatus.length > 0);
  t.strictSame(a.snapshotStatus, [{ groupId: 6, to: 'b', ok: false }]);
  t.equal(b.transport.peerCounters('a').malformedFrameCount, 1);
  t.equal(b.received.length, 0);
});

t.test('several snapshots in flight to one peer are bounded', async (t) => {
  const [a, b] = await startMesh(t, ['a', 'b'], { maxSnapshotsInFlightPerPeer: 2 });
  if (a === undefined || b === undefined) throw new Error('mesh');
  a.transport.send(
    'b',
    [1, 2, 3].map((g) => snap('a', 'b', g, MiB, g)),
  );
  await eventually('three statuses', () => a.snapshotStatus.length === 3, 30_000);
  const byGroup = new Map(a.snapshotStatus.map((s) => [s.groupId, s.ok]));
  t.strictSame([...byGroup.entries()].sort(), [
    [1, true],
    [2, true],
    [3, false],
  ]);
});
