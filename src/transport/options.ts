/**
 * PeerTransport options: the user-facing shape with documented defaults, and the compiled, frozen
 * form the transport reads. Every bound of the transport is here, so a queue or a frame cannot
 * grow past a number someone chose.
 */
import { ValidationError, type FieldViolation } from '../base/errors.js';
import type { NodeId } from '../raft/messages.js';
import { INVALID_OPTIONS } from './errors.js';
import type { RefusedPeer } from './tls-listener.js';
import type { TlsSource } from './tls.js';
import type { GroupMessage } from './wire.js';

const KiB = 1024;
const MiB = 1024 * KiB;

export interface PeerTransportLimits {
  /**
   * Estimated wire bytes queued for one peer (waiting for the stream to come up or for HTTP/2
   * flow control). Messages beyond it are dropped and counted. @default 8 MiB
   */
  maxQueuedBytesPerPeer?: number;
  /**
   * A frame is split so its estimated size stays at or below this. A single message above it is
   * dropped and counted: Raft's maxMsgBytes + maxEntryBytes must fit. The receiver accepts frames
   * up to twice its own value, so peers may differ a little. @default 4 MiB
   */
  maxFrameBytes?: number;
  /** Data bytes per SendSnapshot chunk. @default 256 KiB, or maxFrameBytes if smaller */
  snapshotChunkBytes?: number;
  /** Largest snapshot a receiver reassembles; larger ones are refused. @default 1 GiB */
  maxSnapshotBytes?: number;
  /** Snapshot sends in flight to one peer; more are reported failed at once. @default 2 */
  maxSnapshotsInFlightPerPeer?: number;
  /** Snapshot receives in flight on this node; more are refused. @default 8 */
  maxSnapshotsReceiving?: number;
  /** Deadline of one SendSnapshot call. @default 300000 */
  snapshotDeadlineMs?: number;
  /** First reconnect delay after a stream fails; doubles per failure. @default 100 */
  reconnectBackoffMinMs?: number;
  /** Cap of the reconnect delay. @default 5000 */
  reconnectBackoffMaxMs?: number;
  /** A stream whose response headers have not arrived by then counts as failed. @default 5000 */
  connectTimeoutMs?: number;
  /** onUnreachable is called at most once per peer per interval. @default 100 */
  unreachableReportIntervalMs?: number;
  /** HTTP/2 keepalive ping interval, which detects a dead peer on a silent stream. @default 10000 */
  keepaliveMs?: number;
  /** A keepalive ping unanswered for this long drops the connection. @default 5000 */
  keepaliveTimeoutMs?: number;
  /** close() waits this long for streams to end gracefully before cancelling. @default 2000 */
  closeTimeoutMs?: number;
}

export interface PeerTransportOptions {
  readonly nodeId: NodeId;
  /** host:port to listen on; port 0 picks a free port, reported by start(). */
  readonly listen: string;
  readonly peers?: ReadonlyMap<NodeId, string>;
  /** One call per received frame (and per received snapshot), messages in send order. */
  onMessages(from: NodeId, msgs: GroupMessage[]): void;
  /** After a snapshot send to `to` finished (`ok`) or failed. */
  onSnapshotStatus?(groupId: number, to: NodeId, ok: boolean): void;
  /** `from` answered that it does not host `groupId`; those messages were not delivered. */
  onGroupNotHosted?(from: NodeId, groupId: number): void;
  /** Messages for these groups to `to` were dropped because `to` is down, slow or unknown. */
  onUnreachable?(to: NodeId, groupIds: number[]): void;
  /** Receiver side: whether this node hosts the group (or is willing to create it). */
  isGroupHosted(groupId: number): boolean;
  readonly limits?: PeerTransportLimits;
  /**
   * Mutual TLS: this node's certificate and key and the cluster's CA. The server then accepts
   * only peers whose certificate chains to the CA, and this node dials its peers with TLS,
   * checking theirs the same way and presenting its own. Plaintext when absent.
   */
  readonly tls?: TlsSource;
  /** A connection the server refused: its certificate did not chain to the CA, or none came. */
  onRefused?(peer: RefusedPeer): void;
  /**
   * A stream to `peer` failed before the peer accepted it (connection refused, TLS refused):
   * `reason` is gRPC's. Called at every failed attempt; the caller decides what to log.
   */
  onConnectFailed?(peer: NodeId, reason: string): void;
  /**
   * A stream from `peer` delivered its first frame: the peer is up, perhaps after a restart or a
   * partition. Once per inbound stream; the transport has already reconnected its own stream to
   * that peer if it was waiting out a backoff.
   */
  onPeerStream?(peer: NodeId): void;
  /**
   * An inbound stream from `peer` ended or broke: it stopped, crashed, or the network between
   * failed. Once per inbound stream that had identified its sender.
   */
  onPeerStreamEnded?(peer: NodeId): void;
}

export type CompiledLimits = Readonly<Required<PeerTransportLimits>>;

export const DEFAULT_LIMITS: CompiledLimits = Object.freeze({
  maxQueuedBytesPerPeer: 8 * MiB,
  maxFrameBytes: 4 * MiB,
  snapshotChunkBytes: 256 * KiB,
  maxSnapshotBytes: 1024 * MiB,
  maxSnapshotsInFlightPerPeer: 2,
  maxSnapshotsReceiving: 8,
  snapshotDeadlineMs: 300_000,
  reconnectBackoffMinMs: 100,
  reconnectBackoffMaxMs: 5_000,
  connectTimeoutMs: 5_000,
  unreachableReportIntervalMs: 100,
  keepaliveMs: 10_000,
  keepaliveTimeoutMs: 5_000,
  closeTimeoutMs: 2_000,
});

/** A smaller maxFrameBytes lowers the default chunk size with it, so one option suffices. */
function defaultFor(key: keyof CompiledLimits, limits: PeerTransportLimits): number {
  // An invalid maxFrameBytes is reported under its own name only.
  const frameBytes = limits.maxFrameBytes;
  if (
    key === 'snapshotChunkBytes' &&
    frameBytes !== undefined &&
    Number.isSafeInteger(frameBytes)
  ) {
    return Math.min(DEFAULT_LIMITS.snapshotChunkBytes, frameBytes);
  }
  return DEFAULT_LIMITS[key];
}

/** Smallest frame bound: a frame must hold at least a few hundred heartbeats. */
const MIN_FRAME_BYTES = 16 * KiB;

/**
 * Checks the options and compiles the limits (defaults applied, relationships checked, frozen).
 * Every violation is collected before anything is thrown.
 */
export function compileOptions(options: PeerTransportOptions): CompiledLimits {
  const violations = checkOptions(options);
  const limits = compileLimitsInto(options.limits ?? {}, violations);
  if (violations.length > 0) throw new ValidationError(INVALID_OPTIONS, violations);
  return limits;
}

function compileLimitsInto(
  limits: PeerTransportLimits,
  violations: FieldViolation[],
): CompiledLimits {
  const violationsBefore = violations.length;
  const out: Record<string, number> = {};
  for (const key of Object.keys(DEFAULT_LIMITS) as (keyof CompiledLimits)[]) {
    const value = limits[key] ?? defaultFor(key, limits);
    if (!Number.isSafeInteger(value) || value <= 0) {
      violations.push({ field: `limits.${key}`, reason: 'must be a positive integer' });
    }
    out[key] = value;
  }
  for (const key of Object.keys(limits)) {
    if (!(key in DEFAULT_LIMITS)) violations.push({ field: `limits.${key}`, reason: 'unknown' });
  }
  const c = out as CompiledLimits;
  // Relationships are checked between valid numbers only, so each mistake is reported once.
  if (violations.length > violationsBefore) return Object.freeze(c);
  if (c.maxFrameBytes < MIN_FRAME_BYTES) {
    violations.push({ field: 'limits.maxFrameBytes', reason: `must be >= ${MIN_FRAME_BYTES}` });
  }
  if (c.snapshotChunkBytes > c.maxFrameBytes) {
    violations.push({
      field: 'limits.snapshotChunkBytes',
      reason: 'must be <= maxFrameBytes (the receiver bounds chunks by its frame size)',
    });
  }
  if (c.reconnectBackoffMaxMs < c.reconnectBackoffMinMs) {
    violations.push({
      field: 'limits.reconnectBackoffMaxMs',
      reason: 'must be >= reconnectBackoffMinMs',
    });
  }
  return Object.freeze(c);
}

function checkOptions(options: PeerTransportOptions): FieldViolation[] {
  const violations: FieldViolation[] = [];
  if (options.nodeId === '') violations.push({ field: 'nodeId', reason: 'must not be empty' });
  if (!/^.+:\d+$/.test(options.listen)) {
    violations.push({ field: 'listen', reason: 'must be host:port' });
  }
  for (const [id, address] of options.peers ?? []) {
    if (id === '') violations.push({ field: 'peers', reason: 'a peer id is empty' });
    if (address === '') violations.push({ field: `peers.${id}`, reason: 'address is empty' });
  }
  return violations;
}
