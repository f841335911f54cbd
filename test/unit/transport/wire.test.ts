// wire.ts maps Raft messages to proto/raft.proto frames and back; nothing else in tickraft
// sees protobuf. Goal: every field of every message type survives the trip exactly, heartbeats
// take the compact form when they can without changing what is delivered or its order, and
// anything a peer could send that breaks the contract is rejected with a MalformedFrameError
// naming the field. Method: seeded random messages (SeededRand, fixed seeds so failures replay)
// through encode → decode compared deep-equal; snapshots through header + chunks + the
// SnapshotAssembler; malformed input built with proto-loader directly from the same .proto, so
// the test can write values our own encoder refuses to produce. BatchFrame has a hand-written
// codec (batch-frame-codec.ts), so it is also checked against proto-loader in both directions:
// what we write is what the .proto says, and we read what a protobuf library writes.
import { fileURLToPath } from 'node:url';
import { loadSync, type MessageTypeDefinition } from '@grpc/proto-loader';
import t from 'tap';
import { SeededRand } from '../../../src/base/rand.js';
import { message } from '../../../src/raft/messages.js';
import { MalformedFrameError } from '../../../src/transport/errors.js';
import { SnapshotAssembler } from '../../../src/transport/snapshot-assembler.js';
import {
  decodeBatchFrame,
  decodeNoticeFrame,
  decodeSnapshotAck,
  decodeSnapshotChunk,
  encodeBatchFrame,
  encodeNoticeFrame,
  encodeSnapshotAck,
  encodeSnapshotData,
  encodeSnapshotHeader,
  estimateFrameOverheadBytes,
  estimateMessageBytes,
  type GroupMessage,
} from '../../../src/transport/wire.js';
import { MESSAGE_TYPE_NUMBER } from '../../../src/transport/batch-frame-codec.js';
import type { Message } from '../../../src/raft/messages.js';
import { MESSAGE_TYPES, randGroupId, randMessage, randSnapshot } from './harness.js';

const FROM = 'n1';
const TO = 'n2';

t.test('every message type round-trips with every field preserved', (t) => {
  for (const seed of [1, 2, 3, 42, 20240611]) {
    const r = new SeededRand(seed);
    for (const type of MESSAGE_TYPES.filter((m) => m !== 'snap')) {
      for (let i = 0; i < 30; i++) {
        const gm: GroupMessage = {
          groupId: randGroupId(r),
          message: randMessage(r, type, FROM, TO),
        };
        const back = decodeBatchFrame(encodeBatchFrame({ from: FROM, to: TO, messages: [gm] }));
        t.strictSame(
          back,
          { from: FROM, to: TO, messages: [gm], stopping: false },
          `seed ${seed} ${type} #${i}`,
        );
      }
    }
  }
  t.end();
});

t.test('a mixed frame keeps send order across the compact and full lists', (t) => {
  const r = new SeededRand(7);
  const types = MESSAGE_TYPES.filter((m) => m !== 'snap');
  for (let round = 0; round < 50; round++) {
    const messages: GroupMessage[] = Array.from({ length: 1 + r.int(60) }, () => ({
      groupId: randGroupId(r),
      message: randMessage(r, types[r.int(types.length)] ?? 'app', FROM, TO),
    }));
    const back = decodeBatchFrame(encodeBatchFrame({ from: FROM, to: TO, messages }));
    t.strictSame(back.messages, messages, `round ${round}`);
  }
  t.end();
});

t.test('heartbeats take the compact form only when nothing is lost', (t) => {
  const hb = (groupId: number) => ({
    groupId,
    message: message({ type: 'heartbeat', from: FROM, to: TO, term: 5, commit: 9, context: 3 }),
  });
  const thousand = Array.from({ length: 1000 }, (_, g) => hb(g));
  const compactBytes = encodeBatchFrame({ from: FROM, to: TO, messages: thousand }).length;
  // Compact heartbeats carry no from/to strings and no zero fields.
  t.ok(compactBytes < 16 * 1000, `1,000 heartbeats in ${compactBytes} bytes`);

  // A heartbeat naming other nodes than the frame's cannot be compact, and still round-trips.
  const odd = {
    groupId: 1,
    message: message({ type: 'heartbeat-resp', from: 'n9', to: TO, term: 2 }),
  };
  const back = decodeBatchFrame(encodeBatchFrame({ from: FROM, to: TO, messages: [odd] }));
  t.strictSame(back.messages, [odd]);
  t.end();
});

t.test('size estimates are upper bounds of the encoded size', (t) => {
  const r = new SeededRand(99);
  const types = MESSAGE_TYPES.filter((m) => m !== 'snap');
  for (let i = 0; i < 300; i++) {
    const messages: GroupMessage[] = Array.from({ length: 1 + r.int(20) }, () => ({
      groupId: randGroupId(r),
      message: randMessage(r, types[r.int(types.length)] ?? 'app', FROM, TO),
    }));
    const estimate =
      estimateFrameOverheadBytes(FROM, TO) +
      messages.reduce((sum, gm) => sum + estimateMessageBytes(gm), 0);
    const actual = encodeBatchFrame({ from: FROM, to: TO, messages }).length;
    if (actual > estimate) t.fail(`frame ${i}: ${actual} bytes > estimate ${estimate}`);
  }
  t.pass('300 random frames within their estimate');
  t.end();
});

t.test('a snapshot round-trips through header, chunks and the assembler', (t) => {
  const r = new SeededRand(5);
  for (const size of [0, 1, 1000, 65_536, 300_001]) {
    const snap = randSnapshot(r, size);
    const gm: GroupMessage = {
      groupId: randGroupId(r),
      message: { ...randMessage(r, 'snap', FROM, TO), entries: [], to: TO, snapshot: snap },
    };
    const assembler = new SnapshotAssembler(TO, {
      maxSnapshotBytes: 1 << 20,
      maxChunkBytes: 4096,
    });
    assembler.add(decodeSnapshotChunk(encodeSnapshotHeader(gm)));
    for (let off = 0; off < size; off += 4096) {
      const piece = snap.data.subarray(off, Math.min(off + 4096, size));
      assembler.add(decodeSnapshotChunk(encodeSnapshotData(off, piece)));
    }
    t.strictSame(assembler.finish(), gm, `snapshot of ${size} bytes`);
  }
  t.end();
});

t.test('notices and acks round-trip', (t) => {
  const notice = { groupsNotHosted: [0, 7, 0xffff_ffff] };
  t.strictSame(decodeNoticeFrame(encodeNoticeFrame(notice)), notice);
  t.equal(decodeSnapshotAck(encodeSnapshotAck('accepted')), 'accepted');
  t.equal(decodeSnapshotAck(encodeSnapshotAck('group-not-hosted')), 'group-not-hosted');
  t.end();
});

// Raw encoders from the same .proto, so tests can put on the wire what our encoder never writes.
const raw = loadSync(fileURLToPath(new URL('../../../proto/raft.proto', import.meta.url)), {
  keepCase: false,
  longs: Number,
  enums: String,
  defaults: true,
  arrays: true,
});
function rawEncode(name: string, value: object): Buffer {
  const def = raw[`tickraft.v1.${name}`] as MessageTypeDefinition<object, object>;
  return def.serialize(value);
}

function rawDecode(name: string, bytes: Buffer): unknown {
  const def = raw[`tickraft.v1.${name}`] as MessageTypeDefinition<object, object>;
  return def.deserialize(bytes);
}

const protoType = (type: string): string => `MESSAGE_TYPE_${type.toUpperCase().replace(/-/g, '_')}`;

/** A message as proto-loader shows a GroupMessage (every field present, bytes as plain arrays). */
function protoMessage(gm: GroupMessage) {
  const m = gm.message;
  return {
    groupId: gm.groupId,
    type: protoType(m.type),
    from: m.from,
    to: m.to,
    term: m.term,
    logTerm: m.logTerm,
    index: m.index,
    commit: m.commit,
    reject: m.reject,
    rejectHint: m.rejectHint,
    context: m.context,
    entries: m.entries.map((e) => ({
      term: e.term,
      index: e.index,
      type: e.type === 'normal' ? 'ENTRY_TYPE_NORMAL' : 'ENTRY_TYPE_CONF_CHANGE',
      data: [...e.data],
    })),
  };
}

function isCompact(m: Message): boolean {
  return (
    (m.type === 'heartbeat' || m.type === 'heartbeat-resp') &&
    m.from === FROM &&
    m.to === TO &&
    m.logTerm === 0 &&
    m.index === 0 &&
    m.entries.length === 0 &&
    !m.reject &&
    m.rejectHint === 0
  );
}

function randFrameMessages(r: SeededRand, count: number): GroupMessage[] {
  const types = MESSAGE_TYPES.filter((m) => m !== 'snap');
  return Array.from({ length: count }, () => ({
    groupId: randGroupId(r),
    message: randMessage(r, types[r.int(types.length)] ?? 'app', FROM, TO),
  }));
}

t.test('enum numbers of the hand-written frame codec are those of the .proto', (t) => {
  const def = raw['tickraft.v1.MessageType'] as unknown as {
    type: { value: { name: string; number: number }[] };
  };
  const numbers = new Map(def.type.value.map((v) => [v.name, v.number]));
  for (const [type, n] of Object.entries(MESSAGE_TYPE_NUMBER)) {
    t.equal(numbers.get(protoType(type)), n, type);
  }
  t.end();
});

t.test('batch frames we write are what proto-loader reads from the .proto', (t) => {
  const r = new SeededRand(11);
  for (let round = 0; round < 100; round++) {
    const messages = randFrameMessages(r, r.int(30));
    const bytes = encodeBatchFrame({ from: FROM, to: TO, messages });
    const decoded = rawDecode('BatchFrame', bytes) as {
      messages: { entries: { data: Buffer }[] }[];
    };
    for (const m of decoded.messages)
      for (const e of m.entries) Object.assign(e, { data: [...e.data] });
    const full = messages.filter((gm) => !isCompact(gm.message));
    let before = 0;
    const heartbeats = [];
    for (const gm of messages) {
      if (!isCompact(gm.message)) before++;
      else {
        const m = gm.message;
        heartbeats.push({
          groupId: gm.groupId,
          type: protoType(m.type),
          term: m.term,
          commit: m.commit,
          context: m.context,
          afterMessages: before,
        });
      }
    }
    t.strictSame(
      decoded,
      { from: FROM, to: TO, messages: full.map(protoMessage), heartbeats, stopping: false },
      `round ${round}`,
    );
  }
  t.end();
});

t.test('batch frames proto-loader writes (every field present) decode to the messages', (t) => {
  const r = new SeededRand(12);
  for (let round = 0; round < 100; round++) {
    const messages = randFrameMessages(r, 1 + r.int(30));
    // Only full messages: proto-loader writes what it is given, zeros included.
    const stopping = round % 2 === 1;
    const bytes = rawEncode('BatchFrame', {
      from: FROM,
      to: TO,
      messages: messages.map(protoMessage).map((m) => ({
        ...m,
        entries: m.entries.map((e) => ({ ...e, data: Uint8Array.from(e.data) })),
      })),
      stopping,
    });
    t.strictSame(
      decodeBatchFrame(bytes),
      { from: FROM, to: TO, messages, stopping },
      `round ${round}`,
    );
  }
  t.end();
});

t.test('the stopping flag round-trips and proto-loader reads it; false stays off the wire', (t) => {
  const messages: GroupMessage[] = [];
  for (const stopping of [false, true]) {
    const bytes = encodeBatchFrame({ from: FROM, to: TO, messages, stopping });
    t.equal(decodeBatchFrame(bytes).stopping, stopping, `decoded: ${stopping}`);
    t.equal(
      (rawDecode('BatchFrame', bytes) as { stopping: boolean }).stopping,
      stopping,
      `proto-loader reads ${stopping}`,
    );
  }
  t.equal(
    encodeBatchFrame({ from: FROM, to: TO, messages, stopping: true }).length,
    encodeBatchFrame({ from: FROM, to: TO, messages }).length + 2,
    'the flag costs two bytes when set, none when not',
  );
  t.end();
});

t.test('unknown fields are skipped; a known field of the wrong wire type is malformed', (t) => {
  const gm: GroupMessage = {
    groupId: 3,
    message: message({
      type: 'app',
      from: FROM,
      to: TO,
      term: 2,
      entries: [{ term: 2, index: 5, type: 'normal', data: Uint8Array.of(1, 2, 3) }],
    }),
  };
  const bytes = encodeBatchFrame({ from: FROM, to: TO, messages: [gm] });
  // Field 15 varint 300, field 14 bytes "ab", field 13 fixed32, field 16 (a 2-byte key) fixed64.
  const unknown = [
    0x78, 0xac, 0x02, 0x72, 2, 0x61, 0x62, 0x6d, 1, 2, 3, 4, 0x81, 0x01, 1, 2, 3, 4, 5, 6, 7, 8,
  ];
  // The frame with unknown fields at its front and at its end.
  const padded = Buffer.from([...unknown, ...bytes, ...unknown]);
  t.strictSame(decodeBatchFrame(padded).messages, [gm], 'unknown frame fields');
  // The same inside the message: rebuild it with the unknown fields appended.
  const inner = rawEncode('GroupMessage', protoMessage(gm));
  const message2 = Buffer.from([...inner, ...unknown]);
  const frame2 = Buffer.concat([
    rawEncode('BatchFrame', { from: FROM, to: TO }),
    Buffer.from([0x1a, message2.length]),
    message2,
  ]);
  t.strictSame(decodeBatchFrame(frame2).messages, [gm], 'unknown message fields');

  const wrongType = Buffer.concat([
    rawEncode('BatchFrame', { from: FROM, to: TO }),
    // messages[0] = { term (field 5) as bytes }
    Buffer.from([0x1a, 3, 0x2a, 1, 0]),
  ]);
  t.throws(() => decodeBatchFrame(wrongType), {
    code: 'TRANSPORT_MALFORMED_FRAME',
    field: 'messages[0].term',
  });
  t.end();
});

t.test('decoded entries do not share memory with the frame', (t) => {
  const gm: GroupMessage = {
    groupId: 3,
    message: message({
      type: 'app',
      from: FROM,
      to: TO,
      term: 2,
      entries: [
        { term: 2, index: 5, type: 'normal', data: Uint8Array.of(1, 2, 3) },
        { term: 2, index: 6, type: 'normal', data: Uint8Array.of(4, 5) },
      ],
    }),
  };
  const bytes = encodeBatchFrame({ from: FROM, to: TO, messages: [gm] });
  const back = decodeBatchFrame(bytes);
  bytes.fill(0);
  t.strictSame(back.messages, [gm]);
  const data = back.messages[0]!.message.entries[0]!.data;
  t.ok(data.buffer.byteLength < bytes.length + 64, 'entries pin no more than their message');
  t.end();
});

const okMessage = {
  groupId: 1,
  type: 'MESSAGE_TYPE_APP',
  from: FROM,
  to: TO,
  term: 1,
  entries: [{ term: 1, index: 1, type: 'ENTRY_TYPE_NORMAL', data: new Uint8Array(1) }],
};
const frame = (patch: object): Buffer =>
  rawEncode('BatchFrame', { from: FROM, to: TO, messages: [okMessage], ...patch });

t.test('malformed frames are rejected with a typed error naming the field', (t) => {
  const cases: [string, Buffer, string][] = [
    ['truncated bytes', Buffer.from([0x1a, 0x7f, 0x08]), '(frame)'],
    ['empty sender', frame({ from: '' }), 'from'],
    ['empty receiver', frame({ to: '' }), 'to'],
    ['unspecified type', frame({ messages: [{ ...okMessage, type: 0 }] }), 'messages[0].type'],
    ['unknown type number', frame({ messages: [{ ...okMessage, type: 99 }] }), 'messages[0].type'],
    ['empty message from', frame({ messages: [{ ...okMessage, from: '' }] }), 'messages[0].from'],
    [
      'term beyond 2^53',
      frame({ messages: [{ ...okMessage, term: '18446744073709551615' }] }),
      'messages[0].term',
    ],
    [
      'commit beyond 2^53',
      frame({ messages: [okMessage, { ...okMessage, commit: '9007199254740993' }] }),
      'messages[1].commit',
    ],
    [
      'unspecified entry type',
      frame({ messages: [{ ...okMessage, entries: [{ term: 1, index: 1 }] }] }),
      'messages[0].entries[0].type',
    ],
    [
      'snapshot in a frame',
      frame({ messages: [{ ...okMessage, type: 'MESSAGE_TYPE_SNAP' }] }),
      'messages[0].type',
    ],
    [
      'compact heartbeat of another type',
      frame({ heartbeats: [{ groupId: 1, type: 'MESSAGE_TYPE_VOTE' }] }),
      'heartbeats[0].type',
    ],
    [
      'heartbeat positions decreasing',
      frame({
        heartbeats: [
          { groupId: 1, type: 'MESSAGE_TYPE_HEARTBEAT', afterMessages: 1 },
          { groupId: 2, type: 'MESSAGE_TYPE_HEARTBEAT', afterMessages: 0 },
        ],
      }),
      'heartbeats[1].afterMessages',
    ],
    [
      'heartbeat position past the messages',
      frame({ heartbeats: [{ groupId: 1, type: 'MESSAGE_TYPE_HEARTBEAT', afterMessages: 2 }] }),
      'heartbeats[0].afterMessages',
    ],
  ];
  for (const [what, bytes, field] of cases) {
    try {
      decodeBatchFrame(bytes);
      t.fail(`${what}: accepted`);
    } catch (err) {
      t.type(err, MalformedFrameError, what);
      const e = err as MalformedFrameError;
      t.equal(e.code, 'TRANSPORT_MALFORMED_FRAME', `${what}: code`);
      t.equal(e.field, field, `${what}: field`);
      t.match(e.message, field, `${what}: message names the field`);
    }
  }
  t.end();
});

t.test('malformed snapshot chunks and sequences are rejected naming the field', (t) => {
  const header = (patch: object) =>
    rawEncode('SnapshotChunk', {
      header: {
        message: { ...okMessage, type: 'MESSAGE_TYPE_SNAP', entries: [] },
        totalBytes: 10,
        confState: { voters: [FROM] },
        ...patch,
      },
    });
  const decodeCases: [string, Buffer, string][] = [
    ['header of another type', header({ message: okMessage }), 'header.message.type'],
    ['empty voter id', header({ confState: { voters: [''] } }), 'header.confState.voters[0]'],
    [
      'data in the header chunk',
      rawEncode('SnapshotChunk', {
        header: { message: { ...okMessage, type: 'MESSAGE_TYPE_SNAP', entries: [] } },
        data: new Uint8Array(3),
      }),
      'data',
    ],
    ['unknown ack outcome', rawEncode('SnapshotAck', { outcome: 0 }), 'outcome'],
  ];
  for (const [what, bytes, field] of decodeCases) {
    t.throws(
      () => (what.includes('ack') ? decodeSnapshotAck(bytes) : decodeSnapshotChunk(bytes)),
      { code: 'TRANSPORT_MALFORMED_FRAME', field },
      what,
    );
  }

  const limits = { maxSnapshotBytes: 100, maxChunkBytes: 8 };
  const start = () => {
    const a = new SnapshotAssembler(TO, limits);
    a.add(decodeSnapshotChunk(header({})));
    return a;
  };
  const data = (offset: number, n: number) =>
    decodeSnapshotChunk(encodeSnapshotData(offset, new Uint8Array(n)));
  const sequenceCases: [string, () => void, string][] = [
    ['data before the header', () => new SnapshotAssembler(TO, limits).add(data(0, 1)), 'header'],
    ['second header', () => start().add(decodeSnapshotChunk(header({}))), 'header'],
    ['gap in offsets', () => start().add(data(1, 1)), 'offset'],
    ['chunk above the bound', () => start().add(data(0, 9)), 'data'],
    [
      'more data than announced',
      () => {
        const a = start();
        a.add(data(0, 8));
        a.add(data(8, 3));
      },
      'data',
    ],
    ['ends short', () => start().finish(), 'data'],
    [
      'snapshot too large',
      () => new SnapshotAssembler(TO, limits).add(decodeSnapshotChunk(header({ totalBytes: 101 }))),
      'header.totalBytes',
    ],
    [
      'addressed to another node',
      () => new SnapshotAssembler('n3', limits).add(decodeSnapshotChunk(header({}))),
      'header.message.to',
    ],
  ];
  for (const [what, fn, field] of sequenceCases) {
    t.throws(fn, { code: 'TRANSPORT_MALFORMED_FRAME', field }, what);
  }
  t.end();
});
