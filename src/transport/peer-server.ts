/**
 * The receiving half: the RaftTransport gRPC server of this node.
 *
 * Stream: each inbound stream is bound to the sender named by its first frame. Every valid frame
 * becomes one onMessages call with the messages of hosted groups in send order; the groups this
 * node does not host are answered on the same stream with one notice per frame. A malformed or
 * misaddressed frame ends the stream with INVALID_ARGUMENT / FAILED_PRECONDITION naming the
 * problem; the sender's reconnect backoff paces what follows.
 *
 * SendSnapshot: chunks are reassembled by SnapshotAssembler; a snapshot for a group this node
 * does not host is refused at the header, before its data is sent. Concurrent receives are
 * bounded, since each holds a whole snapshot in memory.
 *
 * With mutual TLS (PeerTransportOptions.tls) the port is a TlsPeerListener's: a node whose
 * certificate does not chain to the cluster's CA never reaches these handlers.
 */
import type * as grpc from '@grpc/grpc-js';
import type { NodeId } from '../raft/messages.js';
import type { CounterTable } from './counters.js';
import { MalformedFrameError } from './errors.js';
import type { CompiledLimits } from './options.js';
import { SnapshotAssembler } from './snapshot-assembler.js';
import { TlsPeerListener, type RefusedPeer } from './tls-listener.js';
import type { TlsSource } from './tls.js';
import {
  bindServer,
  createRaftTransportServer,
  decodeBatchFrame,
  decodeSnapshotChunk,
  encodeNoticeFrame,
  encodeSnapshotAck,
  grpcStatus,
  insecureServerCredentials,
  Metadata,
  type GroupMessage,
  type SnapshotCall,
  type SnapshotCallback,
  type StreamCall,
} from './wire.js';

export interface PeerServerContext {
  readonly selfId: NodeId;
  readonly limits: CompiledLimits;
  readonly counters: CounterTable;
  onMessages(from: NodeId, msgs: GroupMessage[]): void;
  isGroupHosted(groupId: number): boolean;
  /** Each valid frame's BatchFrame.stopping, before its messages are delivered. */
  onPeerStopping(from: NodeId, stopping: boolean): void;
  /** Mutual TLS: this node's certificate and the cluster's CA; plaintext when absent. */
  readonly tls?: TlsSource;
  /** A connection refused by mutual TLS (its certificate did not chain to the CA). */
  onRefused?(peer: RefusedPeer): void;
  /** A stream from `from` delivered its first valid frame: the peer is up, perhaps restarted. */
  onPeerStream?(from: NodeId): void;
  /** A stream from `from` ended or broke (the peer stopped, crashed, or the network failed). */
  onPeerStreamEnded?(from: NodeId): void;
}

/** Headroom over maxFrameBytes the server accepts, for peers configured a little differently. */
const RECEIVE_FRAME_FACTOR = 2;
const RECEIVE_HEADER_BYTES = 64 * 1024;

export class PeerServer {
  private readonly server: grpc.Server;
  private readonly streams = new Set<StreamCall>();
  private readonly snapshotCalls = new Set<SnapshotCall>();
  /** Frames rejected before a sender was known (the first frame was already malformed). */
  malformedUnknownSenderCount = 0;
  private closing: Promise<void> | undefined;
  private binding: Promise<number> | undefined;
  private tlsListener: TlsPeerListener | undefined;

  constructor(private readonly ctx: PeerServerContext) {
    const { limits } = ctx;
    this.server = createRaftTransportServer(
      {
        stream: (call) => this.handleStream(call),
        sendSnapshot: (call, callback) => this.handleSnapshot(call, callback),
      },
      {
        'grpc.max_receive_message_length':
          RECEIVE_FRAME_FACTOR * limits.maxFrameBytes + RECEIVE_HEADER_BYTES,
        'grpc.keepalive_time_ms': limits.keepaliveMs,
        'grpc.keepalive_timeout_ms': limits.keepaliveTimeoutMs,
        // Channelz (grpc-js's introspection service, unused here) would count and timestamp
        // every frame.
        'grpc.enable_channelz': 0,
      },
    );
  }

  /** Binds `listen` and starts serving; resolves to the bound port. */
  start(listen: string): Promise<number> {
    const tls = this.ctx.tls;
    if (tls === undefined) {
      this.binding = bindServer(this.server, listen);
    } else {
      this.tlsListener = new TlsPeerListener(
        this.server,
        insecureServerCredentials(),
        tls,
        (peer) => this.ctx.onRefused?.(peer),
      );
      this.binding = this.tlsListener.listen(listen);
    }
    return this.binding;
  }

  /** Ends inbound streams, then shuts down, forcing after closeTimeoutMs. */
  close(): Promise<void> {
    this.closing ??= this.closeOnce();
    return this.closing;
  }

  private async closeOnce(): Promise<void> {
    // Shutting down while a bind is pending would let the bind complete afterwards and leave
    // the port open, so the bind settles first (its failure is start()'s to report).
    await this.binding?.catch(() => undefined);
    this.tlsListener?.close();
    await new Promise<void>((resolve) => {
      // Ending our side with OK tells senders the stream is over rather than broken mid-frame.
      for (const call of this.streams) call.end();
      const timer = setTimeout(() => {
        this.server.forceShutdown();
        resolve();
      }, this.ctx.limits.closeTimeoutMs);
      this.server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  private handleStream(call: StreamCall): void {
    this.streams.add(call);
    const forget = (): void => {
      this.streams.delete(call);
    };
    let sender: NodeId | undefined;
    let endReported = false;
    // The peer's end of the stream went away: said once, and only of a sender that identified
    // itself (this server ending its own streams at close is not the peer's doing).
    const peerGone = (): void => {
      if (sender === undefined || endReported || this.closing !== undefined) return;
      endReported = true;
      this.ctx.onPeerStreamEnded?.(sender);
    };
    call.on('finish', forget);
    call.on('cancelled', () => {
      forget();
      peerGone();
    });
    // A client that cancels or drops surfaces here; the stream is simply gone.
    call.on('error', forget);
    call.on('end', () => {
      peerGone();
      call.end();
    });
    // Headers right away: the sender waits for them before it writes (see PeerClient).
    call.sendMetadata(new Metadata());

    let rejected = false;
    let noticesBlocked = false;
    call.on('drain', () => {
      noticesBlocked = false;
    });

    const reject = (code: grpc.status, details: string): void => {
      rejected = true;
      if (sender === undefined) this.malformedUnknownSenderCount++;
      else this.ctx.counters.of(sender).malformedFrameCount++;
      // grpc-js turns an 'error' event on a server stream into the call's final status.
      call.emit('error', { code, details });
    };

    call.on('data', (bytes: Buffer) => {
      if (rejected) return;
      let frame;
      try {
        frame = decodeBatchFrame(bytes);
      } catch (err) {
        if (!(err instanceof MalformedFrameError)) throw err;
        reject(grpcStatus.INVALID_ARGUMENT, err.message);
        return;
      }
      if (frame.to !== this.ctx.selfId) {
        reject(
          grpcStatus.FAILED_PRECONDITION,
          `frame for node ${frame.to} reached node ${this.ctx.selfId}`,
        );
        return;
      }
      if (sender === undefined) {
        sender = frame.from;
        this.ctx.onPeerStream?.(sender);
      } else if (frame.from !== sender) {
        reject(grpcStatus.INVALID_ARGUMENT, `from changed from ${sender} to ${frame.from}`);
        return;
      }
      const counters = this.ctx.counters.of(sender);
      counters.receivedFrameCount++;
      counters.receivedMessageCount += frame.messages.length;
      counters.receivedBytes += bytes.length;

      this.ctx.onPeerStopping(sender, frame.stopping);
      const { hosted, notHosted } = this.splitByHosting(frame.messages);
      if (hosted.length > 0) this.ctx.onMessages(sender, hosted);
      if (notHosted.length > 0) {
        counters.notHostedSentCount += notHosted.length;
        // A sender that stops reading notices loses some; its messages still go undelivered.
        if (!noticesBlocked) {
          noticesBlocked = !call.write(encodeNoticeFrame({ groupsNotHosted: notHosted }));
        }
      }
    });
  }

  private splitByHosting(messages: GroupMessage[]): {
    hosted: GroupMessage[];
    notHosted: number[];
  } {
    const verdicts = new Map<number, boolean>();
    let hosted: GroupMessage[] | undefined;
    for (let i = 0; i < messages.length; i++) {
      const gm = messages[i] as GroupMessage;
      let isHosted = verdicts.get(gm.groupId);
      if (isHosted === undefined) {
        isHosted = this.ctx.isGroupHosted(gm.groupId);
        verdicts.set(gm.groupId, isHosted);
      }
      // Copy only once a message must be left out; the common frame is delivered as decoded.
      if (!isHosted && hosted === undefined) hosted = messages.slice(0, i);
      else if (isHosted && hosted !== undefined) hosted.push(gm);
    }
    const notHosted: number[] = [];
    for (const [groupId, isHosted] of verdicts) if (!isHosted) notHosted.push(groupId);
    return { hosted: hosted ?? messages, notHosted };
  }

  private handleSnapshot(call: SnapshotCall, callback: SnapshotCallback): void {
    const { limits } = this.ctx;
    if (this.snapshotCalls.size >= limits.maxSnapshotsReceiving) {
      callback({
        code: grpcStatus.RESOURCE_EXHAUSTED,
        details: `already receiving ${this.snapshotCalls.size} snapshots`,
      });
      return;
    }
    this.snapshotCalls.add(call);
    const assembler = new SnapshotAssembler(this.ctx.selfId, {
      maxSnapshotBytes: limits.maxSnapshotBytes,
      maxChunkBytes: limits.maxFrameBytes,
    });
    let answered = false;
    /** The sender as named by the header, once one decoded (even if the assembler refused it). */
    let from: NodeId | undefined;
    const answer = (err: grpc.ServiceError | null, ack?: Buffer): void => {
      if (answered) return;
      answered = true;
      this.snapshotCalls.delete(call);
      if (err !== null) callback(err);
      else callback(null, ack);
    };
    const refuse = (err: MalformedFrameError): void => {
      if (from === undefined) this.malformedUnknownSenderCount++;
      else this.ctx.counters.of(from).malformedFrameCount++;
      answer(serviceError(grpcStatus.INVALID_ARGUMENT, err.message));
    };

    call.on('data', (bytes: Buffer) => {
      if (answered) return;
      try {
        const chunk = decodeSnapshotChunk(bytes);
        if (chunk.kind === 'header') from ??= chunk.header.message.from;
        assembler.add(chunk);
        if (chunk.kind === 'data' && from !== undefined) {
          this.ctx.counters.of(from).snapshotChunkReceivedCount++;
        }
        if (chunk.kind === 'header' && !this.ctx.isGroupHosted(chunk.header.groupId)) {
          this.ctx.counters.of(chunk.header.message.from).notHostedSentCount++;
          answer(null, encodeSnapshotAck('group-not-hosted'));
        }
      } catch (err) {
        if (!(err instanceof MalformedFrameError)) throw err;
        refuse(err);
      }
    });
    call.on('end', () => {
      if (answered) return;
      let gm: GroupMessage;
      try {
        gm = assembler.finish();
      } catch (err) {
        if (!(err instanceof MalformedFrameError)) throw err;
        refuse(err);
        return;
      }
      const counters = this.ctx.counters.of(gm.message.from);
      counters.snapshotReceivedCount++;
      counters.snapshotReceivedBytes += assembler.bytesReceived;
      this.ctx.onMessages(gm.message.from, [gm]);
      answer(null, encodeSnapshotAck('accepted'));
    });
    // The sender cancelled or vanished: nobody is left to answer, only the slot to free.
    const abandon = (): void => {
      answered = true;
      this.snapshotCalls.delete(call);
    };
    call.on('cancelled', abandon);
    call.on('error', abandon);
  }
}

function serviceError(code: grpc.status, details: string): grpc.ServiceError {
  return Object.assign(new Error(details), { code, details, metadata: new Metadata() });
}
