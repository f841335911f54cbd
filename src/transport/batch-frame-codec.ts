/**
 * The protobuf encoding of proto/raft.proto's BatchFrame, written out by hand because it is the
 * hot path of replication: every entry crosses it once per follower. proto-loader's generic
 * codec goes through intermediate objects (fromObject/toObject per message and per entry) and
 * the old reader copied each entry's data on its own; this codec writes the wire bytes straight
 * from the Raft messages and reads them straight into them.
 *
 * The contract is still the .proto file, and nothing else changes on the wire:
 * - Writing: plain proto3 (fields in number order, default values left out, repeated messages
 *   unpacked), so any protobuf library reads it.
 * - Reading: any encoding of the same schema a protobuf library may produce (fields in any
 *   order, default values present or not, a repeated scalar field read last-one-wins, unknown
 *   fields skipped).
 * The wire tests check both directions against proto-loader with the same .proto file.
 *
 * Values are checked here with wire.ts's rules and messages, as they are read: a frame that is
 * not protobuf is a MalformedFrameError on `(frame)`, a bad value one naming its field (field
 * paths are built only when something is wrong).
 */
import { assertionFailed } from '../base/assert.js';
import type { Entry, EntryType, Message, MessageType, NodeId } from '../raft/messages.js';
import { MalformedFrameError } from './errors.js';

/** A Raft message of one group (wire.ts's GroupMessage). */
export interface FrameMessage {
  readonly groupId: number;
  readonly message: Message;
}

/** A heartbeat in the compact list, and how many full messages precede it in send order. */
export interface CompactHeartbeat {
  readonly gm: FrameMessage;
  readonly afterMessages: number;
}

/** A parsed frame: both lists as they were on the wire, every value checked. */
export interface ParsedBatchFrame {
  readonly from: NodeId;
  readonly to: NodeId;
  readonly messages: FrameMessage[];
  readonly heartbeats: CompactHeartbeat[];
  /** The sender is stopping (BatchFrame.stopping). */
  readonly stopping: boolean;
}

// ---------------------------------------------------------------------------------------------
// Schema: field numbers, wire types and enum numbers of proto/raft.proto

const VARINT = 0;
const FIXED64 = 1;
const LEN = 2;
const FIXED32 = 5;

const FRAME_FROM = 1;
const FRAME_TO = 2;
const FRAME_MESSAGES = 3;
const FRAME_HEARTBEATS = 4;
const FRAME_STOPPING = 5;

const MSG_GROUP_ID = 1;
const MSG_TYPE = 2;
const MSG_FROM = 3;
const MSG_TO = 4;
const MSG_TERM = 5;
const MSG_LOG_TERM = 6;
const MSG_INDEX = 7;
const MSG_COMMIT = 8;
const MSG_REJECT = 9;
const MSG_REJECT_HINT = 10;
const MSG_CONTEXT = 11;
const MSG_ENTRIES = 12;

const ENTRY_TERM = 1;
const ENTRY_INDEX = 2;
const ENTRY_TYPE = 3;
const ENTRY_DATA = 4;

const HB_GROUP_ID = 1;
const HB_TYPE = 2;
const HB_TERM = 3;
const HB_COMMIT = 4;
const HB_CONTEXT = 5;
const HB_AFTER_MESSAGES = 6;

/** enum MessageType: numbers as in the .proto. */
export const MESSAGE_TYPE_NUMBER = {
  app: 1,
  'app-resp': 2,
  heartbeat: 3,
  'heartbeat-resp': 4,
  vote: 5,
  'vote-resp': 6,
  'pre-vote': 7,
  'pre-vote-resp': 8,
  snap: 9,
  'timeout-now': 10,
  'read-index': 11,
  'read-index-resp': 12,
  quiesce: 13,
} as const satisfies Record<MessageType, number>;

const MESSAGE_TYPE_OF_NUMBER: readonly (MessageType | undefined)[] = (() => {
  const out: (MessageType | undefined)[] = [];
  for (const [type, n] of Object.entries(MESSAGE_TYPE_NUMBER)) out[n] = type as MessageType;
  return out;
})();

/** enum EntryType. */
const ENTRY_TYPE_NUMBER = { normal: 1, 'conf-change': 2 } as const satisfies Record<
  EntryType,
  number
>;

const ENTRY_TYPE_OF_NUMBER: readonly (EntryType | undefined)[] = [
  undefined,
  'normal',
  'conf-change',
];

// ---------------------------------------------------------------------------------------------
// Encoding (our own objects: a bad value is a bug, so assertions, not errors)

const U32_MAX = 0xffff_ffff;
const TWO_POW_28 = 0x1000_0000;

function checkU32(value: number, what: string): number {
  if (!Number.isInteger(value) || value < 0 || value > U32_MAX) {
    assertionFailed(`${what} not a u32: ${value}`);
  }
  return value;
}

function checkU64(value: number, what: string): number {
  if (!Number.isSafeInteger(value) || value < 0)
    assertionFailed(`${what} not a safe u64: ${value}`);
  return value;
}

/** Bytes of the varint of a non-negative safe integer. */
function varintSize(v: number): number {
  if (v < 0x80) return 1;
  if (v < 0x4000) return 2;
  if (v < 0x20_0000) return 3;
  if (v < TWO_POW_28) return 4;
  let n = 4;
  for (v = Math.floor(v / TWO_POW_28); v > 0; v = Math.floor(v / 0x80)) n++;
  return n;
}

/** Tag and varint of a field, or nothing when the value is zero (the default). */
function varintFieldSize(v: number): number {
  return v === 0 ? 0 : 1 + varintSize(v);
}

/** Tag, length and bytes of a bytes/string/message field of `n` bytes. */
function lenFieldSize(n: number): number {
  return 1 + varintSize(n) + n;
}

/**
 * UTF-8 bytes of the node ids seen so far: a node talks to a handful of peers, so each id is
 * encoded once. Bounded in case ids churn.
 */
const utf8Cache = new Map<string, Buffer>();
const UTF8_CACHE_MAX = 1024;

function utf8(s: string): Buffer {
  let b = utf8Cache.get(s);
  if (b === undefined) {
    if (utf8Cache.size >= UTF8_CACHE_MAX) utf8Cache.clear();
    b = Buffer.from(s, 'utf8');
    utf8Cache.set(s, b);
  }
  return b;
}

/** A string field, left out when empty. */
function stringFieldSize(s: string): number {
  return s === '' ? 0 : lenFieldSize(utf8(s).length);
}

function entrySize(e: Entry): number {
  const n = e.data.length;
  // The type is never the default (0 is ENTRY_TYPE_UNSPECIFIED): one tag and one byte.
  return varintFieldSize(e.term) + varintFieldSize(e.index) + 2 + (n === 0 ? 0 : lenFieldSize(n));
}

/** Size of a full GroupMessage; checks its values on the way (assertions). */
function groupMessageSize(gm: FrameMessage): number {
  const m = gm.message;
  let n =
    varintFieldSize(checkU32(gm.groupId, 'groupId')) +
    2 +
    stringFieldSize(m.from) +
    stringFieldSize(m.to) +
    varintFieldSize(checkU64(m.term, 'term')) +
    varintFieldSize(checkU64(m.logTerm, 'logTerm')) +
    varintFieldSize(checkU64(m.index, 'index')) +
    varintFieldSize(checkU64(m.commit, 'commit')) +
    (m.reject ? 2 : 0) +
    varintFieldSize(checkU64(m.rejectHint, 'rejectHint')) +
    varintFieldSize(checkU64(m.context, 'context'));
  for (const e of m.entries) {
    checkU64(e.term, 'entry term');
    checkU64(e.index, 'entry index');
    n += lenFieldSize(entrySize(e));
  }
  return n;
}

function heartbeatSize(h: CompactHeartbeat): number {
  const m = h.gm.message;
  return (
    varintFieldSize(checkU32(h.gm.groupId, 'groupId')) +
    2 +
    varintFieldSize(checkU64(m.term, 'term')) +
    varintFieldSize(checkU64(m.commit, 'commit')) +
    varintFieldSize(checkU64(m.context, 'context')) +
    varintFieldSize(h.afterMessages)
  );
}

class Writer {
  pos = 0;
  constructor(readonly buf: Buffer) {}

  tag(field: number, wireType: number): void {
    this.buf[this.pos++] = (field << 3) | wireType;
  }

  varint(v: number): void {
    const buf = this.buf;
    let pos = this.pos;
    while (v >= TWO_POW_28) {
      buf[pos++] = (v % 0x80) | 0x80;
      v = Math.floor(v / 0x80);
    }
    while (v > 0x7f) {
      buf[pos++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    buf[pos++] = v;
    this.pos = pos;
  }

  varintField(field: number, v: number): void {
    if (v === 0) return;
    this.tag(field, VARINT);
    this.varint(v);
  }

  bytesField(field: number, bytes: Uint8Array): void {
    if (bytes.length === 0) return;
    this.tag(field, LEN);
    this.varint(bytes.length);
    this.buf.set(bytes, this.pos);
    this.pos += bytes.length;
  }

  stringField(field: number, s: string): void {
    if (s !== '') this.bytesField(field, utf8(s));
  }
}

/**
 * Encodes a frame: full messages in `messages`, compact heartbeats in `heartbeats`. Sizes are
 * computed first (embedded messages are length-prefixed), then one buffer is written.
 */
export function encodeBatchFrameBytes(
  from: NodeId,
  to: NodeId,
  messages: readonly FrameMessage[],
  heartbeats: readonly CompactHeartbeat[],
  stopping = false,
): Buffer {
  const messageSizes = new Array<number>(messages.length);
  // A bool set is one tag byte and one value byte; false is left out.
  let size = stringFieldSize(from) + stringFieldSize(to) + (stopping ? 2 : 0);
  for (let i = 0; i < messages.length; i++) {
    const s = groupMessageSize(messages[i]!);
    messageSizes[i] = s;
    size += lenFieldSize(s);
  }
  for (const h of heartbeats) size += lenFieldSize(heartbeatSize(h));

  const w = new Writer(Buffer.allocUnsafe(size));
  w.stringField(FRAME_FROM, from);
  w.stringField(FRAME_TO, to);
  for (let i = 0; i < messages.length; i++) {
    const gm = messages[i]!;
    const m = gm.message;
    w.tag(FRAME_MESSAGES, LEN);
    w.varint(messageSizes[i]!);
    w.varintField(MSG_GROUP_ID, gm.groupId);
    w.varintField(MSG_TYPE, MESSAGE_TYPE_NUMBER[m.type]);
    w.stringField(MSG_FROM, m.from);
    w.stringField(MSG_TO, m.to);
    w.varintField(MSG_TERM, m.term);
    w.varintField(MSG_LOG_TERM, m.logTerm);
    w.varintField(MSG_INDEX, m.index);
    w.varintField(MSG_COMMIT, m.commit);
    w.varintField(MSG_REJECT, m.reject ? 1 : 0);
    w.varintField(MSG_REJECT_HINT, m.rejectHint);
    w.varintField(MSG_CONTEXT, m.context);
    for (const e of m.entries) {
      w.tag(MSG_ENTRIES, LEN);
      w.varint(entrySize(e));
      w.varintField(ENTRY_TERM, e.term);
      w.varintField(ENTRY_INDEX, e.index);
      w.varintField(ENTRY_TYPE, ENTRY_TYPE_NUMBER[e.type]);
      w.bytesField(ENTRY_DATA, e.data);
    }
  }
  for (const h of heartbeats) {
    const m = h.gm.message;
    w.tag(FRAME_HEARTBEATS, LEN);
    w.varint(heartbeatSize(h));
    w.varintField(HB_GROUP_ID, h.gm.groupId);
    w.varintField(HB_TYPE, MESSAGE_TYPE_NUMBER[m.type]);
    w.varintField(HB_TERM, m.term);
    w.varintField(HB_COMMIT, m.commit);
    w.varintField(HB_CONTEXT, m.context);
    w.varintField(HB_AFTER_MESSAGES, h.afterMessages);
  }
  w.varintField(FRAME_STOPPING, stopping ? 1 : 0);
  if (w.pos !== size) assertionFailed(`batch frame encoded to ${w.pos} bytes, sized ${size}`);
  return w.buf;
}

// ---------------------------------------------------------------------------------------------
// Decoding (peer input: a bad value is a MalformedFrameError naming the field)

function fail(field: string, reason: string): never {
  throw new MalformedFrameError(field, reason);
}

/** The bytes are not a protobuf message (truncated, bad varint, bad wire type). */
function broken(reason: string): never {
  throw new MalformedFrameError('(frame)', `does not decode: ${reason}`);
}

function wrongWireType(field: string, wireType: number): never {
  return fail(field, `has wire type ${wireType}, which its type does not use`);
}

function notU32(field: string, v: number): never {
  return fail(field, `is not a u32 (${v})`);
}

function notU64(field: string, v: number): never {
  return fail(field, `is not a non-negative integer below 2^53 (${v})`);
}

function isU32(v: number): boolean {
  return v <= U32_MAX;
}

/** Varints decode to non-negative numbers; those above 2^53 - 1 lost precision. */
function isU64(v: number): boolean {
  return v <= Number.MAX_SAFE_INTEGER;
}

class Reader {
  pos = 0;
  constructor(readonly buf: Buffer) {}

  /**
   * An unsigned varint of up to 10 bytes, within `end`. Exact below 2^53; above, the nearest
   * double (then not a safe integer, which the checks refuse).
   */
  varint(end: number): number {
    const buf = this.buf;
    let pos = this.pos;
    if (pos >= end) broken('a varint runs past its message');
    let b = buf[pos++]!;
    if (b < 0x80) {
      this.pos = pos;
      return b;
    }
    let value = b & 0x7f;
    let scale = 0x80;
    for (let k = 1; k < 10; k++) {
      if (pos >= end) broken('a varint runs past its message');
      b = buf[pos++]!;
      value += (b & 0x7f) * scale;
      if (b < 0x80) {
        this.pos = pos;
        return value;
      }
      scale *= 0x80;
    }
    return broken('a varint is longer than 10 bytes');
  }

  /** A field key: returns field number << 3 | wire type, as a u32. */
  key(end: number): number {
    const k = this.varint(end);
    if (k > U32_MAX) broken(`field key ${k} out of range`);
    return k;
  }

  /** Reads a length prefix; returns the end offset of the field's bytes. */
  length(end: number): number {
    const len = this.varint(end);
    if (len > end - this.pos) broken('a field runs past its message');
    return this.pos + len;
  }

  skip(wireType: number, end: number): void {
    switch (wireType) {
      case VARINT:
        this.varint(end);
        return;
      case LEN:
        this.pos = this.length(end);
        return;
      case FIXED64:
        this.pos += 8;
        break;
      case FIXED32:
        this.pos += 4;
        break;
      default:
        broken(`wire type ${wireType} is not supported`);
    }
    if (this.pos > end) broken('a field runs past its message');
  }

  string(end: number): string {
    const stop = this.length(end);
    const s = this.buf.toString('utf8', this.pos, stop);
    this.pos = stop;
    return s;
  }
}

/** The first bad value found in a message's entries, reported after the message's own fields. */
interface EntryFault {
  readonly k: number;
  readonly field: 'term' | 'index' | 'type';
  readonly value: number;
}

/** The fields of the last entry read by readEntryFields (reused: no object per entry). */
const entryFields = { term: 0, index: 0, type: 0, dataStart: 0, dataEnd: 0 };

/**
 * Reads entry `k` of a message (whose path `path` gives) in [r.pos, end) into entryFields; its
 * data is at [dataStart, dataEnd).
 */
function readEntryFields(r: Reader, end: number, path: () => string, k: number): void {
  const f = entryFields;
  f.term = 0;
  f.index = 0;
  f.type = 0;
  f.dataStart = 0;
  f.dataEnd = 0;
  while (r.pos < end) {
    const key = r.key(end);
    const wt = key & 7;
    const field = key >>> 3;
    if (field === ENTRY_DATA) {
      if (wt !== LEN) wrongWireType(`${path()}.entries[${k}].data`, wt);
      f.dataEnd = r.length(end);
      f.dataStart = r.pos;
      r.pos = f.dataEnd;
    } else if (field >= ENTRY_TERM && field <= ENTRY_TYPE) {
      if (wt !== VARINT) {
        wrongWireType(`${path()}.entries[${k}].${ENTRY_FIELD_NAMES[field]!}`, wt);
      }
      const v = r.varint(end);
      if (field === ENTRY_TERM) f.term = v;
      else if (field === ENTRY_INDEX) f.index = v;
      else f.type = v;
    } else {
      r.skip(wt, end);
    }
  }
}

const ENTRY_FIELD_NAMES: readonly string[] = ['', 'term', 'index', 'type'];

/** The varint fields of the message being read (reused: no object per message). */
const messageFields = {
  groupId: 0,
  type: 0,
  term: 0,
  logTerm: 0,
  index: 0,
  commit: 0,
  reject: 0,
  rejectHint: 0,
  context: 0,
};

type MessageNumberField = keyof typeof messageFields;

/** Field names of GroupMessage by field number (strings and entries are read apart). */
const MESSAGE_NUMBER_FIELDS: readonly (MessageNumberField | undefined)[] = [
  undefined,
  'groupId',
  'type',
  undefined,
  undefined,
  'term',
  'logTerm',
  'index',
  'commit',
  'reject',
  'rejectHint',
  'context',
];

const U64_BEFORE_ENTRIES: readonly MessageNumberField[] = ['term', 'logTerm', 'index'];
const U64_AFTER_ENTRIES: readonly MessageNumberField[] = ['commit', 'rejectHint', 'context'];

/**
 * Reads a GroupMessage in [r.pos, end). Entries' data are views into one copy of the message's
 * bytes: the frame buffer is not kept, and an entry (which lives on in the Raft log) pins no
 * more than the message it came in.
 */
function readGroupMessage(r: Reader, end: number, path: () => string): FrameMessage {
  const start = r.pos;
  const f = messageFields;
  f.groupId = f.type = f.term = f.logTerm = f.index = f.commit = f.reject = 0;
  f.rejectHint = f.context = 0;
  let from = '';
  let to = '';
  const entries: Entry[] = [];
  let entryFault: EntryFault | undefined;
  let copy: ArrayBuffer | undefined;
  while (r.pos < end) {
    const key = r.key(end);
    const wt = key & 7;
    const field = key >>> 3;
    if (field === MSG_ENTRIES) {
      if (wt !== LEN) wrongWireType(`${path()}.entries`, wt);
      const entryEnd = r.length(end);
      copy ??= new Uint8Array(r.buf.buffer, r.buf.byteOffset + start, end - start).slice().buffer;
      readEntryFields(r, entryEnd, path, entries.length);
      const { term, index, type, dataStart, dataEnd } = entryFields;
      const entryType = ENTRY_TYPE_OF_NUMBER[type];
      if (entryFault === undefined) {
        const k = entries.length;
        if (entryType === undefined) entryFault = { k, field: 'type', value: type };
        else if (!isU64(term)) entryFault = { k, field: 'term', value: term };
        else if (!isU64(index)) entryFault = { k, field: 'index', value: index };
      }
      entries.push({
        term,
        index,
        type: entryType ?? 'normal',
        data:
          dataEnd === dataStart
            ? new Uint8Array(0)
            : new Uint8Array(copy, dataStart - start, dataEnd - dataStart),
      });
    } else if (field === MSG_FROM || field === MSG_TO) {
      if (wt !== LEN) wrongWireType(`${path()}.${field === MSG_FROM ? 'from' : 'to'}`, wt);
      if (field === MSG_FROM) from = r.string(end);
      else to = r.string(end);
    } else if (field >= MSG_GROUP_ID && field <= MSG_CONTEXT) {
      const name = MESSAGE_NUMBER_FIELDS[field]!;
      if (wt !== VARINT) wrongWireType(`${path()}.${name}`, wt);
      f[name] = r.varint(end);
    } else {
      r.skip(wt, end);
    }
  }
  return checkedGroupMessage(path, from, to, entries, entryFault);
}

/** Checks what readGroupMessage read, in the order of the fields of Message (as wire.ts did). */
function checkedGroupMessage(
  path: () => string,
  from: string,
  to: string,
  entries: Entry[],
  entryFault: EntryFault | undefined,
): FrameMessage {
  const n = messageFields;
  const groupId = n.groupId;
  if (!isU32(groupId)) notU32(`${path()}.groupId`, groupId);
  const type = n.type;
  const messageType = MESSAGE_TYPE_OF_NUMBER[type];
  if (messageType === undefined) fail(`${path()}.type`, `is not a known message type (${type})`);
  if (from === '') fail(`${path()}.from`, 'is empty; a node id is required');
  if (to === '') fail(`${path()}.to`, 'is empty; a node id is required');
  for (const field of U64_BEFORE_ENTRIES)
    if (!isU64(n[field])) notU64(`${path()}.${field}`, n[field]);
  if (entryFault !== undefined) {
    const field = `${path()}.entries[${entryFault.k}].${entryFault.field}`;
    if (entryFault.field === 'type') {
      fail(field, `is not a known entry type (${entryFault.value})`);
    }
    notU64(field, entryFault.value);
  }
  for (const field of U64_AFTER_ENTRIES)
    if (!isU64(n[field])) notU64(`${path()}.${field}`, n[field]);
  const message: Message = {
    type: messageType,
    from,
    to,
    term: n.term,
    logTerm: n.logTerm,
    index: n.index,
    entries,
    commit: n.commit,
    reject: n.reject !== 0,
    rejectHint: n.rejectHint,
    snapshot: undefined,
    context: n.context,
  };
  return { groupId, message };
}

const HEARTBEAT_FIELD_NAMES: readonly string[] = [
  '',
  'groupId',
  'type',
  'term',
  'commit',
  'context',
  'afterMessages',
];

/** Reads a compact Heartbeat in [r.pos, end); from and to are the frame's. */
function readHeartbeat(
  r: Reader,
  end: number,
  path: () => string,
  frame: { readonly from: NodeId; readonly to: NodeId },
): CompactHeartbeat {
  let groupId = 0;
  let type = 0;
  let term = 0;
  let commit = 0;
  let context = 0;
  let afterMessages = 0;
  while (r.pos < end) {
    const key = r.key(end);
    const wt = key & 7;
    const field = key >>> 3;
    if (field < HB_GROUP_ID || field > HB_AFTER_MESSAGES) {
      r.skip(wt, end);
      continue;
    }
    if (wt !== VARINT) wrongWireType(`${path()}.${HEARTBEAT_FIELD_NAMES[field]!}`, wt);
    const v = r.varint(end);
    switch (field) {
      case HB_GROUP_ID:
        groupId = v;
        break;
      case HB_TYPE:
        type = v;
        break;
      case HB_TERM:
        term = v;
        break;
      case HB_COMMIT:
        commit = v;
        break;
      case HB_CONTEXT:
        context = v;
        break;
      case HB_AFTER_MESSAGES:
        afterMessages = v;
        break;
    }
  }
  if (!isU32(groupId)) notU32(`${path()}.groupId`, groupId);
  const messageType = MESSAGE_TYPE_OF_NUMBER[type];
  if (messageType === undefined) fail(`${path()}.type`, `is not a known message type (${type})`);
  if (messageType !== 'heartbeat' && messageType !== 'heartbeat-resp') {
    fail(`${path()}.type`, `must be a heartbeat or heartbeat response, not ${messageType}`);
  }
  if (!isU32(afterMessages)) notU32(`${path()}.afterMessages`, afterMessages);
  if (!isU64(term)) notU64(`${path()}.term`, term);
  if (!isU64(commit)) notU64(`${path()}.commit`, commit);
  if (!isU64(context)) notU64(`${path()}.context`, context);
  const message: Message = {
    type: messageType,
    from: frame.from,
    to: frame.to,
    term,
    logTerm: 0,
    index: 0,
    entries: [],
    commit,
    reject: false,
    rejectHint: 0,
    snapshot: undefined,
    context,
  };
  return { gm: { groupId, message }, afterMessages };
}

/**
 * Parses and checks a BatchFrame. The frame's from and to are read first wherever they stand,
 * since compact heartbeats take theirs from them.
 */
export function parseBatchFrame(bytes: Buffer): ParsedBatchFrame {
  const end = bytes.length;
  const r = new Reader(bytes);
  let from = '';
  let to = '';
  let stopping = false;
  // Pass 1: the frame's own fields, and where its messages and heartbeats are.
  const spans: number[] = [];
  while (r.pos < end) {
    const key = r.key(end);
    const wt = key & 7;
    switch (key >>> 3) {
      case FRAME_FROM:
        if (wt !== LEN) wrongWireType('from', wt);
        from = r.string(end);
        break;
      case FRAME_TO:
        if (wt !== LEN) wrongWireType('to', wt);
        to = r.string(end);
        break;
      case FRAME_STOPPING:
        if (wt !== VARINT) wrongWireType('stopping', wt);
        // A proto3 bool: any non-zero varint is true.
        stopping = r.varint(end) !== 0;
        break;
      case FRAME_MESSAGES:
      case FRAME_HEARTBEATS: {
        if (wt !== LEN) wrongWireType(key >>> 3 === FRAME_MESSAGES ? 'messages' : 'heartbeats', wt);
        const stop = r.length(end);
        spans.push(key >>> 3, r.pos, stop);
        r.pos = stop;
        break;
      }
      default:
        r.skip(wt, end);
    }
  }
  if (from === '') fail('from', 'is empty; a node id is required');
  if (to === '') fail('to', 'is empty; a node id is required');
  // Pass 2: the messages, then the heartbeats.
  const messages: FrameMessage[] = [];
  const heartbeats: CompactHeartbeat[] = [];
  const frame = { from, to };
  for (const list of [FRAME_MESSAGES, FRAME_HEARTBEATS]) {
    for (let s = 0; s < spans.length; s += 3) {
      if (spans[s] !== list) continue;
      r.pos = spans[s + 1]!;
      const stop = spans[s + 2]!;
      if (list === FRAME_MESSAGES) {
        const i = messages.length;
        messages.push(readGroupMessage(r, stop, () => `messages[${i}]`));
      } else {
        const i = heartbeats.length;
        heartbeats.push(readHeartbeat(r, stop, () => `heartbeats[${i}]`, frame));
      }
    }
  }
  return { from, to, messages, heartbeats, stopping };
}
