/**
 * The one boundary between proto/raft.proto and the Raft core's plain objects, and the one place
 * that touches the loosely typed grpc-js and proto-loader APIs.
 *
 * gRPC itself moves opaque Buffers (identity serializers): this module encodes and decodes them
 * with the codecs proto-loader builds from the .proto file, except for BatchFrame, the hot path,
 * which batch-frame-codec.ts encodes and decodes by hand from the same .proto. Doing it here
 * rather than inside grpc-js gives the caller the exact byte counts, and a frame that fails
 * validation surfaces as a MalformedFrameError naming the field instead of an INTERNAL status
 * from deep inside grpc-js.
 *
 * Heartbeat coalescing lives here too, because it is a wire format question: heartbeats and
 * heartbeat responses whose other fields are all zero, and whose from/to are the frame's, travel
 * in the compact `heartbeats` list; every other message keeps its full form. Each compact
 * heartbeat records how many full messages preceded it, so decoding restores the send order.
 */
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import type { MessageTypeDefinition, PackageDefinition } from '@grpc/proto-loader';
import { assert, assertionFailed, assertNever } from '../base/assert.js';
import type {
  ConfState,
  Entry,
  EntryType,
  Message,
  MessageType,
  NodeId,
  SnapshotMeta,
} from '../raft/messages.js';
import {
  encodeBatchFrameBytes,
  parseBatchFrame,
  type CompactHeartbeat,
} from './batch-frame-codec.js';
import { MalformedFrameError } from './errors.js';

/** A Raft message of one group: the unit the transport moves. */
export interface GroupMessage {
  readonly groupId: number;
  readonly message: Message;
}

/** What one Stream frame carries once decoded: every message in send order. */
export interface BatchFrame {
  readonly from: NodeId;
  readonly to: NodeId;
  readonly messages: readonly GroupMessage[];
  /** The sender is stopping and must not be handed a leadership (false when absent). */
  readonly stopping?: boolean;
}

/** A decoded frame: the messages array is fresh and the caller's to keep. */
export interface DecodedBatchFrame extends BatchFrame {
  readonly messages: GroupMessage[];
  readonly stopping: boolean;
}

export interface NoticeFrame {
  readonly groupsNotHosted: readonly number[];
}

/** The first chunk of a SendSnapshot call: the 'snap' message minus its data. */
export interface SnapshotHeader {
  readonly groupId: number;
  /** The 'snap' message; its `snapshot` is undefined here and rebuilt from `meta` and data. */
  readonly message: Message;
  readonly meta: SnapshotMeta;
  readonly totalBytes: number;
}

export type SnapshotChunk =
  | { readonly kind: 'header'; readonly header: SnapshotHeader }
  | { readonly kind: 'data'; readonly offset: number; readonly data: Uint8Array };

export type SnapshotOutcome = 'accepted' | 'group-not-hosted';

// ---------------------------------------------------------------------------------------------
// Loading the proto

const PROTO_PATH = fileURLToPath(new URL('../../proto/raft.proto', import.meta.url));
const PACKAGE = 'tickraft.v1';

/**
 * Numbers come out as JS numbers (checked against 2^53 below), enums as their names, bytes as
 * Buffers, and every field is present so validation reads one shape.
 */
const packageDefinition: PackageDefinition = loadSync(PROTO_PATH, {
  keepCase: false,
  longs: Number,
  enums: String,
  defaults: true,
  arrays: true,
});

/**
 * proto-loader types codecs as `object` in and out. `unknown` out forces validation before use;
 * the input side is our own Proto* interfaces, which mirror the .proto file.
 */
interface Codec<In> {
  encode(value: In): Buffer;
  decode(bytes: Buffer): unknown;
}

function codecFor<In extends object>(name: string): Codec<In> {
  const def = packageDefinition[`${PACKAGE}.${name}`];
  if (!(def !== undefined && 'serialize' in def))
    assertionFailed(`proto/raft.proto lacks message ${name}`);
  const typed = def as MessageTypeDefinition<object, object>;
  return { encode: (value) => typed.serialize(value), decode: (bytes) => typed.deserialize(bytes) };
}

function methodPath(method: string): string {
  const service = packageDefinition[`${PACKAGE}.RaftTransport`];
  assert(service !== undefined && !('format' in service), 'proto/raft.proto lacks RaftTransport');
  const def = service[method];
  if (def === undefined) assertionFailed(`RaftTransport lacks method ${method}`);
  return def.path;
}

// The shapes handed to proto-loader's encoders: field names as proto-loader maps them (camelCase).

type ProtoMessageType = (typeof MESSAGE_TYPE_TO_PROTO)[MessageType];

interface ProtoEntry {
  term: number;
  index: number;
  type: 'ENTRY_TYPE_NORMAL' | 'ENTRY_TYPE_CONF_CHANGE';
  data: Uint8Array;
}

interface ProtoGroupMessage {
  groupId: number;
  type: ProtoMessageType;
  from: string;
  to: string;
  term: number;
  logTerm: number;
  index: number;
  commit: number;
  reject: boolean;
  rejectHint: number;
  context: number;
  entries: ProtoEntry[];
}

interface ProtoConfState {
  voters: readonly string[];
  votersOutgoing: readonly string[];
  learners: readonly string[];
  learnersNext: readonly string[];
  autoLeave: boolean;
}

interface ProtoSnapshotChunk {
  header?: {
    message: ProtoGroupMessage;
    snapshotIndex: number;
    snapshotTerm: number;
    confState: ProtoConfState;
    totalBytes: number;
  };
  offset: number;
  data: Uint8Array;
}

const noticeFrameCodec = codecFor<{ groupsNotHosted: readonly number[] }>('NoticeFrame');
const snapshotChunkCodec = codecFor<ProtoSnapshotChunk>('SnapshotChunk');
const snapshotAckCodec = codecFor<{ outcome: string }>('SnapshotAck');

// ---------------------------------------------------------------------------------------------
// Enum tables

const MESSAGE_TYPE_TO_PROTO = {
  app: 'MESSAGE_TYPE_APP',
  'app-resp': 'MESSAGE_TYPE_APP_RESP',
  heartbeat: 'MESSAGE_TYPE_HEARTBEAT',
  'heartbeat-resp': 'MESSAGE_TYPE_HEARTBEAT_RESP',
  vote: 'MESSAGE_TYPE_VOTE',
  'vote-resp': 'MESSAGE_TYPE_VOTE_RESP',
  'pre-vote': 'MESSAGE_TYPE_PRE_VOTE',
  'pre-vote-resp': 'MESSAGE_TYPE_PRE_VOTE_RESP',
  snap: 'MESSAGE_TYPE_SNAP',
  'timeout-now': 'MESSAGE_TYPE_TIMEOUT_NOW',
  'read-index': 'MESSAGE_TYPE_READ_INDEX',
  'read-index-resp': 'MESSAGE_TYPE_READ_INDEX_RESP',
  quiesce: 'MESSAGE_TYPE_QUIESCE',
} as const satisfies Record<MessageType, string>;

const MESSAGE_TYPE_FROM_PROTO: ReadonlyMap<string, MessageType> = new Map(
  Object.entries(MESSAGE_TYPE_TO_PROTO).map(([k, v]) => [v, k as MessageType]),
);

function entryTypeToProto(type: EntryType): ProtoEntry['type'] {
  switch (type) {
    case 'normal':
      return 'ENTRY_TYPE_NORMAL';
    case 'conf-change':
      return 'ENTRY_TYPE_CONF_CHANGE';
    default:
      return assertNever(type, 'entry type');
  }
}

const ENTRY_TYPE_FROM_PROTO: ReadonlyMap<string, EntryType> = new Map([
  ['ENTRY_TYPE_NORMAL', 'normal'],
  ['ENTRY_TYPE_CONF_CHANGE', 'conf-change'],
]);

const SNAPSHOT_OUTCOME_TO_PROTO = {
  accepted: 'OUTCOME_ACCEPTED',
  'group-not-hosted': 'OUTCOME_GROUP_NOT_HOSTED',
} as const satisfies Record<SnapshotOutcome, string>;

// ---------------------------------------------------------------------------------------------
// Size estimates

/**
 * Upper bounds of encoded sizes, used to split frames and to bound queues without encoding
 * twice. A scalar field costs at most 1 tag byte (field numbers < 16) + 8 varint bytes (values
 * < 2^53, enums and bools fewer); a length-delimited field 1 + 5 + payload; a string at most 3
 * UTF-8 bytes per UTF-16 unit. Invariant: encoded size <= estimate, so a frame built under
 * maxFrameBytes by estimate is under it on the wire.
 */
const SCALAR_BYTES_MAX = 9;
const LENGTH_PREFIX_BYTES_MAX = 6;

function stringBytesMax(s: string): number {
  return LENGTH_PREFIX_BYTES_MAX + s.length * 3;
}

/** Wire bytes of one message inside a frame (full or compact form), an upper bound. */
export function estimateMessageBytes(gm: GroupMessage): number {
  const m = gm.message;
  let n = LENGTH_PREFIX_BYTES_MAX + 9 * SCALAR_BYTES_MAX;
  n += stringBytesMax(m.from) + stringBytesMax(m.to);
  for (const e of m.entries)
    n += 2 * LENGTH_PREFIX_BYTES_MAX + 3 * SCALAR_BYTES_MAX + e.data.length;
  return n;
}

/** Frame bytes besides its messages (the from/to strings and the stopping flag), an upper bound. */
export function estimateFrameOverheadBytes(from: NodeId, to: NodeId): number {
  return stringBytesMax(from) + stringBytesMax(to) + 2;
}

// ---------------------------------------------------------------------------------------------
// Encoding (our own objects: a bad value is a bug, so assertions, not errors)

const U32_MAX = 0xffff_ffff;

function checkU32(value: number, what: string): number {
  if (!(Number.isInteger(value) && value >= 0 && value <= U32_MAX))
    assertionFailed(`${what} not a u32: ${value}`);
  return value;
}

function checkU64(value: number, what: string): number {
  if (!(Number.isSafeInteger(value) && value >= 0))
    assertionFailed(`${what} not a safe u64: ${value}`);
  return value;
}

function isCompactHeartbeat(m: Message, from: NodeId, to: NodeId): boolean {
  return (
    (m.type === 'heartbeat' || m.type === 'heartbeat-resp') &&
    m.from === from &&
    m.to === to &&
    m.logTerm === 0 &&
    m.index === 0 &&
    m.entries.length === 0 &&
    !m.reject &&
    m.rejectHint === 0 &&
    m.snapshot === undefined
  );
}

function toProtoGroupMessage(gm: GroupMessage): ProtoGroupMessage {
  const m = gm.message;
  return {
    groupId: checkU32(gm.groupId, 'groupId'),
    type: MESSAGE_TYPE_TO_PROTO[m.type],
    from: m.from,
    to: m.to,
    term: checkU64(m.term, 'term'),
    logTerm: checkU64(m.logTerm, 'logTerm'),
    index: checkU64(m.index, 'index'),
    commit: checkU64(m.commit, 'commit'),
    reject: m.reject,
    rejectHint: checkU64(m.rejectHint, 'rejectHint'),
    context: checkU64(m.context, 'context'),
    entries: m.entries.map((e) => ({
      term: checkU64(e.term, 'entry term'),
      index: checkU64(e.index, 'entry index'),
      type: entryTypeToProto(e.type),
      data: e.data,
    })),
  };
}

export function encodeBatchFrame(frame: BatchFrame): Buffer {
  const messages: GroupMessage[] = [];
  const heartbeats: CompactHeartbeat[] = [];
  for (const gm of frame.messages) {
    const m = gm.message;
    // Invariant: snapshots travel only on SendSnapshot, so a delivered 'snap' always has data.
    assert(m.type !== 'snap', 'a snap message cannot travel in a batch frame');
    if (isCompactHeartbeat(m, frame.from, frame.to)) {
      heartbeats.push({ gm, afterMessages: messages.length });
    } else {
      messages.push(gm);
    }
  }
  return encodeBatchFrameBytes(frame.from, frame.to, messages, heartbeats, frame.stopping);
}

export function encodeNoticeFrame(notice: NoticeFrame): Buffer {
  return noticeFrameCodec.encode({ groupsNotHosted: notice.groupsNotHosted });
}

/** The header chunk of a snapshot send; `gm.message.snapshot` must be set. */
export function encodeSnapshotHeader(gm: GroupMessage): Buffer {
  const snap = gm.message.snapshot;
  assert(gm.message.type === 'snap' && snap !== undefined, 'snapshot header needs a snap message');
  const cs = snap.meta.confState;
  return snapshotChunkCodec.encode({
    header: {
      message: { ...toProtoGroupMessage(gm), entries: [] },
      snapshotIndex: checkU64(snap.meta.index, 'snapshot index'),
      snapshotTerm: checkU64(snap.meta.term, 'snapshot term'),
      confState: {
        voters: cs.voters,
        votersOutgoing: cs.votersOutgoing,
        learners: cs.learners,
        learnersNext: cs.learnersNext,
        autoLeave: cs.autoLeave,
      },
      totalBytes: snap.data.length,
    },
    offset: 0,
    data: new Uint8Array(0),
  });
}

export function encodeSnapshotData(offset: number, data: Uint8Array): Buffer {
  return snapshotChunkCodec.encode({ offset: checkU64(offset, 'offset'), data });
}

export function encodeSnapshotAck(outcome: SnapshotOutcome): Buffer {
  return snapshotAckCodec.encode({ outcome: SNAPSHOT_OUTCOME_TO_PROTO[outcome] });
}

// ---------------------------------------------------------------------------------------------
// Decoding and validation (peer input: a bad value is a MalformedFrameError naming the field)

type Fields = Readonly<Record<string, unknown>>;

function fail(field: string, reason: string): never {
  throw new MalformedFrameError(field, reason);
}

function join(path: string, key: string): string {
  return path === '' ? key : `${path}.${key}`;
}

function decodeWith(codec: Codec<never>, bytes: Buffer): Fields {
  let value: unknown;
  try {
    value = codec.decode(bytes);
  } catch (err) {
    throw new MalformedFrameError('(frame)', `does not decode: ${(err as Error).message}`, {
      cause: err,
    });
  }
  return asFields(value, '(frame)');
}

function asFields(value: unknown, field: string): Fields {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    fail(field, 'is not a message');
  }
  return value as Fields;
}

function readU32(o: Fields, key: string, path: string): number {
  const v = o[key];
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > U32_MAX) {
    fail(join(path, key), `is not a u32 (${String(v)})`);
  }
  return v;
}

function readU64(o: Fields, key: string, path: string): number {
  const v = o[key];
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) {
    fail(join(path, key), `is not a non-negative integer below 2^53 (${String(v)})`);
  }
  return v;
}

function readString(o: Fields, key: string, path: string): string {
  const v = o[key];
  if (typeof v !== 'string') fail(join(path, key), 'is not a string');
  return v;
}

function readNodeId(o: Fields, key: string, path: string): NodeId {
  const v = readString(o, key, path);
  if (v === '') fail(join(path, key), 'is empty; a node id is required');
  return v;
}

function readBool(o: Fields, key: string, path: string): boolean {
  const v = o[key];
  if (typeof v !== 'boolean') fail(join(path, key), 'is not a bool');
  return v;
}

/**
 * The decoded bytes as a plain Uint8Array (not a Buffer), so results compare deep-equal with
 * what was sent. `copy` detaches them from the received frame: an entry may live in the Raft log
 * long after its frame is gone, and a view would pin the whole frame buffer (up to
 * maxFrameBytes) for one small entry. Chunk data is copied by the assembler right away.
 */
function readBytes(o: Fields, key: string, path: string, copy: 'copy' | 'view'): Uint8Array {
  const v = o[key];
  if (!(v instanceof Uint8Array)) fail(join(path, key), 'is not bytes');
  return copy === 'copy' ? new Uint8Array(v) : new Uint8Array(v.buffer, v.byteOffset, v.length);
}

function readList(o: Fields, key: string, path: string): readonly unknown[] {
  const v = o[key];
  if (!Array.isArray(v)) fail(join(path, key), 'is not a list');
  return v;
}

function readNodeIds(o: Fields, key: string, path: string): NodeId[] {
  return readList(o, key, path).map((v, i) => {
    if (typeof v !== 'string' || v === '') fail(`${join(path, key)}[${i}]`, 'is not a node id');
    return v;
  });
}

function readMessageType(o: Fields, key: string, path: string): MessageType {
  const v = o[key];
  const type = typeof v === 'string' ? MESSAGE_TYPE_FROM_PROTO.get(v) : undefined;
  if (type === undefined) fail(join(path, key), `is not a known message type (${String(v)})`);
  return type;
}

function readEntry(value: unknown, path: string): Entry {
  const o = asFields(value, path);
  const rawType = o['type'];
  const type = typeof rawType === 'string' ? ENTRY_TYPE_FROM_PROTO.get(rawType) : undefined;
  if (type === undefined)
    fail(join(path, 'type'), `is not a known entry type (${String(rawType)})`);
  return {
    term: readU64(o, 'term', path),
    index: readU64(o, 'index', path),
    type,
    data: readBytes(o, 'data', path, 'copy'),
  };
}

function readGroupMessage(value: unknown, path: string): GroupMessage {
  const o = asFields(value, path);
  const groupId = readU32(o, 'groupId', path);
  const message: Message = {
    type: readMessageType(o, 'type', path),
    from: readNodeId(o, 'from', path),
    to: readNodeId(o, 'to', path),
    term: readU64(o, 'term', path),
    logTerm: readU64(o, 'logTerm', path),
    index: readU64(o, 'index', path),
    entries: readList(o, 'entries', path).map((e, i) => readEntry(e, `${path}.entries[${i}]`)),
    commit: readU64(o, 'commit', path),
    reject: readBool(o, 'reject', path),
    rejectHint: readU64(o, 'rejectHint', path),
    snapshot: undefined,
    context: readU64(o, 'context', path),
  };
  return { groupId, message };
}

/** Decodes and validates one Stream frame; throws MalformedFrameError naming the first bad field. */
export function decodeBatchFrame(bytes: Buffer): DecodedBatchFrame {
  const { from, to, messages: full, heartbeats, stopping } = parseBatchFrame(bytes);
  for (let i = 0; i < full.length; i++) {
    if (full[i]!.message.type === 'snap') {
      fail(`messages[${i}].type`, 'a snapshot travels on SendSnapshot, not in a frame');
    }
  }
  if (heartbeats.length === 0) return { from, to, messages: full, stopping };

  let previousAfter = 0;
  for (let i = 0; i < heartbeats.length; i++) {
    const after = heartbeats[i]!.afterMessages;
    if (after < previousAfter) fail(`heartbeats[${i}].afterMessages`, 'decreases');
    if (after > full.length) {
      fail(`heartbeats[${i}].afterMessages`, `exceeds the ${full.length} messages of the frame`);
    }
    previousAfter = after;
  }
  // Merge the two lists back into send order.
  const messages: GroupMessage[] = [];
  let h = 0;
  for (let i = 0; i <= full.length; i++) {
    for (let hb = heartbeats[h]; hb !== undefined && hb.afterMessages === i; hb = heartbeats[++h]) {
      messages.push(hb.gm);
    }
    const gm = full[i];
    if (gm !== undefined) messages.push(gm);
  }
  return { from, to, messages, stopping };
}

export function decodeNoticeFrame(bytes: Buffer): NoticeFrame {
  const o = decodeWith(noticeFrameCodec, bytes);
  const groupsNotHosted = readList(o, 'groupsNotHosted', '').map((v, i) => {
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > U32_MAX) {
      fail(`groupsNotHosted[${i}]`, 'is not a u32');
    }
    return v;
  });
  return { groupsNotHosted };
}

function readConfState(value: unknown, path: string): ConfState {
  const o = asFields(value, path);
  return {
    voters: readNodeIds(o, 'voters', path),
    votersOutgoing: readNodeIds(o, 'votersOutgoing', path),
    learners: readNodeIds(o, 'learners', path),
    learnersNext: readNodeIds(o, 'learnersNext', path),
    autoLeave: readBool(o, 'autoLeave', path),
  };
}

export function decodeSnapshotChunk(bytes: Buffer): SnapshotChunk {
  const o = decodeWith(snapshotChunkCodec, bytes);
  const offset = readU64(o, 'offset', '');
  const data = readBytes(o, 'data', '', 'view');
  const rawHeader = o['header'];
  if (rawHeader === null || rawHeader === undefined) return { kind: 'data', offset, data };

  if (offset !== 0 || data.length !== 0) fail('data', 'the header chunk carries no data');
  const h = asFields(rawHeader, 'header');
  const gm = readGroupMessage(h['message'], 'header.message');
  if (gm.message.type !== 'snap')
    fail('header.message.type', `must be snap, not ${gm.message.type}`);
  if (gm.message.entries.length > 0) fail('header.message.entries', 'must be empty');
  const meta: SnapshotMeta = {
    index: readU64(h, 'snapshotIndex', 'header'),
    term: readU64(h, 'snapshotTerm', 'header'),
    confState: readConfState(h['confState'], 'header.confState'),
  };
  const totalBytes = readU64(h, 'totalBytes', 'header');
  return { kind: 'header', header: { groupId: gm.groupId, message: gm.message, meta, totalBytes } };
}

export function decodeSnapshotAck(bytes: Buffer): SnapshotOutcome {
  const o = decodeWith(snapshotAckCodec, bytes);
  switch (o['outcome']) {
    case SNAPSHOT_OUTCOME_TO_PROTO.accepted:
      return 'accepted';
    case SNAPSHOT_OUTCOME_TO_PROTO['group-not-hosted']:
      return 'group-not-hosted';
    default:
      return fail('outcome', `is not a known outcome (${String(o['outcome'])})`);
  }
}

// ---------------------------------------------------------------------------------------------
// grpc-js glue: typed handlers, client and server over Buffers

const identity = (b: Buffer): Buffer => b;
const STREAM_PATH = methodPath('Stream');
const SEND_SNAPSHOT_PATH = methodPath('SendSnapshot');

export type StreamCall = grpc.ServerDuplexStream<Buffer, Buffer>;
export type SnapshotCall = grpc.ServerReadableStream<Buffer, Buffer>;
export type SnapshotCallback = grpc.sendUnaryData<Buffer>;

export interface RaftTransportHandlers {
  stream(call: StreamCall): void;
  sendSnapshot(call: SnapshotCall, callback: SnapshotCallback): void;
}

function serviceDefinition(): grpc.ServiceDefinition {
  const method = (path: string, requestStream: boolean, responseStream: boolean) => ({
    path,
    requestStream,
    responseStream,
    requestSerialize: identity,
    requestDeserialize: identity,
    responseSerialize: identity,
    responseDeserialize: identity,
  });
  return {
    Stream: method(STREAM_PATH, true, true),
    SendSnapshot: method(SEND_SNAPSHOT_PATH, true, false),
  };
}

export function createRaftTransportServer(
  handlers: RaftTransportHandlers,
  options: grpc.ServerOptions,
): grpc.Server {
  const server = new grpc.Server(options);
  const impl: grpc.UntypedServiceImplementation = {
    Stream: (call: StreamCall) => handlers.stream(call),
    SendSnapshot: (call: SnapshotCall, callback: SnapshotCallback) =>
      handlers.sendSnapshot(call, callback),
  };
  server.addService(serviceDefinition(), impl);
  return server;
}

/** Binds and starts the server (plaintext); resolves to the bound port (useful with port 0). */
export function bindServer(server: grpc.Server, address: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.bindAsync(address, insecureServerCredentials(), (err, port) => {
      if (err === null) resolve(port);
      else reject(err);
    });
  });
}

export type ClientStream = grpc.ClientDuplexStream<Buffer, Buffer>;
export type ClientSnapshotStream = grpc.ClientWritableStream<Buffer>;
export type ServiceError = grpc.ServiceError;
export type PeerChannelCredentials = grpc.ChannelCredentials;

/** The typed client side of RaftTransport: one channel to one peer address. */
export class RaftTransportClient {
  private readonly client: grpc.Client;

  /** `credentials`: the peer transport's mutual TLS (tls.ts); plaintext when absent. */
  constructor(
    address: string,
    options: grpc.ChannelOptions,
    credentials?: grpc.ChannelCredentials,
  ) {
    this.client = new grpc.Client(
      address,
      credentials ?? grpc.credentials.createInsecure(),
      options,
    );
  }

  openStream(): ClientStream {
    return this.client.makeBidiStreamRequest(STREAM_PATH, identity, identity);
  }

  sendSnapshot(
    deadlineMs: number,
    callback: (err: ServiceError | null, ack: Buffer | undefined) => void,
  ): ClientSnapshotStream {
    return this.client.makeClientStreamRequest(
      SEND_SNAPSHOT_PATH,
      identity,
      identity,
      { deadline: Date.now() + deadlineMs },
      callback,
    );
  }

  close(): void {
    this.client.close();
  }
}

export const grpcStatus = grpc.status;
export const insecureServerCredentials = (): grpc.ServerCredentials =>
  grpc.ServerCredentials.createInsecure();
export { Metadata } from '@grpc/grpc-js';
