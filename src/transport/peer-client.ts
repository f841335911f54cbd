/**
 * The sending half of one ordered node pair: a bounded queue, one long-lived Stream to the peer,
 * and the reconnect loop.
 *
 * States: idle (nothing sent yet) → connecting (stream opened, waiting for the peer's response
 * headers) → ready (frames flow) → backoff (the stream failed; waiting to reopen) → connecting …;
 * closed is final. Messages queue while connecting or while HTTP/2 flow control holds frames
 * back, up to maxQueuedBytesPerPeer; beyond that they are dropped. When a stream fails the
 * queue is dropped too, and while in backoff every message is dropped at once: Raft retransmits
 * whatever matters, and holding traffic for a peer known to be down would only deliver stale
 * heartbeats and appends in a burst when it returns. Every drop is counted and its groups are
 * handed to the unreachable reporter, which is how Raft learns to stop pipelining to the peer.
 *
 * Invariant: all frames to the peer go through one stream at a time, written in queue order, so
 * the peer sees this node's messages in send order (up to drops, never reordered).
 */
import { SystemClock } from '../base/clock.js';
import type { NodeId } from '../raft/messages.js';
import type { PeerCounters } from './counters.js';
import { MalformedFrameError } from './errors.js';
import type { CompiledLimits } from './options.js';
import {
  startSnapshotSend,
  type SnapshotSend,
  type SnapshotSendResult,
} from './snapshot-sender.js';
import {
  decodeNoticeFrame,
  encodeBatchFrame,
  estimateFrameOverheadBytes,
  estimateMessageBytes,
  RaftTransportClient,
  type ClientStream,
  type GroupMessage,
  type PeerChannelCredentials,
} from './wire.js';

export type PeerClientState = 'idle' | 'connecting' | 'ready' | 'backoff' | 'closed';

export interface PeerClientHooks {
  /** Messages for these groups were dropped (queue full, peer down, client closed). */
  onDropped(groupIds: Iterable<number>): void;
  /** The peer does not host these groups. */
  onNotHosted(groupIds: readonly number[]): void;
  /** A stream ended before the peer accepted it (refused, unreachable, TLS refused). */
  onConnectFailed?(reason: string): void;
}

interface Queued {
  readonly gm: GroupMessage;
  readonly bytes: number;
}

/** Frames handed to grpc-js but not yet written to the socket, at most this many frames' worth. */
const INFLIGHT_FRAMES_MAX = 2;

export class PeerClient {
  private stateValue: PeerClientState = 'idle';
  private rpc: RaftTransportClient;
  private call: ClientStream | undefined;
  private queue: Queued[] = [];
  private queuedBytesValue = 0;
  /** Encoded bytes written to the current call whose write callback has not fired yet. */
  private inflightBytes = 0;
  private needsDrain = false;
  private flushScheduled = false;
  private failureCount = 0;
  private readySinceMs = 0;
  private connectStartedMs = 0;
  private connectTimer: NodeJS.Timeout | undefined;
  private backoffTimer: NodeJS.Timeout | undefined;
  private readonly snapshots = new Set<SnapshotSend>();
  private closing: Promise<void> | undefined;
  private readonly frameOverheadBytes: number;
  /** This node is stopping: every frame says so (BatchFrame.stopping). */
  private stopping = false;
  /**
   * The peer has not yet been told this node's stopping flag on the current stream: the next
   * flush writes a frame even if nothing is queued. Every new stream starts out so.
   */
  private flagPending = false;

  constructor(
    private readonly selfId: NodeId,
    readonly peerId: NodeId,
    readonly address: string,
    private readonly limits: CompiledLimits,
    private readonly counters: PeerCounters,
    private readonly hooks: PeerClientHooks,
    /** Mutual TLS (tls.ts); plaintext when absent. */
    private readonly credentials?: PeerChannelCredentials,
  ) {
    this.rpc = this.makeRpc();
    this.frameOverheadBytes = estimateFrameOverheadBytes(selfId, peerId);
  }

  /** The gRPC client (one channel) to the peer. */
  private makeRpc(): RaftTransportClient {
    const limits = this.limits;
    return new RaftTransportClient(
      this.address,
      {
        'grpc.keepalive_time_ms': limits.keepaliveMs,
        'grpc.keepalive_timeout_ms': limits.keepaliveTimeoutMs,
        'grpc.keepalive_permit_without_calls': 1,
        // The channel's own reconnect backoff follows ours, so a restarted peer is found as soon
        // as our timer allows, not after grpc-js's default of up to two minutes.
        'grpc.initial_reconnect_backoff_ms': limits.reconnectBackoffMinMs,
        'grpc.max_reconnect_backoff_ms': limits.reconnectBackoffMaxMs,
        // Retries would buffer and replay frames behind our back; Raft does its own.
        'grpc.enable_retries': 0,
        // One connection per ordered node pair, not shared with other transports in the process.
        'grpc.use_local_subchannel_pool': 1,
        // Channelz (grpc-js's introspection service, unused here) would track every frame.
        'grpc.enable_channelz': 0,
      },
      this.credentials,
    );
  }

  /**
   * The peer is evidently up (its own stream to this node just opened). While in backoff, or
   * connecting for longer than the shortest backoff (an attempt begun while the peer was down
   * can hang until connectTimeoutMs), reconnect now on a fresh channel with the backoff started
   * over, keeping what is queued. Otherwise what is sent meanwhile (a leader's heartbeats to a
   * restarted follower) would wait or be dropped until our timer and the old channel's own
   * backoff, which grpc-js offers no way to cut short, both ran out. Not while a snapshot is in
   * flight on the old channel.
   */
  reconnectNow(): void {
    const state = this.stateValue;
    // A connect younger than the shortest backoff is still a fresh attempt (both nodes dial
    // each other at start-up): left alone, not replaced by one more channel.
    const stuck =
      state === 'connecting' &&
      SystemClock.monotonicMs() - this.connectStartedMs >= this.limits.reconnectBackoffMinMs;
    if ((state !== 'backoff' && !stuck) || this.snapshots.size > 0) return;
    clearTimeout(this.backoffTimer);
    this.backoffTimer = undefined;
    clearTimeout(this.connectTimer);
    // Forgotten first, so that its end does not count as this stream's failure.
    const pending = this.call;
    this.call = undefined;
    pending?.cancel();
    this.failureCount = 0;
    this.rpc.close();
    this.rpc = this.makeRpc();
    this.counters.reconnectCount++;
    this.connect();
  }

  get state(): PeerClientState {
    return this.stateValue;
  }

  /** Estimated wire bytes waiting in the queue. */
  get queuedBytes(): number {
    return this.queuedBytesValue;
  }

  get snapshotsInFlight(): number {
    return this.snapshots.size;
  }

  /** Queues messages for the next flush; never blocks and never calls back synchronously. */
  enqueue(msgs: readonly GroupMessage[]): void {
    if (this.stateValue === 'closed' || this.stateValue === 'backoff') {
      this.dropAll(msgs.map((gm) => ({ gm, bytes: estimateMessageBytes(gm) })));
      return;
    }
    const dropped: Queued[] = [];
    const frameRoom = this.limits.maxFrameBytes - this.frameOverheadBytes;
    for (const gm of msgs) {
      const q: Queued = { gm, bytes: estimateMessageBytes(gm) };
      if (q.bytes > frameRoom) {
        this.counters.oversizeDroppedCount++;
        dropped.push(q);
      } else if (this.queuedBytesValue + q.bytes > this.limits.maxQueuedBytesPerPeer) {
        dropped.push(q);
      } else {
        this.queue.push(q);
        this.queuedBytesValue += q.bytes;
      }
    }
    if (dropped.length > 0) this.dropAll(dropped);
    if (this.stateValue === 'idle') this.connect();
    else if (this.stateValue === 'ready') this.scheduleFlush();
  }

  /**
   * Tells the peer whether this node is stopping: every later frame carries the flag, and one
   * frame goes out now even if nothing else is queued (connecting first if need be).
   */
  announce(stopping: boolean): void {
    this.stopping = stopping;
    if (this.stateValue === 'closed') return;
    this.flagPending = true;
    if (this.stateValue === 'idle') this.connect();
    else if (this.stateValue === 'ready') this.scheduleFlush();
  }

  /** Starts a SendSnapshot call; `done` runs from a later event-loop turn. */
  sendSnapshot(gm: GroupMessage, done: (result: SnapshotSendResult) => void): void {
    if (
      this.stateValue === 'closed' ||
      this.snapshots.size >= this.limits.maxSnapshotsInFlightPerPeer
    ) {
      const reason = this.stateValue === 'closed' ? 'closed' : 'too many snapshots in flight';
      setImmediate(() => done({ ok: false, error: new Error(`snapshot not sent: ${reason}`) }));
      return;
    }
    const send = startSnapshotSend(
      this.rpc,
      gm,
      { chunkBytes: this.limits.snapshotChunkBytes, deadlineMs: this.limits.snapshotDeadlineMs },
      (result) => {
        this.snapshots.delete(send);
        done(result);
      },
    );
    this.snapshots.add(send);
  }

  /** Ends the stream gracefully within closeTimeoutMs, then cancels; queued messages are dropped. */
  close(): Promise<void> {
    this.closing ??= this.closeOnce();
    return this.closing;
  }

  private async closeOnce(): Promise<void> {
    this.stateValue = 'closed';
    clearTimeout(this.connectTimer);
    clearTimeout(this.backoffTimer);
    this.dropQueue();
    for (const s of this.snapshots) s.cancel();
    const call = this.call;
    if (call !== undefined) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          call.cancel();
          resolve();
        }, this.limits.closeTimeoutMs);
        call.once('status', () => {
          clearTimeout(timer);
          resolve();
        });
        call.end();
      });
    }
    this.call = undefined;
    this.rpc.close();
  }

  private connect(): void {
    this.stateValue = 'connecting';
    this.connectStartedMs = SystemClock.monotonicMs();
    const call = this.rpc.openStream();
    this.call = call;
    this.inflightBytes = 0;
    this.needsDrain = false;
    // The server sends headers as soon as it accepts the stream; that is our "connected".
    call.on('metadata', () => {
      if (call === this.call && this.stateValue === 'connecting') this.becomeReady();
    });
    call.on('data', (bytes: Buffer) => this.handleNotice(call, bytes));
    call.on('drain', () => {
      if (call !== this.call) return;
      this.needsDrain = false;
      this.scheduleFlush();
    });
    // 'status' always ends a call; 'error' accompanies a non-OK status and must be listened to,
    // or it would be thrown. Either one ends this stream, whichever comes first.
    call.on('status', (st: { details: string }) => this.handleStreamEnded(call, st.details));
    call.on('error', (err: Error) => this.handleStreamEnded(call, err.message));
    this.connectTimer = setTimeout(() => {
      if (call === this.call && this.stateValue === 'connecting') call.cancel();
    }, this.limits.connectTimeoutMs);
    this.connectTimer.unref();
  }

  private becomeReady(): void {
    clearTimeout(this.connectTimer);
    this.stateValue = 'ready';
    this.readySinceMs = SystemClock.monotonicMs();
    // A new stream may reach a new process of the peer: the flag goes first, with whatever is
    // queued or alone.
    this.flagPending = true;
    this.scheduleFlush();
  }

  private handleStreamEnded(call: ClientStream, reason: string): void {
    if (call !== this.call) return;
    this.call = undefined;
    clearTimeout(this.connectTimer);
    this.dropQueue();
    if (this.stateValue === 'closed') return;
    if (this.stateValue === 'connecting') this.hooks.onConnectFailed?.(reason);
    // A stream that stayed up for a while resets the backoff; one that fails at once keeps
    // doubling, so a peer that accepts and then rejects us is not hammered.
    const wasReady = this.stateValue === 'ready';
    if (
      wasReady &&
      SystemClock.monotonicMs() - this.readySinceMs >= this.limits.reconnectBackoffMaxMs
    ) {
      this.failureCount = 0;
    }
    this.failureCount++;
    this.stateValue = 'backoff';
    this.backoffTimer = setTimeout(() => {
      this.backoffTimer = undefined;
      if (this.stateValue !== 'backoff') return;
      this.counters.reconnectCount++;
      this.connect();
    }, this.backoffDelayMs());
    this.backoffTimer.unref();
  }

  /** Exponential in the failure count, capped, with equal jitter: in [base/2, base). */
  private backoffDelayMs(): number {
    const { reconnectBackoffMinMs: min, reconnectBackoffMaxMs: max } = this.limits;
    const exponent = Math.min(this.failureCount - 1, 30);
    const base = Math.min(max, min * 2 ** exponent);
    return Math.round(base / 2 + (Math.random() * base) / 2);
  }

  private handleNotice(call: ClientStream, bytes: Buffer): void {
    if (call !== this.call) return;
    let groupIds: readonly number[];
    try {
      groupIds = decodeNoticeFrame(bytes).groupsNotHosted;
    } catch (err) {
      if (!(err instanceof MalformedFrameError)) throw err;
      // A peer speaking another version: end the stream; the reconnect backoff paces retries.
      this.counters.malformedFrameCount++;
      call.cancel();
      return;
    }
    this.counters.notHostedReceivedCount += groupIds.length;
    if (groupIds.length > 0) this.hooks.onNotHosted(groupIds);
  }

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    // Everything sent during this event-loop turn leaves as one frame (split at maxFrameBytes).
    setImmediate(() => {
      this.flushScheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    const call = this.call;
    if (call === undefined || this.stateValue !== 'ready') return;
    if (this.queue.length === 0) {
      if (this.flagPending && !this.needsDrain) this.writeFrame(call, []);
      return;
    }
    const inflightMax = INFLIGHT_FRAMES_MAX * this.limits.maxFrameBytes;
    const batch = this.queue;
    let i = 0;
    while (i < batch.length && !this.needsDrain && this.inflightBytes < inflightMax) {
      const messages: GroupMessage[] = [];
      let frameBytes = this.frameOverheadBytes;
      for (let q = batch[i]; q !== undefined; q = batch[++i]) {
        if (messages.length > 0 && frameBytes + q.bytes > this.limits.maxFrameBytes) break;
        messages.push(q.gm);
        frameBytes += q.bytes;
        this.queuedBytesValue -= q.bytes;
      }
      this.writeFrame(call, messages);
    }
    this.queue = i === batch.length ? [] : batch.slice(i);
  }

  private writeFrame(call: ClientStream, messages: GroupMessage[]): void {
    const bytes = encodeBatchFrame({
      from: this.selfId,
      to: this.peerId,
      messages,
      stopping: this.stopping,
    });
    this.flagPending = false;
    this.counters.sentFrameCount++;
    this.counters.sentMessageCount += messages.length;
    this.counters.sentBytes += bytes.length;
    this.inflightBytes += bytes.length;
    const more = call.write(bytes, () => {
      if (call !== this.call) return;
      this.inflightBytes -= bytes.length;
      if (this.queue.length > 0) this.scheduleFlush();
    });
    if (!more) this.needsDrain = true;
  }

  private dropQueue(): void {
    const queue = this.queue;
    this.queue = [];
    this.queuedBytesValue = 0;
    this.dropAll(queue);
  }

  private dropAll(items: readonly Queued[]): void {
    if (items.length === 0) return;
    const groups = new Set<number>();
    for (const q of items) {
      this.counters.droppedMessageCount++;
      this.counters.droppedBytes += q.bytes;
      groups.add(q.gm.groupId);
    }
    this.hooks.onDropped(groups);
  }
}
