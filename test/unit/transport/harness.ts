// Shared pieces of the transport tests: seeded random Raft messages covering every field, and a
// small node fixture that starts a PeerTransport on 127.0.0.1 port 0, records what it receives
// and closes itself in t.teardown.
import type { SeededRand } from '../../../src/base/rand.js';
import type {
  ConfState,
  Entry,
  Message,
  MessageType,
  NodeId,
  Snapshot,
} from '../../../src/raft/messages.js';
import {
  PeerTransport,
  type GroupMessage,
  type PeerTransportLimits,
} from '../../../src/transport/peer-transport.js';
import type { RefusedPeer } from '../../../src/transport/tls-listener.js';
import type { TlsSource } from '../../../src/transport/tls.js';

export const MESSAGE_TYPES: readonly MessageType[] = [
  'app',
  'app-resp',
  'heartbeat',
  'heartbeat-resp',
  'vote',
  'vote-resp',
  'pre-vote',
  'pre-vote-resp',
  'snap',
  'timeout-now',
  'read-index',
  'read-index-resp',
];

const NODE_IDS = ['n1', 'n2', 'node-3', 'ñ4'];

/** A non-negative safe integer, often small, sometimes at the 2^53 edge. */
export function randU64(r: SeededRand): number {
  switch (r.int(4)) {
    case 0:
      return 0;
    case 1:
      return r.int(1000);
    case 2:
      return Number.MAX_SAFE_INTEGER - r.int(3);
    default:
      return r.u32() * 2048 + r.int(2048);
  }
}

export function randBytes(r: SeededRand, length: number): Uint8Array {
  const out = new Uint8Array(length);
  for (let i = 0; i < length; i++) out[i] = r.int(256);
  return out;
}

function randEntry(r: SeededRand): Entry {
  return {
    term: randU64(r),
    index: randU64(r),
    type: r.chance(0.5) ? 'normal' : 'conf-change',
    data: randBytes(r, r.int(3) === 0 ? 0 : r.int(200)),
  };
}

function randIds(r: SeededRand): NodeId[] {
  return NODE_IDS.filter(() => r.chance(0.5));
}

export function randConfState(r: SeededRand): ConfState {
  return {
    voters: randIds(r),
    votersOutgoing: randIds(r),
    learners: randIds(r),
    learnersNext: randIds(r),
    autoLeave: r.chance(0.5),
  };
}

export function randSnapshot(r: SeededRand, dataBytes: number): Snapshot {
  return {
    meta: { index: randU64(r), term: randU64(r), confState: randConfState(r) },
    data: randBytes(r, dataBytes),
  };
}

/**
 * A message of `type` with every field random. Heartbeats are made compact-eligible (other
 * fields zero, from/to as given) half of the time so both wire forms are exercised.
 */
export function randMessage(r: SeededRand, type: MessageType, from: NodeId, to: NodeId): Message {
  const compact = (type === 'heartbeat' || type === 'heartbeat-resp') && r.chance(0.5);
  const pick = (): NodeId => NODE_IDS[r.int(NODE_IDS.length)] as NodeId;
  return {
    type,
    from: compact || r.chance(0.5) ? from : pick(),
    to: compact || r.chance(0.5) ? to : pick(),
    term: randU64(r),
    logTerm: compact ? 0 : randU64(r),
    index: compact ? 0 : randU64(r),
    entries: compact ? [] : Array.from({ length: r.int(4) }, () => randEntry(r)),
    commit: randU64(r),
    reject: compact ? false : r.chance(0.5),
    rejectHint: compact ? 0 : randU64(r),
    snapshot: type === 'snap' ? randSnapshot(r, r.int(2000)) : undefined,
    context: randU64(r),
  };
}

export function randGroupId(r: SeededRand): number {
  return r.chance(0.1) ? 0xffff_ffff : r.int(100_000);
}

/** Polls `check` until it returns true or `timeoutMs` passes; no fixed sleeps in the tests. */
export async function eventually(
  what: string,
  check: () => boolean,
  timeoutMs = 10_000,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

export interface Received {
  readonly from: NodeId;
  readonly msgs: GroupMessage[];
}

export interface TestNode {
  readonly id: NodeId;
  readonly transport: PeerTransport;
  readonly port: number;
  readonly address: string;
  /** One entry per onMessages call. */
  readonly received: Received[];
  readonly snapshotStatus: { groupId: number; to: NodeId; ok: boolean }[];
  readonly notHosted: { from: NodeId; groupId: number }[];
  readonly unreachable: { to: NodeId; groupIds: number[] }[];
  /** Groups this node answers "not hosted" for. */
  readonly foreignGroups: Set<number>;
  /** Connections its mutual TLS refused (with `tls`). */
  readonly refused: RefusedPeer[];
  /** Streams to a peer that failed before it accepted them, with gRPC's reason. */
  readonly connectFailed: { peer: NodeId; reason: string }[];
  /** One entry per inbound stream that ended or broke after its first frame: the sender's id. */
  readonly peerStreamsEnded: NodeId[];
}

interface Teardown {
  teardown(fn: () => unknown): void;
}

export async function startNode(
  t: Teardown,
  id: NodeId,
  options: {
    port?: number;
    limits?: PeerTransportLimits;
    peers?: Map<NodeId, string>;
    /** Mutual TLS with this node's certificate and the CA it trusts. */
    tls?: TlsSource;
  } = {},
): Promise<TestNode> {
  const refused: RefusedPeer[] = [];
  const connectFailed: TestNode['connectFailed'] = [];
  const peerStreamsEnded: NodeId[] = [];
  const received: Received[] = [];
  const snapshotStatus: TestNode['snapshotStatus'] = [];
  const notHosted: TestNode['notHosted'] = [];
  const unreachable: TestNode['unreachable'] = [];
  const foreignGroups = new Set<number>();
  const transport = new PeerTransport({
    nodeId: id,
    listen: `127.0.0.1:${options.port ?? 0}`,
    peers: options.peers ?? new Map(),
    onMessages: (from, msgs) => received.push({ from, msgs }),
    onSnapshotStatus: (groupId, to, ok) => snapshotStatus.push({ groupId, to, ok }),
    onGroupNotHosted: (from, groupId) => notHosted.push({ from, groupId }),
    onUnreachable: (to, groupIds) => unreachable.push({ to, groupIds }),
    isGroupHosted: (groupId) => !foreignGroups.has(groupId),
    limits: { reconnectBackoffMinMs: 20, reconnectBackoffMaxMs: 200, ...options.limits },
    ...(options.tls !== undefined ? { tls: options.tls } : {}),
    onRefused: (peer) => refused.push(peer),
    onConnectFailed: (peer, reason) => connectFailed.push({ peer, reason }),
    onPeerStreamEnded: (peer) => peerStreamsEnded.push(peer),
  });
  t.teardown(() => transport.close());
  const { port } = await transport.start();
  return {
    id,
    transport,
    port,
    address: `127.0.0.1:${port}`,
    received,
    snapshotStatus,
    notHosted,
    unreachable,
    foreignGroups,
    refused,
    connectFailed,
    peerStreamsEnded,
  };
}

/** Starts nodes and makes every one a peer of every other. */
export async function startMesh(
  t: Teardown,
  ids: readonly NodeId[],
  limits: PeerTransportLimits = {},
): Promise<TestNode[]> {
  const nodes = await Promise.all(ids.map((id) => startNode(t, id, { limits })));
  for (const a of nodes) for (const b of nodes) if (a !== b) a.transport.setPeer(b.id, b.address);
  return nodes;
}

/** A port that was free a moment ago: bound by a transport that was then closed. */
export async function deadAddress(t: Teardown): Promise<string> {
  const node = await startNode(t, 'ghost');
  await node.transport.close();
  return node.address;
}
